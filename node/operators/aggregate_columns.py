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
        windows, columns, order = self._windows, batch.columns, self._order
        keys, lengths, valid, lo, hi = runs.keys, runs.lengths, runs.valid, runs.lo, runs.hi
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
            row = _row(columns, row_index)
            v = row[order]
            w = windows.hot(key) if at > 0 else None  # a later row: the generated loop's own test first
            if w is not None and v is not None and w[START] <= v < w[END]:
                self._add(w, _Part.of_row(row, self._functions))
            else:
                windows.place_hot(row, key, v, now, out)
            if at + 1 >= lengths[r]:
                continue
            w = windows.hot(key)
            if w is not None:
                rest = runs.part(r, at + 1)
                if rest is not None and w[START] <= rest[0] and rest[1] < w[END]:
                    self._add(w, rest[2])
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
    """One batch cut into runs: per run its key, first row, length, order values' range and whole partials."""

    def __init__(self, batch: pa.RecordBatch, functions: list[Function], perm: np.ndarray, sv: np.ndarray,
                 sok: np.ndarray, starts: np.ndarray, keys: list):
        n = batch.num_rows
        self._batch, self._functions, self._perm, self._sv, self._sok = batch, functions, perm, sv, sok
        self.keys = keys
        self._starts = starts.tolist()
        ends = np.concatenate((starts[1:], [n]))
        self.lengths = (ends - starts).tolist()
        self.first_rows = perm[starts].tolist()
        self.valid = sok[starts].tolist()
        self.lo = np.minimum.reduceat(sv, starts).tolist()
        self.hi = np.maximum.reduceat(sv, starts).tolist()
        self._sorted: list[tuple[np.ndarray, np.ndarray] | None] = []
        parts = []
        for f in functions:
            prepared = _prepare(batch.column(f.field), perm) if f.field is not None and f.func not in (
                "firstval", "lastval") else None
            self._sorted.append(prepared)
            parts.append(_whole(batch, f, prepared, perm, starts, ends))
        self.whole = [_Part(length, values) for length, values in zip(self.lengths, zip(*parts))] if parts else [
            _Part(length, ()) for length in self.lengths]

    def row_at(self, r: int, at: int) -> int:
        """The batch position of the ``at``-th row of run ``r``."""
        return int(self._perm[self._starts[r] + at])

    def part(self, r: int, at: int) -> tuple[Any, Any, _Part] | None:
        """Run ``r`` from its ``at``-th row on: (lowest, highest order value, partials); None if a value is None."""
        a, b = self._starts[r] + at, self._starts[r] + self.lengths[r]
        if not self._sok[a:b].all():
            return None
        values: list[Any] = []
        for f, prepared in zip(self._functions, self._sorted):
            values.append(_slice_part(self._batch, f, prepared, self._perm, a, b))
        v = self._sv[a:b]
        return v.min().item(), v.max().item(), _Part(b - a, tuple(values))

    @classmethod
    def cut(cls, batch: pa.RecordBatch, groups: list[int], order: int, functions: list[Function],
            spec: WindowSpec, windows: GroupWindows) -> "_Runs | None":
        """The batch's runs, or None when it is to be read as rows (a NaN, a possible overflow, too many runs)."""
        n = batch.num_rows
        codes, keys_of, distinct = _group_codes(batch, groups)
        if codes is None:
            return None
        column = batch.column(order)
        valid = ~np.asarray(column.is_null(), dtype=bool) if column.null_count else None
        v = _numbers(column)
        if v.dtype.kind == "f" and np.isnan(v if valid is None else v[valid]).any():
            return None
        if groups:
            small = codes.astype(np.int16) if distinct < 2 ** 15 else codes
            perm = np.argsort(small, kind="stable")  # int16: numpy's stable sort is a radix sort
            sc, sv = codes[perm], v[perm]
        else:
            perm, sc, sv = np.arange(n), codes, v
        sok = np.ones(n, bool) if valid is None else valid[perm]
        # each group's window grid: its next start, or (a new group) where its first window will start
        gstarts = np.flatnonzero(sc[1:] != sc[:-1]) + 1 if groups else np.zeros(0, np.int64)
        gstarts = np.concatenate(([0], gstarts)).astype(np.int64)
        bases = []
        for i, gs in enumerate(gstarts.tolist()):
            g = windows.groups.get(keys_of(int(sc[gs])))
            if g is not None:
                bases.append(g[0])
                continue
            end = int(gstarts[i + 1]) if i + 1 < len(gstarts) else n
            first = sv[gs:end][sok[gs:end]]
            b = first[0].item() if len(first) else 0
            bases.append(b - b % spec.advance if spec.aligned else b)
        bounds = np.concatenate((gstarts, [n]))
        glens = bounds[1:] - bounds[:-1]
        if v.dtype.kind in "iu" and all(isinstance(b, int) for b in bases) and isinstance(spec.advance, int):
            cell = (sv - np.repeat(np.asarray(bases, dtype=np.int64), glens)) // spec.advance
        else:
            cell = np.floor((sv - np.repeat(np.asarray(bases, dtype=np.float64), glens)) / float(spec.advance))
        cut = np.empty(n, bool)
        cut[0] = True
        np.not_equal(cell[1:], cell[:-1], out=cut[1:])
        if groups:
            cut[1:] |= sc[1:] != sc[:-1]
        if valid is not None:
            cut[1:] |= ~sok[1:] | ~sok[:-1]
        starts = np.flatnonzero(cut)
        if len(starts) > max(1.0, MAX_RUNS_PER_ROW * n):
            return None
        for f in functions:
            if f.field is not None and f.func not in ("firstval", "lastval") and not _fits(batch.column(f.field)):
                return None
        return cls(batch, functions, perm, sv, sok, starts, [keys_of(c) for c in sc[starts].tolist()])


def _fits(column: pa.Array) -> bool:
    """Whether a column's sums are exact in numpy: no NaN, and int64 sums that cannot overflow."""
    kind = column.type
    if pa.types.is_floating(kind):
        return not pc.any(pc.is_nan(column)).as_py()
    if kind == pa.int64() and len(column):
        big = pc.max(pc.abs(column)).as_py() or 0
        return big * len(column) < 2 ** 62  # Python's ints never overflow; int64 sums might
    return True


def _prepare(column: pa.Array, perm: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """A numeric column in run order, as float64 or int64 with None as 0, and where it is not None."""
    ok = ~np.asarray(column.is_null(), dtype=bool)[perm] if column.null_count else np.ones(len(perm), bool)
    x = _numbers(column)[perm]
    return (x.astype(np.float64) if x.dtype.kind == "f" else x.astype(np.int64)), ok


def _whole(batch: pa.RecordBatch, f: Function, prepared: tuple[np.ndarray, np.ndarray] | None, perm: np.ndarray,
           starts: np.ndarray, ends: np.ndarray) -> list:
    """One function's partial of every whole run (as :class:`_Part` holds them)."""
    if f.field is None:
        return [None] * len(starts)
    if f.func in ("firstval", "lastval"):
        at = starts if f.func == "firstval" else ends - 1
        return batch.column(f.field).take(pa.array(perm[at])).to_pylist()
    x, ok = prepared  # type: ignore[misc]
    counts = np.add.reduceat(ok.astype(np.int64), starts) if not ok.all() else ends - starts
    if f.func == "count":
        return counts.tolist()
    if f.func in ("sum", "avg"):
        sums = np.add.reduceat(x if ok.all() else np.where(ok, x, 0), starts)
        return list(zip(sums.tolist(), counts.tolist()))
    take_min = f.func == "min"
    edge = (np.inf if take_min else -np.inf) if x.dtype.kind == "f" else (
        np.iinfo(np.int64).max if take_min else np.iinfo(np.int64).min)
    ext = (np.minimum if take_min else np.maximum).reduceat(x if ok.all() else np.where(ok, x, edge), starts)
    return [e if c else None for e, c in zip(ext.tolist(), counts.tolist())]


def _slice_part(batch: pa.RecordBatch, f: Function, prepared: tuple[np.ndarray, np.ndarray] | None,
                perm: np.ndarray, a: int, b: int) -> Any:
    """One function's partial of the rows ``a:b`` (in run order) of one run."""
    if f.field is None:
        return None
    if f.func in ("firstval", "lastval"):
        return batch.column(f.field)[int(perm[a if f.func == "firstval" else b - 1])].as_py()
    x, ok = prepared  # type: ignore[misc]
    x, ok = x[a:b], ok[a:b]
    count = int(ok.sum())
    if f.func == "count":
        return count
    if f.func in ("sum", "avg"):
        return np.where(ok, x, 0).sum().item(), count
    if not count:
        return None
    return (x[ok].min() if f.func == "min" else x[ok].max()).item()


def _numbers(column: pa.Array) -> np.ndarray:
    """A numeric column as numpy, nulls as 0 (callers mask them)."""
    if column.null_count:
        column = pc.fill_null(column, 0)
    return column.to_numpy(zero_copy_only=False)


def _group_codes(batch: pa.RecordBatch, groups: list[int]) -> tuple[np.ndarray | None, Callable[[int], Any], int]:
    """One int64 code per row for its group, the group key (as the row path makes it) of a code, and how many
    codes there can be."""
    n = batch.num_rows
    if not groups:
        return np.zeros(n, np.int64), lambda code: None, 1
    digits, dictionaries = [], []
    for i in groups:
        encoded = pc.dictionary_encode(batch.column(i), null_encoding="encode")
        digits.append(np.asarray(encoded.indices.to_numpy(zero_copy_only=False), dtype=np.int64))
        dictionaries.append(encoded.dictionary.to_pylist())
    if len(groups) == 1:
        values = dictionaries[0]
        return digits[0], values.__getitem__, len(values)
    radix = [len(d) for d in dictionaries]
    distinct = float(np.prod(np.asarray(radix, dtype=np.float64)))
    if distinct >= 2 ** 62:
        return None, lambda code: None, 0
    codes = np.zeros(n, np.int64)
    for d, r in zip(digits, radix):
        codes = codes * r + d

    def key(code: int) -> tuple:
        parts = []
        for values, r in zip(reversed(dictionaries), reversed(radix)):
            code, d = divmod(code, r)
            parts.append(values[d])
        return tuple(reversed(parts))
    return codes, key, int(distinct)


def _row(columns: list[pa.Array], i: int) -> tuple:
    """Row ``i`` of the batch as the row path has it (one per row that the per-tuple code must see)."""
    return tuple(c[i].as_py() for c in columns)


def _rows(batch: pa.RecordBatch) -> list[tuple]:
    columns = [c.to_pylist() for c in batch.columns]
    return list(zip(*columns)) if columns else [() for _ in range(batch.num_rows)]
