"""A map's entries into C from column buffers: what a Cumulus member receives in a Push or Chunk, installed in bulk.

The twin of :mod:`.export`.  A member on the native backend received a
Push's or a Chunk's entries as Arrow columns and decoded them to Python
values (a key tuple and a value per entry), which :meth:`.backend.NativeMaps.load`
then encoded again.  Here the columns' buffers (numpy views of them, made by
``node/cumulus/entry_install.py`` without a Python object per entry) go to C
as they are: ``rt_import`` reads each key column by its kind (int64 codes, a
``date32``'s days since 1970, a double, an int64 into a FLOAT key, a
dictionary-encoded STRING's indices into its strings' intern ids), makes
the codes :class:`.codes.Codec` would (``f2k``: ``-0.0`` as ``0.0``; a DATE
as its day number) and, when asked, sets the entries in the map as
``rt_load`` does (a value 0 removes), leaving out a Push's entries whose
partition column falls in a slot the member owns.  Only a STRING column
costs Python, once per *distinct* string (interning it).  What comes back
(:class:`Coded`) is the entries kept as codes, row-major, and their value
bits: what a Push is uninstalled by and a Chunk's staging keeps.  (The
entry types import without ``cffi``: ``m3/cumulus/native_member.py`` names
them on every backend; the C call imports :mod:`.backend` when made.)

>>> from boreas.m3.syntax import parse_program
>>> from boreas.m3.runtime.native.backend import open_native
>>> p = parse_program("CREATE STREAM R(A STRING, B INT); DECLARE MAP m[A: STRING, B: INT] : INT; "
...                   "ON +R(A, B) DO { m[A, B] += B }")
>>> native = open_native(p, 1e-9)
>>> strings = KeyColumn(DICT, np.array([1, 0, 1], np.int32), string_ids(native, ["x", "y"]))
>>> got = import_columns(native, "m", [strings, KeyColumn(CODES, np.array([1, 2, 3]))], np.array([5, 7, 0]),
...                      install=True)
>>> len(got), sorted(native.dump("m"))   # the value 0 removes (there was nothing to remove)
(3, [(('x', 2), 7), (('y', 1), 5)])
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from .backend import NativeMaps

CODES, DATE32, DOUBLE, INT_AS_FLOAT, DICT = 0, 1, 2, 3, 4  # how rt_import reads a key column (crt_api.py)
_DTYPE = {CODES: np.int64, DATE32: np.int32, DOUBLE: np.float64, INT_AS_FLOAT: np.int64, DICT: np.int32}
_SLOT_KIND = {"INT": 0, "DATE": 0, "FLOAT": 1, "STRING": 2}  # as rt_export hashes a key column's codes


@dataclass(frozen=True)
class KeyColumn:
    """One key column as ``rt_import`` reads it: ``data`` of ``kind`` (numpy, contiguous; a view of an Arrow
    buffer), and for :data:`DICT` the intern id of each dictionary entry (``ids``, int64)."""

    kind: int
    data: np.ndarray
    ids: np.ndarray | None = None


@dataclass(frozen=True)
class EntryColumns:
    """A map's entries as column buffers, not yet in C: ``values`` int64, or float64 (a FLOAT map's doubles, or
    ``ints_as_float``: int64 values of a FLOAT map, made doubles as ``Codec.encode_values`` does)."""

    name: str
    columns: tuple[KeyColumn, ...]
    values: np.ndarray
    ints_as_float: bool = False

    def __len__(self) -> int:
        return len(self.values)


@dataclass(frozen=True)
class Coded:
    """Entries of map ``name`` as the C map holds them: ``table`` (one row of int64 codes per key) and ``bits``
    (the values' int64 bits; a FLOAT map's doubles viewed as int64)."""

    name: str
    table: np.ndarray
    bits: np.ndarray

    def __len__(self) -> int:
        return len(self.bits)

    def values(self, native: NativeMaps) -> np.ndarray:
        """The values (float64 for a FLOAT map)."""
        return self.bits.view(np.float64) if self.name in native.float_maps else self.bits


def string_ids(native: NativeMaps, strings: Sequence[str]) -> np.ndarray:
    """The intern ids of ``strings`` (a dictionary's, each distinct: interned now, the C side told of new ones)."""
    ids = np.fromiter(map(native.ids.__getitem__, strings), dtype=np.int64, count=len(strings))
    native.send_strings()
    return ids


def import_columns(native: NativeMaps, name: str, columns: Sequence[KeyColumn], values: np.ndarray, *,
                   ints_as_float: bool = False, install: bool, skip: np.ndarray | None = None,
                   col: int | None = None) -> Coded:
    """Map ``name``'s entries given as columns made codes (one ``rt_import``) and, ``install``, set in C (no
    journal; a value 0 removes, as :meth:`.backend.NativeMaps.load`).  ``skip`` (bool per slot) with ``col``:
    entries whose key column ``col`` falls in a slot ``skip`` holds are left out.  Returns the entries kept."""
    from .backend import ffi
    from .export import SLOTS, string_slots

    m, arity = native.map_no[name], native.arity[name]
    if len(columns) != arity:
        raise ValueError(f"map {name} has {arity} key columns, not {len(columns)}")
    n = len(values)
    cols = [np.ascontiguousarray(c.data, dtype=_DTYPE[c.kind]) for c in columns]
    ids = [np.ascontiguousarray(c.ids, dtype=np.int64) if c.kind == DICT else np.zeros(1, np.int64) for c in columns]
    for c, data in zip(columns, cols):
        if len(data) != n:
            raise ValueError(f"a key column of map {name} has {len(data)} entries, not {n}")
        if c.kind == DICT and n and (int(data.min()) < 0 or int(data.max()) >= len(c.ids)):
            raise ValueError(f"a STRING column of map {name} indexes outside its dictionary")
    vals = np.ascontiguousarray(values, dtype=np.int64 if ints_as_float or values.dtype != np.float64 else np.float64)
    keys_out = np.empty(max(1, n * arity), dtype=np.int64)
    bits_out = np.empty(max(1, n), dtype=np.int64)
    skind, slots = 0, np.zeros(1, dtype=np.int16)
    if skip is not None and col is not None:
        if len(skip) != SLOTS:
            raise ValueError(f"skip has {len(skip)} slots, not {SLOTS}")
        skind = _SLOT_KIND[native.key_types[name][col]]
        if skind == 2:
            slots = string_slots(native)
        skip = np.ascontiguousarray(skip, dtype=np.int8)
    if install:
        native.touched()
    got = native.lib.rt_import(
        native.rt, m, n, ffi.new("int[]", [c.kind for c in columns] or [0]),
        ffi.new("void *[]", [ffi.from_buffer(c) for c in cols] or [ffi.NULL]),
        ffi.new("int64_t *[]", [ffi.cast("int64_t *", ffi.from_buffer(i)) for i in ids] or [ffi.NULL]),
        1 if ints_as_float else 0, ffi.from_buffer(vals), -1 if skip is None or col is None else col, skind,
        ffi.NULL if skip is None or col is None else ffi.from_buffer("int8_t[]", skip),
        ffi.from_buffer("int16_t[]", slots), len(slots), 1 if install else 0,
        ffi.from_buffer("int64_t[]", keys_out), ffi.from_buffer("int64_t[]", bits_out))
    if got < 0:
        raise MemoryError(f"importing entries of map {name}")
    table = keys_out[:got * arity].reshape(got, arity) if arity else np.zeros((got, 0), dtype=np.int64)
    return Coded(name, table, bits_out[:got])


def entries_of(native: NativeMaps, coded: Coded) -> list[tuple[tuple, object]]:
    """``(key tuple, value)`` of each entry of ``coded`` (the Python path's form: a member that left C)."""
    from array import array

    n = len(coded)
    keys = native.decode_keys(coded.name, array("q", np.ascontiguousarray(coded.table).tobytes()), n)
    return list(zip(keys, coded.values(native).tolist()))


@dataclass
class Pushed:
    """The entries other members pushed for a version: ``entries`` (``{(map, key tuple): value}``, the Python
    path's form) and, on a native member, ``columns`` (:class:`EntryColumns`, installed by ``rt_import``).  A
    key is served by one member, so the two never hold the same key."""

    native: NativeMaps | None = None
    entries: dict = field(default_factory=dict)
    columns: list[EntryColumns] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.entries) or any(len(c) for c in self.columns)

    def as_dict(self) -> dict:
        """Every entry as ``{(map, key tuple): value}`` (the columns decoded: a member that left C)."""
        out = dict(self.entries)
        for c in self.columns:
            coded = import_columns(self.native, c.name, c.columns, c.values, ints_as_float=c.ints_as_float,
                                   install=False)
            out.update(((c.name, k), v) for k, v in entries_of(self.native, coded))
        return out
