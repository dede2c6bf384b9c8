"""What checking a received Arrow batch against its schema measures, column by column (wire/columns.py's
:func:`~boreas.wire.columns.decode` and :func:`~boreas.wire.columns.check`).

A batch a sender made right is taken as it came when no column breaks a
limit (:func:`too_long`); otherwise :func:`~boreas.wire.columns.check` names
the rows, asking :func:`cast` which values do not fit their field's type and
:func:`refused_nulls` which nulls the field refuses.  Every function here
answers for a whole column in C (pyarrow.compute); only a batch with a bad
value is read row by row, to name the rows.  A column of nulls only (a
nullable field NULL in every row) has no longest string: it breaks no limit.

>>> from boreas.catalog.model import Field, FieldType, Schema
>>> s = Schema("N", (Field("k", FieldType.INT), Field("name", FieldType.STRING, 3, nullable=True)))
>>> ks = pa.array([1, 2], pa.int32())
>>> too_long(pa.record_batch([ks, pa.array([None, None], pa.string())], names=["k", "name"]), s)
False
>>> too_long(pa.record_batch([ks, pa.array(["ab", "abcd"], pa.string())], names=["k", "name"]), s)
True
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from boreas.catalog.model import FieldType, Schema

from . import array_columns
from .array_columns import holding_null, wrong_lengths


def too_long(batch: pa.RecordBatch, schema: Schema) -> bool:
    """Whether a string is longer than its size, or an array's list longer or shorter than its dimension."""
    for i, f in enumerate(schema.fields):
        if f.array is not None and wrong_lengths(batch.column(i), f):
            return True
        if f.type == FieldType.STRING:
            longest = pc.max(pc.utf8_length(batch.column(i))).as_py()  # None: no rows, or NULL in every row
            if longest is not None and longest > f.size:
                return True
    return False


def refused_nulls(column: pa.Array, nullable: bool) -> pa.Array:
    """The rows whose nulls the field refuses: every null of a field that is not nullable, and the
    nulls inside an array value (an array field's own value may be NULL when it is nullable)."""
    if not array_columns.nulls(column) or not (pa.types.is_list(column.type) or pa.types.is_fixed_size_list(column.type)):
        return pa.array([False] * len(column), pa.bool_()) if nullable else column.is_null()
    held = holding_null(column)
    if nullable and column.null_count:
        held = pc.and_(held, column.is_valid())
    return held


def cast(column: pa.Array, want: pa.DataType) -> tuple[pa.Array, list[int]]:
    """``column`` as ``want``; rows whose value cannot be (out of range, not a number) become null, listed."""
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    if column.type == want:
        return column, []
    try:
        return column.cast(want, safe=True), []
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        pass
    values, wrong = [], []
    for i, v in enumerate(column.to_pylist()):  # the slow path names the rows; a good batch never comes here
        try:
            values.append(pa.scalar(v).cast(want, safe=True).as_py() if v is not None else None)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
            values.append(None)
            wrong.append(i)
    return pa.array(values, want), wrong
