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
3. per run, one ``reduceat`` gives its count, the order value's min and
   max and every function's partial (count, sum, min, max; firstval and
   lastval are the values at the run's ends) -- for the whole run and for
   the run without its first row;
4. the runs are taken in the order of their first row in the batch.  A
   run inside its group's hot window (``start <= min`` and ``max < end``)
   is added at once.  Otherwise its first row goes through the general
   per-tuple code (:meth:`~.aggregate_windows.GroupWindows.place_hot`,
   which opens, closes and emits windows), and then the rest of the run is
   added at once if it lies in the hot window that leaves; if not, each
   further row goes through the per-tuple code in batch order, taking
   turns with the other groups' rows by their position in the batch.

Groups are independent, a run's rows all go to one window in arrival order
and every row that can open, close or emit a window is taken in batch order
by the reference code, so outputs, their order, the window counter and
every counter are the row path's.  One difference: a float sum or average
adds a run's values pairwise (numpy) before adding them to the window,
where the row path adds them one by one, so the two can differ in the last
bits (integer sums, counts, min, max, firstval and lastval are exact).

The shapes taken (:meth:`ColumnRuns.make` says None otherwise and the box
reads rows): windows by VALUES that do not overlap (``advance >=
window-size``), group-by fields that are not floating point, and functions
``count``, ``sum``, ``avg``, ``min``, ``max``, ``firstval`` and ``lastval``
of a field (not an expression) -- docs/operators.md ("aggregate on
columns").  A batch with a NaN, an int64 sum that could overflow, or more
runs than a quarter of its rows is read as rows, whole, before anything
changes.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from boreas.catalog.model import Schema
from boreas.node.compile import FLOAT, STR, kind_of

from .accumulators import COUNT, END, FIRST_SLOT, START, parse_call
from .aggregate_loop import BatchLoop
from .aggregate_windows import GroupWindows, WindowSpec

#: Above this many runs per row the batch is read as rows (few tuples per run: numpy would not pay).
MAX_RUNS_PER_ROW = 0.25

#: Functions this path computes, and what each reduces: the field's values ("x") or nothing.
TAKEN = ("count", "sum", "avg", "min", "max", "firstval", "lastval")


@dataclass(frozen=True)
class Function:
    """One ``aggregate-function.N`` as the columnar path computes it."""

    func: str
    field: int | None  # None: count(*)
    slot: int          # its first slot in a window list


class ColumnRuns:
    """Runs a plain batch of columns through an aggregate's :class:`GroupWindows` (see the module doc).

    It holds no state of its own between batches: the windows are the
    book's, so a batch read as columns and the next one read as rows
    continue each other exactly.
    """

    def __init__(self, functions: list[Function], groups: list[int], order: int, spec: WindowSpec,
                 windows: GroupWindows, loop: BatchLoop):
        self._functions = functions
        self._groups, self._order, self._spec = groups, order, spec
        self._windows, self._loop = windows, loop
        self._keyf: Callable[[tuple], Any] | None = None
        if groups:
            self._keyf = (lambda row, i=groups[0]: row[i]) if len(groups) == 1 else (
                lambda row, ix=tuple(groups): tuple(row[i] for i in ix))

    @classmethod
    def make(cls, functions: list[str], schema: Schema, groups: list[int], order: int, spec: WindowSpec,
             windows: GroupWindows, loop: BatchLoop) -> "ColumnRuns | None":
        """The columnar path for a box of this shape, or None when the box reads rows (module doc)."""
        if not spec.by_values or spec.advance < spec.size:
            return None  # sliding windows: a tuple enters several windows, never a hot one
        if any(kind_of(schema.fields[i].type) == FLOAT for i in groups):
            return None  # -0.0 and nan group as one in Python and as two in Arrow
        names = {f.name: i for i, f in enumerate(schema.fields)}
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
            if field is None:
                return None  # an expression: the row path's generated code evaluates it
            if func in ("sum", "avg", "min", "max") and kind_of(schema.fields[field].type) == STR:
                return None
            taken.append(Function(func, field, slot))
            slot += 2 if func == "avg" else 1
        return cls(taken, groups, order, spec, windows, loop)

    # -- one batch ---------------------------------------------------------------------

    def process(self, batch: pa.RecordBatch, now: float, out: list[tuple]) -> None:
        """Add a plain batch to the windows, emitting what closes, exactly as the row path would."""
        if not batch.num_rows:
            return
        runs = _Runs.cut(batch, self._groups, self._order, self._functions, self._spec, self._windows)
        if runs is None:
            rows = _rows(batch)
            self._windows.by_values(rows, self._keyf, self._order, now, out, self._loop)
            return
        self._walk(batch, runs, now, out)

    def _walk(self, batch: pa.RecordBatch, runs: "_Runs", now: float, out: list[tuple]) -> None:
        """Take the runs (and any row the per-tuple code must see) in the order of their rows in the batch."""
        windows, columns = self._windows, batch.columns
        keys, firsts, lengths = runs.keys, runs.first_rows, runs.lengths
        events: list[tuple[int, int, int]] = [(firsts[r], r, 0) for r in range(len(lengths))]
        heapq.heapify(events)
        while events:
            row_index, r, at = heapq.heappop(events)
            key = keys[r]
            if at == 0 and runs.valid[r]:
                w = windows.hot(key)
                if w is not None and w[START] <= runs.lo[r] and runs.hi[r] < w[END]:
                    self._add(w, runs.whole(r))
                    continue
            if at > 0:  # a later row of a run that did not fit: the generated loop's own test first
                w = windows.hot(key)
                row = _row(columns, row_index)
                v = row[self._order]
                if w is not None and v is not None and w[START] <= v < w[END]:
                    self._add(w, _Part.of_row(row, self._functions))
                else:
                    windows.place_hot(row, key, v, now, out)
            else:
                row = _row(columns, row_index)
                windows.place_hot(row, key, row[self._order], now, out)
            if at + 1 >= lengths[r]:
                continue
            if at == 0 and runs.valid[r]:
                w = windows.hot(key)
                if w is not None and w[START] <= runs.rest_lo[r] and runs.rest_hi[r] < w[END]:
                    self._add(w, runs.rest(r))
                    continue
            heapq.heappush(events, (runs.row_at(r, at + 1), r, at + 1))

    def _add(self, w: list, part: "_Part") -> None:
        """A run's rows added to window ``w``: what ``add`` would make of them one by one."""
        first = not w[COUNT]
        w[COUNT] += part.n
        for f, value in zip(self._functions, part.values):
            if f.field is None:
                continue
            s = f.slot
            func = f.func
            if func == "count":
                w[s] += value
            elif func == "sum":
                if value[1]:
                    w[s] += value[0]
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


@dataclass(frozen=True)
class _Part:
    """What a stretch of one run adds: its row count and one partial per function (as :meth:`ColumnRuns._add`
    reads them: count, (sum, non-None count), min or max or None, a value)."""

    n: int
    values: tuple

    @staticmethod
    def of_row(row: tuple, functions: list[Function]) -> "_Part":
        values: list[Any] = []
        for f in functions:
            x = row[f.field] if f.field is not None else None
            if f.func == "count":
                values.append(int(x is not None))
            elif f.func in ("sum", "avg"):
                values.append((x if x is not None else 0, int(x is not None)))
            else:
                values.append(x)
        return _Part(1, tuple(values))


class _Runs:
    """One batch cut into runs, with each run's partials (whole, and without its first row) as Python values."""

    def __init__(self, **fields: Any):
        self.__dict__.update(fields)

    def whole(self, r: int) -> _Part:
        return _Part(self.lengths[r], tuple(p[r] for p in self.whole_parts))

    def rest(self, r: int) -> _Part:
        return _Part(self.lengths[r] - 1, tuple(p[r] for p in self.rest_parts))

    def row_at(self, r: int, at: int) -> int:
        """The batch position of the ``at``-th row of run ``r``."""
        return int(self.perm[self.starts[r] + at])

    @classmethod
    def cut(cls, batch: pa.RecordBatch, groups: list[int], order: int, functions: list[Function],
            spec: WindowSpec, windows: GroupWindows) -> "_Runs | None":
        """The batch's runs, or None when it is to be read as rows (a NaN, a possible overflow, too many runs)."""
        n = batch.num_rows
        codes, keys_of = _group_codes(batch, groups)
        if codes is None:
            return None
        column = batch.column(order)
        valid = ~np.asarray(column.is_null(), dtype=bool) if column.null_count else np.ones(n, bool)
        v = _numbers(column)
        if v.dtype.kind == "f" and np.isnan(v[valid]).any():
            return None
        perm = np.argsort(codes, kind="stable")
        sc, sv, sok = codes[perm], v[perm], valid[perm]
        # each group's window grid: its next start, or (new group) where its first window will start
        bounds = np.flatnonzero(np.diff(sc)) + 1
        gstarts = np.concatenate(([0], bounds))
        glens = np.diff(np.concatenate((gstarts, [n])))
        bases = []
        for gs in gstarts.tolist():
            g = windows.groups.get(keys_of(int(sc[gs])))
            if g is not None:
                bases.append(g[0])
            else:
                first = sv[gs:gs + int(glens[len(bases)])][sok[gs:gs + int(glens[len(bases)])]]
                b = first[0].item() if len(first) else 0
                bases.append(b - b % spec.advance if spec.aligned else b)
        base = np.repeat(np.asarray(bases, dtype=np.float64), glens)
        cell = np.floor((sv.astype(np.float64) - base) / float(spec.advance))
        cell[~sok] = np.nan
        cut = np.ones(n, bool)
        cut[1:] = (sc[1:] != sc[:-1]) | (cell[1:] != cell[:-1]) | ~sok[1:] | ~sok[:-1]
        starts = np.flatnonzero(cut)
        if len(starts) > max(1.0, MAX_RUNS_PER_ROW * n):
            return None
        lengths = np.diff(np.concatenate((starts, [n])))
        # segments: each run's first row alone, then (runs longer than one) the rest
        long = lengths > 1
        seg = np.sort(np.concatenate((starts, starts[long] + 1)))
        first_seg = np.searchsorted(seg, starts)
        rest_seg = np.minimum(first_seg + 1, len(seg) - 1)
        fill = sv.copy()
        fill[~sok] = 0
        lo_seg = np.minimum.reduceat(fill, seg)
        hi_seg = np.maximum.reduceat(fill, seg)
        lo = np.minimum(lo_seg[first_seg], np.where(long, lo_seg[rest_seg], lo_seg[first_seg]))
        hi = np.maximum(hi_seg[first_seg], np.where(long, hi_seg[rest_seg], hi_seg[first_seg]))
        whole_parts, rest_parts = [], []
        for f in functions:
            parts = _partials(batch, f, perm, seg, first_seg, rest_seg, long, starts, lengths)
            if parts is None:
                return None
            whole_parts.append(parts[0])
            rest_parts.append(parts[1])
        return cls(keys=[keys_of(c) for c in sc[starts].tolist()], first_rows=perm[starts].tolist(),
                   lengths=lengths.tolist(), valid=sok[starts].tolist(), lo=lo.tolist(), hi=hi.tolist(),
                   rest_lo=lo_seg[rest_seg].tolist(), rest_hi=hi_seg[rest_seg].tolist(),
                   whole_parts=whole_parts, rest_parts=rest_parts, perm=perm, starts=starts.tolist())


def _partials(batch: pa.RecordBatch, f: Function, perm: np.ndarray, seg: np.ndarray, first_seg: np.ndarray,
              rest_seg: np.ndarray, long: np.ndarray, starts: np.ndarray,
              lengths: np.ndarray) -> tuple[list, list] | None:
    """One function's partial per run, whole and without the first row (see :class:`_Part`), or None (rows)."""
    nruns = len(starts)
    if f.field is None:
        return [None] * nruns, [None] * nruns
    column = batch.column(f.field)
    if f.func in ("firstval", "lastval"):
        at = starts if f.func == "firstval" else starts + lengths - 1
        whole = column.take(pa.array(perm[at])).to_pylist()
        if f.func == "lastval":
            return whole, whole
        second = column.take(pa.array(perm[np.minimum(starts + 1, len(perm) - 1)])).to_pylist()
        return whole, second
    ok = ~np.asarray(column.is_null(), dtype=bool)[perm] if column.null_count else np.ones(len(perm), bool)
    count_seg = np.add.reduceat(ok.astype(np.int64), seg)
    counts_first, counts_rest = count_seg[first_seg], np.where(long, count_seg[rest_seg], 0)
    if f.func == "count":
        return (counts_first + counts_rest).tolist(), counts_rest.tolist()
    x = _numbers(column)[perm]
    if x.dtype.kind == "f":
        if np.isnan(x[ok]).any():
            return None
        x = x.astype(np.float64)
    else:
        x = x.astype(np.int64)
        big = int(np.abs(x[ok]).max()) if ok.any() else 0
        if big and big * len(x) >= 2 ** 62:
            return None  # Python's ints never overflow; int64 sums might
    if f.func in ("sum", "avg"):
        sums = np.add.reduceat(np.where(ok, x, 0), seg)
        first, rest = sums[first_seg], np.where(long, sums[rest_seg], 0)
        whole = list(zip((first + rest).tolist(), (counts_first + counts_rest).tolist()))
        return whole, list(zip(rest.tolist(), counts_rest.tolist()))
    take_min = f.func == "min"
    edge = (np.inf if take_min else -np.inf) if x.dtype.kind == "f" else (
        np.iinfo(np.int64).max if take_min else np.iinfo(np.int64).min)
    ext = (np.minimum if take_min else np.maximum).reduceat(np.where(ok, x, edge), seg)
    first, rest = ext[first_seg], np.where(long, ext[rest_seg], edge)
    both = (np.minimum if take_min else np.maximum)(first, rest)
    whole = [e if c else None for e, c in zip(both.tolist(), (counts_first + counts_rest).tolist())]
    return whole, [e if c else None for e, c in zip(rest.tolist(), counts_rest.tolist())]


def _numbers(column: pa.Array) -> np.ndarray:
    """A numeric column as numpy, nulls as 0 (callers mask them)."""
    if column.null_count:
        column = pc.fill_null(column, 0)
    return column.to_numpy(zero_copy_only=False)


def _group_codes(batch: pa.RecordBatch, groups: list[int]) -> tuple[np.ndarray | None, Callable[[int], Any]]:
    """One int64 code per row for its group, and the group key (as the row path makes it) of a code."""
    n = batch.num_rows
    if not groups:
        return np.zeros(n, np.int64), lambda code: None
    digits, dictionaries = [], []
    for i in groups:
        encoded = pc.dictionary_encode(batch.column(i), null_encoding="encode")
        digits.append(np.asarray(encoded.indices.to_numpy(zero_copy_only=False), dtype=np.int64))
        dictionaries.append(encoded.dictionary.to_pylist())
    if len(groups) == 1:
        values = dictionaries[0]
        return digits[0], values.__getitem__
    radix = [len(d) for d in dictionaries]
    if float(np.prod(np.asarray(radix, dtype=np.float64))) >= 2 ** 62:
        return None, lambda code: None
    codes = np.zeros(n, np.int64)
    for d, r in zip(digits, radix):
        codes = codes * r + d

    def key(code: int) -> tuple:
        parts = []
        for values, r in zip(reversed(dictionaries), reversed(radix)):
            code, d = divmod(code, r)
            parts.append(values[d])
        return tuple(reversed(parts))
    return codes, key


def _row(columns: list[pa.Array], i: int) -> tuple:
    """Row ``i`` of the batch as the row path has it (one per row that the per-tuple code must see)."""
    return tuple(c[i].as_py() for c in columns)


def _rows(batch: pa.RecordBatch) -> list[tuple]:
    columns = [c.to_pylist() for c in batch.columns]
    return list(zip(*columns)) if columns else [() for _ in range(batch.num_rows)]
