"""The rows a batch changed in a plain view, read from the native backend's journals as Arrow columns.

``Runtime.changes()`` finds a view's changed rows key by key in Python: it
decodes every write of the batch's journal into a tuple, keeps each key's
value before the batch, reads the values after it and compares.  That is
per *write*, so for a view written by most events (Q3's revenue per order)
it cost about as much as the C triggers themselves.  This module does the
same in bulk over the raw int64 journal (``NativeMaps.last_raw``): the
journal as columns, each key's first old value by a group-by, the values
now by one ``get_many_raw`` call, the changed keys by one comparison, and
the view's out rows decoded column by column (day numbers to timestamps,
intern ids to strings, bits to doubles) into a :class:`Columns` of the out
stream's schema.  The box then emits Arrow, which the links carry as it is.

Only a *plain* view (each value one map, or a numerator over a denominator
at the same keys) on the native backend is read so; anything else (a
general view, the Python backend) keeps ``Runtime.changes()``.  The rows
are the same, as a set: tests/test_columns.py compares the two on random
batches.  Their order within the batch differs (by first write here), and
a view's keys are distinct, so no reader can tell.
"""

from __future__ import annotations

import datetime as dt
from array import array

import pyarrow as pa
import pyarrow.compute as pc

from boreas.catalog.model import Schema
from boreas.wire.columns import Columns, arrow_schema

_EPOCH = dt.date(1970, 1, 1).toordinal()
_DAY_US = 86_400_000_000
_ZERO = pa.scalar(0, pa.int64())
_EPOCH_DAYS = pa.scalar(_EPOCH, pa.int64())
_DAY = pa.scalar(_DAY_US, pa.int64())


def _int64(data: array) -> pa.Array:
    return pa.Array.from_buffers(pa.int64(), len(data), [None, pa.py_buffer(data)])


def _doubles(bits: pa.Array) -> pa.Array:
    """int64 bits as the doubles they are (a view of the same buffer)."""
    return pa.Array.from_buffers(pa.float64(), len(bits), [None, bits.buffers()[1]], offset=bits.offset)


def _arange(n: int) -> pa.Array:
    return pc.indices_nonzero(pa.nulls(n, pa.bool_()).is_null()).cast(pa.int64())


def _interleaved(columns: list[pa.Array]) -> array:
    """Columns of equal length as one int64 ``array``, row after row (``k0 k1 .. k0 k1 ..``): keys for C."""
    if len(columns) == 1:
        flat = columns[0].cast(pa.int64())
    else:
        rows, width = len(columns[0]), len(columns)
        position = _arange(rows * width)
        row = pc.divide(position, pa.scalar(width, pa.int64()))
        column = pc.subtract(position, pc.multiply(row, pa.scalar(width, pa.int64())))
        index = pc.add(pc.multiply(column, pa.scalar(rows, pa.int64())), row)
        flat = pc.take(pa.concat_arrays([c.cast(pa.int64()) for c in columns]), index)
    out = array("q")
    out.frombytes(memoryview(flat.buffers()[1])[flat.offset * 8:(flat.offset + len(flat)) * 8])
    return out


def _journal(native, name: str) -> pa.Table | None:
    """The batch's writes of map ``name``: key code columns ``k0..``, then ``old`` (bits), in write order."""
    flat = native.last_raw(name)
    if not flat:
        return None
    arity = native.arity[name]
    rows = pa.FixedSizeListArray.from_arrays(_int64(flat), arity + 1)
    return pa.table({**{f"k{j}": pc.list_element(rows, j) for j in range(arity)},
                     "old": pc.list_element(rows, arity)})


def _changed_keys(native, name: str) -> pa.Table | None:
    """The keys of map ``name`` whose value the batch changed (its first old value against the value now)."""
    journal = _journal(native, name)
    if journal is None:
        return None
    keys = [f"k{j}" for j in range(native.arity[name])]
    if not keys:
        first = journal.slice(0, 1)
    else:  # (the result's columns are named, not placed: "old_first" and the keys)
        first = journal.group_by(keys, use_threads=False).aggregate([("old", "first")])
        first = first.select(keys).append_column("old", first.column("old_first"))
    now = _int64(native.get_many_raw(name, _interleaved([first.column(k).combine_chunks() for k in keys])
                                     if keys else array("q", [0]), len(first)))
    old = first.column("old").combine_chunks()
    if name in native.float_maps:
        differs = pc.not_equal(_doubles(old), _doubles(now))
    else:
        differs = pc.not_equal(old, now)
    return first.select(keys).filter(differs)


def view_changes(native, view, keys: tuple[tuple[str, str], ...], schema: Schema) -> Columns | None:
    """The out rows (key columns, then the values now; 0: the row left) of the keys the last batch changed in
    plain ``view`` (an ``m3.ast.ViewDecl``), as a :class:`Columns` of ``schema``; None: nothing changed."""
    maps = list(dict.fromkeys(m for c in view.columns for m in (c.numerator, c.denominator) if m))
    found = [t for t in (_changed_keys(native, m) for m in maps) if t is not None and t.num_rows]
    if not found:
        return None
    changed = found[0] if len(found) == 1 else pa.concat_tables(found).group_by(
        found[0].column_names, use_threads=False).aggregate([])
    if not changed.num_rows:
        return None
    codes = [changed.column(k).combine_chunks() for k in changed.column_names]
    flat = _interleaved(codes) if codes else array("q", [0] * changed.num_rows)
    target = arrow_schema(schema)
    out: list[pa.Array] = []
    for code, (_, kind), field in zip(codes, keys, target):
        out.append(_key_column(native, code, kind).cast(field.type))
    values = {m: _value_column(native, m, flat, changed.num_rows) for m in maps}
    for column, field in zip(view.columns, list(target)[len(keys):]):
        value = values[column.numerator]
        if column.denominator is not None:
            den = values[column.denominator].cast(pa.float64())
            value = pc.if_else(pc.equal(den, pa.scalar(0.0)), pa.scalar(0.0),
                               pc.divide(value.cast(pa.float64()), den))
        out.append(value.cast(field.type, safe=False) if field.type != pa.float64() else value.cast(pa.float64()))
    return Columns(pa.RecordBatch.from_arrays(out, schema=target))


def _key_column(native, code: pa.Array, kind: str) -> pa.Array:
    if kind == "DATE":
        return pc.multiply(pc.subtract(code, _EPOCH_DAYS), _DAY)
    if kind == "STRING":
        return pc.take(pa.array(native.ids.strings, pa.string()), code)
    if kind == "FLOAT":
        return _doubles(code)
    return code


def _value_column(native, name: str, keys: array, n: int) -> pa.Array:
    bits = _int64(native.get_many_raw(name, keys, n))
    return _doubles(bits) if name in native.float_maps else bits
