"""The slot hash over a whole column at once: what :func:`~boreas.m3.cumulus.hashing.slot` gives each value, without a Python call
per value (docs/cumulus.md §3.1).

A coordinator that takes a batch as Arrow columns routes it by the slots of
its key columns.  The hash is :mod:`~boreas.m3.cumulus.hashing`'s, computed with numpy's
wrapping 64-bit arithmetic (:mod:`~boreas.m3.cumulus.slot_arrays`, shared with the native member runtime): INT values are multiplied by the golden ratio
constant as unsigned 64-bit integers (the low 64 bits of the product, as
:func:`~boreas.m3.cumulus.hashing.slot_int` masks them) and shifted right by 52; an integral
FLOAT hashes as the INT of its value, any other as the INT of its IEEE bits
(every NaN as the quiet NaN); a DATE, which Arrow carries as microseconds
since 1970 as rows do, as the INT of its day's proleptic ordinal (floored, as
``date_of`` floors); a STRING by CRC-32 of its UTF-8 bytes, computed once per
distinct value of the batch (the column is dictionary-encoded first), since
neither numpy nor Arrow has CRC-32.

``tests/test_cumulus_slot_columns.py`` checks that every kind gives exactly the
per-value slots over random values (hypothesis).

>>> import pyarrow as pa
>>> from boreas.m3.cumulus.hashing import slot
>>> column_slots(pa.array([7, -1, 3], pa.int32()), "INT").tolist() == [slot(7), slot(-1), slot(3)]
True
>>> column_slots(pa.array([2.0, 0.25, -0.0]), "FLOAT").tolist() == [slot(2), slot(0.25), slot(0)]
True
>>> column_slots(pa.array(["BUILDING", "", "BUILDING"]), "STRING").tolist() == [slot("BUILDING"), 0, slot("BUILDING")]
True
"""

from __future__ import annotations

import datetime as dt
import zlib

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from boreas.m3.cumulus.slot_arrays import float_slots, int_slots

_EPOCH = dt.date(1970, 1, 1).toordinal()
_DAY_US = 86_400_000_000


def string_slots(column: pa.Array) -> np.ndarray:
    """The slots of STRING values: CRC-32 of each distinct value's UTF-8 bytes, top 12 bits, taken per row."""
    encoded = pc.dictionary_encode(column)
    distinct = np.array([zlib.crc32(s.encode("utf-8")) >> 20 for s in encoded.dictionary.to_pylist()],
                        dtype=np.int64)
    return distinct[encoded.indices.to_numpy(zero_copy_only=False)]


def date_slots(micros: np.ndarray) -> np.ndarray:
    """The slots of DATE values carried as microseconds since 1970 (UTC): the INT slot of the day's ordinal.

    >>> from boreas.m3.cumulus.hashing import slot
    >>> date_slots(np.array([-1, 0])).tolist() == [slot(dt.date(1969, 12, 31)), slot(dt.date(1970, 1, 1))]
    True
    """
    return int_slots(np.floor_divide(micros.astype(np.int64, copy=False), _DAY_US) + _EPOCH)


def column_slots(column: pa.Array | pa.ChunkedArray, kind: str) -> np.ndarray:
    """The slot of every value of an Arrow column holding M3 values of ``kind`` (INT, FLOAT, STRING or DATE),
    as an int64 numpy array; the column has no nulls (the node refuses them first)."""
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    if kind == "STRING":
        return string_slots(column)
    values = column.to_numpy(zero_copy_only=False)
    if kind == "FLOAT":
        return float_slots(values)
    if kind == "DATE":
        return date_slots(values)
    if kind == "INT":
        return int_slots(values)
    raise TypeError(f"cannot hash a column of {kind} into slots: keys are INT, FLOAT, STRING or DATE values")
