"""A window join's rows, emitted when its windows close: the closed leaf rows grouped per window, the stages
above evaluated over each (m3/winstages.py), the query's rows emitted in window order.

Why its own module: the windowed box (:mod:`.m3windows`) closes windows the same way for every view; only
what it does with the closed rows differs.  A plain windowed view emits them; a window join's views are its
leaves, whose closed rows are the input of the stages above (docs/m3.md, "Window joins").

A leaf that the stage above joins on equal INT columns with a narrower leaf (:class:`.winstages.SemiJoin`)
is read after it, only its entries meeting one of that leaf's rows in the same window: the rest would join
nothing, and on the native backend they are left out by their codes, never decoded (q7's bids: of a window's
bids only those at its highest price are read).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

from boreas.catalog.model import FieldType, Schema
from boreas.m3.runtime.closed import Keep
from boreas.m3.runtime.closed_columns import LeafColumns, leaf_columns, read_windows
from boreas.m3.runtime.program import Runtime
from boreas.m3.winstages import SemiJoin, StagePlan

from .m3closing import ClosedEntries, Closing

Closed = dict[str, list[tuple[int, tuple, object]]]  # per leaf view its closed rows as (window end, key, value)


class StageEmit:
    """Turns the closed windows' leaf rows into the query's out rows (out port 0); owns the runtimes it
    evaluates the stages with (nothing in them outlives one window)."""

    def __init__(self, stages: StagePlan, schema: Schema, closing: Closing | None = None,
                 runtime: Runtime | None = None):
        self.stages, self.schema = stages, schema
        self.runtimes = stages.runtimes()
        self.semijoins = _usable(stages, closing, runtime) if closing is not None and runtime is not None else ()
        self.columns = _columns(stages, closing, runtime) if closing is not None and runtime is not None else None

    def emit(self, closing: Closing, runtime: Runtime, frontier: float, everything: bool = False) -> list[tuple]:
        """The out rows of the windows ``frontier`` closes: from the leaves' closed entries as columns where
        each leaf has them (:attr:`columns`, m3/runtime/closed_columns.py), else from their rows."""
        native = runtime.native_maps()
        if self.columns is None or native is None:
            return self.rows(self.closed(closing, runtime, frontier, everything))
        windows = read_windows(native, self.columns, closing.bounds(frontier, everything))
        return self._out([self.stages.evaluate_tables(tables, self.runtimes) for tables in windows.values()])

    def closed(self, closing: Closing, runtime: Runtime, frontier: float, everything: bool = False) -> Closed:
        """Every leaf's rows of the windows ``frontier`` closes, as :meth:`rows` reads them: a semi-joined
        leaf's (:attr:`semijoins`) read after the other leaf's, only the entries meeting one of its rows."""
        bounds = closing.bounds(frontier, everything)
        late = {s.leaf: s for s in self.semijoins}
        maps = {runtime.program.view(leaf).plain_map for leaf in late}
        closed = ClosedEntries(runtime, {name: bound for name, bound in bounds.items() if name not in maps})
        leaves: Closed = {}
        views = set(v.name for _, v, _, _ in closing.views)
        for view, rows in self._read(closing, runtime, frontier, closed, everything, views - late.keys()):
            leaves[view] = rows
        for s in self.semijoins:
            name = runtime.program.view(s.leaf).plain_map
            position, is_end = next((p, e) for _, v, p, e in closing.views if v.name == s.leaf)
            keep = Keep((position, *s.keys), self._allowed(s, leaves.get(s.other, ()), 0 if is_end else closing.size))
            closed[name] = runtime.entries_at_most(name, *bounds[name], keep)
            for view, rows in self._read(closing, runtime, frontier, closed, everything, {s.leaf}):
                leaves[view] = rows
        return leaves

    @staticmethod
    def _read(closing: Closing, runtime: Runtime, frontier: float, closed, everything: bool, only):
        for _, view, position, is_end, pairs in closing.rows(runtime, frontier, closed, everything, only):
            shift = 0 if is_end else closing.size  # (a key holding the start: its end is size on)
            yield view.name, [(k[position] + shift, k, v) for k, v in pairs]

    def _allowed(self, s: SemiJoin, rows: Sequence[tuple[int, tuple, object]], shift: int) -> frozenset[tuple]:
        """The (leaf's window key, its join columns' values) a leaf row must hold to meet one of ``rows`` (the
        other leaf's closed rows); a value no INT equals (a null, a fraction) meets nothing."""
        per_window: dict[int, list] = defaultdict(list)
        for end, key, value in rows:
            per_window[end].append((key, value))
        reader = self.stages.reader(s.other)
        allowed = set()
        for end, pairs in per_window.items():
            for row in reader.rows(pairs):
                values = [row[j] for j in s.columns]
                if all(isinstance(v, int) or (isinstance(v, float) and v.is_integer()) for v in values):
                    allowed.add((end - shift, *(int(v) for v in values)))
        return frozenset(allowed)

    def rows(self, closed: dict[str, Sequence[tuple[int, tuple, object]]]) -> list[tuple]:
        """``closed``: per leaf view its closed rows as ``(window end, key, value)``; the out rows, per window
        in order of its end."""
        per_window: dict[int, dict[str, list]] = defaultdict(lambda: defaultdict(list))
        for view, rows in closed.items():
            for end, key, value in rows:
                per_window[end][view].append((key, value))
        return self._out([self.stages.evaluate(per_window[end], self.runtimes) for end in sorted(per_window)])

    def _out(self, results: Sequence[dict[tuple, object]]) -> list[tuple]:
        """The out rows of the top stage's rows of each window, in the order given: every row the top view
        reads, all zeros included (its groups are counted: m3/compiler/winrows.py)."""
        top = self.stages.top
        width = len(top.output_keys)
        casts = [_cast(f.type) for f in self.schema.fields[width:]]
        out: list[tuple] = []
        for result in results:
            for key, value in result.items():  # (each a group of the window: a SUM of 0 is a row, issue 34)
                values = value if isinstance(value, tuple) else (value,)
                out.append(tuple(key[i] for i in top.output_keys) + tuple(c(v) for c, v in zip(casts, values)))
        return out


def _cast(kind: FieldType):
    """An upper stage's value as its out field holds it; None (SQL's NULL: a MAX or SUM of the window's NULLs
    only, the field nullable) stays None, as the plain view's out rows keep it (node/operators/m3box.py).

    >>> [_cast(FieldType.LONG)(v) for v in (3.0, None)], _cast(FieldType.DOUBLE)(2), _cast(FieldType.STRING)("x")
    ([3, None], 2.0, 'x')
    """
    if kind == FieldType.STRING:
        return lambda v: v if isinstance(v, str) or v is None else ""  # ('' for a string value that left)
    cast = float if kind == FieldType.DOUBLE else int
    return lambda v: None if v is None else cast(v)


def _usable(stages: StagePlan, closing: Closing, runtime: Runtime) -> tuple[SemiJoin, ...]:
    """The plan's semi-joins this box can read so: the leaf's map keyed by its window and read by no other
    view (reading part of its closed entries must not cut another view's rows)."""
    found = []
    for s in stages.semijoins:
        name = runtime.program.view(s.leaf).plain_map
        others = [v.name for _, v, _, _ in closing.views if v.name != s.leaf]
        if name in closing.doomed and all(name not in runtime.view_reads(v) for v in others):
            found.append(s)
    return tuple(found)


def _columns(stages: StagePlan, closing: Closing, runtime: Runtime) -> dict[str, LeafColumns] | None:
    """Where each leaf relation's columns are in its map's dump (m3/runtime/closed_columns.py), when every
    leaf's are, none is read as a semi-join's and each map is dropped by the window the leaf reads; else None."""
    if stages.semijoins:
        return None
    found = {}
    for relation, reader in zip(stages.leaf_relations, stages.leaves):
        position, is_end = next(((p, e) for _, v, p, e in closing.views if v.name == reader.view), (None, True))
        where = None if position is None else leaf_columns(runtime, reader.view, reader.picks, reader.distinct,
                                                            position, is_end, closing.size)
        if where is None or closing.doomed.get(where.map) != (where.window, where.shift == 0):
            return None
        found[relation] = where
    return found
