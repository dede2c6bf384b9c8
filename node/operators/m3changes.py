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
stream's schema.  The values before the batch come from the same journals
(a key's first old value), so each changed row is emitted as a changelog:
its old row with weight -1, its new row with weight +1.  The box then emits
Arrow, which the links carry as it is.

Only a *plain* view (each value one map, or a numerator over a denominator
at the same keys) on the native backend is read so; anything else (a
general view, the Python backend) keeps ``Runtime.changes()``.  The rows
are the same, as a set of (row, weight): tests/test_columns.py compares the
two on random batches.  Their order within the batch differs (here all
retractions come first, then the new rows), and a view's keys are distinct
on each side, so no reader that applies the weights can tell.
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


def _first_old(native, name: str) -> pa.Table | None:
    """Each key map ``name``'s batch wrote, with its value before the batch (its first write's old value)."""
    journal = _journal(native, name)
    if journal is None:
        return None
    keys = [f"k{j}" for j in range(native.arity[name])]
    if not keys:
        return journal.slice(0, 1)
    first = journal.group_by(keys, use_threads=False).aggregate([("old", "first")])  # (named, not placed)
    return first.select(keys).append_column("old", first.column("old_first"))


def _changed_keys(native, name: str, first: pa.Table | None) -> pa.Table | None:
    """The keys of map ``name`` whose value the batch changed (its first old value against the value now)."""
    if first is None:
        return None
    keys = [f"k{j}" for j in range(native.arity[name])]
    now = _int64(native.get_many_raw(name, _interleaved([first.column(k).combine_chunks() for k in keys])
                                     if keys else array("q", [0]), len(first)))
    old = first.column("old").combine_chunks()
    if name in native.float_maps:
        differs = pc.not_equal(_doubles(old), _doubles(now))
    else:
        differs = pc.not_equal(old, now)
    return first.select(keys).filter(differs)


def view_changes(native, view, keys: tuple[tuple[str, str], ...], schema: Schema) -> Columns | None:
    """The changes the last batch made to plain ``view`` (an ``m3.ast.ViewDecl``) as a changelog
    :class:`Columns` of ``schema``: the old row of each changed key with weight -1 (if it was in the view),
    then its new row with weight +1 (if it is); None: nothing changed.  A row is in the view unless every
    value is 0 (the runtime's word for a row that left)."""
    maps = list(dict.fromkeys(m for c in view.columns for m in (c.numerator, c.denominator) if m))
    firsts = {m: _first_old(native, m) for m in maps}
    found = [t for t in (_changed_keys(native, m, firsts[m]) for m in maps) if t is not None and t.num_rows]
    if not found:
        return None
    changed = found[0] if len(found) == 1 else pa.concat_tables(found).group_by(
        found[0].column_names, use_threads=False).aggregate([])
    n = changed.num_rows
    if not n:
        return None
    codes = [changed.column(k).combine_chunks() for k in changed.column_names]
    flat = _interleaved(codes) if codes else array("q", [0] * n)
    target = arrow_schema(schema)
    key_columns = [_key_column(native, code, kind).cast(field.type) for code, (_, kind), field in zip(codes, keys, target)]
    now_bits = {m: _int64(native.get_many_raw(m, flat, n)) for m in maps}
    old_bits = {m: _old_bits(changed, firsts[m], now_bits[m]) for m in maps}
    value_fields = list(target)[len(keys):]
    new = _view_values(native, view, now_bits, value_fields)
    old = _view_values(native, view, old_bits, value_fields)
    new_in, old_in = _present(new), _present(old)
    same = pc.and_(pc.and_(new_in, old_in), _all_equal(old, new))
    leave, enter = pc.and_not(old_in, same), pc.and_not(new_in, same)
    parts = [pa.RecordBatch.from_arrays([c.filter(mask) for c in key_columns + values], schema=target)
             for mask, values in ((leave, old), (enter, new))]
    weights = pa.concat_arrays([pa.repeat(pa.scalar(-1, pa.int64()), parts[0].num_rows),
                                pa.repeat(pa.scalar(1, pa.int64()), parts[1].num_rows)])
    if not len(weights):
        return None
    batch = pa.Table.from_batches(parts, target).combine_chunks().to_batches()[0]
    return Columns(batch, weights=weights)


def _old_bits(changed: pa.Table, first: pa.Table | None, now: pa.Array) -> pa.Array:
    """A map's values before the batch at the ``changed`` keys (its journal's first old value where the batch
    wrote the key, else the value now), in ``changed``'s order."""
    if first is None:
        return now
    keys = changed.column_names
    if not keys:
        return first.column("old").combine_chunks()
    numbered = changed.append_column("__row", _arange(changed.num_rows))
    joined = numbered.join(first, keys, join_type="left outer", use_threads=False).sort_by("__row")
    old = joined.column("old").combine_chunks()
    return pc.if_else(pc.is_null(old), now, old) if old.null_count else old


def _view_values(native, view, bits: dict[str, pa.Array], fields: list[pa.Field]) -> list[pa.Array]:
    """The view's value columns from its maps' values (raw bits), cast to the out fields' types."""
    values = {m: _doubles(b) if m in native.float_maps else b for m, b in bits.items()}
    out = []
    for column, field in zip(view.columns, fields):
        value = values[column.numerator]
        if column.denominator is not None:
            den = values[column.denominator].cast(pa.float64())
            value = pc.if_else(pc.equal(den, pa.scalar(0.0)), pa.scalar(0.0),
                               pc.divide(value.cast(pa.float64()), den))
        out.append(value.cast(field.type, safe=False) if field.type != pa.float64() else value.cast(pa.float64()))
    return out


def _present(values: list[pa.Array]) -> pa.Array:
    """Rows with a value other than 0 (the rows in the view)."""
    mask = pc.not_equal(values[0], pa.scalar(0, values[0].type))
    for v in values[1:]:
        mask = pc.or_(mask, pc.not_equal(v, pa.scalar(0, v.type)))
    return mask


def _all_equal(a: list[pa.Array], b: list[pa.Array]) -> pa.Array:
    mask = pc.equal(a[0], b[0])
    for x, y in zip(a[1:], b[1:]):
        mask = pc.and_(mask, pc.equal(x, y))
    return mask


def _key_column(native, code: pa.Array, kind: str) -> pa.Array:
    if kind == "DATE":
        return pc.multiply(pc.subtract(code, _EPOCH_DAYS), _DAY)
    if kind == "STRING":
        return pc.take(pa.array(native.ids.strings, pa.string()), code)
    if kind == "FLOAT":
        return _doubles(code)
    return code
