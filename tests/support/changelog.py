"""Reading a changelog in tests: a batch's rows with their weights, and a view followed through them."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any

from boreas.m3.runtime.views import same
from boreas.wire.columns import Columns


def changes(batch: Any) -> list[tuple[tuple, int]]:
    """``(row, weight)`` of every row of an emitted batch (a plain batch's rows weigh 1)."""
    if isinstance(batch, Columns):
        return list(zip(batch.rows(), batch.weight_list()))
    return [(tuple(row), 1) for row in batch]


def follow(view: dict, batch: Any, key_of: Callable[[tuple], tuple], width: int) -> dict:
    """Apply one emitted batch of a view's changelog to ``view`` ({key: value}): a -1 row must be the row there
    now (a retraction names what it retracts; NaN equal to NaN, as SQL's rows are: a NaN sent and the one
    retracted after a move are two objects), a +1 row is the row from now on."""
    for row, weight in sorted(changes(batch), key=lambda c: c[1]):  # retractions first, as the box emits them
        key, value = key_of(row[:width]), row[width:]
        value = value[0] if len(value) == 1 else value
        if weight < 0:
            assert same(view.pop(key), value), f"retracted {row}, which is not the row in the view"
        else:
            assert key not in view, f"{row} entered, but the view still holds {key}: {view[key]}"
            view[key] = value
    return view


def multiset(batches: list[Any]) -> Counter:
    """The rows a sequence of changelog batches leaves, with their multiplicities (zero counts dropped)."""
    total: Counter = Counter()
    for batch in batches:
        for row, weight in changes(batch):
            total[row] += weight
    return Counter({row: n for row, n in total.items() if n})
