"""Borealis array fields as Arrow list columns: their types, and checking what a publisher sent.

An array field (``byte(0...319, 0...239)``, ``double(0...*)``; see
:mod:`boreas.catalog.arrays`) is one list column: one list level per
dimension, outermost first, fixed-size where the dimension is bounded and
variable for ``0...*``.  Rows carry the same values as nested Python lists.
A checked batch holds no null anywhere (rows have none), so checking a list
column also looks inside it (:func:`nulls`).

>>> import pyarrow as pa
>>> nulls(pa.array([[1, None], [2, 3]])), holding_null(pa.array([[1, None], [2, 3]])).to_pylist()
(1, [True, False])
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from boreas.catalog.arrays import parse_array
from boreas.catalog.model import Field, FieldType

from .row_errors import SchemaMismatch, with_article

#: Each Borealis type's Arrow type.
ARROW_TYPES: dict[FieldType, pa.DataType] = {
    FieldType.BYTE: pa.int8(),
    FieldType.SHORT: pa.int16(),
    FieldType.INT: pa.int32(),
    FieldType.LONG: pa.int64(),
    FieldType.SINGLE: pa.float32(),
    FieldType.DOUBLE: pa.float64(),
    FieldType.STRING: pa.string(),
    FieldType.TIMESTAMP: pa.int64(),  # microseconds since the epoch, as rows carry them
}


def arrow_type(f: Field) -> pa.DataType:
    """A field's Arrow type: its scalar's, or for an array field (written inline) a list per dimension,
    outermost first: fixed-size where the dimension is bounded, variable for ``0...*``.

    >>> arrow_type(Field("frame", None, array="byte(0...*, 0...1)"))
    ListType(list<item: fixed_size_list<item: int8>[2]>)
    """
    if f.array is None:
        return ARROW_TYPES[f.type]  # type: ignore[index]
    if "(" not in f.array:  # (validation refuses a <type> alias where values flow: catalog/arrays.flow_problem)
        raise SchemaMismatch(f.name, f"its type {f.array!r} is a <type> alias, which the data plane does not carry")
    array = parse_array(f.array)
    kind = ARROW_TYPES[array.element]
    for dim in reversed(array.dims):
        kind = pa.list_(kind) if dim.length is None else pa.list_(kind, dim.length)
    return kind


def holds_single(f: Field) -> bool:
    """Whether the field holds ``single`` values (float32 columns would round what rows keep as doubles)."""
    return f.type == FieldType.SINGLE or (f.array is not None and "(" in f.array
                                          and parse_array(f.array).element == FieldType.SINGLE)


def not_a(f: Field) -> str:
    if f.array is None:
        return f"not {with_article(str(f.type))}: out of its range or of another type"
    return (f"not {with_article(f.array)}: a list of another length, a value out of its element's range "
            f"or of another type")


def nulls(column: pa.Array) -> int:
    """How many nulls ``column`` holds, counting a list column's elements at every depth."""
    count = column.null_count
    while (pa.types.is_list(column.type) or pa.types.is_fixed_size_list(column.type)):
        column = column.flatten()
        count += column.null_count
    return count


def holding_null(column: pa.Array) -> pa.Array:
    """Per row of a list column: whether it is null or holds a null anywhere (rows hold no nulls)."""
    def holds_null(value: Any) -> bool:
        return value is None or (isinstance(value, list) and any(holds_null(v) for v in value))
    return pa.array([holds_null(v) for v in column.to_pylist()], pa.bool_())  # (a bad batch only)
