"""Borealis array fields as Arrow list columns: their types, and checking what a publisher sent.

An array field (``byte(0...319, 0...239)``, ``double(0...*)``; see
:mod:`boreas.catalog.arrays`) is one list column: one list level per
dimension, outermost first, the innermost fixed-size where the dimension is
bounded (:func:`arrow_type` says why only that one).  Rows carry the same values as nested Python lists.
A checked batch holds no null anywhere (rows have none), so checking a list
column also looks inside it (:func:`nulls`), and at the lengths of the
levels Arrow does not fix (:func:`wrong_lengths`).

>>> import pyarrow as pa
>>> nulls(pa.array([[1, None], [2, 3]])), holding_null(pa.array([[1, None], [2, 3]])).to_pylist()
(1, [True, False])
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from boreas.catalog.arrays import flowing
from boreas.catalog.model import Field, FieldType

from .row_errors import with_article

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
    """A field's Arrow type: its scalar's, or for an array field (written inline) one list level per
    dimension, outermost first: the innermost a fixed-size list when bounded, the others variable lists
    whose lengths :func:`wrong_lengths` checks where batches enter.

    Only the innermost level is fixed-size because pyarrow (26) reads the wrong rows when it takes or
    filters a slice of a fixed-size list of fixed-size lists, which every operator does.

    >>> arrow_type(Field("frame", None, array="byte(0...*, 0...1)"))
    ListType(list<item: fixed_size_list<item: int8>[2]>)
    >>> arrow_type(Field("frame", None, array="byte(0...1, 0...2)"))
    ListType(list<item: fixed_size_list<item: int8>[3]>)
    """
    if f.array is None:
        return ARROW_TYPES[f.type]  # type: ignore[index]
    array = flowing(f)
    kind = ARROW_TYPES[array.element]
    innermost = array.dims[-1].length
    kind = pa.list_(kind) if innermost is None else pa.list_(kind, innermost)
    for _ in array.dims[:-1]:
        kind = pa.list_(kind)
    return kind


def wrong_lengths(column: pa.Array, f: Field) -> list[int]:
    """The rows of an array field's column whose outer lists (variable in Arrow) have another length than
    their dimension says (the innermost is fixed-size: a cast checks it)."""
    if f.array is None:
        return []
    dims = flowing(f).dims
    rows = pa.array(range(len(column)), pa.int64())
    bad: set[int] = set()
    level = column
    for dim in dims[:-1]:
        if dim.length is not None:
            wrong = pc.fill_null(pc.not_equal(pc.list_value_length(level), dim.length), False)
            bad.update(rows.filter(wrong).to_pylist())
        rows = rows.take(pc.list_parent_indices(level))
        level = pc.list_flatten(level)
    return sorted(bad)


def holds_single(f: Field) -> bool:
    """Whether the field holds ``single`` values (float32 columns would round what rows keep as doubles)."""
    return f.type == FieldType.SINGLE or (f.array is not None and flowing(f).element == FieldType.SINGLE)


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
