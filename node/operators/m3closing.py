"""Which map entries and view rows an event-time frontier closes in an ``m3`` box's maps.

One owner of the question "what does closing up to ``frontier`` take away": the one-node windowed box
(node/operators/m3windows.py) and each member of a partitioned one (node/cumulus/windowing.py) ask
:class:`Closing` for the closed entries of every map keyed by a window, and for each view's rows there, then emit
those rows and delete the entries (:meth:`Closing.bounds`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Iterator, Mapping
from dataclasses import dataclass

from boreas.m3.boxtype import BoxPlan, ViewInfo
from boreas.m3.compiler.windowfn import Window
from boreas.m3.nullable import GONE
from boreas.m3.runtime.program import Runtime


Pairs = list[tuple[tuple, object]]  # (key, value) rows of a view


def _key_vars(program, decl) -> tuple[str, ...]:
    """The variable of each key column of a view (a plain view's: its first map's keys)."""
    if decl.key_vars:
        return tuple(decl.key_vars)
    return tuple(k.name for k in program.map(decl.columns[0].numerator or "").keys)


def window_position(names: tuple[str, ...]) -> tuple[int, bool] | None:
    """The key position holding a window's end (``(i, True)``) or else its start (``(i, False)``).

    >>> window_position(("auction", "B_WINDOW_START", "B_WINDOW_END")), window_position(("a",))
    ((2, True), None)
    """
    for suffix, is_end in (("WINDOW_END", True), ("WINDOW_START", False)):
        for i, name in enumerate(names):
            if name.upper().endswith(suffix):
                return i, is_end
    return None


@dataclass(frozen=True)
class Closing:
    """The views and maps a box's windows close: each view's out port, window key position and whether it holds
    the end (else the start, ``size`` before it); each map keyed by a window, its window key position."""

    views: tuple[tuple[int, ViewInfo, int, bool], ...]
    doomed: dict[str, tuple[int, bool]]
    size: int  # the widest fixed window's size (a window starting at s ends at s + size)

    @classmethod
    def of(cls, plan: BoxPlan, error: Callable[[str], Exception]) -> Closing:
        views = []
        for out, view in enumerate(plan.views):
            where = window_position(_key_vars(plan.program, plan.program.view(view.name)))
            if where is None:
                raise error(f"view {view.name} reads a windowed stream but does not GROUP BY window_start or "
                            "window_end: its rows would never close")
            views.append((out, view, *where))
        doomed = {m.name: where for m in plan.program.maps
                  if (where := window_position(tuple(k.name for k in m.keys))) is not None}
        size = max((w.size for w in plan.windows if isinstance(w, Window)), default=0)
        return cls(tuple(views), doomed, size)

    @property
    def positions(self) -> dict[str, int]:
        """Each map keyed by a window: its window key position."""
        return {name: position for name, (position, _) in self.doomed.items()}

    def end_of(self, key: tuple, position: int, is_end: bool) -> int:
        """The end of the window a view or map key at ``position`` names."""
        return key[position] if is_end else key[position] + self.size

    def bounds(self, frontier: float, everything: bool = False) -> dict[str, tuple[int, float]]:
        """Each windowed map's window key position and the greatest value there of a window ending at or
        before ``frontier`` (``everything``: every entry, as when every entry is a session closed just now)."""
        return {name: (position, math.inf if everything else frontier if is_end else frontier - self.size)
                for name, (position, is_end) in self.doomed.items()}

    def closed_entries(self, runtime: Runtime, frontier: float, everything: bool = False) -> ClosedEntries:
        """Each windowed map's entries ``{key: value}`` of windows ending at or before ``frontier`` (read when
        first asked for: a view folded from the map's dump never needs them decoded, .closed_folds)."""
        return ClosedEntries(runtime, self.bounds(frontier, everything))

    def rows(self, runtime: Runtime, frontier: float, closed: Mapping[str, dict[tuple, object]],
             everything: bool = False,
             only: Collection[str] | None = None) -> list[tuple[int, ViewInfo, int, bool, Pairs]]:
        """Each view's rows (``only``: of those views) of the windows ``closed`` names, in window order: a row
        for each group that had rows there, whatever its values (:func:`in_window_order`)."""
        found = []
        bounds = self.bounds(frontier, everything)
        for out, view, position, is_end in self.views:
            if only is not None and view.name not in only:
                continue
            decl = runtime.program.view(view.name)
            if decl.general:  # computed when read: from the closed entries if they hold its rows, else read whole
                pairs = runtime.closed_rows(view.name, closed, self.positions, bounds)
                if pairs is None:
                    pairs = list(runtime.view(view.name).items())
                pairs = [(key, value) for key, value in pairs
                         if everything or self.end_of(key, position, is_end) <= frontier]
            else:  # a plain view's keys are its maps' keys: its rows are the closed entries
                pairs = runtime.rows_at(view.name, closed)
            found.append((out, view, position, is_end, in_window_order(pairs, position)))
        return found


class ClosedEntries(Mapping[str, dict]):
    """Each windowed map's closed entries ``{key: value}`` (``Runtime.entries_at_most`` at the map's bound), read
    from the runtime when first asked for, then kept; a map given entries of its own (a semi-join's part of
    them: node/operators/m3winjoin.py) holds those.  Read before the closing deletes the entries.

    >>> class Rt:
    ...     def entries_at_most(self, name, position, bound):
    ...         print("read", name); return {(bound,): 1}
    >>> c = ClosedEntries(Rt(), {"m": (0, 10), "n": (0, 20)})
    >>> "m" in c, c.get("x"), sorted(c)
    (True, None, ['m', 'n'])
    >>> c["m"], c.get("m")
    read m
    ({(10,): 1}, {(10,): 1})
    """

    def __init__(self, runtime: Runtime, bounds: dict[str, tuple[int, float]]):
        self._runtime, self._bounds = runtime, bounds
        self._read: dict[str, dict] = {}

    def __getitem__(self, name: str) -> dict:
        if (found := self._read.get(name)) is None:
            if name not in self._bounds:
                raise KeyError(name)
            found = self._read[name] = self._runtime.entries_at_most(name, *self._bounds[name])
        return found

    def __setitem__(self, name: str, entries: dict) -> None:
        self._read[name] = entries

    def __contains__(self, name: object) -> bool:
        return name in self._bounds or name in self._read

    def __iter__(self) -> Iterator[str]:
        return iter(self._names())

    def __len__(self) -> int:
        return len(self._names())

    def _names(self) -> dict[str, None]:
        return dict.fromkeys([*self._bounds, *self._read])


def in_window_order(pairs: Pairs, position: int) -> Pairs:
    """The rows of ``pairs`` in order of their key's window at ``position``, rows of one window in the order
    given (a stable sort): grouped per window in one pass, the windows sorted, not every row by a key function
    (a closing holds few windows and many rows).  A row GONE (a group counted by a hidden count that reads 0:
    :class:`boreas.m3.nullable.ViewNulls`) is left out; a row whose values are all 0 is a row (a SUM of 0 over
    the window's rows, a MAX of 0: issue 34): the views' reads give the groups that had rows, no other
    (m3/compiler/winrows.py).

    >>> from boreas.m3.nullable import GONE
    >>> in_window_order([((1, 20), 5), ((2, 10), 0), ((3, 10), GONE), ((4, 20), (0, 0))], 1)
    [((2, 10), 0), ((1, 20), 5), ((4, 20), (0, 0))]
    """
    windows: dict[object, Pairs] = {}
    for kv in pairs:
        if kv[1] is GONE:
            continue
        at = kv[0][position]
        if (rows := windows.get(at)) is None:
            windows[at] = [kv]
        else:
            rows.append(kv)
    if len(windows) == 1:
        return next(iter(windows.values()))
    return [kv for at in sorted(windows) for kv in windows[at]]
