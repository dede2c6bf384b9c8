"""The value-window aggregate's batch loop, generated per box with the common case inlined.

Profiled on ``bench/dataplane.py`` (filter -> map -> per-sensor average),
the aggregate was over half of a node's operator time, ~220 ns a tuple: per
tuple it called the group-key getter, walked the group's windows in a
general loop and called the accumulators' ``add``.  Almost every tuple of a
stream in order takes one path: its group has exactly one open window, the
next window starts at or after that one's end, and the tuple falls inside
it.  The aggregate keeps such a window per group in a *hot* dict
(:func:`hot_window`, refreshed after every tuple the general code handles
and dropped wholesale when timeouts or a restore change windows behind its
back); the loop generated here looks the group's hot window up, tests the
bounds with the key fields and ``add``'s body inlined, and hands every
other tuple to the operator's general per-tuple code (``slow``), which is
the reference semantics.

The fast path's condition implies the general code's path step by step (no
window opens since ``v < end <= next start``; the one window is not closed,
starts at or before ``v`` and ends after it, so the tuple is added and
nothing closes), so outputs, state and counters are the same whichever path
a tuple takes.  ``tests/test_fastpath_aggregate.py`` checks that on random
streams (out of order, None order values, several groups, sliding windows,
slack, timeouts, moves).

>>> print(loop_source(("    w[4] += 1",), key=[0], order=1))
def _by_values(rows, now, out, hot, slow):
    get = hot.get
    for row in rows:
        key = row[0]
        v = row[1]
        w = get(key)
        if w is not None and v is not None and w[0] <= v < w[1]:
            w[4] += 1
            continue
        slow(row, key, v, now, out)
<BLANKLINE>
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from .accumulators import END, START

#: The closing-tuple count of a value window that has closed (the aggregate's ``CLOSED``).
CLOSED = -1

BatchLoop = Callable[[list[tuple], float, list[tuple], dict, Callable[..., None]], None]


def key_source(key: Sequence[int]) -> str:
    """The group key as ``operator.itemgetter(*key)`` gives it: None, a value, or a tuple.

    >>> key_source([]), key_source([2]), key_source([0, 3])
    ('None', 'row[2]', '(row[0], row[3], )')
    """
    if not key:
        return "None"
    if len(key) == 1:
        return f"row[{key[0]}]"
    return "(" + "".join(f"row[{i}], " for i in key) + ")"


def loop_source(add_body: Sequence[str], key: Sequence[int], order: int) -> str:
    """Source of ``_by_values(rows, now, out, hot, slow)`` for one box (see the module doc)."""
    inlined = ["            " + line[4:] for line in add_body]
    lines = [
        "def _by_values(rows, now, out, hot, slow):",
        "    get = hot.get",
        "    for row in rows:",
        f"        key = {key_source(key)}",
        f"        v = row[{order}]",
        "        w = get(key)",
        f"        if w is not None and v is not None and w[{START}] <= v < w[{END}]:",
        *inlined,
        "            continue",
        "        slow(row, key, v, now, out)",
    ]
    return "\n".join(lines) + "\n"


def hot_window(g: list, beyond: int) -> list | None:
    """The window a group's in-order tuples go to without the general code, or None.

    ``g`` is the aggregate's group entry ``[next start, [windows], horizon]``.
    A window qualifies when it is the group's only open one, has not closed,
    and the next window starts at or after its end: then a tuple inside it
    opens nothing, closes nothing and enters exactly that window.

    >>> hot_window([60, [[0, 60, 0.0, 0, 3, 0]], 0], beyond=5)
    [0, 60, 0.0, 0, 3, 0]
    >>> hot_window([30, [[0, 60, 0.0, 0, 3, 0]], 0], beyond=5) is None  # sliding: 30 opens another
    True
    >>> hot_window([60, [[0, 60, 0.0, 0, 3, -1]], 0], beyond=5) is None  # closed, waiting
    True
    """
    wins = g[1]
    if len(wins) != 1:
        return None
    w = wins[0]
    if w[beyond] == CLOSED or not g[0] >= w[END]:
        return None
    return w


def compile_loop(add_body: Sequence[str], namespace: dict[str, Any] | None, key: Sequence[int],
                 order: int, label: str = "") -> BatchLoop:
    """The generated loop, compiled with the accumulators' globals (their helpers and constants)."""
    source = loop_source(add_body, key, order)
    scope = dict(namespace or {})
    exec(compile(source, f"<boreas {label + ' ' if label else ''}_by_values>", "exec"), scope)
    return scope["_by_values"]
