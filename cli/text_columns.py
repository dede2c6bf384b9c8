"""Typing columns of text (a CSV file's values) by a stream's schema, a batch at a time.

A CSV file is read with every column as text, not with the stream's Arrow
types: a value Arrow cannot parse (``abc`` in an ``int`` column) would
otherwise end the whole read, where ``boreas publish`` refuses that one row,
naming it, and goes on.  Each batch is then typed in Arrow (casts, a trim, a
regular expression: no value is touched in Python); a batch Arrow cannot
type whole (a bad value, or text Arrow reads otherwise than Python does:
``+7``, ``1_000``, a timestamp in a mixed form) is typed row by row with
:meth:`~boreas.wire.tuples.RowType.from_text`, the row path's rules and
messages, so the two paths accept exactly the same values.

A nullable field's empty value (``\\N`` for a string) is NULL, as the row path reads it.

Timestamps may be microseconds since the epoch or ISO 8601 (naive means
UTC), as :meth:`~boreas.wire.tuples.RowType.from_text` reads them.  An
array field's value is JSON (``[[1, 2, 3], [4, 5, 6]]``), read row by row.

>>> from boreas.catalog.model import Field, FieldType, Schema
>>> s = Schema("T", (Field("n", FieldType.INT), Field("at", FieldType.TIMESTAMP), Field("s", FieldType.STRING, 2)))
>>> text = pa.record_batch({"n": [" 7", "8"], "at": ["1970-01-01T00:00:01Z", "2000000"], "s": ["ab", "c"]})
>>> batch, problems = typed(text, s)
>>> batch.to_pylist(), problems
([{'n': 7, 'at': 1000000, 's': 'ab'}, {'n': 8, 'at': 2000000, 's': 'c'}], [])
>>> batch, problems = typed(pa.record_batch({"n": ["1", "x"], "at": ["0", "0"], "s": ["", "abc"]}), s)
>>> batch.to_pylist(), problems
([{'n': 1, 'at': 0, 's': ''}], [(1, "n: 'x' is not an int")])
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from boreas.catalog.model import FieldType, Schema
from boreas.wire.columns import arrow_schema
from boreas.wire.tuples import RowType, SchemaMismatch

#: The largest finite ``single`` (float32), as the row path checks it.
_SINGLE_MAX = 3.4028235e38


class Untyped(ValueError):
    """Arrow cannot type this column as a whole: the batch goes row by row."""


def typed(text: pa.RecordBatch, schema: Schema) -> tuple[pa.RecordBatch, list[tuple[int, str]]]:
    """``text`` (string columns in the schema's field order) as a batch of the stream's Arrow schema, and the
    rows that cannot be typed, ``(row in the batch, reason)``; those rows are left out of the batch."""
    target = arrow_schema(schema)
    try:
        columns = [_column(_nulls(text.column(i), f.type) if f.nullable else text.column(i), f.type, f.size, want.type)
                   for i, (f, want) in enumerate(zip(schema.fields, target))]
    except Untyped:
        return _row_by_row(text, schema)
    return pa.RecordBatch.from_arrays(columns, schema=target), []


def _nulls(column: pa.Array, kind: FieldType | None) -> pa.Array:
    """A nullable field's NULLs as :meth:`~boreas.wire.tuples.RowType.from_text` reads them: an empty value
    (after the trim), or ``\\N`` for a string."""
    if kind is None:
        return column
    null = pc.equal(column, "\\N") if kind == FieldType.STRING else pc.equal(pc.utf8_trim_whitespace(column), "")
    return pc.if_else(null, pa.scalar(None, column.type), column)


def _column(column: pa.Array, kind: FieldType | None, size: int | None, want: pa.DataType) -> pa.Array:
    if kind is None:  # an array field's JSON text: row by row (RowType.from_text checks every dimension)
        raise Untyped()
    if kind == FieldType.STRING:
        if size and len(column) and pc.max(pc.utf8_length(column)).as_py() > size:
            raise Untyped()
        return column
    column = pc.utf8_trim_whitespace(column)
    try:
        if kind == FieldType.TIMESTAMP:
            return _timestamps(column)
        if kind == FieldType.SINGLE:
            wide = column.cast(pa.float64())
            if len(wide) and pc.max(pc.abs(pc.if_else(pc.is_finite(wide), wide, 0.0))).as_py() > _SINGLE_MAX:
                raise Untyped()
            return wide.cast(want)
        return column.cast(want, safe=True)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        raise Untyped() from None


def _timestamps(column: pa.Array) -> pa.Array:
    """Microseconds as they are, or ISO 8601 all naive (UTC) or all with a zone; anything else: row by row."""
    if pc.all(pc.match_substring_regex(column, r"^-?\d+$")).as_py() is not False:
        return column.cast(pa.int64())
    for kind in (pa.timestamp("us"), pa.timestamp("us", "UTC")):
        try:
            return column.cast(kind).cast(pa.int64())
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            continue
    raise Untyped()


def _row_by_row(text: pa.RecordBatch, schema: Schema) -> tuple[pa.RecordBatch, list[tuple[int, str]]]:
    row_type = RowType(schema)
    rows, problems = [], []
    for index, values in enumerate(zip(*(c.to_pylist() for c in text.columns))):
        try:
            rows.append(row_type.from_text(values))
        except SchemaMismatch as exc:
            problems.append((index, str(exc)))
    target = arrow_schema(schema)
    columns = [pa.array([row[i] for row in rows], f.type) for i, f in enumerate(target)]
    return pa.RecordBatch.from_arrays(columns, schema=target), problems
