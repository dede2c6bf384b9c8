"""A caller's columns made a stream's batches, on the publisher's side (issue 30): a pyarrow ``RecordBatch`` or
``Table``, a pandas or polars ``DataFrame`` cut into batches by rows (:func:`record_batches`, never by time, so a
re-run sends the same batches and digests), each conformed to the stream's Arrow schema where that casts safely
(:func:`conform`; the node checks every batch again and refuses what does not hold, naming its rows:
:func:`boreas.wire.columns.check`).

>>> import pyarrow as pa
>>> from boreas.catalog.model import Field, FieldType, Schema
>>> s = Schema("P", (Field("time", FieldType.INT),))
>>> [b.num_rows for b in record_batches(pa.table({"time": pa.array(range(5), pa.int16())}), 2)]
[2, 2, 1]
>>> conform(pa.record_batch({"time": pa.array([1], pa.int16())}), s).schema.field("time").type
DataType(int32)
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from boreas.catalog.model import Schema

from .columns import arrow_schema


def conform(batch: pa.RecordBatch, schema: Schema) -> pa.RecordBatch:
    """``batch`` in the stream's column order and types where that casts safely (a publisher's side: the node
    then takes it as it is); anything else is left for the node to refuse, naming its rows."""
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
