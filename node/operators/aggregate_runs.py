"""A batch of Arrow columns cut into runs for the columnar aggregate (:mod:`.aggregate_columns`).

A run is a stretch of one group's rows, in arrival order, that lies in one
window cell (``(v - next start) // advance``), or a single row whose order
value is None.  :meth:`Runs.cut` makes them with numpy (dictionary codes of
the group-by values, a stable sort by code, the cells) and computes, per
run, the order values' range and one partial per function with one
``reduceat`` each; :meth:`Runs.part` computes the partials of a run's tail
when the walk needs them.  A batch this cannot take exactly (a NaN in the
order field or under min, max or count_distinct: :mod:`.aggregate_exact`,
which also keeps long sums and signed zeros exact; more runs than
:data:`MAX_RUNS_PER_ROW` of its rows) gives None before anything changes, and the box reads its rows.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .aggregate_exact import exact, first_zero, first_zeros, needs_wide, wide_sum, wide_sums
from .aggregate_groups import group_codes, numbers
from .aggregate_windows import GroupWindows, WindowSpec

#: Above this many runs per row the batch is read as rows (few tuples per run: numpy would not pay).
MAX_RUNS_PER_ROW = 0.25


@dataclass(frozen=True)
class Function:
    """One ``aggregate-function.N`` as the columnar path computes it."""

    func: str
    field: int | None  # None: count(*)
    slot: int          # its first slot in a window list
    counted: bool = False  # a sum of a nullable argument: its count of values in the next slot (accumulators.py)


@dataclass(frozen=True)
class Part:
    """What a stretch of one run adds: its row count and one partial per function (as :meth:`ColumnRuns._add`
    reads them: count, (sum, non-None count), min or max or None, a value)."""

    n: int
    values: tuple

    @staticmethod
    def of_row(row: tuple, functions: list[Function]) -> "Part":
        values: list[Any] = []
        for f in functions:
            x = row[f.field] if f.field is not None else None
            if f.func == "count":
                values.append(int(x is not None))
            elif f.func in ("sum", "avg"):
                values.append((x if x is not None else 0, int(x is not None)))
            elif f.func == "count_distinct":
                values.append([] if x is None else [x])
            else:
                values.append(x)
        return Part(1, tuple(values))


class Runs:
    """One batch cut into runs: per run its key, first row, length, order values' range and whole partials."""

    def __init__(self, batch: pa.RecordBatch, functions: list[Function], perm: np.ndarray, sv: np.ndarray,
                 sok: np.ndarray, starts: np.ndarray, keys: list, codes: np.ndarray):
        n = batch.num_rows
        self._batch, self._functions, self._perm, self._sv, self._sok = batch, functions, perm, sv, sok
        self.keys = keys
        self.codes = codes  # each run's group code: a group's runs are consecutive
        self._starts = starts.tolist()
        ends = np.concatenate((starts[1:], [n]))
        self.length_array = ends - starts
        self.lengths = self.length_array.tolist()
        self.first_row_array = perm[starts]
        self.first_rows = self.first_row_array.tolist()
        self.valid_array = sok[starts]
        self.valid = self.valid_array.tolist()
        self.lo_array = np.minimum.reduceat(sv, starts)
        self.hi_array = np.maximum.reduceat(sv, starts)
        self.lo = self.lo_array.tolist()
        self.hi = self.hi_array.tolist()
        self._sorted: list[tuple[np.ndarray, np.ndarray, list | None, bool] | None] = []
        self._suffix: dict[int, tuple[list, list]] = {}  # per run: its order values' suffix minima and maxima
        #: per function, every whole run's partial as arrays (:class:`Partials`), for emitting windows at once
        self.partials: list[Partials] = []
        for f in functions:
            prepared = _prepare(batch.column(f.field), perm, f.func == "count_distinct") if f.field is not None and f.func not in (
                "firstval", "lastval") else None
            self._sorted.append(prepared)
            self.partials.append(_whole(batch, f, prepared, perm, starts, ends))

    def whole_part(self, r: int) -> Part:
        """Run ``r``'s :class:`Part` alone (:attr:`whole` makes every run's)."""
        return Part(self.lengths[r], tuple(p.at(r) for p in self.partials))

    @functools.cached_property
    def whole(self) -> list[Part]:
        """Each whole run's :class:`Part` (made when the walk asks: the chained emission reads the arrays)."""
        parts = [p.as_list() for p in self.partials]
        if not parts:
            return [Part(length, ()) for length in self.lengths]
        return [Part(length, values) for length, values in zip(self.lengths, zip(*parts))]

    def row_at(self, r: int, at: int) -> int:
        """The batch position of the ``at``-th row of run ``r``."""
        return int(self._perm[self._starts[r] + at])

    def rest_range(self, r: int, at: int) -> tuple[Any, Any]:
        """The lowest and highest order value of run ``r`` from its ``at``-th row on, in O(1): the run's
        suffix minima and maxima are made once, when first asked (a run of late rows asks once per row).
        (A run of more than one row has no None order value: :meth:`cut` makes such a row a run of its own.)"""
        suffix = self._suffix.get(r)
        if suffix is None:
            a = self._starts[r]
            v = self._sv[a:a + self.lengths[r]][::-1]
            suffix = self._suffix[r] = (np.minimum.accumulate(v)[::-1].tolist(),
                                        np.maximum.accumulate(v)[::-1].tolist())
        return suffix[0][at], suffix[1][at]

    def rest_values(self, r: int, at: int) -> np.ndarray:
        """The order values of run ``r`` from its ``at``-th row on (a run of more than one row has no None)."""
        a = self._starts[r]
        return self._sv[a + at:a + self.lengths[r]]

    def part(self, r: int, at: int) -> Part:
        """Run ``r``'s partials from its ``at``-th row on (``at`` > 0: these rows have order values)."""
        a, b = self._starts[r] + at, self._starts[r] + self.lengths[r]
        values: list[Any] = []
        for f, prepared in zip(self._functions, self._sorted):
            values.append(_slice_part(self._batch, f, prepared, self._perm, a, b))
        return Part(b - a, tuple(values))

    @classmethod
    def cut(cls, batch: pa.RecordBatch, groups: list[int], order: int, functions: list[Function],
            spec: WindowSpec, windows: GroupWindows) -> "Runs | None":
        """The batch's runs, or None when it is to be read as rows (a NaN, a possible overflow, too many runs)."""
        n = batch.num_rows
        codes, keys_of, distinct = group_codes(batch, groups)
        if codes is None:
            return None
        column = batch.column(order)
        valid = ~np.asarray(column.is_null(), dtype=bool) if column.null_count else None
        v = numbers(column)
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
        if v.dtype.kind in "iu" and n and any(isinstance(b, int) for b in bases):
            lo, hi, ints = int(sv.min()), int(sv.max()), [b for b in bases if isinstance(b, int)]
            if hi - min(ints) >= 2 ** 63 or lo - max(ints) < -2 ** 63 or max(ints) >= 2 ** 63:
                return None  # (a window start or an offset past `long`: Python's ints hold it, int64 wraps)
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
        if spec.advance < spec.size and spec.size % spec.advance:
            # sliding windows whose ends are off the starts' grid: cut where a window ends too
            ends = np.floor((sv - np.repeat(np.asarray(bases, dtype=np.float64), glens) - spec.size)
                            / float(spec.advance))
            cut[1:] |= ends[1:] != ends[:-1]
        if valid is not None:
            cut[1:] |= ~sok[1:] | ~sok[:-1]
        starts = np.flatnonzero(cut)
        if len(starts) > max(1.0, MAX_RUNS_PER_ROW * n):
            return None
        if not exact(batch, functions):
            return None
        codes = sc[starts]
        return cls(batch, functions, perm, sv, sok, starts, [keys_of(c) for c in codes.tolist()], codes)


def _prepare(column: pa.Array, perm: np.ndarray, distinct: bool = False) -> tuple[np.ndarray, np.ndarray, list | None,
                                                                                   bool]:
    """A column in run order, as float64 or int64 with None as 0, where it is not None, (a string column,
    for min and max, or any column for count_distinct) the distinct values in order, which the int64s are
    then the ranks of (:func:`_ranks`), and whether its sums are to be made wide (.aggregate_exact)."""
    ok = ~np.asarray(column.is_null(), dtype=bool)[perm] if column.null_count else np.ones(len(perm), bool)
    if distinct or pa.types.is_string(column.type) or pa.types.is_large_string(column.type):
        ranks, decode = _ranks(column)
        return ranks[perm], ok, decode, False
    x = numbers(column)[perm]
    return (x.astype(np.float64) if x.dtype.kind == "f" else x.astype(np.int64)), ok, None, needs_wide(column)


def _ranks(column: pa.Array) -> tuple[np.ndarray, list]:
    """Each value's rank among the column's distinct values (None: 0), and those values in order.

    Arrow orders strings by their UTF-8 bytes, which is the order of their code points: Python's ``<`` on
    ``str``.  A run's min or max of strings is then its ranks' min or max, one numpy reduction."""
    encoded = pc.dictionary_encode(column)
    dictionary = encoded.dictionary
    order = np.asarray(pc.sort_indices(dictionary).to_numpy(zero_copy_only=False), dtype=np.int64)
    rank = np.empty(len(order), np.int64)
    rank[order] = np.arange(len(order), dtype=np.int64)
    codes = encoded.indices
    if codes.null_count:
        codes = pc.fill_null(codes, 0)
    at = np.asarray(codes.to_numpy(zero_copy_only=False), dtype=np.int64)
    ranks = rank[at] if len(order) else np.zeros(len(at), np.int64)
    return ranks, dictionary.take(pa.array(order)).to_pylist()


@dataclass(frozen=True)
class Partials:
    """One function's partials of every whole run, as arrays: ``values`` (count: None; sum and avg: the sums;
    min and max: the extremes, meaningless where ``counts`` is 0; firstval and lastval: a list of values) and
    ``counts`` (the non-None arguments per run; None for count(*), firstval and lastval)."""

    func: str
    values: np.ndarray | list | None
    counts: np.ndarray | None
    decode: list | None = None  # min and max of strings: ``values`` are ranks into this list (:func:`_ranks`)

    def at(self, r: int) -> Any:
        """Run ``r``'s partial as :class:`Part` holds it."""
        values, counts = self.values, self.counts
        if counts is None:
            return values[r]  # type: ignore[index]
        c = int(counts[r])
        if self.func == "count":
            return c
        if self.func in ("sum", "avg"):
            v = values[r]  # type: ignore[index]
            return (v if isinstance(v, int) else v.item()), c  # (a wide sum: a Python int, .aggregate_exact)
        if not c:
            return None
        v = values[r].item()  # type: ignore[index]
        return v if self.decode is None else self.decode[v]

    def as_list(self) -> list:
        """Per run, the partial as :class:`Part` holds it."""
        values, counts = self.values, self.counts
        if counts is None:
            return values  # type: ignore[return-value]  (a list: count(*), firstval, lastval)
        if self.func == "count":
            return counts.tolist()
        if self.func in ("sum", "avg"):
            return list(zip(values.tolist(), counts.tolist()))  # type: ignore[union-attr]
        decode = self.decode
        if decode is not None:
            return [decode[e] if c else None for e, c in zip(values.tolist(), counts.tolist())]  # type: ignore[union-attr]
        return [e if c else None for e, c in zip(values.tolist(), counts.tolist())]  # type: ignore[union-attr]


def _whole(batch: pa.RecordBatch, f: Function, prepared: tuple[np.ndarray, np.ndarray, list | None, bool] | None,
           perm: np.ndarray,
           starts: np.ndarray, ends: np.ndarray) -> Partials:
    """One function's partials of every whole run."""
    if f.field is None:
        return Partials(f.func, [None] * len(starts), None)
    if f.func in ("firstval", "lastval"):
        at = starts if f.func == "firstval" else ends - 1
        return Partials(f.func, batch.column(f.field).take(pa.array(perm[at])).to_pylist(), None)
    x, ok, decode, wide = prepared  # type: ignore[misc]
    counts = np.add.reduceat(ok.astype(np.int64), starts) if not ok.all() else ends - starts
    if f.func == "count":
        return Partials(f.func, None, counts)
    if f.func == "count_distinct":
        return Partials(f.func, _distinct(x, ok, starts, decode), None)  # type: ignore[arg-type]
    if f.func in ("sum", "avg"):
        masked = x if ok.all() else np.where(ok, x, 0)
        return Partials(f.func, wide_sums(masked, starts) if wide else np.add.reduceat(masked, starts), counts)
    take_min = f.func == "min"
    edge = (np.inf if take_min else -np.inf) if x.dtype.kind == "f" else (
        np.iinfo(np.int64).max if take_min else np.iinfo(np.int64).min)
    ext = (np.minimum if take_min else np.maximum).reduceat(x if ok.all() else np.where(ok, x, edge), starts)
    if x.dtype.kind == "f":
        ext = first_zeros(x, ok, starts, ext)  # 0.0 and -0.0: the first, as Python's fold keeps it
    return Partials(f.func, ext, counts, decode)


def _slice_part(batch: pa.RecordBatch, f: Function, prepared: tuple[np.ndarray, np.ndarray, list | None, bool] | None,
                perm: np.ndarray, a: int, b: int) -> Any:
    """One function's partial of the rows ``a:b`` (in run order) of one run."""
    if f.field is None:
        return None
    if f.func in ("firstval", "lastval"):
        return batch.column(f.field)[int(perm[a if f.func == "firstval" else b - 1])].as_py()
    x, ok, decode, wide = prepared  # type: ignore[misc]
    x, ok = x[a:b], ok[a:b]
    count = int(ok.sum())
    if f.func == "count":
        return count
    if f.func == "count_distinct":
        return _distinct(x, ok, np.zeros(1, np.int64), decode)[0]  # type: ignore[arg-type]
    if f.func in ("sum", "avg"):
        masked = np.where(ok, x, 0)
        return (wide_sum(masked) if wide else masked.sum().item()), count
    if not count:
        return None
    v = (x[ok].min() if f.func == "min" else x[ok].max()).item()
    if x.dtype.kind == "f":
        v = first_zero(x[ok], v)
    return v if decode is None else decode[v]


def _distinct(ranks: np.ndarray, ok: np.ndarray, starts: np.ndarray, decode: list) -> list[list]:
    """Per run (rows ``starts[r]:starts[r+1]`` in run order), its distinct values that are not None, in the
    order they first come: what the row path's dict of a window gets from the run's rows one by one."""
    n, width = len(ranks), len(decode) + 1
    run = np.repeat(np.arange(len(starts), dtype=np.int64), np.diff(np.concatenate((starts, [n]))))
    pairs = (run * width + ranks)[ok]
    at = np.flatnonzero(ok)
    _, first = np.unique(pairs, return_index=True)
    first = np.sort(first)  # rows in run order: first by run, then as they come
    out: list[list] = [[] for _ in range(len(starts))]
    for r, v in zip(run[at[first]].tolist(), ranks[at[first]].tolist()):
        out[r].append(decode[v])
    return out
