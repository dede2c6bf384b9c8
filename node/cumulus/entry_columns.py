"""Map entries as Arrow columns: what Push and Chunk messages carry (docs/cumulus.md §3.12).

A Push (the entries a serving member pushes to a writer for a version) and a
Chunk (a moving segment's entries, :mod:`~boreas.node.cumulus.precopy`) carry
their entries per map as one Arrow IPC stream of one record batch: a column
per key position (``k0``, ``k1``, ...) and the values (``v``).  Columns are
made from the key and value lists in bulk (``pyarrow.array`` over a list, a
C loop; a tuple key list is transposed by ``zip(*keys)``), and decoded the
same way, so no Python runs per entry on either side.  Types are the
values' own; where the sender gives the map's M3 types (:func:`map_types`),
INT and FLOAT lists convert through numpy (``int64``, ``double``: ~8x faster
than pyarrow's conversion of a list of ints); otherwise: strings ``string``, DATEs
``date32`` (decoded as ``datetime.date``, so no day-number codec is
needed), timestamps ``timestamp``, a missing value a null.

Exactness comes first: a column Arrow cannot hold as the values are (an int
beyond 64 bits in the Python runtime, or ints and floats mixed in one
column, which a ``double`` column would turn into floats) travels as the
values' ``repr`` text, marked in the field's metadata, and is read back to
the same Python values.  That path costs Python per entry and is rare.

>>> import datetime as dt
>>> item = encode("m", [[1, 2], [dt.date(1995, 3, 15), None]], [2.5, 7])
>>> item[0], type(item[1])
('m', <class 'bytes'>)
>>> decode(item)
('m', [[1, 2], [datetime.date(1995, 3, 15), None]], [2.5, 7])
>>> decode(encode("big", [["a"]], [2 ** 70]))
('big', [['a']], [1180591620717411303424])
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

_REPR = {b"boreas": b"repr"}  # a column sent as its values' repr (see the module's docstring)


#: M3 types whose values convert through numpy (``numpy.array`` of a list of ints is ~8x faster than pyarrow's
#: conversion of it, typed or not)
_NUMBERS = frozenset(("INT", "FLOAT"))

#: A map's M3 types: its key columns', its value's (what :func:`map_types` gives)
Types = tuple[tuple[str, ...], str]


def map_types(program) -> dict[str, Types]:
    """Each map of an M3 ``Program``: ``(key types, value type)``."""
    return {m.name: (tuple(k.type for k in m.keys), m.value_type) for m in program.maps}


def _column(values: list, name: str, kind: str | None = None) -> tuple[pa.Array, pa.Field]:
    """``values`` as an Arrow column (in bulk), or as repr text where Arrow would change them; ``kind``: their M3
    type if known (INT and FLOAT go through numpy, the rest by pyarrow's inference)."""
    column = None
    if kind in _NUMBERS and values:
        got = np.array(values)  # (ints: int64; any float: float64; past 64 bits or a None: object, not taken)
        if got.dtype.kind in "iu" or (got.dtype.kind == "f" and int not in set(map(type, values))):
            column = pa.array(got)
    if column is None:
        try:
            column = pa.array(values)
        except (OverflowError, pa.ArrowInvalid, pa.ArrowTypeError):
            column = None
        if column is not None and pa.types.is_floating(column.type) and int in set(map(type, values)):
            column = None  # ints mixed with floats: a double column would make them floats
    if column is None:
        column = pa.array(list(map(repr, values)), pa.string())
        return column, pa.field(name, pa.string(), metadata=_REPR)
    return column, pa.field(name, column.type)


def _values(column: pa.Array, field: pa.Field) -> list:
    """A column decoded to Python values, in bulk (repr text: per entry)."""
    if field.metadata == _REPR:
        return [_literal(s) for s in column.to_pylist()]
    if column.null_count == 0 and (pa.types.is_integer(column.type) or pa.types.is_floating(column.type)):
        return column.to_numpy().tolist()  # (faster than to_pylist for numbers)
    return column.to_pylist()


def _literal(text: str):
    """A value from its ``repr``: None, an int, a float."""
    if text == "None":
        return None
    try:
        return int(text)
    except ValueError:
        return float(text)


def encode(name: str, key_columns: list[list], values: list, types: Types | None = None) -> list:
    """Map ``name``'s entries, as ``[name, IPC bytes]``: ``key_columns`` one list per key position; ``types``: the
    map's (:func:`map_types`), which makes ints and floats faster to convert."""
    keys, value = types if types is not None else ((None,) * len(key_columns), None)
    arrays, fields = [], []
    for i, col in enumerate(key_columns):
        array, field = _column(col, f"k{i}", keys[i])
        arrays.append(array)
        fields.append(field)
    array, field = _column(values, "v", value)
    arrays.append(array)
    fields.append(field)
    batch = pa.RecordBatch.from_arrays(arrays, schema=pa.schema(fields))
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, batch.schema) as writer:
        writer.write_batch(batch)
    return [name, sink.getvalue().to_pybytes()]


def decode(item: list) -> tuple[str, list[list], list]:
    """``(name, key columns, values)`` of an :func:`encode`\\ d item."""
    name, raw = item
    table = pa.ipc.open_stream(raw).read_all()
    columns = [_values(table.column(i).combine_chunks(), table.schema.field(i)) for i in range(table.num_columns)]
    return name, columns[:-1], columns[-1]


def encode_tuples(name: str, keys: list[tuple], values: list, arity: int, types: Types | None = None) -> list:
    """As :func:`encode`, from keys as tuples of ``arity`` values."""
    return encode(name, [list(c) for c in zip(*keys)] if keys else [[] for _ in range(arity)], values, types)


def decode_tuples(item: list) -> tuple[str, list[tuple], list]:
    """``(name, keys as tuples, values)`` of an :func:`encode`\\ d item."""
    name, columns, values = decode(item)
    return name, list(zip(*columns)) if columns else [()] * len(values), values


def encode_stored(name: str, keys: list, values: list, arity: int, types: Types | None = None) -> list:
    """As :func:`encode`, from keys in a map store's form: one value (``arity`` 1), else a tuple."""
    return encode(name, [keys], values, types) if arity == 1 else encode_tuples(name, keys, values, arity, types)


def decode_stored(item: list) -> tuple[str, list, list]:
    """``(name, keys in a map store's form, values)`` of an :func:`encode`\\ d item."""
    name, columns, values = decode(item)
    if len(columns) == 1:
        return name, columns[0], values
    return name, list(zip(*columns)) if columns else [()] * len(values), values


def size(item: list) -> int:
    """How many entries an :func:`encode`\\ d item holds (reads the IPC stream's batch header only)."""
    return pa.ipc.open_stream(item[1]).read_next_batch().num_rows
