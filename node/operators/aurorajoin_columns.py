"""The aurorajoin on Arrow columns: a batch against the other side's buffer in a few numpy and pyarrow calls.

The row path (:class:`~.aurorajoin.AuroraRows`) takes a batch arriving on
one side a tuple at a time: the tuple enters its own buffer, the other
buffer is trimmed by it, and it is joined with what is left there, oldest
first.  Only the other buffer is read and only the trims change it, so for
the whole batch:

* **the trims are a running maximum.**  A ``TUPLES`` trim leaves the newest
  ``size`` tuples after the batch's first tuple, and nothing more after the
  others.  A ``VALUES`` trim pops the oldest while it is null or more than
  ``size`` behind the arriving order value; popping for a value ``v`` then
  for a smaller one pops nothing more, and for a larger one pops what the
  larger one alone pops, so the cut after tuple i is where the running
  maximum ``M_i`` of the batch's non-null order values alone would cut (no
  cut before the first one).  That is the first buffered tuple that is not
  null and not too old for ``M_i``; as "too old" only grows with the
  buffered value's age, it is the first place where the buffer's running
  maximum is not too old: ``searchsorted`` over that running maximum finds
  it for every tuple at once, checked with the row path's own comparison
  (a binary search for any that rounding put off: :func:`value_cuts`).  Values with a nan or an infinity, or
  ints a double does not hold with room for their differences, are cut by
  the row path's loop over the order values alone (:func:`cuts_by_rows`);
* **the pairs are a nested-loop join on ever-shorter suffixes**: tuple i
  with buffered tuples ``cuts[i]..`` (with an equality among the
  predicate's terms, the equal-key pairs, :func:`~.join_columns.equal_pairs`,
  whose buffer row is at or past the cut), ordered by i then the buffer's
  order, the predicate and out fields evaluated on them by ``join``'s pair
  translation (:class:`~.join_columns.PairPlan`);
* then the other buffer drops what the last tuple's cut left behind, and
  the batch enters its own buffer.

A batch whose tuples times the other buffer's are few is joined by the row path instead, buffers and all
(:class:`~.join_paths.JoinPaths` chooses and hands them over): the columns' fixed cost per batch would be more
than its probes.

Pairs on which Python might compute otherwise than the columns (a zero
divisor, ``sqrt(-1)``, an int64 overflow, a nullable field's NULL under
three-valued logic) get the predicate's and out fields' values from the
box's row code over that pair's two rows, in place (:mod:`.arrow_exprs`,
"Exact, row by row"); a batch the pair translation still cannot treat
exactly (:class:`~.arrow_exprs.Fallback`: an out value a column cannot
hold, a Python int beyond int64) is probed by the row path's generated code
against the same suffixes: the same out tuples, the same buffers after.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator

import numpy as np
import pyarrow as pa

from . import arrow_exprs
from .join_buffer import rows_batch
from .join_columns import PairPlan, equal_pairs, suffix_pairs
from .join_rows import Probe

#: Order values a double holds exactly with room for a difference.
EXACT = 2**52


class SideRows:
    """One side's buffered tuples as Arrow (an aurorajoin's buffer is trimmed only from its oldest end, and only
    when the other side receives)."""

    def __init__(self, schema: pa.Schema) -> None:
        self.schema = schema
        self.table = schema.empty_table()
        self._batch: pa.RecordBatch | None = None  # the table as one batch, until it changes

    def __len__(self) -> int:
        return self.table.num_rows

    def batch(self) -> pa.RecordBatch:
        """The buffered tuples as one record batch, oldest first (made once per change)."""
        if self._batch is None:
            self.table = self.table.combine_chunks()
            batches = self.table.to_batches()
            self._batch = batches[0] if batches else pa.RecordBatch.from_arrays(
                [pa.array([], f.type) for f in self.schema], schema=self.schema)
        return self._batch

    def rows(self) -> list[tuple]:
        batch = self.batch()
        return list(zip(*[c.to_pylist() for c in batch.columns])) if batch.num_columns else [
            () for _ in range(batch.num_rows)]

    def append(self, batch: pa.RecordBatch) -> None:
        if batch.num_rows:
            self.table = pa.concat_tables([self.table, pa.Table.from_batches([batch], self.schema)])
            self._batch = None

    def drop(self, count: int) -> None:
        """The oldest ``count`` tuples leave."""
        if count > 0:
            self.table = self.table.slice(count)
            self._batch = None

    def load(self, rows: list[tuple]) -> None:
        """Hold ``rows`` as they are (a restore; :class:`~.join_buffer.Unfit` if the columns cannot)."""
        self.table = pa.Table.from_batches([rows_batch(rows, self.schema)], self.schema)
        self._batch = None


def _floats(column: pa.Array) -> np.ndarray | None:
    """A numeric order column as doubles, nulls as -inf, when that is exact for the row path's arithmetic
    (finite values; ints under :data:`EXACT`); None otherwise."""
    if not (pa.types.is_integer(column.type) or pa.types.is_floating(column.type)):
        return None
    if not column.null_count:
        values = column.to_numpy(zero_copy_only=False).astype(np.float64)
        if len(values) and (not np.isfinite(values).all() or np.abs(values).max() >= EXACT):
            return None
        return values
    values = column.fill_null(0).to_numpy(zero_copy_only=False).astype(np.float64)
    valid = np.asarray(column.is_valid().to_numpy(zero_copy_only=False), dtype=bool)
    present = values[valid]
    if not np.isfinite(present).all() or (len(present) and np.abs(present).max() >= EXACT):
        return None
    return np.where(valid, values, -np.inf)


def value_cuts(arriving: pa.Array, buffered: pa.Array, size: float) -> np.ndarray | None:
    """Where the buffer is cut after each arriving tuple by ``VALUES`` (the module docstring), or None when the
    values are not exact as doubles (:func:`cuts_by_rows` then)."""
    new, old = _floats(arriving), _floats(buffered)
    if new is None or old is None or not np.isfinite(size):
        return None
    n, m = len(new), len(old)
    running = np.maximum.accumulate(new) if n else new  # -inf until the first non-null value
    reach = np.maximum.accumulate(old) if m else old
    cuts = np.searchsorted(reach, running - size, side="left")  # exact for ints, else a guess to check
    if m and not (_integral(arriving) and _integral(buffered) and float(size).is_integer() and abs(size) < EXACT):
        with np.errstate(invalid="ignore"):  # -inf - -inf before the first value: its cut is 0 below
            exact = _fits(running, reach, cuts, size) & ~_fits(running, reach, cuts - 1, size)
        if not exact.all():
            cuts[~exact] = _search(running[~exact], reach, size)
    return np.where(running == -np.inf, 0, cuts) if n and running[0] == -np.inf else cuts


def _integral(column: pa.Array) -> bool:
    """Ints (under :data:`EXACT`, as :func:`_floats` checked): with an integral size, every difference the cut
    compares is exact in doubles, so ``searchsorted``'s cut is the row path's and needs no check (nulls are -inf,
    which a finite bound never reaches)."""
    return pa.types.is_integer(column.type)


def _fits(running: np.ndarray, reach: np.ndarray, k: np.ndarray, size: float) -> np.ndarray:
    """Whether the buffer's running maximum at ``k`` is not too old for ``running`` (k < 0: False, k = m: True,
    as the first k that fits is asked for)."""
    m = len(reach)
    fits = ~(running - reach.take(k, mode="clip") > size)
    return np.where((k >= 0) & (k < m), fits, k >= m)


def _search(running: np.ndarray, reach: np.ndarray, size: float) -> np.ndarray:
    """The first k where ``not running - reach[k] > size`` (monotone in k), by a binary search for each."""
    m = len(reach)
    lo, hi = np.zeros(len(running), dtype=np.int64), np.full(len(running), m, dtype=np.int64)
    while (lo < hi).any():
        mid = (lo + hi) // 2
        fits = _fits(running, reach, mid, size)
        hi = np.where((lo < hi) & fits, mid, hi)
        lo = np.where((lo < hi) & ~fits, mid + 1, lo)
    return lo


def cuts_by_rows(arriving: list, buffered: list, size: float) -> np.ndarray:
    """The row path's ``VALUES`` trim, value by value: where the buffer is cut after each arriving tuple."""
    cut, cuts = 0, []
    for value in arriving:
        if value is not None:
            while cut < len(buffered):
                oldest = buffered[cut]
                if oldest is not None and not value - oldest > size:
                    break
                cut += 1
        cuts.append(cut)
    return np.array(cuts, dtype=np.int64)


class AuroraColumns:
    """Both buffers as Arrow, and a batch's trims and pairs (the module docstring); state as the row path's."""

    def __init__(self, schemas: list[pa.Schema], plan: PairPlan, probes: list[Probe],
                 sizes: tuple[float, float], by_values: list[bool], orders: list[int | None]) -> None:
        self.schemas = schemas
        self.plan = plan
        self.probes = probes
        self.sizes = sizes
        self.by_values = by_values
        self.orders = orders
        self.buffers = [SideRows(schemas[0]), SideRows(schemas[1])]

    def process(self, port: int, batch: pa.RecordBatch, now: float = 0.0) -> pa.RecordBatch | list[tuple]:
        """The out tuples of ``batch`` arriving on ``port``: columns, or rows from the row path's probes (``now``:
        unused, an aurorajoin has no timeout)."""
        if not batch.num_rows:
            return []
        other = self.buffers[1 - port]
        buffered = other.batch()
        cuts = self._cuts(port, batch, buffered)
        out: pa.RecordBatch | list[tuple] = []
        if buffered.num_rows:
            try:
                out = self._pairs(port, batch, buffered, cuts)
            except arrow_exprs.Fallback:
                out = self._probed(port, batch, other.rows(), cuts)
        other.drop(int(cuts[-1]))
        self.buffers[port].append(batch)
        return out

    def _cuts(self, port: int, batch: pa.RecordBatch, buffered: pa.RecordBatch) -> np.ndarray:
        side, m = 1 - port, buffered.num_rows
        if not self.by_values[side]:
            return np.full(batch.num_rows, max(0, m - int(self.sizes[side])), dtype=np.int64)
        arriving = batch.column(self.orders[port])  # type: ignore[arg-type]
        kept = buffered.column(self.orders[side])  # type: ignore[arg-type]
        cuts = value_cuts(arriving, kept, self.sizes[side])
        return cuts if cuts is not None else cuts_by_rows(arriving.to_pylist(), kept.to_pylist(), self.sizes[side])

    def _pairs(self, port: int, batch: pa.RecordBatch, buffered: pa.RecordBatch,
               cuts: np.ndarray) -> pa.RecordBatch | list[tuple]:
        plan = self.plan
        if plan.keys is not None:
            # (only the buffer past the first cut: cuts never fall, and the buffer may hold far more than a window)
            first = int(cuts[0]) if len(cuts) else 0
            i, j = equal_pairs(batch.column(plan.keys[port]), buffered.column(plan.keys[1 - port]).slice(first))
            j = j + first
            inside = j >= cuts[i]
            blocks: Iterator[tuple[np.ndarray, np.ndarray]] = iter([(i[inside], j[inside])])
        else:
            blocks = suffix_pairs(cuts, buffered.num_rows)
        outs = []
        for i, j in blocks:
            if not len(i):
                continue
            kept, _ = plan.held(batch, buffered, i, j) if port == 0 else plan.held(buffered, batch, j, i)
            if kept.num_rows:
                outs.append(plan.out(kept))
        if not outs:
            return []
        if len(outs) == 1:
            return outs[0]
        return pa.Table.from_batches(outs, plan.target).combine_chunks().to_batches()[0]

    def _probed(self, port: int, batch: pa.RecordBatch, buffered: list[tuple], cuts: np.ndarray) -> list[tuple]:
        """The row path's probes of each arriving tuple against its suffix of the buffer."""
        out: list[tuple] = []
        probe = self.probes[port]
        for row, cut in zip(zip(*[c.to_pylist() for c in batch.columns]), cuts.tolist()):
            probe(row, itertools.islice(buffered, cut, None), out.append)
        return out

    def entries(self) -> int:
        return len(self.buffers[0]) + len(self.buffers[1])

    def buffered(self, side: int) -> int:
        return len(self.buffers[side])

    def state(self) -> dict:
        return {"buffers": [[list(r) for r in b.rows()] for b in self.buffers]}

    def restore(self, state: dict) -> None:
        """From either path's state; :class:`~.join_buffer.Unfit` if its rows do not fit the columns."""
        for side, buffer in enumerate(self.buffers):
            buffer.load([tuple(r) for r in state["buffers"][side]])
