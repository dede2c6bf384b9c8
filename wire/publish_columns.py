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

from boreas.catalog.model import FieldType, Schema

from .columns import arrow_schema
from .time_columns import Unconvertible, as_micros, is_temporal, not_a_time_field


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
    """``batch`` with each date or time column of a ``timestamp`` field as its microseconds
    (:func:`~boreas.wire.time_columns.as_micros`); a date or time column of any other field refused.  Columns
    named after no field are left for the node to refuse."""
    fields = {f.name: f for f in schema.fields}
    converted = {}
    for index, name in enumerate(batch.schema.names):
        f = fields.get(name)
        kind = batch.schema.field(index).type
        if f is None or not _holds_times(kind):
            continue
        if f.array is not None or f.type != FieldType.TIMESTAMP or not is_temporal(kind):
            if f.array is not None:
                raise Unconvertible(f"column {name!r} is {kind}: array field {name!r} ({f.array}) takes integer "
                                    "microseconds, not dates or times")
            raise not_a_time_field(name, kind, str(f.type))
        converted[index] = as_micros(batch.column(index), name)
    if not converted:
        return batch
    columns = [converted.get(i, c) for i, c in enumerate(batch.columns)]
    return pa.RecordBatch.from_arrays(columns, names=batch.schema.names)


def _holds_times(kind: pa.DataType) -> bool:
    """Whether a column of ``kind`` holds dates or times, at any list depth."""
    while pa.types.is_list(kind) or pa.types.is_fixed_size_list(kind) or pa.types.is_large_list(kind):
        kind = kind.value_type
    return is_temporal(kind)


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
