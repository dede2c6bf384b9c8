"""Where numpy and Python part on an aggregate's values, and the columnar twins that keep the row path's result.

The columnar aggregate (:mod:`.aggregate_runs`) reduces a run's values with
numpy; the row path folds them one by one in Python.  The two agree except
at a few values, handled here:

* a ``long`` sum: Python's ints never overflow, int64 sums can.  A column
  whose sums might (its largest magnitude times its length reaches 2**62) is
  summed *wide* (:func:`wide_sums`): each value split into its high and low
  32 bits (``x >> 32``, ``x & 0xFFFFFFFF``), each half summed in int64 (it
  cannot overflow below 2**31 rows), the halves joined as Python ints --
  exactly Python's sum, any values, ``-2**63`` included;
* ``0.0`` and ``-0.0`` under a float ``min``/``max``: equal, and Python's
  fold (``v < w``, strict) keeps whichever came first, numpy's reduction
  need not.  A run whose extreme is a zero takes the run's first zero
  (:func:`first_zeros`), and a run added to a window replaces its extreme
  only when strictly beyond, so the window keeps the first zero as on rows;
* NaN: IEEE addition is the same in both (a NaN makes a sum NaN either
  way), so ``sum``/``avg``/``count`` take it; under ``min``/``max`` (Python
  keeps a NaN that comes first and ignores later ones) and
  ``count_distinct`` (every NaN a key of its own in a dict) the batch still
  reads rows (:func:`exact` says False), as it does for a NaN in the order
  field or a float group-by field (.aggregate_runs, .aggregate_groups).
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

#: A column whose largest magnitude times its length reaches this is summed wide (:func:`wide_sums`).
WIDE = 2 ** 62

_LOW = np.int64(0xFFFFFFFF)


def exact(batch: pa.RecordBatch, functions: list) -> bool:
    """Whether the columnar partials of this batch are the rows' (module doc): no NaN under ``min``, ``max``
    or ``count_distinct`` (an int64 sum that could overflow is summed wide; a -0.0 takes the first zero)."""
    for f in functions:
        if f.field is not None and f.func in ("min", "max", "count_distinct") and _nan(batch.column(f.field)):
            return False
    return True


def _nan(column: pa.Array) -> bool:
    return pa.types.is_floating(column.type) and bool(pc.any(pc.is_nan(column)).as_py())


def needs_wide(column: pa.Array) -> bool:
    """Whether an int64 column's sums could overflow int64 (Python ints: ``abs(-2**63)`` does not wrap)."""
    if column.type != pa.int64() or not len(column):
        return False
    lo, hi = pc.min_max(column).values()
    big = max(-(lo.as_py() or 0), hi.as_py() or 0)
    return big * len(column) >= WIDE


def wide_sums(x: np.ndarray, starts: np.ndarray) -> np.ndarray:
    """Per run (rows ``starts[r]:starts[r+1]``), the exact sum of int64 ``x`` as a Python int (an object array)."""
    high = np.add.reduceat(x >> 32, starts).astype(object)
    low = np.add.reduceat(x & _LOW, starts).astype(object)
    return high * (1 << 32) + low


def wide_sum(x: np.ndarray) -> int:
    """The exact sum of int64 ``x`` as a Python int."""
    return int((x >> 32).sum()) * (1 << 32) + int((x & _LOW).sum())


def first_zeros(x: np.ndarray, ok: np.ndarray, starts: np.ndarray, ext: np.ndarray) -> np.ndarray:
    """``ext`` (per run its float min or max) with each zero replaced by the run's first zero, signed as it
    came (module doc); ``x`` the run-ordered values, ``ok`` where they are not None."""
    zero = ext == 0
    if not zero.any():
        return ext
    idx = np.where(ok & (x == 0), np.arange(len(x)), len(x))
    first = np.minimum.reduceat(idx, starts)[zero]
    ext = ext.copy()
    ext[zero] = x[np.minimum(first, len(x) - 1)]
    return ext


def first_zero(values: np.ndarray, v: float) -> float:
    """A stretch's float min or max ``v`` (of its values, in order): its first zero when ``v`` is a zero."""
    if v != 0:
        return v
    return values[values == 0][0].item()
