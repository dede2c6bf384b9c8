"""The stable slot hash: which of 4,096 *slots* a key value falls in (docs/cumulus.md §3.1).

A partitioned map places an entry by the value at its partition column:
``slot(value)`` picks one of :data:`SLOTS` slots, and the layout says which
member owns each slot.  Every process that routes, stores, reads or bulk-loads
an entry (coordinators, members, query clients, Spark tasks) must agree on the
slot, in any Python version and on any machine, so Python's ``hash()`` is
never used: it is salted per process for strings.

The encoding, per value type (the result is always in ``range(4096)``):

* **INT** ``v``: Fibonacci hashing of the two's complement 64-bit value,
  ``((v * 0x9E3779B97F4A7C15) mod 2**64) >> 52`` (the top 12 bits of the
  product).  Consecutive ids spread over all slots.
* **FLOAT** ``f``: an integral float (``3.0``, ``-0.0``) hashes as the INT of
  the same value, because the runtime's maps are dicts in which ``3`` and
  ``3.0`` are one key, and one key must have one owner whichever Python type
  carried it (an INT column joined with a FLOAT column, a FLOAT column fed
  ``3`` by a client).  Any other float hashes as the INT of its IEEE-754
  binary64 bits (big-endian ``struct`` ``>d`` read as ``>q``); every NaN as the
  quiet NaN ``0x7FF8000000000000``.
* **STRING** ``s``: ``zlib.crc32(s.encode("utf-8")) >> 20`` (the top 12 of
  CRC-32's 32 bits).
* **DATE** ``d``: the INT hash of ``d.toordinal()`` (days since 0001-01-01 = 1).

``bool`` is refused (not an M3 value; ``True == 1`` would silently hash as 1).

>>> slot(7), slot(3), slot(7.0), slot(-0.0) == slot(0), slot("BUILDING")
(1336, 3498, 1336, True, 629)
"""

from __future__ import annotations

import datetime
import math
import struct
import zlib
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from typing import Any

SLOTS = 4096
"""Number of hash slots; segments are contiguous slot ranges ``[lo, hi)`` of ``range(SLOTS)``."""

_GOLDEN = 0x9E3779B97F4A7C15  # 2**64 / golden ratio, odd: the multiplication permutes 64-bit values
_MASK = (1 << 64) - 1
_SHIFT = 64 - 12  # keep the top 12 bits: 2**12 == SLOTS
_QUIET_NAN = 0x7FF8000000000000


def slot_int(v: int) -> int:
    """The slot of an INT (any Python int; only its low 64 bits matter, as in a 64-bit engine).

    >>> [slot_int(v) for v in (0, 1, 2, 7, -1)]
    [0, 2531, 966, 1336, 1564]
    """
    return ((v * _GOLDEN) & _MASK) >> _SHIFT


def slot_float(v: float) -> int:
    """The slot of a FLOAT: as the INT of the same value when integral, else of its IEEE bits.

    >>> slot_float(2.0) == slot_int(2), slot_float(-0.0), slot_float(0.25), slot_float(float("nan"))
    (True, 0, 4033, 2549)
    """
    if v.is_integer() and -(2**63) <= v < 2**63:
        return slot_int(int(v))
    bits = _QUIET_NAN if math.isnan(v) else struct.unpack(">q", struct.pack(">d", v))[0]
    return slot_int(bits)


def slot_str(v: str) -> int:
    """The slot of a STRING: the top 12 bits of the CRC-32 of its UTF-8 bytes.

    >>> slot_str(""), slot_str("q3"), slot_str("ASIA")
    (0, 3202, 1223)
    """
    return zlib.crc32(v.encode("utf-8")) >> 20


def slot_date(v: datetime.date) -> int:
    """The slot of a DATE: the INT hash of its proleptic Gregorian ordinal.

    >>> slot_date(datetime.date(1995, 3, 15)) == slot_int(datetime.date(1995, 3, 15).toordinal())
    True
    """
    return slot_int(v.toordinal())


def slot(value: float | str | datetime.date) -> int:
    """The slot of one key value, by its type (see the module docstring for the encoding).

    >>> slot(datetime.date(1995, 3, 15)), slot("O"), slot(10**30) == slot(10**30 % 2**64)
    (2303, 838, True)
    >>> slot(True)
    Traceback (most recent call last):
    TypeError: cannot hash True (bool) into a slot: keys are INT, FLOAT, STRING or DATE values
    """
    kind = type(value)
    if kind is int:  # the common cases first, inline: routing hashes every event at least once
        return ((value * _GOLDEN) & _MASK) >> _SHIFT
    if kind is str:
        return zlib.crc32(value.encode("utf-8")) >> 20
    if isinstance(value, bool):
        raise TypeError(f"cannot hash {value!r} (bool) into a slot: keys are INT, FLOAT, STRING or DATE values")
    if isinstance(value, int):
        return slot_int(value)
    if isinstance(value, float):
        return slot_float(value)
    if isinstance(value, str):
        return slot_str(value)
    if isinstance(value, datetime.date):  # datetime.datetime too: its day
        return slot_date(value)
    raise TypeError(f"cannot hash {value!r} ({type(value).__name__}) into a slot: keys are INT, FLOAT, STRING or DATE values")


def placed(values: Iterable, cells: Sequence) -> list:
    """``[cells[slot(v)] for v in values]``, INTs hashed inline in one comprehension.

    Routing places every event at least once, and a member checks every key
    a mixed trigger wrote: per batch, not per value, so a value costs one
    step of a comprehension instead of a few Python calls.

    >>> cells = list(range(SLOTS))
    >>> placed([7, -1, "O", 2.5], cells) == [slot(v) for v in (7, -1, "O", 2.5)]
    True
    """
    return [cells[((v * _GOLDEN) & _MASK) >> _SHIFT] if type(v) is int else cells[slot(v)] for v in values]


def placer(read: Callable[[Any], Any], cells: Sequence) -> Callable[[Sequence], list]:
    """``rows -> [cells[slot(read(row))] for row in rows]`` (:func:`placed`).

    >>> from operator import itemgetter
    >>> placer(itemgetter(0), list(range(SLOTS)))([(7,), ("O",)]) == [slot(7), slot("O")]
    True
    """
    return lambda rows: placed(map(read, rows), cells)


def slot_counts(pairs: Iterable[tuple[Any, int]]) -> Counter:
    """Per slot, the sum of the counts of ``(value, count)`` pairs (``boreas segments`` counts every entry
    of a member, a group of entries per pair where an index holds them so).

    INTs are hashed inline, in one comprehension: a member holding a
    million entries counts them without a Python call per entry, so the
    count stalls its node's event loop for milliseconds, not a second.

    >>> slot_counts([(7, 2), (3, 1), ("O", 1), (2.0, 1), (7, 1)]) == Counter({slot(7): 3, slot(3): 1, slot("O"): 1, slot(2): 1})
    True
    """
    pairs = pairs if isinstance(pairs, list) else list(pairs)
    slots = [((v * _GOLDEN) & _MASK) >> _SHIFT if type(v) is int else slot(v) for v, _ in pairs]
    weights = [n for _, n in pairs]
    if sum(weights) == len(weights):  # one entry each: Counter counts in C
        return Counter(slots)
    counts: Counter = Counter()
    for s, n in zip(slots, weights):
        counts[s] += n
    return counts


def slots_of(key: Sequence, column: int) -> int:
    """The slot that places a map entry: the slot of its key tuple's value at ``column``.

    ``column`` is the map's partition column (a key position); a map without
    one lives on its box's home slot instead (:func:`home_slot`).

    >>> slots_of((7, datetime.date(1995, 3, 1), 0), 0) == slot(7)
    True
    """
    return slot(key[column])


def home_slot(box: str) -> int:
    """The slot whose owner holds every unpartitioned (*home*) map of ``box``.

    One home per box rather than per map: a view's maps (``SUM`` and ``COUNT``
    of an ``AVG``) must sit together, and a statement between two home maps
    is then local.

    >>> home_slot("q3") == slot("q3")
    True
    """
    return slot_str(box)
