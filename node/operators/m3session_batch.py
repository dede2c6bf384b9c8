"""A batch of a ``SESSION`` port held in its keys' sessions a run at a time, the runs found in Arrow columns.

node/operators/m3sessions.py adds a batch's rows to their keys' open
sessions one row at a time (the key made, the sessions found, a bisect per
row).  A session is a connected run of rows of one key less than ``gap``
apart, whatever order they came in; so the batch's rows of one key, sorted
by time and cut where two neighbours are ``gap`` or more apart, make runs
that each join the key's open sessions exactly as their rows would one by
one (a run's ``[first, last + gap)`` meets the same open sessions as the
union of its rows' ``[t, t + gap)``).  :func:`runs` finds the runs with a sort
of the batch's columns; :meth:`~.m3sessions.SessionPort.take_runs` adds each
run once, the batch's rows made in run order (one Arrow ``take``), so each
run is a slice of them.  Within a run the rows keep the order they came in.

What is not done here, but row by row as before: a batch with a null event
time or with a row before the closed frontier (whether it is late depends
on the rows of its key that came before it in the batch), and a changelog
with deletions (refused: a SESSION reads insertions only).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc


@dataclass
class Runs:
    """A batch cut into runs: ``order`` is the batch's row numbers, run after run (each run's in the order they
    came); run i is ``order[bounds[i]:bounds[i + 1]]``, of key rows' ``first[i]``, times ``low[i]``..``high[i]``."""

    order: np.ndarray
    bounds: np.ndarray
    low: np.ndarray
    high: np.ndarray
    newest: float


def runs(batch: pa.RecordBatch, time: int, partition: tuple[int, ...], gap: float, closed: float) -> Runs | None:
    """The batch's runs per key (module docstring), or None when it must go row by row: a null or NaN event
    time (the row path refuses it, keeping the key's other rows), a row before ``closed`` (it may be late), or
    no rows."""
    column = batch.column(time)
    if batch.num_rows == 0 or column.null_count:
        return None
    times = column.to_numpy(zero_copy_only=False)
    if times.dtype.kind == "f" and np.isnan(times).any():
        return None
    if times.min() < closed:
        return None
    n = batch.num_rows
    names = [f"k{i}" for i in range(len(partition))]
    table = pa.table([batch.column(i) for i in partition] + [column], names=names + ["t"])
    by_time = pc.sort_indices(table, sort_keys=[(k, "ascending") for k in names] + [("t", "ascending")]).to_numpy()
    sorted_t = times[by_time]
    starts = np.zeros(n, dtype=bool)
    starts[0] = True
    starts[1:] = np.diff(sorted_t) >= gap
    for name in names:
        keys = table[name].take(by_time)
        if keys.null_count:
            return None  # a null key compares by Python's rules there: row by row
        starts[1:] |= pc.not_equal(keys[1:], keys[:-1]).to_numpy(zero_copy_only=False)
    run_of_sorted = np.cumsum(starts) - 1
    bounds_sorted = np.flatnonzero(starts)
    low = sorted_t[bounds_sorted]
    high = np.maximum.reduceat(sorted_t, bounds_sorted)
    run_of = np.empty(n, dtype=np.int64)
    run_of[by_time] = run_of_sorted
    order = np.argsort(run_of, kind="stable")  # run after run, each in arrival order
    bounds = np.append(bounds_sorted, n)
    return Runs(order, bounds, low, high, float(times.max()))
