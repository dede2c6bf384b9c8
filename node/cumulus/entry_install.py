"""A Push's or Chunk's Arrow columns as the column buffers a native member installs in bulk (no Python per entry).

:mod:`.entry_columns` decodes an item to Python values (a key tuple and a
value per entry), which the Python backend needs.  A member on the native
backend needs codes in C instead: :func:`entry_columns_of` takes the
item's Arrow columns as numpy views of their buffers, by the map's declared
key types, for ``m3/runtime/native/install.py``'s ``rt_import``:

============  ================  =========================================
key type      Arrow column      read as
============  ================  =========================================
INT           ``int64``         the codes as they are
DATE          ``date32``        days since 1970 (the day number less 719163)
FLOAT         ``double``        the double (``-0.0`` keyed as ``0.0``)
FLOAT         ``int64``         the int made a double (as ``Codec`` does)
STRING        ``string``        dictionary-encoded (a C pass): the distinct
                                strings interned, once each
============  ================  =========================================

The values: ``int64`` (an INT map), ``double`` or ``int64`` (a FLOAT map).
Anything else is left to the Python path (``None``), which takes it as it
always did, errors included: a tagged column (ints beyond 64 bits, mixed
types: node/cumulus/entry_columns.py), a null, a column of another type
(a DATE column of datetimes, an INT column of doubles, bools), a map the
program does not have or a column count that does not match it.
"""

from __future__ import annotations

import pyarrow as pa
from boreas.m3.runtime.native.install import (CODES, DATE32, DICT, DOUBLE, INT_AS_FLOAT, EntryColumns, KeyColumn,
                                              string_ids)

from .entry_columns import TAGGED


def _read(raw: bytes) -> pa.RecordBatch | None:
    """The item's one record batch (its chunks combined), or None when it holds no entry."""
    table = pa.ipc.open_stream(raw).read_all()
    return table.combine_chunks().to_batches()[0] if table.num_rows else None


def _key_column(column: pa.Array, kind: str, native) -> KeyColumn | None:
    """A key column of M3 type ``kind`` as ``rt_import`` reads it (views of its buffers), or None (Python path)."""
    t = column.type
    if kind == "INT" and t == pa.int64():
        return KeyColumn(CODES, column.to_numpy(zero_copy_only=True))
    if kind == "DATE" and t == pa.date32():
        return KeyColumn(DATE32, column.view(pa.int32()).to_numpy(zero_copy_only=True))
    if kind == "FLOAT" and t == pa.float64():
        return KeyColumn(DOUBLE, column.to_numpy(zero_copy_only=True))
    if kind == "FLOAT" and t == pa.int64():
        return KeyColumn(INT_AS_FLOAT, column.to_numpy(zero_copy_only=True))
    if kind == "STRING" and t in (pa.string(), pa.large_string()):
        encoded = column.dictionary_encode()
        indices = encoded.indices.cast(pa.int32())
        return KeyColumn(DICT, indices.to_numpy(zero_copy_only=True), string_ids(native, encoded.dictionary.to_pylist()))
    return None


def entry_columns_of(native, item: list) -> EntryColumns | None:
    """The entries of a Push or Chunk item (``[map, IPC bytes]``) as column buffers for ``rt_import``, or None:
    the Python path takes them (see the module's docstring for which)."""
    if len(item) != 2 or not isinstance(item[1], (bytes, bytearray, memoryview)):
        return None
    name = item[0]
    kinds = native.key_types.get(name)
    if kinds is None:
        return None
    batch = _read(item[1])
    if batch is None or batch.num_columns != len(kinds) + 1:
        return None
    for i in range(batch.num_columns):
        if batch.schema.field(i).metadata == TAGGED or batch.column(i).null_count:
            return None
    columns = []
    for column, kind in zip(batch.columns, kinds):
        got = _key_column(column, kind, native)
        if got is None:
            return None
        columns.append(got)
    values, float_map = batch.column(len(kinds)), name in native.float_maps
    if values.type == pa.int64():
        return EntryColumns(name, tuple(columns), values.to_numpy(zero_copy_only=True), ints_as_float=float_map)
    if values.type == pa.float64() and float_map:
        return EntryColumns(name, tuple(columns), values.to_numpy(zero_copy_only=True))
    return None
