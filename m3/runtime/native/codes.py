"""Python values as the int64 codes the C maps hold, and back: the tables a native runtime keeps for them.

Why a module of its own: the codes (a STRING's intern id, a DATE's day
number, a FLOAT key's bits) are one convention shared by every column going
into C and every key coming out; :class:`.backend.NativeMaps` owns one table
of each and asks these classes, which own nothing else.
"""

from __future__ import annotations

import datetime
from array import array


def packed(values, typecode: str) -> bool:
    """Whether a column is already packed as C reads it: an ``array`` of ``typecode`` (``q`` int64, ``d``
    double), or a ``memoryview`` of that format (an Arrow buffer handed over without a copy:
    node/operators/m3columns.py).

    >>> packed(array("q", [1]), "q"), packed(memoryview(array("d", [1.0])), "d"), packed([1], "q")
    (True, True, False)
    """
    if isinstance(values, array):
        return values.typecode == typecode
    return isinstance(values, memoryview) and values.format == typecode


class Interner(dict):
    """STRING values to int64 ids (``ids[s]`` interns on first sight); ``strings[id]`` is the way back."""

    def __init__(self):
        super().__init__()
        self.strings: list[str] = []

    def __missing__(self, s):
        if not isinstance(s, str):
            raise TypeError(f"a STRING column holds {s!r}, not a string")
        i = self[s] = len(self.strings)
        self.strings.append(s)
        return i


class DayNumbers(dict):
    """DATE values to day numbers (``date.toordinal()``), remembered: a column converts at dict-lookup speed.

    Dates repeat (a stream spans some thousands of days), so the cache stays
    small; it is emptied if it ever grows past :attr:`LIMIT`.

    >>> DayNumbers()[datetime.date(1995, 3, 15)]
    728367
    """

    LIMIT = 1 << 20

    def __missing__(self, d):
        try:
            n = d.toordinal()
        except AttributeError:
            raise TypeError(f"a DATE column holds {d!r}, not a date") from None
        if len(self) >= self.LIMIT:
            self.clear()
        self[d] = n
        return n


class Dates(dict):
    """Day numbers back to dates, remembered (keys read back from C repeat their dates).

    >>> Dates()[728367]
    datetime.date(1995, 3, 15)
    """

    def __missing__(self, n):
        if len(self) >= DayNumbers.LIMIT:
            self.clear()
        d = self[n] = datetime.date.fromordinal(n)
        return d


def float_bits(values: array) -> array:
    """Doubles as their int64 bits (FLOAT key columns), -0.0 as 0.0 as the C side keys it.

    >>> list(float_bits(array("d", [-0.0]))) == list(float_bits(array("d", [0.0])))
    True
    """
    out = array("q")
    out.frombytes(array("d", [v + 0.0 for v in values]).tobytes())
    return out
