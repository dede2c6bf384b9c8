"""A map's entries out of C as column buffers, picked by slot or by key: what a Cumulus Chunk or Push carries.

Why apart from :mod:`.backend`: a partition member on the native backend
ships entries to other members (a Push: the entries a writer reads from it
for a version; a Chunk: a moving segment's entries, docs/cumulus.md §6.2).
Read through the Python mirror, every entry became a key tuple and a value
before it became an Arrow column again.  Here the selection runs in C
(``rt_export``: every entry whose partition column's slot is leaving, with
its target; or ``rt_get_many`` at the keys a writer asked for) and the result
stays as it came out: one int64 buffer of codes per key column (INT as is, a
DATE's day number, a FLOAT's bits, a STRING's intern id) and the value bits,
which ``node/cumulus/entry_columns.py`` wraps as Arrow columns (strings by a
``take`` from the intern table) without a Python object per entry.

The slot of a STRING is the CRC-32 of its UTF-8 bytes (m3/cumulus/hashing.py);
C has no CRC, so :class:`StringSlots` works it out once per interned string
and hands C a table indexed by intern id.

>>> from boreas.m3.syntax import parse_program
>>> from boreas.m3.runtime.native.backend import open_native
>>> p = parse_program("CREATE STREAM R(A STRING, B INT); DECLARE MAP m[A: STRING] : INT; "
...                   "ON +R(A, B) DO { m[A] += B }")
>>> native = open_native(p, 1e-9)
>>> native.load("m", [(("x",), 5), (("y",), 7)])
>>> got = at_keys(native, "m", [("y",), ("z",)])       # "z" is absent: left out
>>> [got.strings[c] for c in got.keys[0]], got.values.tolist()
(['y'], [7])
>>> every = by_slots(native, "m", None, None)[0]
>>> sorted(every.strings[c] for c in every.keys[0]), len(every)
(['x', 'y'], 2)
"""

from __future__ import annotations

import weakref
import zlib
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from .backend import NativeMaps, ffi

SLOTS = 4096  # as m3/cumulus/hashing.py's (a test checks they agree)
_KIND = {"INT": 0, "DATE": 0, "FLOAT": 1, "STRING": 2}  # how rt_export hashes a key column's codes


@dataclass(frozen=True)
class Exported:
    """``len(values)`` entries of map ``name`` as column buffers: ``keys[i]`` the int64 codes of key column i
    (of M3 type ``key_types[i]``), ``values`` int64 or float64 (a FLOAT map); a STRING code indexes ``strings``
    (the runtime's intern table when they were read: a compaction replaces it by a new list, .compaction)."""

    name: str
    key_types: tuple[str, ...]
    keys: tuple[np.ndarray, ...]
    values: np.ndarray
    strings: list[str]

    def __len__(self) -> int:
        return len(self.values)

    def cut(self, lo: int, hi: int) -> Exported:
        """Entries ``lo`` to ``hi`` (views, no copy): a Chunk's payload cut into bounded pieces."""
        return Exported(self.name, self.key_types, tuple(k[lo:hi] for k in self.keys), self.values[lo:hi],
                        self.strings)

    def where(self, mask: np.ndarray) -> Exported:
        """The entries where ``mask`` holds."""
        return Exported(self.name, self.key_types, tuple(k[mask] for k in self.keys), self.values[mask],
                        self.strings)


class StringSlots:
    """The slot of each interned string by its id, extended as the intern table grows (one CRC per string).

    >>> slots = StringSlots(); slots.of(["", "q3", "ASIA"]).tolist()
    [0, 3202, 1223]
    >>> slots.of(["ASIA"]).tolist()  # a compacted table (a new list): worked out again
    [1223]
    """

    def __init__(self) -> None:
        self._slots = np.zeros(0, dtype=np.int16)
        self._of: list[str] | None = None  # the table they are of (a compacted one is a new list: .compaction)

    def of(self, strings: list[str]) -> np.ndarray:
        if strings is not self._of:
            self._of, self._slots = strings, np.zeros(0, dtype=np.int16)
        if len(strings) > len(self._slots):
            more = [zlib.crc32(s.encode("utf-8", "surrogatepass")) >> 20 for s in strings[len(self._slots):]]
            self._slots = np.concatenate([self._slots, np.asarray(more, dtype=np.int16)])
        return self._slots


_SLOTS_OF: weakref.WeakKeyDictionary[NativeMaps, StringSlots] = weakref.WeakKeyDictionary()


def string_slots(native: NativeMaps) -> np.ndarray:
    """The slot of each string of ``native``'s intern table, by its id (int16; :class:`StringSlots`)."""
    return _SLOTS_OF.setdefault(native, StringSlots()).of(native.ids.strings)


def _values(native: NativeMaps, name: str, bits: np.ndarray) -> np.ndarray:
    return bits.view(np.float64) if name in native.float_maps else bits


def by_slots(native: NativeMaps, name: str, col: int | None,
             target_of: np.ndarray | None) -> tuple[Exported, np.ndarray]:
    """The entries of map ``name`` whose key column ``col`` falls in a slot ``s`` with ``target_of[s] >= 0``
    (``target_of``: int32, one per slot), and each one's target: one pass over the map in C.  ``col`` None:
    every entry, each to ``target_of[0]``; ``target_of`` None: every entry, to target 0."""
    m, arity = native.map_no[name], native.arity[name]
    cap = int(native.lib.rt_count(native.rt, m))
    keys = np.empty(max(1, cap * arity), dtype=np.int64)
    bits = np.empty(max(1, cap), dtype=np.int64)
    targets = np.empty(max(1, cap), dtype=np.int32)
    kind = 0 if col is None else _KIND[native.key_types[name][col]]
    if kind == 2:
        slots = string_slots(native)
    else:
        slots = np.zeros(1, dtype=np.int16)
    if target_of is not None:
        target_of = np.ascontiguousarray(target_of, dtype=np.int32)
        if len(target_of) != SLOTS:
            raise ValueError(f"target_of has {len(target_of)} slots, not {SLOTS}")
    n = native.lib.rt_export(native.rt, m, -1 if col is None else col, kind,
                             ffi.NULL if target_of is None else ffi.from_buffer("int32_t[]", target_of),
                             ffi.from_buffer("int16_t[]", slots), len(slots), cap,
                             ffi.from_buffer("int64_t[]", keys), ffi.from_buffer("int64_t[]", bits),
                             ffi.from_buffer("int32_t[]", targets))
    if n < 0:
        raise RuntimeError(f"rt_export of map {name} failed (a STRING key without a slot, or the map grew)")
    columns = tuple(keys[i * cap:i * cap + n] for i in range(arity))
    return Exported(name, native.key_types[name], columns, _values(native, name, bits[:n]),
                    native.ids.strings), targets[:n]


def slots_of(native: NativeMaps, name: str, col: int, codes: np.ndarray) -> np.ndarray:
    """The slots of key column ``col``'s codes ``codes`` of map ``name`` (numpy; a STRING by its id's slot), as
    ``rt_export`` works them out: m3/cumulus/hashing.py's ``slot`` of each value."""
    kind = native.key_types[name][col]
    if kind == "STRING":
        return string_slots(native)[codes].astype(np.int64)
    if kind == "FLOAT":
        values = codes.view(np.float64)
        with np.errstate(invalid="ignore"):
            integral = np.isfinite(values) & (values >= -(2.0 ** 63)) & (values < 2.0 ** 63) & (np.floor(values) == values)
        codes = np.where(np.isnan(values), np.int64(0x7FF8000000000000), codes)
        codes = np.where(integral, np.where(integral, values, 0.0).astype(np.int64), codes)
    with np.errstate(over="ignore"):
        return ((codes.astype(np.int64).view(np.uint64) * np.uint64(0x9E3779B97F4A7C15)) >> np.uint64(52)).astype(np.int64)


def values_at(native: NativeMaps, name: str, table: np.ndarray) -> np.ndarray:
    """The current values (int64, or float64 for a FLOAT map; 0 where absent) at the keys ``table`` holds as
    codes (one row per key): one ``rt_get_many``."""
    n = len(table)
    flat = np.ascontiguousarray(table, dtype=np.int64)
    if not flat.size:
        flat = np.zeros(1, dtype=np.int64)
    bits = np.empty(max(1, n), dtype=np.int64)
    if n:
        native.lib.rt_get_many(native.rt, native.map_no[name], n, ffi.from_buffer("int64_t[]", flat),
                               ffi.from_buffer("int64_t[]", bits))
    return _values(native, name, bits[:n])


def at_keys(native: NativeMaps, name: str, keys: Sequence[tuple]) -> Exported:
    """The entries of map ``name`` at ``keys`` (key tuples; those absent left out): the keys encoded once, their
    values read in one C call (``rt_get_many``), the absent ones masked out by numpy."""
    arity = native.arity[name]
    if not keys:
        return Exported(name, native.key_types[name], tuple(np.zeros(0, np.int64) for _ in range(arity)),
                        _values(native, name, np.zeros(0, np.int64)), native.ids.strings)
    flat = native.codec.encode_keys(name, keys)
    bits = np.empty(len(keys), dtype=np.int64)
    native.lib.rt_get_many(native.rt, native.map_no[name], len(keys), ffi.from_buffer("int64_t[]", flat),
                           ffi.from_buffer("int64_t[]", bits))
    values = _values(native, name, bits)
    present = values != 0
    table = np.frombuffer(flat, dtype=np.int64)[:len(keys) * arity].reshape(len(keys), arity)
    if not present.all():
        table, values = table[present], values[present]
    return Exported(name, native.key_types[name], tuple(np.ascontiguousarray(table[:, i]) for i in range(arity)),
                    values, native.ids.strings)
