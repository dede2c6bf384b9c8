"""An Arrow batch as an M3 relation's columns: what an ``m3`` box hands its runtime without making a row.

The M3 runtime takes a relation's events column by column
(``Runtime.apply_grouped_columns``): an int64 column crosses into the
native backend's C code as it is (INT values, DATE values as day numbers,
STRING values as the ids of the runtime's intern table), a double column
likewise (FLOAT).  This module makes those columns from Arrow columns with
vectorised kernels, as views (``memoryview``) over the Arrow buffers (no copy: an
int64 column that came in the batch is read by C where the frame put it), so
no Python object is made per row:

* integers are widened to int64 and floats to float64, a DATE column
  (timestamps in microseconds on the wire) becomes day numbers
  (``date.toordinal()``) by a floor division, each by one numpy call over a
  view of the Arrow buffer (a pyarrow compute call costs 3-4x as much on a
  batch of 20,000: 24 against 6 us for a widening, 97 against 23 for the
  day numbers, which took four Arrow kernels); an int64 or float64 column
  goes as it came;
* a STRING column is dictionary-encoded, its distinct values interned once
  (``Runtime.string_ids``), and the ids taken by index.  On the Python
  backend, which keeps strings as strings, the column is handed over as a
  list of strings instead.  A STRING column of a stream that no trigger
  reads (:func:`unread_strings`: Nexmark's e-mail addresses and item
  descriptions in a query of ids and names) is handed over as ``''`` in
  every row, never interned: the intern table is never emptied, so
  interning values nothing reads grew the box's memory with every distinct
  value of an unbounded stream, however many windows had closed.

A ``sign-field`` splits the batch into inserts (+1) and deletes (-1) by a
filter; other signs are counted as ignored, as on the row path.  A
changelog batch's weights (:attr:`Columns.weights`) split it the same way
and multiply the sign field's sign; a weight of n (or -n) enters (leaves)
n times, so its row is repeated.

>>> import pyarrow as pa
>>> from array import array
>>> col = pa.array([0, 86_400_000_000 * 2 + 5, -1], pa.int64())
>>> list(day_numbers(col)) == [719163, 719165, 719162]
True
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from boreas.m3.ast import Program, variables
from boreas.m3.boxtype import PortPlan
from boreas.m3.nullable import indicator
from boreas.wire.columns import Columns

from . import m3rows_distinct

_EPOCH = dt.date(1970, 1, 1).toordinal()
_DAY_US = 86_400_000_000


def _array(column: pa.Array, typecode: str) -> memoryview:
    """A null-free int64 or float64 Arrow array's values as a ``memoryview`` of ``typecode`` over its buffer:
    no copy (the view keeps the buffer alive; M3 reads it as it reads an ``array``, ``codes.packed``)."""
    width = 8
    data = column.buffers()[1]
    return memoryview(data)[column.offset * width:(column.offset + len(column)) * width].cast(typecode)


# Arrow scalars made once: a Python number given to a compute function is converted on every call, and
# pyarrow then tries to import pandas and dateutil each time (a sys.path search apiece where they are absent).
_ONE, _MINUS_ONE, _NOUGHT = (pa.scalar(v, pa.int64()) for v in (1, -1, 0))


def _numbers(column: pa.Array) -> np.ndarray | None:
    """A null-free integer, floating or timestamp column's values as numpy over its Arrow buffer (no copy;
    timestamps as int64); None for any other type."""
    kind = column.type
    if not (pa.types.is_integer(kind) or pa.types.is_floating(kind) or pa.types.is_timestamp(kind)):
        return None
    values = column.to_numpy(zero_copy_only=True)
    return values.view(np.int64) if values.dtype.kind == "M" else values


def _view(values: np.ndarray, typecode: str) -> memoryview:
    """A contiguous int64 or float64 numpy array as a ``memoryview`` of ``typecode`` (what ``codes.packed``
    takes; numpy's own format for int64 is ``l``), keeping the array alive.  Copied when its buffer is not
    aligned to its items: a frame's columns are read where they lie (``wire.columns.unwrap``), at whatever
    offset the msgpack header left, and the generated C reads them as ``const int64_t *`` / ``double *``,
    which C requires aligned (an optimiser may vectorise on that promise)."""
    if not values.flags.aligned:
        values = values.copy()
    return memoryview(values).cast("B").cast(typecode)


def _widened(column: pa.Array, dtype: type, typecode: str) -> memoryview:
    """``column`` as int64 (``q``) or float64 (``d``) values: as it came when it is of that type already, else
    widened by one numpy conversion where that is exact (a narrower signed or unsigned integer, a narrower
    float); anything else (integers to floats, uint64) by Arrow's safe cast, which refuses what would not
    hold (a ValueError: the batch then takes the row path)."""
    values = _numbers(column)
    want = np.dtype(dtype)
    if values is not None and values.dtype == want:
        return _view(values, typecode)
    if values is not None and (values.dtype.kind == want.kind or (want.kind == "i" and values.dtype.kind == "u"
                                                                  and values.dtype.itemsize < 8)):
        return _view(values.astype(want), typecode)
    return _array(column.cast(pa.int64() if typecode == "q" else pa.float64()), typecode)


def day_numbers(column: pa.Array) -> memoryview:
    """Timestamps (microseconds since the epoch, UTC) as the day numbers of their dates (numpy's integer
    division floors, so a timestamp before 1970 falls on the day it is in)."""
    values = _numbers(column)
    if values is None:
        values = _numbers(column.cast(pa.int64()))
    days = np.floor_divide(values, _DAY_US, dtype=np.int64)
    days += _EPOCH
    return _view(days, "q")


def unread_strings(program: Program, port: PortPlan) -> frozenset[int]:
    """Positions of the port's STRING columns that no statement of any trigger on its relation reads, for a
    stream (a table's rows may be kept whole: none); such a column's values can be left out (module docstring).

    >>> from boreas.m3.syntax import parse_program
    >>> prog = parse_program("CREATE STREAM P(id INT, name STRING, mail STRING);"
    ...                      " DECLARE MAP m[id: INT, name: STRING] : INT := 0;"
    ...                      " ON +P(id, name, mail) DO { m[id, name] += 1; }")
    >>> sorted(unread_strings(prog, PortPlan("P", (("id", "INT"), ("name", "STRING"), ("mail", "STRING")), None)))
    [2]
    """
    relation = next((r for r in program.relations if r.name.lower() == port.relation.lower()), None)
    if relation is None or relation.kind != "STREAM":
        return frozenset()
    # (by name: the relation has an indicator column after each nullable one, the port does not)
    names = [c.name.lower() for c in relation.columns]
    read: set[str] = set()
    for trigger in program.triggers:
        if trigger.relation.lower() == port.relation.lower():
            used = {v for s in trigger.statements for v in (*variables(s.target), *variables(s.expr))}
            read.update(name for name, var in zip(names, trigger.vars) if var in used)
    return frozenset(i for i, (name, kind) in enumerate(port.columns) if kind == "STRING"
                     and name.lower() not in read and indicator(name).lower() not in read)


def blank_unread(columns: Columns, port: PortPlan, unread: frozenset[int]) -> Columns:
    """``columns`` with each STRING column nothing reads (``unread``: :func:`unread_strings`'s positions) all
    ``''``: what :func:`relation_columns` hands over for them anyway, made before a batch is copied once per
    window a row falls in (a HOP's ``size / slide``: node/operators/m3event_time.py), so their strings are not.

    >>> import pyarrow as pa
    >>> c = blank_unread(Columns(pa.record_batch([[1, 2], ["a@b", "c@d"]], names=["id", "mail"])),
    ...                  PortPlan("P", (("id", "INT"), ("mail", "STRING")), None), frozenset({1}))
    >>> c.batch.column(1).to_pylist(), c.batch.schema.names
    (['', ''], ['id', 'mail'])
    """
    if not unread:
        return columns
    batch = columns.batch
    picks = [i for i in range(batch.num_columns) if i != port.sign_index]
    blank = {picks[at] for at in unread if at < len(picks)}
    arrays = [pa.repeat(pa.scalar("", type=c.type), len(c)) if i in blank else c for i, c in enumerate(batch.columns)]
    return Columns(pa.RecordBatch.from_arrays(arrays, schema=batch.schema), weights=columns.weights)


def relation_columns(batch: pa.RecordBatch, port: PortPlan, string_ids, unread: frozenset[int] = frozenset()) -> list[Any]:
    """The relation's columns of ``batch`` (the port's fields, the sign field left out), as M3 takes them.

    ``string_ids(values) -> ids | None``: the runtime's ids for a column's distinct strings (an Arrow array in, a list
    or numpy array of ints out; None: pass strings);
    ``unread``: positions of STRING columns nothing reads (:func:`unread_strings`), handed over as ``''``.
    """
    picks = [i for i in range(batch.num_columns) if i != port.sign_index]
    out: list[Any] = []
    for at, (i, (_, kind)) in enumerate(zip(picks, port.columns)):
        column = batch.column(i)
        if kind == "DATE":
            out.append(day_numbers(column))
        elif kind == "FLOAT":
            out.append(_widened(column, np.float64, "d"))
        elif kind == "STRING" and at in unread:
            ids = string_ids([""])
            out.append([""] * len(column) if ids is None else _view(np.full(len(column), ids[0], np.int64), "q"))
        elif kind == "STRING":
            encoded = m3rows_distinct.encoded(column)  # (a string function's result: remembered, not made again)
            ids = string_ids(encoded.dictionary)  # (an Arrow array: the native runtime finds its ids in C)
            if ids is None:
                out.append(column.to_pylist())
            else:
                out.append(_array(pc.take(pa.array(ids, pa.int64()), encoded.indices), "q"))
        else:
            out.append(_widened(column, np.int64, "q"))
    return out


def split(columns: Columns, port: PortPlan, string_ids,
          unread: frozenset[int] = frozenset()) -> tuple[list[tuple[int, list[Any]]], int]:
    """``([(sign, relation columns)], ignored)`` of one batch; ValueError when it cannot go as columns (nulls:
    the row path names what is wrong with them).  ``unread``: as :func:`relation_columns`'s."""
    if any(c.null_count for c in columns.batch.columns):
        raise ValueError("null values")
    parts, ignored = signed_parts(columns, port)
    return [(sign, relation_columns(part, port, string_ids, unread)) for sign, part in parts], ignored


def signed_parts(columns: Columns, port: PortPlan) -> tuple[list[tuple[int, pa.RecordBatch]], int]:
    """``([(sign, rows of the batch)], ignored)``: the rows that enter (+1) and those that leave (-1), by the
    sign field and the weights (their product), a row repeated as often as its weight says; rows whose sign
    field is neither +1 nor -1 are ignored (counted).  ValueError: a null sign field or weight."""
    batch = columns.batch
    sign_column = batch.column(port.sign_index) if port.sign_index is not None else None
    if (sign_column is not None and sign_column.null_count) or (columns.weights is not None
                                                                and columns.weights.null_count):
        raise ValueError("null signs")
    if sign_column is None and columns.weights is None:
        return [(1, batch)], 0
    whole = _one_sign(sign_column, columns.weights)
    if whole is not None:  # every row enters (or every row leaves) once: the batch as it is, no filter
        return [(whole, batch)], 0
    ignored = 0
    if sign_column is not None:
        sign = sign_column.cast(pa.int64())
        unsigned = pc.and_(pc.not_equal(sign, _ONE), pc.not_equal(sign, _MINUS_ONE))
        ignored = unsigned.true_count
        sign = pc.if_else(unsigned, _NOUGHT, sign)
        signs = sign if columns.weights is None else pc.multiply(sign, columns.weights)
    else:
        signs = columns.weights
    out = []
    for value, mask in ((1, pc.greater(signs, _NOUGHT)), (-1, pc.less(signs, _NOUGHT))):
        if not mask.true_count:
            continue
        part, times = batch.filter(mask), pc.abs(signs.filter(mask))
        if pc.max(times).as_py() > 1:  # a multiplicity: the row as often as it counts
            part = part.take(pa.array([i for i, n in enumerate(times.to_pylist()) for _ in range(n)], pa.int64()))
        out.append((value, part))
    return out, ignored


def _one_sign(sign: pa.Array | None, weights: pa.Array | None) -> int | None:
    """+1 or -1 when every row of a batch has one sign field value (or none) and one weight (or none), each +1
    or -1: their product (the common case, a publisher's batch of inserts or of deletes), found by one
    min/max per column; else None.

    >>> _one_sign(pa.array([-1, -1]), pa.array([-1, -1])), _one_sign(pa.array([1, -1]), None)
    (1, None)
    """
    product = None
    for column in (sign, weights):
        if column is None:
            continue
        if pa.types.is_integer(column.type) and len(column) and not column.null_count:
            values = column.to_numpy(zero_copy_only=True)  # (numpy's min and max: a third of a compute call)
            low, high = values.min().item(), values.max().item()
        else:
            bounds = pc.min_max(column)
            low, high = bounds["min"].as_py(), bounds["max"].as_py()
        if low != high or low not in (1, -1):
            return None
        product = low if product is None else product * low
    return product


def by_sign(columns: Columns) -> tuple[list[tuple], list[tuple]]:
    """The rows a batch adds and the rows it takes away (a changelog's -1 rows), each repeated as often as its
    weight says; a plain batch takes nothing away."""
    rows = columns.rows()
    if columns.weights is None:
        return rows, []
    adds: list[tuple] = []
    takes: list[tuple] = []
    for row, weight in zip(rows, columns.weights.to_pylist()):
        (adds if weight > 0 else takes).extend([row] * abs(weight))
    return adds, takes
