"""A native batch's computed column (a library function of one column and constants) evaluated once per distinct
argument value, not once per row.

Why: the C side reads a call the generator does not compile (``DATE_FORMAT(datetime, 'yyyy-MM-dd')``,
``SPLIT_INDEX(url, '/', 3)``) as a column the Python side computes before the batch runs
(:meth:`.backend.NativeMaps.prepare`), one Python call per row: Nexmark q16 computes two ``DATE_FORMAT``\\ s
per bid, about 1 µs of its CPU per event.  But a batch's arguments repeat: a stream's string column arrives as
interned ids with few distinct values (a bid's channel), its event times come about ten to a millisecond.  So
the arguments are made distinct first (numpy, over their int64 codes or a FLOAT's bits), the function called
once per distinct value, and its results spread back to the rows (``take``).

Exactness: the distinct values are those of the codes the C side reads -- a STRING's intern id, a DATE's day
number, a FLOAT's bit pattern (so ``-0.0`` and ``0.0``, and NaNs, are each their own argument) -- so every row
gets what the call on its own value returns.  A column this cannot make distinct (a list of Python INTs, which
may not fit 64 bits) is left to the per-row path (:func:`distinct_arguments` returns None).

>>> from array import array
>>> args, inverse = distinct_arguments(array("q", [2, 1, 2, 2]), "STRING", ["a", "b", "c"])
>>> args, inverse.tolist()
(['b', 'c'], [1, 0, 1, 1])
>>> args, inverse = distinct_arguments(array("d", [0.0, -0.0, 0.0]), "FLOAT", [])
>>> [str(a) for a in args], inverse.tolist()
(['-0.0', '0.0'], [1, 0, 1])
>>> spread(["x", "y"], np.array([0, 1, 0]), "STRING", {"x": 7, "y": 8}.__getitem__).tolist()
[7, 8, 7]
"""

from __future__ import annotations

import datetime
from array import array
from collections.abc import Callable, Sequence

import numpy as np

from .codes import packed


def distinct_arguments(values, m3_type: str, strings: Sequence[str]) -> tuple[list, np.ndarray] | None:
    """``(the distinct arguments as the function takes them, each row's index into them)`` of a column
    (``strings``: the intern table a packed STRING column's ids index), or None: compute it per row."""
    if packed(values, "q") and m3_type in ("STRING", "DATE", "INT"):
        codes, inverse = np.unique(np.frombuffer(values, dtype=np.int64), return_inverse=True)
        firsts = codes.tolist()
        if m3_type == "STRING":
            return [strings[x] for x in firsts], inverse
        if m3_type == "DATE":
            return list(map(datetime.date.fromordinal, firsts)), inverse
        return firsts, inverse
    if m3_type == "FLOAT" and (packed(values, "d") or (isinstance(values, (list, tuple))
                                                        and all(type(v) is float for v in values))):
        # (a list holding an int, a bool or a Decimal: the function is called on that value as it is, per row,
        # as the Python backend does -- made a double first, CAST_STRING(5) would say '5.0' there and '5' here)
        try:
            floats = np.frombuffer(values if packed(values, "d") else array("d", values), dtype=np.float64)
        except (TypeError, ValueError, OverflowError):  # (a None, not a number: the per-row path says so)
            return None
        bits, inverse = np.unique(floats.view(np.int64), return_inverse=True)
        return bits.view(np.float64).tolist(), inverse
    if m3_type == "STRING" and isinstance(values, (list, tuple)):
        first: dict = {}
        index = first.setdefault
        inverse = np.fromiter((index(v, len(first)) for v in values), dtype=np.int64, count=len(values))
        return list(first), inverse
    return None


def spread(results: list, inverse: np.ndarray, kind: str, intern: Callable[[str], int]) -> array:
    """The column C reads from the results per distinct argument (``kind``: the function's result type;
    ``intern``: a STRING's id), each row's taken by its index."""
    if kind == "FLOAT":
        codes = np.array(results, dtype=np.float64)
    elif kind == "STRING":
        codes = np.array([intern(s) for s in results], dtype=np.int64)
    elif kind == "DATE":
        codes = np.array([d.toordinal() for d in results], dtype=np.int64)
    else:
        codes = np.array(results, dtype=np.int64)
    return array("d" if kind == "FLOAT" else "q", codes[inverse].tobytes())
