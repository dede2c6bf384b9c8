"""The rows a batch changed in a plain view, read from the native backend as Arrow columns: a changelog.

``Runtime.changes()`` finds a view's changed rows key by key in Python
(a tuple per journal write), which for a view written by most events
(Q3's revenue per order) cost about as much as the C triggers.  Here one C
call (``NativeMaps.changed``, ``rt_changes`` in :mod:`boreas.m3.runtime.native.crt_api`)
walks the last batch's journals of the view's maps and returns each changed
key once with every map's value before the batch (its first journal record
there) and now, as int64 buffers laid out column by column.  This module
wraps those buffers as Arrow arrays without copying them and makes the
view's out rows with a fixed handful of vectorised kernels per batch: the
value columns (bits as doubles, a quotient for an average), which rows were
in the view and are now, key codes decoded (day numbers to timestamps,
intern ids to strings through a cached Arrow array of the intern table).
Each changed row is emitted as its old row with weight -1 (if it was in the
view), then its new row with weight +1 (if it is), as one
:class:`Columns` of the out stream's schema, which the links carry as it is.
Where every value of the view is one map's value of its out field's type
(any SUM or COUNT: no quotient, no narrowing cast), the maps' values alone
say which row leaves and which enters, so C lays the changelog out
(``NativeMaps.changelog``, ``rt_changelog``) and its buffers become the out
columns as they are: no kernel but the keys' decoding.

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

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from boreas.catalog.model import Schema
from boreas.m3.nullable import null_keys, null_values, shown_columns, zero_rows
from boreas.wire.columns import Columns, arrow_schema

_EPOCH = dt.date(1970, 1, 1).toordinal()
_DAY_US = 86_400_000_000
_ZERO_F = pa.scalar(0.0, pa.float64())
_ONE = pa.scalar(1, pa.int64())


class StringTable:
    """The runtime's intern table as an Arrow string array, extended as it grows (ids to strings by ``take``).

    The table only grows, so the array is rebuilt only for a new table (a
    restored runtime) and extended by the strings interned since last asked.

    >>> table = StringTable()
    >>> table.array(["a", "b"]).to_pylist(), table.array(["a", "b", "c"]).to_pylist()
    (['a', 'b'], ['a', 'b', 'c'])
    """

    def __init__(self):
        self._of: list[str] | None = None
        self._array = pa.array([], pa.string())

    def array(self, strings: list[str]) -> pa.Array:
        if strings is not self._of:
            self._of, self._array = strings, pa.array(strings, pa.string())
        elif len(strings) > len(self._array):
            more = pa.array(strings[len(self._array):], pa.string())
            self._array = pa.concat_arrays([self._array, more])
        return self._array


def _column(data: array | bytes, n: int, at: int, kind: pa.DataType = pa.int64()) -> pa.Array:
    """``n`` int64 slots of ``data`` from slot ``at`` as an Arrow array of ``kind`` (int64 or float64), no copy."""
    return pa.Array.from_buffers(kind, n, [None, pa.py_buffer(data)], offset=at)


def view_changes(native, view, keys: tuple[tuple[str, str], ...], schema: Schema,
                 strings: StringTable | None = None) -> Columns | None:
    """The changes the last batch made to plain ``view`` (an ``m3.ast.ViewDecl``) as a changelog
    :class:`Columns` of ``schema``: the old row of each changed key with weight -1 (if it was in the view),
    then its new row with weight +1 (if it is); None: nothing changed.  A row is in the view unless every
    value is 0 (the runtime's word for a row that left)."""
    maps = list(dict.fromkeys(m for c in view.columns for m in (c.numerator, c.denominator) if m))
    target = arrow_schema(schema)
    shown = view.output_keys  # an internal key (a GROUP BY column not selected) is no out field
    value_fields = list(target)[len(shown):]
    kinds = {m: pa.float64() if m in native.float_maps else pa.int64() for m in maps}
    if not zero_rows([c.name for c in view.columns]) and all(
            c.denominator is None and kinds[c.numerator] == f.type for c, f in zip(view.columns, value_fields)):
        return _as_laid_out(native, view, maps, kinds, keys, target, strings)
    return _from_changes(native, view, maps, kinds, keys, target, strings)


def _from_changes(native, view, maps: list[str], kinds: dict, keys: tuple[tuple[str, str], ...],
                  target: pa.Schema, strings: StringTable | None) -> Columns | None:
    """:func:`view_changes` of any plain view (a quotient, a value cast to its out field): the changed keys
    with their maps' values before and now (``NativeMaps.changed``), the view's values, and which rows left
    and entered, by kernels."""
    shown = view.output_keys
    names = [c.name for c in view.columns]
    counts = dict(null_values(names))  # a value column NULL where its hidden count is 0 (docs/m3.md "NULLs")
    types = [pa.int64()] * len(names)
    for i, f in zip(shown_columns(names), list(target)[len(shown):]):
        types[i] = f.type
    changed = native.changed(maps)
    n = changed.n
    if not n:
        return None
    stride = changed.stride
    now, before = {}, {}
    for j, m in enumerate(maps):
        now[m] = _column(changed.news, n, j * stride, kinds[m])
        before[m] = _column(changed.olds, n, j * stride, kinds[m])
    new = _view_values(view, now, types)
    old = _view_values(view, before, types)
    old_in, new_in = _present(old), _present(new)
    same = pc.and_(pc.and_(new_in, old_in), _all_equal(old, new))
    leave = pc.indices_nonzero(pc.and_not(old_in, same))
    enter = pc.indices_nonzero(pc.and_not(new_in, same))
    out_n = len(leave) + len(enter)
    if not out_n:
        return None
    rows = pa.concat_arrays([leave, enter])
    table = strings if strings is not None else StringTable()
    columns = [_key_column(native, _column(changed.keys, n, i * stride).take(rows), keys[i][1], table).cast(field.type)
               for i, field in zip(shown, target)]
    columns = _nulls(view, columns, lambda j: _column(changed.keys, n, j * stride).take(rows))
    values = [pa.concat_arrays([o.take(leave), v.take(enter)]) for o, v in zip(old, new)]
    for i, j in counts.items():
        values[i] = pc.if_else(pc.equal(values[j], pa.scalar(0, values[j].type)), pa.scalar(None, values[i].type),
                               values[i])
    columns += [values[i] for i in shown_columns(names)]
    weights = pa.concat_arrays([pa.repeat(pa.scalar(-1, pa.int64()), len(leave)),
                                pa.repeat(pa.scalar(1, pa.int64()), len(enter))])
    return Columns(pa.RecordBatch.from_arrays(columns, schema=target), weights=weights)


def _as_laid_out(native, view, maps: list[str], kinds: dict, keys: tuple[tuple[str, str], ...],
                 target: pa.Schema, strings: StringTable | None) -> Columns | None:
    """:func:`view_changes` of a view whose values are its maps' values, of its out fields' types: the C side
    lays the changelog out (``NativeMaps.changelog``), and its buffers become the columns as they are (keys
    decoded: a DATE or STRING key is one kernel, an INT key a cast where the out field is narrower)."""
    log = native.changelog(maps)
    n, stride = log.n, log.stride
    if not n:
        return None
    table = strings if strings is not None else StringTable()
    columns = [_cast(_key_column(native, _column(log.keys, n, i * stride), keys[i][1], table), field.type)
               for i, field in zip(view.output_keys, target)]
    columns = _nulls(view, columns, lambda j: _column(log.keys, n, j * stride))
    values = {m: _column(log.vals, n, j * stride, kinds[m]) for j, m in enumerate(maps)}
    columns += [values[c.numerator] for c in view.columns]
    return Columns(pa.RecordBatch.from_arrays(columns, schema=target), weights=_column(log.weights, n, 0))


def _cast(column: pa.Array, kind: pa.DataType) -> pa.Array:
    """``column`` as ``kind``: as it is where it is of that type; an int64 column narrowed to a smaller signed
    integer by numpy when every value fits (a pyarrow compute call costs several times a numpy one on a
    changelog's thousand rows); anything else (a value that does not fit: refused as before) by Arrow's safe
    cast.

    >>> _cast(pa.array([1, -2], pa.int64()), pa.int32()).to_pylist()
    [1, -2]
    """
    if column.type == kind:
        return column
    if column.type == pa.int64() and pa.types.is_signed_integer(kind) and not column.null_count and len(column):
        values = column.to_numpy(zero_copy_only=True)
        limits = np.iinfo(np.dtype(kind.to_pandas_dtype()))
        if limits.min <= values.min() and values.max() <= limits.max:
            return _wrap(values.astype(limits.dtype), kind)
    return column.cast(kind)


def _wrap(values: np.ndarray, kind: pa.DataType) -> pa.Array:
    """A contiguous numpy array of fixed-width values, null-free, as an Arrow array of ``kind`` over its buffer."""
    return pa.Array.from_buffers(kind, len(values), [None, pa.py_buffer(values)])


def _nulls(view, columns: list[pa.Array], codes) -> list[pa.Array]:
    """The key columns with a nullable key's rows null where its internal indicator key (``codes(position)``)
    is 1 (:func:`boreas.m3.nullable.null_keys`, docs/m3.md "NULLs"); one kernel per nullable key."""
    pairs = null_keys(view.keys, view.internal)
    if not pairs:
        return columns
    at = {i: k for k, i in enumerate(view.output_keys)}
    out = list(columns)
    for i, j in pairs:
        if i in at:
            col = out[at[i]]
            out[at[i]] = pc.if_else(pc.equal(codes(j), _ONE), pa.scalar(None, col.type), col)
    return out


def _view_values(view, values: dict[str, pa.Array], types: list[pa.DataType]) -> list[pa.Array]:
    """The view's value columns from its maps' values, cast to the out fields' types (a hidden count: int64)."""
    out = []
    for column, kind in zip(view.columns, types):
        value = values[column.numerator]
        if column.denominator is not None:
            den = values[column.denominator].cast(pa.float64())
            value = pc.if_else(pc.equal(den, _ZERO_F), _ZERO_F, pc.divide(value.cast(pa.float64()), den))
        out.append(value if value.type == kind else value.cast(kind, safe=False))
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


def _key_column(native, code: pa.Array, kind: str, strings: StringTable) -> pa.Array:
    """Key codes as the out stream's values: day numbers as timestamps, ids as strings, bits as doubles."""
    if kind == "DATE":  # (a day number times a day's microseconds: far inside int64 for any date)
        return _wrap((code.to_numpy(zero_copy_only=True) - _EPOCH) * _DAY_US, pa.int64())
    if kind == "STRING":
        return pc.take(strings.array(native.ids.strings), code)
    if kind == "FLOAT":
        return pa.Array.from_buffers(pa.float64(), len(code), [None, code.buffers()[1]], offset=code.offset)
    return code
