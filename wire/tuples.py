"""Tuples typed by their schema: checking rows, and reading them from text.

A tuple is a Python tuple of values in the schema's field order, with the
Borealis types mapped to Python values:

========== ===================================================
byte       int in -128..127
short      int in -32768..32767
int        int in -2**31..2**31-1
long       int in -2**63..2**63-1
single     float (ints are accepted and converted)
double     float (ints are accepted and converted)
string     str of at most ``size`` characters
timestamp  int, microseconds since the epoch
array      nested lists, one level per dimension (``byte(0...1, 0...2)``: two
           lists of three bytes; ``double(0...*)``: any number of doubles);
           from text, JSON (``[[1, 2, 3], [4, 5, 6]]``)
========== ===================================================

A ``nullable`` field's value may also be None (SQL's NULL, msgpack nil; in
text an empty value, or ``\\N`` for a string).

:class:`RowType` checks a whole batch in C with msgspec (the fast path: a
valid batch is decoded and checked in one call); only a batch with a bad row
falls back to row-by-row checking, to name every bad row's field and reason
while the good rows go on.

>>> from boreas.catalog.model import Field, FieldType, Schema
>>> rt = RowType(Schema("T", (Field("id", FieldType.INT), Field("name", FieldType.STRING, 3))))
>>> rt.check([[1, "abc"], [2, "toolong"], [3, "x"]])
([(1, 'abc'), (3, 'x')], [RowError(row=1, field='name', reason='string longer than 3 characters')])
>>> rt.from_text(["7", "ab"])
(7, 'ab')
"""

from __future__ import annotations

import datetime as dt
import json
import math
from collections.abc import Sequence
from dataclasses import replace
from typing import Annotated, Any

import msgspec

from boreas.catalog.arrays import flowing
from boreas.catalog.model import Field, FieldType, Schema
from boreas.catalog.words import counted

from .row_errors import RowError, SchemaMismatch, with_article

_INT_RANGES = {
    FieldType.BYTE: (-(2**7), 2**7 - 1),
    FieldType.SHORT: (-(2**15), 2**15 - 1),
    FieldType.INT: (-(2**31), 2**31 - 1),
    FieldType.LONG: (-(2**63), 2**63 - 1),
    FieldType.TIMESTAMP: (-(2**63), 2**63 - 1),
}


def _msgspec_type(f: Field) -> Any:
    if f.nullable:  # NULL: None in a row, msgpack nil
        return _msgspec_type(replace(f, nullable=False)) | None
    if f.array is not None:
        array = flowing(f)
        kind = _msgspec_type(Field(f.name, array.element, f.size))
        for dim in reversed(array.dims):
            length = dim.length
            kind = list[kind] if length is None else Annotated[list[kind], msgspec.Meta(min_length=length,
                                                                                        max_length=length)]
        return kind
    if f.type in _INT_RANGES:
        low, high = _INT_RANGES[f.type]
        return Annotated[int, msgspec.Meta(ge=low, le=high)]
    if f.type in (FieldType.SINGLE, FieldType.DOUBLE):
        return float
    return Annotated[str, msgspec.Meta(max_length=f.size)] if f.size else str


class RowType:
    """Checks and converts rows of one schema."""

    def __init__(self, schema: Schema):
        self.schema = schema
        self.fields = schema.fields
        row = tuple.__class_getitem__(tuple(_msgspec_type(f) for f in self.fields))  # tuple[int, str, ...]
        self._batch = msgspec.msgpack.Decoder(list[row])
        self._convert_type = list[row]

    # -- whole batches -------------------------------------------------------

    def decode(self, raw: bytes) -> tuple[list[tuple], list[RowError]]:
        """Rows from msgpack bytes (an array of arrays): fast path in C, row by row on a bad row."""
        try:
            return self._batch.decode(raw), []
        except msgspec.ValidationError:
            return self.check(msgspec.msgpack.decode(raw))
        except msgspec.DecodeError as exc:
            return [], [RowError(-1, "", f"batch is not a msgpack array of rows: {exc}")]

    def decode_payload(self, raw: bytes, fmt: int = 0) -> tuple[Any, list[RowError]]:
        """A batch's rows as its format holds them: msgpack rows (:meth:`decode`), or Arrow columns checked
        against the schema (a :class:`~boreas.wire.columns.Columns`, which stands for a list of rows)."""
        if not fmt:
            return self.decode(raw)
        from .columns import decode  # (pyarrow: only where batches are columns)

        try:
            return decode(raw, self.schema)
        except SchemaMismatch as exc:
            return [], [RowError(-1, exc.field, exc.reason)]

    def convert(self, rows: Sequence[Any]) -> list[tuple] | None:
        """Good rows as tuples, in C, or None if any row is bad (a caller that sends rows as they are then,
        for the receiver to name the bad ones, never checks row by row itself)."""
        try:
            return msgspec.convert(rows, self._convert_type)
        except msgspec.ValidationError:
            return None

    def check(self, rows: Sequence[Any]) -> tuple[list[tuple], list[RowError]]:
        """Good rows as tuples, and one error per bad row."""
        try:
            return msgspec.convert(rows, self._convert_type), []
        except msgspec.ValidationError:
            pass
        good: list[tuple] = []
        errors: list[RowError] = []
        for index, row in enumerate(rows):
            try:
                good.append(self.check_row(row))
            except SchemaMismatch as exc:
                errors.append(RowError(index, exc.field, exc.reason))
        return good, errors

    # -- one row -------------------------------------------------------------

    def check_row(self, row: Any) -> tuple:
        if isinstance(row, dict):
            row = self._from_mapping(row)
        if not isinstance(row, (list, tuple)):
            raise SchemaMismatch("", f"a row is an array of {len(self.fields)} values, not {type(row).__name__}")
        if len(row) != len(self.fields):
            raise SchemaMismatch("", f"row has {counted(len(row), 'value')}; schema {self.schema.name} has "
                                     f"{len(self.fields)} fields")
        return tuple(_check_value(f, v) for f, v in zip(self.fields, row))

    def _from_mapping(self, row: dict) -> list[Any]:
        missing = [f.name for f in self.fields if f.name not in row]
        if missing:
            raise SchemaMismatch(missing[0], "missing")
        extra = sorted(set(row) - {f.name for f in self.fields})
        if extra:
            raise SchemaMismatch(extra[0], f"not a field of schema {self.schema.name}")
        return [row[f.name] for f in self.fields]

    def from_text(self, values: Sequence[str]) -> tuple:
        """A row from text fields (CSV): numbers parsed, timestamps as ISO 8601 or microseconds."""
        if len(values) != len(self.fields):
            raise SchemaMismatch("", f"row has {counted(len(values), 'value')}; schema {self.schema.name} has "
                                     f"{len(self.fields)} fields")
        return tuple(_check_value(f, _parse_text(f, v)) for f, v in zip(self.fields, values))

    def as_dict(self, row: Sequence[Any]) -> dict[str, Any]:
        return {f.name: v for f, v in zip(self.fields, row)}


#: A nullable field's NULL in text (CSV): an empty value, or for a string field (whose empty value is the
#: empty string) this one, as PostgreSQL's COPY writes it.
_NULL_TEXT = "\\N"


def _parse_text(f: Field, text: str) -> Any:
    if f.array is not None:
        try:
            return json.loads(text)
        except ValueError:
            raise SchemaMismatch(f.name, f"{text[:40]!r} is not a JSON array (an array field's text, e.g. "
                                         f"[[1, 2], [3, 4]])") from None
    text = text.strip() if f.type != FieldType.STRING else text
    if f.nullable and (text == "" if f.type != FieldType.STRING else text == _NULL_TEXT):
        return None
    try:
        if f.type == FieldType.TIMESTAMP and not text.lstrip("-").isdigit():
            stamp = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
            if stamp.tzinfo is None:
                stamp = stamp.replace(tzinfo=dt.timezone.utc)
            return int(stamp.timestamp() * 1_000_000)
        if f.type in _INT_RANGES:
            return int(text)
        if f.type in (FieldType.SINGLE, FieldType.DOUBLE):
            return float(text)
    except ValueError:
        raise SchemaMismatch(f.name, f"{text!r} is not {with_article(f.type.value)}") from None
    return text



def _check_array(f: Field, value: Any) -> list:
    """An array field's value as nested lists of checked elements (their lengths as its dimensions say)."""
    array = flowing(f)
    element = Field(f.name, array.element, f.size)

    def level(value: Any, depth: int) -> Any:
        if depth == len(array.dims):
            return _check_value(element, value)
        if not isinstance(value, (list, tuple)):
            raise SchemaMismatch(f.name, f"expected {f.array} (nested lists), got {_describe(value)}")
        length = array.dims[depth].length
        if length is not None and len(value) != length:
            raise SchemaMismatch(f.name, f"dimension {depth + 1} of {f.array} holds {length} values, "
                                         f"got {len(value)}")
        return [level(v, depth + 1) for v in value]

    return level(value, 0)


def _check_value(f: Field, value: Any) -> Any:
    if value is None and f.nullable:
        return None
    if f.array is not None:
        return _check_array(f, value)
    if f.type in _INT_RANGES:
        if isinstance(value, bool) or not isinstance(value, int):
            if isinstance(value, float) and value.is_integer():
                value = int(value)
            else:
                raise SchemaMismatch(f.name, f"expected {f.type.value}, got {_describe(value)}")
        low, high = _INT_RANGES[f.type]
        if not low <= value <= high:
            raise SchemaMismatch(f.name, f"{value} is out of range for {f.type.value}")
        return value
    if f.type in (FieldType.SINGLE, FieldType.DOUBLE):
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise SchemaMismatch(f.name, f"expected {f.type.value}, got {_describe(value)}")
        value = float(value)
        if f.type == FieldType.SINGLE and math.isfinite(value) and abs(value) > 3.4028235e38:
            raise SchemaMismatch(f.name, f"{value} is out of range for single")
        return value
    if not isinstance(value, str):
        raise SchemaMismatch(f.name, f"expected string, got {_describe(value)}")
    if f.size and len(value) > f.size:
        raise SchemaMismatch(f.name, f"string longer than {f.size} characters")
    return value


def _describe(value: Any) -> str:
    return "null" if value is None else f"{type(value).__name__} {value!r}"[:60]
