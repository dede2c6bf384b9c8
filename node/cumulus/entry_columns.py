"""Map entries as Arrow columns: what Push and Chunk messages carry (docs/cumulus.md §3.12).

A Push (the entries a serving member pushes to a writer for a version) and a
Chunk (a moving segment's entries, :mod:`~boreas.node.cumulus.precopy`) carry
their entries per map as one Arrow IPC stream of one record batch: a column
per key position (``k0``, ``k1``, ...) and the values (``v``).  Columns are
made from the key and value lists in bulk (``pyarrow.array`` over a list, a
C loop; a tuple key list is transposed by ``zip(*keys)``), and decoded the
same way.  Types are the values' own, as pyarrow infers them: ints
``int64``, floats ``double``, strings ``string``, DATEs ``date32`` (decoded
as ``datetime.date``, so no day-number codec is needed), naive timestamps
``timestamp``, a missing value a null.  (Converting through numpy, or with
the map's declared type, was measured no faster: docs/cumulus.md §3.12.)

Exactness comes first.  pyarrow's inference changes some columns silently
(ints mixed with floats become floats; a date beside a datetime, or an int
beside a date, becomes a date; a naive datetime beside an aware one becomes
UTC), so an inferred column is taken as it is only when it is ``int64``,
``string`` or ``bool`` (which pyarrow infers only from values all of that
type) or when the values, None aside, are all of one Python type (and no
datetime carries a time zone).  Any other column -- those, and ints beyond
64 bits -- travels as tagged text (a type letter and the value's text),
marked in the field's metadata, and reads back to the same Python values
(None, bool, int, float, str, date, datetime).  That path costs Python per
entry and is rare.  A value of any other type in such a column is refused
by the *sender*, naming its type; a receiver never fails on a column.

>>> item = encode("m", [[1, 2], [dt.date(1995, 3, 15), None]], [2.5, 7])
>>> item[0], type(item[1])
('m', <class 'bytes'>)
>>> decode(item)
('m', [[1, 2], [datetime.date(1995, 3, 15), None]], [2.5, 7])
>>> decode(encode("big", [["a"]], [2 ** 70]))
('big', [['a']], [1180591620717411303424])
>>> decode(encode("mixed", [[None, dt.date(2020, 1, 1), 1]], [True, 1, 2.0]))
('mixed', [[None, datetime.date(2020, 1, 1), 1]], [True, 1, 2.0])
"""

from __future__ import annotations

import datetime as dt

import numpy as np
import pyarrow as pa

TAGGED = {b"boreas": b"tagged"}  # a column sent as tagged text (see the module's docstring)

#: inferred Arrow types pyarrow makes only from values all of one Python type (None aside): no check needed
_PURE = (pa.int64(), pa.string(), pa.bool_())
_EPOCH = dt.date(1970, 1, 1).toordinal()  # a DATE code is its day number (toordinal); date32 counts from 1970


def _column(values: list, name: str) -> tuple[pa.Array, pa.Field]:
    """``values`` as an Arrow column (in bulk), or as tagged text where Arrow would change them."""
    column = None
    try:
        column = pa.array(values)
    except (OverflowError, pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError):
        column = None
    if column is not None and column.type not in _PURE:  # (a C-speed scan of the values' types)
        kinds = set(map(type, values))
        kinds.discard(type(None))
        if len(kinds) > 1 or (pa.types.is_timestamp(column.type) and _aware(values)):
            column = None
    if column is None:
        return pa.array(list(map(_tag, values)), pa.string()), pa.field(name, pa.string(), metadata=TAGGED)
    return column, pa.field(name, column.type)


def _aware(values: list) -> bool:
    """Whether any datetime of ``values`` has a time zone (pyarrow makes it naive UTC beside naive ones, or a
    zone-typed column that reads back in another ``tzinfo``): per entry, timestamp columns only."""
    return any(v is not None and v.tzinfo is not None for v in values)


def _values(column: pa.Array, field: pa.Field) -> list:
    """A column decoded to Python values, in bulk (tagged text: per entry)."""
    if field.metadata == TAGGED:
        return [_untag(s) for s in column.to_pylist()]
    if column.null_count == 0 and (pa.types.is_integer(column.type) or pa.types.is_floating(column.type)):
        return column.to_numpy().tolist()  # (faster than to_pylist for numbers)
    return column.to_pylist()


def _tag(value) -> str:
    """``value`` as tagged text: a type letter, then its text (:func:`_untag` reads it back exactly)."""
    kind = type(value)
    if value is None:
        return "n"
    if kind is bool:
        return "b1" if value else "b0"
    if kind is int:
        return f"i{value}"
    if kind is float:
        return f"f{value!r}"
    if kind is str:
        return f"s{value}"
    if kind is dt.datetime:
        return f"t{value.isoformat()}"
    if kind is dt.date:
        return f"d{value.isoformat()}"
    raise TypeError(f"a map entry of type {kind.__name__} ({value!r}) cannot travel in a Push or Chunk beside "
                    f"values of other types")


def _untag(text: str):
    """A value from its :func:`_tag` text."""
    kind, rest = text[0], text[1:]
    if kind == "n":
        return None
    if kind == "b":
        return rest == "1"
    if kind == "i":
        return int(rest)
    if kind == "f":
        return float(rest)
    if kind == "s":
        return rest
    if kind == "t":
        return dt.datetime.fromisoformat(rest)
    return dt.date.fromisoformat(rest)


def encode(name: str, key_columns: list[list], values: list) -> list:
    """Map ``name``'s entries, as ``[name, IPC bytes]``: ``key_columns`` one list per key position."""
    arrays, fields = [], []
    for i, col in enumerate(key_columns):
        array, field = _column(col, f"k{i}")
        arrays.append(array)
        fields.append(field)
    array, field = _column(values, "v")
    arrays.append(array)
    fields.append(field)
    return _ipc(name, pa.RecordBatch.from_arrays(arrays, schema=pa.schema(fields)))


def encode_exported(exported) -> list:
    """As :func:`encode`, from a native map's entries as column buffers
    (``boreas.m3.runtime.native.export.Exported``): each key column's codes wrapped as the Arrow column
    :func:`encode` makes of the same values (INT ``int64``, FLOAT ``double`` from its bits, DATE ``date32``
    from its day number, STRING ``string`` by a ``take`` from the intern table), the values ``int64`` or
    ``double``: no Python object per entry.  (All values of such a column are of one type, so none needs the
    tagged text.)"""
    n = len(exported)
    arrays = [_code_column(codes, kind, exported.strings, n) for codes, kind in zip(exported.keys, exported.key_types)]
    arrays.append(_numbers(exported.values, pa.float64() if exported.values.dtype == np.float64 else pa.int64()))
    fields = [pa.field(f"k{i}", a.type) for i, a in enumerate(arrays[:-1])] + [pa.field("v", arrays[-1].type)]
    return _ipc(exported.name, pa.RecordBatch.from_arrays(arrays, schema=pa.schema(fields)))


class _StringArray:
    """The intern table as an Arrow string array, extended as it grows (it only grows); one per table."""

    def __init__(self) -> None:
        self.of: list[str] | None = None
        self.array = pa.array([], pa.string())

    def take(self, strings: list[str], ids: pa.Array) -> pa.Array:
        if strings is not self.of:
            self.of, self.array = strings, pa.array(strings, pa.string())
        elif len(strings) > len(self.array):
            self.array = pa.concat_arrays([self.array, pa.array(strings[len(self.array):], pa.string())])
        return self.array.take(ids)


_STRINGS: dict[int, _StringArray] = {}  # by the intern table's id (a node's runtimes each have one; few kept)


def _strings_of(strings: list[str]) -> _StringArray:
    got = _STRINGS.get(id(strings))
    if got is None or got.of is not strings:
        if len(_STRINGS) >= 16:
            del _STRINGS[next(iter(_STRINGS))]
        got = _STRINGS[id(strings)] = _StringArray()
    return got


def _code_column(codes: np.ndarray, kind: str, strings: list[str], n: int) -> pa.Array:
    """One key column's int64 codes as the Arrow column of its values."""
    if kind == "FLOAT":
        return _numbers(codes, pa.float64())
    if kind == "DATE":
        return _numbers((codes - _EPOCH).astype(np.int32), pa.date32())
    if kind == "STRING":
        return _strings_of(strings).take(strings, _numbers(codes, pa.int64()))
    return _numbers(codes, pa.int64())


def _numbers(values: np.ndarray, kind: pa.DataType) -> pa.Array:
    """A numpy array's buffer as an Arrow column of ``kind`` (of the same width), without a copy (and without
    ``pyarrow.array``'s numpy path, which imports pandas the first time)."""
    values = np.ascontiguousarray(values)
    return pa.Array.from_buffers(kind, len(values), [None, pa.py_buffer(values)])


def _ipc(name: str, batch: pa.RecordBatch) -> list:
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


def encode_tuples(name: str, keys: list[tuple], values: list, arity: int) -> list:
    """As :func:`encode`, from keys as tuples of ``arity`` values."""
    return encode(name, [list(c) for c in zip(*keys)] if keys else [[] for _ in range(arity)], values)


def decode_tuples(item: list) -> tuple[str, list[tuple], list]:
    """``(name, keys as tuples, values)`` of an :func:`encode`\\ d item."""
    name, columns, values = decode(item)
    return name, list(zip(*columns)) if columns else [()] * len(values), values


def encode_stored(name: str, keys: list, values: list, arity: int) -> list:
    """As :func:`encode`, from keys in a map store's form: one value (``arity`` 1), else a tuple."""
    return encode(name, [keys], values) if arity == 1 else encode_tuples(name, keys, values, arity)


def decode_stored(item: list) -> tuple[str, list, list]:
    """``(name, keys in a map store's form, values)`` of an :func:`encode`\\ d item."""
    name, columns, values = decode(item)
    if len(columns) == 1:
        return name, columns[0], values
    return name, list(zip(*columns)) if columns else [()] * len(values), values


def size(item: list) -> int:
    """How many entries an :func:`encode`\\ d item holds (reads the IPC stream's batch header only)."""
    return pa.ipc.open_stream(item[1]).read_next_batch().num_rows
