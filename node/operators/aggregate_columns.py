"""The value-window aggregate on Arrow columns: a batch a *run* at a time, not a tuple at a time.

A stream in order mostly does one thing per tuple: it adds to its group's
one open window (the *hot* window of :mod:`.aggregate_loop`).  This module
finds those tuples for a whole batch with numpy and adds them with one
reduction per run instead of one Python step per tuple:

1. each row's group is a code from the key columns' dictionary encoding;
   the rows are sorted by code, stably, so each group's rows stay in
   arrival order;
2. a group's rows are cut into *runs* where their window cell
   (``(v - next start) // advance`` from the group's state) changes, and
   around every row whose order value is None;
3. per run, one ``reduceat`` gives its order values' min and max and every
   function's partial (count, sum, min, max; firstval and lastval are the
   values at the run's ends);
4. the runs are taken in the order of their first row in the batch.  A
   run inside its group's hot window (``start <= min`` and ``max < end``)
   is added at once.  A run that starts the group's next window, where an
   in-order stream with slack 0 meets every window's end, rolls the window
   over once (:meth:`~.aggregate_windows.GroupWindows.roll`: the hot window
   closes and is emitted, the next opens) and is added at once.  Otherwise
   its first row goes through the general per-tuple code
   (:meth:`~.aggregate_windows.GroupWindows.place_hot`, which opens, closes
   and emits windows and counts late tuples), and the rest of the run is
   added at once if it lies in the hot window that leaves (its partials
   computed then); if not, each further row goes through the per-tuple
   code, taking turns with the other groups' rows by batch position.

A batch of an in-order stream into tumbling windows (slack 0, no timeout)
skips the heap: when every run lies in its group's hot window or in the
window right after its predecessor's, checked for the whole batch before
anything changes, the runs are taken in batch order and each is added or
rolls its group's window over (:meth:`ColumnRuns._chained`,
:meth:`~.aggregate_windows.GroupWindows.next_window`).

Groups are independent, a run's rows all go to one window in arrival order
and every row that can open, close or emit a window is taken in batch order
by the reference code, so outputs, their order, the window counter and
every counter are the row path's.  One difference: a float sum or average
adds a run's values pairwise (numpy) before adding them to the window,
where the row path adds them one by one, so the two can differ in the last
bits (integer sums, counts, min, max, firstval and lastval are exact).

Sliding windows (``advance < window-size``) have no hot window: a run's
first row takes the per-tuple code, and the rest of the run (or a whole run
that opens and closes nothing) is added at once to every window of its group
that holds it whole (:meth:`ColumnRuns._windows_holding`), when that is all
:meth:`~.aggregate_windows.GroupWindows.place` would do with each row.
A run whose rows go to the per-tuple code one by one (late rows, say) tests
its rest's bounds in O(1) per row (:meth:`~.aggregate_runs.Runs.rest_range`)
and makes the rest's partials (:meth:`~.aggregate_runs.Runs.part`) only when
they are added, at most once per run: linear in the batch, not quadratic.
Rows the per-tuple code would only count (late, or between hopping windows:
:meth:`~.aggregate_windows.GroupWindows.ignores`) are counted at once, a
run's rest at a time (:meth:`ColumnRuns._skip_ignored`); the rows it does
see are made a cell at a time for the first few, then from columns
converted once per batch (:class:`_Rows`).

The shapes taken (:meth:`ColumnRuns.make` says None otherwise and the box
reads rows): windows by VALUES, and functions ``count``, ``count_distinct``,
``sum``, ``avg``, ``min``, ``max`` (of a string: ranks,
:mod:`.aggregate_runs`), ``firstval`` and ``lastval`` of a field (a
``nullable`` one too: NULLs skipped, a sum's count of values kept in its
next slot, :attr:`~.aggregate_runs.Function.counted`) or of a numeric expression (a column
of its own: :mod:`.aggregate_args`) -- docs/operators.md ("aggregate on
columns").  A batch with a NaN in the order field or under min, max or
count_distinct (:mod:`.aggregate_exact`, which keeps long sums and signed
zeros exact), more runs than a quarter of its rows, an expression the row
path would fail on in some row, or a NaN or zero in a float group-by field
is read as rows, whole, before anything changes.
"""

from __future__ import annotations

import operator
import heapq
from collections.abc import Callable
from typing import Any

import pyarrow as pa

from boreas.catalog.model import Schema
from boreas.node.compile import STR, kind_of

from .accumulators import COUNT, END, FIRST_SLOT, START, parse_call
from .aggregate_args import ArgumentColumns, reads_nullable
from .aggregate_emit import BatchEmit
from .aggregate_loop import CLOSED, BatchLoop
from .aggregate_runs import Function, Part, Runs
from .aggregate_windows import GroupWindows, WindowSpec

#: The functions this path computes (of a field; min and max of a numeric one).
TAKEN = ("count", "count_distinct", "sum", "avg", "min", "max", "firstval", "lastval")


class ColumnRuns:
    """Runs a plain batch of columns through an aggregate's :class:`GroupWindows` (see the module doc).

    It holds no state of its own between batches: the windows are the
    book's, so a batch read as columns and the next one read as rows
    continue each other exactly.
    """

    def __init__(self, functions: list[Function], groups: list[int], order: int, spec: WindowSpec,
                 windows: GroupWindows, loop: BatchLoop, args: ArgumentColumns):
        self._functions = functions
        self._groups, self._order, self._spec = groups, order, spec
        self._windows, self._loop = windows, loop
        self._keyf: Callable[[tuple], Any] | None = None
        # the chained case with the common functions: closed windows emitted as columns (.aggregate_emit)
        self._args = args  # expression arguments: columns appended to each batch (.aggregate_args)
        self._batch_emit = BatchEmit.make(functions, args.schema, spec, windows, self._add)
        if groups:  # the row path's key, as the box makes it (in C)
            self._keyf = operator.itemgetter(*groups)

    @classmethod
    def make(cls, functions: list[str], schema: Schema, groups: list[int], order: int, spec: WindowSpec,
             windows: GroupWindows, loop: BatchLoop) -> "ColumnRuns | None":
        """The columnar path for a box of this shape, or None when the box reads rows (module doc)."""
        if not spec.by_values:
            return None  # TUPLES windows: .aggregate_tuples
        taken = columnar_functions(functions, schema)
        return cls(taken[0], groups, order, spec, windows, loop, taken[1]) if taken is not None else None

    # -- one batch ---------------------------------------------------------------------

    def process(self, batch: pa.RecordBatch, now: float, out: list[tuple]) -> None:
        """Add a plain batch to the windows, emitting what closes, exactly as the row path would."""
        if not batch.num_rows:
            return
        extended = self._args.extend(batch)
        if extended is None:  # an argument the row path would not compute exactly so: the batch reads rows
            self._windows.by_values(_rows(batch), self._keyf, self._order, now, out, self._loop)
            return
        batch = extended
        runs = Runs.cut(batch, self._groups, self._order, self._functions, self._spec, self._windows)
        if runs is None:
            rows = _rows(batch)
            self._windows.by_values(rows, self._keyf, self._order, now, out, self._loop)
            return
        if self._batch_emit is not None and self._batch_emit.take(runs, now, out):
            return
        if not self._chained(runs, now, out):
            self._walk(batch, runs, now, out)

    def _chained(self, runs: "Runs", now: float, out: list[tuple]) -> bool:
        """The batch of an in-order stream into tumbling windows, one Python step per window, no heap: or
        False, before anything changes, when some run is not that case and :meth:`_walk` takes the batch.

        The case: every group in the batch has a hot window that is its only one; its first run lies in
        that window or in the next (the hot window then holds tuples and closes), and each later run lies in
        the window after its predecessor's; no order value is None (:meth:`GroupWindows.chains` says the
        windows are tumbling, slack 0, without timeout).  These are :meth:`GroupWindows.roll`'s conditions
        for every run, checked for the batch at once; groups do not touch each other, so the runs are then
        taken in the order of their first rows (as :meth:`_walk` takes them) and each either adds to its
        group's hot window or rolls it over (:meth:`GroupWindows.next_window`) and adds: the same windows,
        outputs, output order and window numbers as the walk.
        """
        windows = self._windows
        if not windows.chains():
            return False
        keys, valid, lo, hi = runs.keys, runs.valid, runs.lo, runs.hi
        size, beyond = self._spec.size, self._spec.beyond
        rolls = [False] * len(keys)
        nxt = None
        prev: Any = _NO_KEY
        for r, key in enumerate(keys):
            if not valid[r]:
                return False
            if r == 0 or key != prev:  # a group's first run (a group's runs are consecutive)
                prev = key
                w = windows.hot(key)
                g = windows.groups.get(key)
                if w is None or g is None or len(g[1]) != 1 or w[beyond] != 0:
                    return False
                if w[START] <= lo[r] and hi[r] < w[END]:
                    nxt = g[0]
                    continue
                nxt = g[0]
                if not (w[COUNT] and w[END] <= lo[r]):
                    return False
            if not (nxt <= lo[r] and hi[r] < nxt + size):  # (size = advance: the run opens one window)
                return False
            rolls[r] = True
            nxt += size
        whole, add = runs.whole, self._add
        for r in sorted(range(len(keys)), key=runs.first_rows.__getitem__):
            key = keys[r]
            w = windows.next_window(key, now, out) if rolls[r] else windows.hot(key)
            add(w, whole[r])  # type: ignore[arg-type]
        return True

    def _walk(self, batch: pa.RecordBatch, runs: "Runs", now: float, out: list[tuple]) -> None:
        """Take the runs (and any row the per-tuple code must see) in the order of their rows in the batch."""
        windows, order = self._windows, self._order
        rows = _Rows(batch.columns)
        keys, lengths, valid, lo, hi = runs.keys, runs.lengths, runs.valid, runs.lo, runs.hi
        sliding = self._spec.advance < self._spec.size
        events = [(first, r, 0) for r, first in enumerate(runs.first_rows)]
        heapq.heapify(events)
        while events:
            row_index, r, at = heapq.heappop(events)
            key = keys[r]
            if at == 0 and valid[r]:
                w = windows.hot(key)
                if w is not None and w[START] <= lo[r] and hi[r] < w[END]:
                    self._add(w, runs.whole[r])
                    continue
                w = windows.roll(key, lo[r], hi[r], now, out)
                if w is not None:
                    self._add(w, runs.whole[r])
                    continue
                if sliding:
                    into = self._windows_holding(key, lo[r], hi[r])
                    if into:
                        self._add_all(into, runs.whole[r])
                        continue
            row = rows(row_index)
            v = row[order]
            w = windows.hot(key) if at > 0 else None  # a later row: the generated loop's own test first
            if w is not None and v is not None and w[START] <= v < w[END]:
                self._add(w, Part.of_row(row, self._functions))
            else:
                windows.place_hot(row, key, v, now, out)
            if at + 1 >= lengths[r]:
                continue
            if valid[r] and self._skip_ignored(runs, r, at + 1, key):
                continue
            w = windows.hot(key)
            if w is not None or sliding:
                # the rest's bounds in O(1) (Runs.rest_range); its partials only when they are added
                rest_lo, rest_hi = runs.rest_range(r, at + 1)
                if w is not None and w[START] <= rest_lo and rest_hi < w[END]:
                    self._add(w, runs.part(r, at + 1))
                    continue
                into = self._windows_holding(key, rest_lo, rest_hi) if sliding else None
                if into:
                    self._add_all(into, runs.part(r, at + 1))
                    continue
            if valid[r] and self._skip_ignored(runs, r, at + 1, key, runs.rest_range(r, at + 1)[1]):
                continue
            heapq.heappush(events, (runs.row_at(r, at + 1), r, at + 1))

    def _skip_ignored(self, runs: "Runs", r: int, at: int, key: Any, hi: Any = None) -> bool:
        """Run ``r``'s rows from the ``at``-th on counted at once, when :meth:`GroupWindows.place` would only
        count each (late rows, or rows between windows: :meth:`GroupWindows.ignores`, the whole run's highest
        order value or the rest's ``hi``); False (nothing done) when not."""
        horizon = self._windows.ignores(key, runs.hi[r] if hi is None else hi)
        if horizon is None:
            return False
        n = runs.lengths[r] - at
        late = n if runs.hi[r] < horizon else int((runs.rest_values(r, at) < horizon).sum())
        self._windows.count_ignored(n, late)
        return True

    def _windows_holding(self, key: Any, lo: Any, hi: Any) -> list | None:
        """Sliding windows: the windows of a group that rows (order values ``lo`` to ``hi``) may be added to
        at once, when that is all :meth:`GroupWindows.place` would do with each of them; None (or empty) when
        it is not.  Changes nothing.

        That is when ``hi`` is before the group's next start (no row opens a window), each window not closed
        either starts after ``hi`` (no row reaches it) or holds ``[lo, hi]`` whole (every row enters it: no
        row is a closing tuple of it), and at least one does (no row is ignored or late)."""
        g = self._windows.groups.get(key)
        if g is None or not hi < g[0]:
            return None
        beyond = self._spec.beyond
        into = []
        for w in g[1]:
            if w[beyond] == CLOSED or hi < w[START]:
                continue
            if not (w[START] <= lo and hi < w[END]):
                return None
            into.append(w)
        return into

    def _add_all(self, into: list, part: "Part") -> None:
        """A stretch of rows added to each of the windows :meth:`_windows_holding` found."""
        for w in into:
            self._add(w, part)

    def _add(self, w: list, part: "Part") -> None:
        add_part(self._functions, w, part)


def columnar_functions(functions: list[str], schema: Schema) -> tuple[list[Function], ArgumentColumns] | None:
    """The box's ``aggregate-function.N`` as the columnar paths compute them (each with its first slot) and the
    expression arguments' columns (:mod:`.aggregate_args`), or None when some function keeps the box on rows
    (the module doc: by VALUES here, by TUPLES :mod:`.aggregate_tuples`)."""
    names = {f.name: i for i, f in enumerate(schema.fields)}
    args = ArgumentColumns(schema)
    taken: list[Function] = []
    slot = FIRST_SLOT
    for text in functions:
        call = parse_call(text)
        if call is None or call[0] not in TAKEN:
            return None
        func, arg = call
        if func == "count" and arg in ("", "*"):
            taken.append(Function(func, None, -1))
            continue
        field = names.get(arg)
        nullable = False
        if field is None:  # an expression: a column of its own (.aggregate_args), or the box reads rows
            field = args.add(arg)
            if field is None:
                return None
            nullable = reads_nullable(schema, arg)  # (NULLs and failed rows: None, skipped as by rows)
        elif func in ("sum", "avg") and kind_of(schema.fields[field].type) == STR:
            return None  # (min and max of strings: their ranks, aggregate_runs._ranks)
        else:
            # SQL's NULLs: skipped as the row path skips None; a sum keeps its count of values beside it
            nullable = schema.fields[field].nullable
        counted = func == "sum" and nullable
        taken.append(Function(func, field, slot, counted))
        slot += 2 if func == "avg" or counted else 1
    return taken, args


def add_part(functions: list[Function], w: list, part: Part) -> None:
    """A stretch of rows (``part``, in arrival order) added to window ``w``: what the accumulators' ``add``
    would make of them one by one (float sums pairwise: the last bits may differ)."""
    first = not w[COUNT]
    w[COUNT] += part.n
    for f, value in zip(functions, part.values):
        if f.field is None:
            continue
        s = f.slot
        func = f.func
        if func == "count":
            w[s] += value
        elif func == "count_distinct":
            if value:
                d = w[s]
                if d is None:
                    d = w[s] = {}
                for x in value:
                    d[x] = 1
        elif func == "sum":
            if value[1]:
                w[s] += value[0]
                if f.counted:
                    w[s + 1] += value[1]
        elif func == "avg":
            if value[1]:
                w[s] += value[0]
                w[s + 1] += value[1]
        elif func == "min":
            if value is not None and (w[s] is None or value < w[s]):
                w[s] = value
        elif func == "max":
            if value is not None and (w[s] is None or value > w[s]):
                w[s] = value
        elif func == "firstval":
            if first:
                w[s] = value
        else:  # lastval
            w[s] = value


_NO_KEY = object()  # no group yet (None is a group key: no group-by)


class _Rows:
    """Rows of a batch as the row path has them, for the per-tuple code: the first few a cell at a time, then
    (a batch whose rows go there in numbers: late ones, say) every column converted once, in C."""

    EAGER_AFTER = 32

    def __init__(self, columns: list[pa.Array]):
        self._columns = columns
        self._lists: list[list] | None = None
        self._taken = 0

    def __call__(self, i: int) -> tuple:
        lists = self._lists
        if lists is None:
            self._taken += 1
            if self._taken <= self.EAGER_AFTER:
                return tuple(c[i].as_py() for c in self._columns)
            lists = self._lists = [c.to_pylist() for c in self._columns]
        return tuple(c[i] for c in lists)


def _rows(batch: pa.RecordBatch) -> list[tuple]:
    columns = [c.to_pylist() for c in batch.columns]
    return list(zip(*columns)) if columns else [() for _ in range(batch.num_rows)]
