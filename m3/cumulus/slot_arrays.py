"""The slot hash of :mod:`.hashing` over numpy arrays: whole columns of INT and FLOAT values at once.

Shared by the coordinator routing Arrow batches
(``node/cumulus/slot_columns.py``) and the native member runtime, which
works out which keys the C maps hold that its member does not own
(:mod:`.native_member`): both need the very slots :func:`.hashing.slot`
gives one value, without a Python call per value.  INT values are multiplied
by the golden ratio constant as unsigned 64-bit integers (the low 64 bits of
the product, as :func:`.hashing.slot_int` masks them) and shifted right by
52; an integral FLOAT hashes as the INT of its value, any other as the INT of
its IEEE bits (every NaN as the quiet NaN).

>>> import numpy as np
>>> from .hashing import slot
>>> int_slots(np.array([7, -1])).tolist() == [slot(7), slot(-1)]
True
"""

from __future__ import annotations

import numpy as np

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_SHIFT = np.uint64(64 - 12)
_QUIET_NAN = np.int64(0x7FF8000000000000)
_LOW, _HIGH = -(2.0 ** 63), 2.0 ** 63


def int_slots(values: np.ndarray) -> np.ndarray:
    """The slots of INT values (any numpy integer array), as int64.

    >>> int_slots(np.array([0, 1, 2, 7, -1])).tolist()
    [0, 2531, 966, 1336, 1564]
    """
    with np.errstate(over="ignore"):
        product = values.astype(np.int64, copy=False).view(np.uint64) * _GOLDEN
    return (product >> _SHIFT).astype(np.int64)


def float_slots(values: np.ndarray) -> np.ndarray:
    """The slots of FLOAT values: integral ones as the INT of their value, others by their IEEE-754 bits.

    >>> float_slots(np.array([2.0, float("nan"), float("inf")])).tolist()[:2]
    [966, 2549]
    """
    values = values.astype(np.float64, copy=False)
    with np.errstate(invalid="ignore"):
        integral = np.isfinite(values) & (np.floor(values) == values) & (values >= _LOW) & (values < _HIGH)
    keys = np.where(np.isnan(values), _QUIET_NAN, values.view(np.int64))
    if integral.any():
        keys = np.where(integral, np.where(integral, values, 0.0).astype(np.int64), keys)
    return int_slots(keys)
