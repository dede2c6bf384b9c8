"""A caller's columns made a stream's batches, on the publisher's side (issue 30): a pyarrow ``RecordBatch`` or
``Table``, a pandas or polars ``DataFrame`` cut into batches by rows (:func:`record_batches`, never by time, so a
re-run sends the same batches and digests), each conformed to the stream's Arrow schema where that casts safely
(:func:`conform`; the node checks every batch again and refuses what does not hold, naming its rows:
:func:`boreas.wire.columns.check`).  Date and time columns become the microseconds a ``timestamp`` field
carries first, by :mod:`boreas.wire.time_columns`'s one rule (an Arrow cast would keep their own unit).

>>> import pyarrow as pa
>>> from boreas.catalog.model import Field, FieldType, Schema
>>> s = Schema("P", (Field("time", FieldType.INT),))
>>> [b.num_rows for b in record_batches(pa.table({"time": pa.array(range(5), pa.int16())}), 2)]
[2, 2, 1]
>>> conform(pa.record_batch({"time": pa.array([1], pa.int16())}), s).schema.field("time").type
DataType(int32)
>>> t = Schema("T", (Field("at", FieldType.TIMESTAMP),))
>>> conform(pa.record_batch({"at": pa.array([1_000_000_000], pa.timestamp("ns"))}), t).column(0).to_pylist()
[1000000]
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from boreas.catalog.arrays import flowing
from boreas.catalog.model import FieldType, Schema

from .columns import arrow_schema
from .time_columns import as_micros, is_temporal, not_a_time_field


def conform(batch: pa.RecordBatch, schema: Schema) -> pa.RecordBatch:
    """``batch`` in the stream's column order and types where that casts safely (a publisher's side: the node
    then takes it as it is); anything else is left for the node to refuse, naming its rows.

    Date and time columns are converted first (:func:`with_micros`): :class:`~boreas.wire.time_columns.Unconvertible`
    names a column that cannot be."""
    batch = with_micros(batch, schema)
    target = arrow_schema(schema)
    if batch.schema.equals(target):
        return batch
    names = set(batch.schema.names)
    if names != set(target.names):
        return batch
    columns = []
    for want in target:
        column = batch.column(want.name)
        try:
            columns.append(column if column.type == want.type else column.cast(want.type, safe=True))
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            return batch
    return pa.RecordBatch.from_arrays(columns, schema=target)


def with_micros(batch: pa.RecordBatch, schema: Schema) -> pa.RecordBatch:
    """``batch`` with the date and time columns its fields carry as microseconds converted
    (:func:`~boreas.wire.time_columns.as_micros`): any date or time column of a ``timestamp`` field (an array
    field's elements too, at any list depth), and a ``timestamp`` column of a ``long`` field (its instant, as
    a row's ``datetime`` would be).  A date or time column of a ``string`` field is left to :func:`conform`'s
    safe cast (a ``date32`` becomes its ISO text); of any other field, refused naming it
    (:class:`~boreas.wire.time_columns.Unconvertible`: a cast would give its own unit).  Columns named after
    no field are left for the node to refuse."""
    fields = {f.name: f for f in schema.fields}
    converted = {}
    for index, name in enumerate(batch.schema.names):
        f = fields.get(name)
        element = f and (flowing(f).element if f.array is not None else f.type)  # an array field: its elements'
        if element is not None and _converts(element, batch.schema.field(index).type, name):
            converted[index] = _micros(batch.column(index), name)
    if not converted:
        return batch
    columns = [converted.get(i, c) for i, c in enumerate(batch.columns)]
    return pa.RecordBatch.from_arrays(columns, names=batch.schema.names)


def _converts(field_type: FieldType, kind: pa.DataType, name: str) -> bool:
    """Whether a column ``name`` of ``kind`` (its elements', for a list) is converted to microseconds for a
    field of ``field_type``: any date or time for a ``timestamp`` (what cannot be one is refused then), a
    timestamp for a ``long``; a date or time for a ``string`` is not (cast to text); for any other, refused."""
    element = _element(kind)
    if not is_temporal(element):
        return False
    if field_type == FieldType.TIMESTAMP or (field_type == FieldType.LONG and pa.types.is_timestamp(element)):
        return True
    if field_type == FieldType.STRING:
        return False
    raise not_a_time_field(name, kind, str(field_type))


def _micros(column: pa.Array, name: str) -> pa.Array:
    """``column`` as microseconds; a list column's elements converted and the lists rebuilt on the same
    offsets and NULLs (recursively, for lists of lists)."""
    kind = column.type
    if not _is_list(kind):
        return as_micros(column, name)
    values = _micros(column.values, name)  # the whole child, as the list's offsets (and offset) index it
    if pa.types.is_fixed_size_list(kind):
        made, parents = pa.list_(values.type, kind.list_size), 1
    else:
        made, parents = (pa.large_list if pa.types.is_large_list(kind) else pa.list_)(values.type), 2
    return pa.Array.from_buffers(made, len(column), column.buffers()[:parents], null_count=column.null_count,
                                 offset=column.offset, children=[values])


def _is_list(kind: pa.DataType) -> bool:
    return pa.types.is_list(kind) or pa.types.is_fixed_size_list(kind) or pa.types.is_large_list(kind)


def _element(kind: pa.DataType) -> pa.DataType:
    """A list type's innermost element type (``kind`` itself for any other)."""
    while _is_list(kind):
        kind = kind.value_type
    return kind


def record_batches(data: Any, size: int) -> list[pa.RecordBatch]:
    """A pyarrow ``RecordBatch`` or ``Table``, or a pandas or polars ``DataFrame``, cut into batches of at most
    ``size`` rows, in order (deterministic: the same data gives the same batches)."""
    if isinstance(data, pa.RecordBatch):
        table = pa.Table.from_batches([data])
    elif isinstance(data, pa.Table):
        table = data
    elif hasattr(data, "to_arrow"):  # polars
        table = data.to_arrow()
    elif type(data).__module__.startswith("pandas"):
        table = pa.Table.from_pandas(data, preserve_index=False)
    else:
        raise TypeError(f"cannot publish a {type(data).__name__}: give rows, a pyarrow RecordBatch or Table, or "
                        "a pandas or polars DataFrame")
    return table.combine_chunks().to_batches(max_chunksize=size)
