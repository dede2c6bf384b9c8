"""Python values as the int64 codes the C maps hold, and back: the tables a native runtime keeps for them.

Why a module of its own: the codes (a STRING's intern id, a DATE's day
number, a FLOAT key's bits) are one convention shared by every column going
into C and every key coming out; :class:`.backend.NativeMaps` owns one table
of each and asks these classes, which own nothing else.
"""

from __future__ import annotations

import datetime
from array import array
from dataclasses import dataclass
from math import isnan
from typing import ClassVar

from ..nanorder import NAN


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

    def replace(self, strings: list[str]) -> None:
        """Make ``strings`` the table (their ids their positions: :mod:`.compaction`); the old list is left as it
        was, for a reader that took codes with it, and a new list object tells a cache it changed.

        >>> ids = Interner(); _ = ids["a"], ids["b"]; old = ids.strings
        >>> ids.replace(["b"]); ids["b"], ids["c"], ids.strings, old
        (0, 1, ['b', 'c'], ['a', 'b'])
        """
        self.clear()
        self.strings = list(strings)
        self.update(zip(self.strings, range(len(self.strings))))


@dataclass
class Compactor:
    """When one runtime's intern table is next compacted (:mod:`.compaction`; owned by its ``NativeMaps``).

    >>> Compactor().due(65_536), Compactor().due(65_537), Compactor(live=40_000).due(70_000)
    (False, True, False)
    """

    FLOOR: ClassVar[int] = 65_536  # a table this small is never compacted (tests lower it)
    live: int = 0  # strings live at the last compaction
    done: int = 0  # compactions so far

    def due(self, size: int) -> bool:
        """Whether a table of ``size`` strings has grown past twice its live size at the last compaction (and
        the floor)."""
        return size > max(2 * self.live, self.FLOOR)


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
    """Doubles as their int64 bits (FLOAT key columns), -0.0 as 0.0 and every NaN as the quiet NaN, as the C
    side keys them (``f2k``).

    >>> list(float_bits(array("d", [-0.0]))) == list(float_bits(array("d", [0.0])))
    True
    >>> list(float_bits(array("d", [-NAN, NAN]))) == [0x7FF8000000000000] * 2
    True
    """
    out = array("q")
    out.frombytes(array("d", [NAN if v != v else v + 0.0 for v in values]).tobytes())
    return out


class Codec:
    """A program's map keys and values as int64 codes and back, by the runtime's tables (one per runtime).

    Why apart from :class:`.backend.NativeMaps`: what crosses into C (a
    column of a batch, the keys a reader asks for) and what comes back (the
    keys of a dump, a journal or a batch's changes) follow one convention, and
    every reader of keys from C decodes them here, by columns: a key column is
    one slice of the codes, converted in one pass per column, then zipped.

    >>> from array import array
    >>> c = Codec({"m": 2}, {"m": ("STRING", "FLOAT")}, set(), Interner(), DayNumbers(), Dates())
    >>> flat = c.encode_keys("m", [("a", 1.5), ("b", -0.0)])
    >>> c.decode_keys("m", flat, 2)
    [('a', 1.5), ('b', 0.0)]
    >>> c.decode_columns("m", [flat[0::2], flat[1::2]], 2) == c.decode_keys("m", flat, 2)
    True
    """

    def __init__(self, arity: dict[str, int], key_types: dict[str, tuple[str, ...]], float_maps: set[str],
                 ids: Interner, days: DayNumbers, dates: Dates):
        self.arity, self.key_types, self.float_maps = arity, key_types, float_maps
        self.ids, self.days, self.dates = ids, days, dates

    def column(self, values, m3_type: str) -> array | memoryview:
        """One column as the C side reads it (an ``array``, or a ``memoryview`` of an Arrow buffer, of the right
        type is taken as it is: :func:`packed`)."""
        if m3_type == "FLOAT":
            return values if packed(values, "d") else array("d", values)
        if packed(values, "q"):
            return values
        if m3_type == "STRING":
            return array("q", map(self.ids.__getitem__, values))
        if m3_type == "DATE":
            return array("q", map(self.days.__getitem__, values))
        return array("q", values)

    def decode_columns(self, name: str, columns, n: int) -> list[tuple]:
        """``n`` keys of map ``name`` given as one int64 sequence of codes per key column, as key tuples."""
        if self.arity[name] == 0:
            return [()] * n
        cols = []
        for col, t in zip(columns, self.key_types[name]):
            if t == "FLOAT":
                col = array("d", array("q", col).tobytes())
                if any(map(isnan, col)):  # one NaN key object, as the Python backend's (..nanorder)
                    col = [NAN if v != v else v for v in col]
            elif t == "DATE":
                col = list(map(self.dates.__getitem__, col))
            elif t == "STRING":
                col = list(map(self.ids.strings.__getitem__, col))
            cols.append(col)
        return list(zip(*cols))

    def decode_keys(self, name: str, flat: array, n: int) -> list[tuple]:
        """``n`` keys of map ``name`` given as codes, row-major (``arity`` int64 each), as key tuples."""
        arity = self.arity[name]
        return self.decode_columns(name, [flat[j::arity] for j in range(arity)], n)

    def encode_keys(self, name: str, keys) -> array:
        """Key tuples of map ``name`` as codes, row-major (one 0 for a map without key columns)."""
        arity = self.arity[name]
        if arity == 0:
            return array("q", [0])
        cols = list(zip(*keys)) if keys else [()] * arity
        parts = []
        for j, t in enumerate(self.key_types[name]):
            parts.append(float_bits(array("d", cols[j])) if t == "FLOAT" else self.column(cols[j], t))
        flat = array("q", bytes(8 * arity * len(keys)))
        for j, part in enumerate(parts):
            flat[j::arity] = part
        return flat

    def decode_values(self, name: str, raw: array):
        """Value bits of map ``name`` as its values (doubles for a FLOAT map)."""
        return array("d", raw.tobytes()) if name in self.float_maps else raw

    def encode_values(self, name: str, values) -> array:
        """Values of map ``name`` as value bits."""
        if name in self.float_maps:
            out = array("q")
            out.frombytes(array("d", values).tobytes())
            return out
        return array("q", values)
