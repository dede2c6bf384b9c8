"""Events into per-relation batches: signs spelled any accepted way, grouped, checked against the triggers.

Why apart from :class:`.program.Runtime`: this is pure bookkeeping over the
caller's events, done before the runtime's lock is taken and before any map
is touched, so a bad sign or an unknown relation refuses the whole batch.

>>> group_events([("R", 1, (1,)), ("R", "+", (2,)), ("S", "delete", (3,))])
[('R', 1, [(1,), (2,)]), ('S', -1, [(3,)])]
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from ..errors import RuntimeStateError

SIGNS = {1: 1, -1: -1, "+": 1, "-": -1, "insert": 1, "delete": -1}


def group_events(events: Iterable[tuple[str, object, Sequence]]) -> list[tuple[str, int, list]]:
    """``(relation, sign, row)`` events as ``(relation, +1 or -1, rows)`` batches, in order of first sight."""
    raw: dict[tuple, list] = {}
    for rel, sign, row in events:  # the hot loop: one dict lookup per event, signs checked per group below
        try:
            raw[rel, sign].append(row)
        except KeyError:
            if SIGNS.get(sign) is None:
                raise RuntimeStateError(f"event sign must be +1 or -1, not {sign!r}") from None
            raw[rel, sign] = [row]
    groups: dict[tuple[str, int], list] = {}
    for (rel, sign), rows in raw.items():
        key = (rel, SIGNS[sign])
        if key in groups:  # one relation and sign spelled two ways (1 and "+")
            groups[key].extend(rows)
        else:
            groups[key] = rows
    return [(rel, s, rows) for (rel, s), rows in groups.items()]


def check_batches(batches: Iterable[tuple[str, int, object]], triggers: Mapping, arity: Mapping[str, int]) -> None:
    """Refuse a batch for a relation the program does not know, or one it has no trigger for in that sign."""
    for rel, sign, _ in batches:
        if (rel, sign) not in triggers:
            raise RuntimeStateError(f"no trigger for {'+' if sign > 0 else '-'}{rel}"
                                    if rel in arity else f"unknown relation {rel!r}")
