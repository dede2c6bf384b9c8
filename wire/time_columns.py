"""Date and time columns as a TIMESTAMP field carries them: the one rule for every publisher of columns (issue 30).

A Borealis ``timestamp`` is an integer, microseconds since 1970-01-01 UTC
(:data:`~boreas.wire.array_columns.ARROW_TYPES`: ``int64``), what rows carry.
A caller's columns hold times in other forms: pandas makes ``timestamp[ns]``
(with the frame's time zone, if any), polars ``timestamp[us]`` or ``[ns]``
or ``[ms]``, a Parquet file any unit, and dates as ``date32`` (days) or
``date64`` (milliseconds).  Arrow casts any of these straight to ``int64``
without complaint, in *its own unit*: a pandas frame's 2026-01-01T00:00:01
would arrive as 1767225601000000000, a thousand times too late, in a batch
whose schema then equals the stream's, so nothing would refuse it.  So every
publisher of columns (:class:`~boreas.client.publisher.Publisher`'s
``send`` of a table or a DataFrame, ``boreas publish`` of a Parquet file,
both through :func:`~boreas.wire.publish_columns.conform`) converts them here first:

* a ``timestamp`` of any unit (``s``, ``ms``, ``us``, ``ns``), with or
  without a time zone (Arrow keeps the instant in UTC either way; a naive
  one is read as UTC, as ``boreas publish`` reads naive ISO text), becomes
  microseconds; nanoseconds are floored to the microsecond (as a row's
  ``datetime`` has no nanoseconds: 1 ns before the epoch is -1 µs, not 0);
* a ``date32``/``date64`` becomes the microseconds of that day's midnight,
  UTC (what Spark's publisher sends for a DATE column in a UTC session:
  ``unix_micros(cast(date as timestamp))``);
* NULLs stay NULLs (the node refuses them unless the field is nullable);
* an array field of timestamps takes a list column of any of these, each
  element converted, the lists kept (at any depth);
* a ``timestamp`` column given for a ``long`` field is its instant in
  microseconds too (as a row's ``datetime`` would be);
* for a ``timestamp`` field, anything that cannot be a time is refused
  here, naming the column (:class:`Unconvertible`): a ``time``,
  ``duration`` or ``interval`` column, or a value whose microseconds
  overflow an ``int64``.

* a date or time column given for a ``string`` field is left to
  :func:`~boreas.wire.publish_columns.conform`'s safe cast, as any column:
  a ``date32`` becomes its ISO text (``'2026-01-01'``);
* a date or time column given for any other number field (``int``,
  ``double``..., or a ``long`` given a date) is refused, naming the column:
  a cast would give a number in the column's own unit (a date32's days).
Integer columns pass as they are (they are microseconds already, as in rows);
text is the node's to parse or refuse row by row.

Spark converts a ``timestamp`` field's column in the JVM before any batch
reaches Python (``spark/publish.py`` selects ``unix_micros``), so those hold
integers by then; its other columns reach
:func:`~boreas.wire.publish_columns.conform` on its Arrow path as Spark types
them (a ``TimestampType`` for a ``long`` field, a ``DateType`` for a
``string`` field) and pass the same rule.

>>> import pyarrow as pa
>>> as_micros(pa.array([1767225601000000000, -1], pa.timestamp("ns")), "at").to_pylist()
[1767225601000000, -1]
>>> as_micros(pa.array([20454, None], pa.date32()), "day").to_pylist()
[1767225600000000, None]
>>> as_micros(pa.array([1], pa.duration("s")), "took")
Traceback (most recent call last):
...
boreas.wire.time_columns.Unconvertible: column 'took' is duration[s], which cannot be a timestamp ...
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

#: Microseconds in each unit Arrow's timestamps come in.
_PER_UNIT = {"s": 1_000_000, "ms": 1_000, "us": 1}
_DAY = 86_400_000_000


class Unconvertible(TypeError):
    """A column that cannot be converted to what its field carries: its name and why."""


def is_temporal(kind: pa.DataType) -> bool:
    """Whether a column of type ``kind`` holds dates or times (a kind only :func:`as_micros` may convert)."""
    return pa.types.is_temporal(kind) or pa.types.is_interval(kind)


def as_micros(column: pa.Array | pa.ChunkedArray, name: str) -> pa.Array:
    """``column`` (a timestamp or date column) as ``int64`` microseconds since 1970-01-01 UTC; raises
    :class:`Unconvertible` naming ``name`` for any other temporal type or a value out of range."""
    kind = column.type
    try:
        if pa.types.is_timestamp(kind):
            raw = column.cast(pa.int64())
            if kind.unit == "ns":  # floored, not truncated toward zero
                return _floor_div(raw, 1000)
            return pc.multiply_checked(raw, _PER_UNIT[kind.unit])
        if pa.types.is_date32(kind):
            return pc.multiply_checked(column.cast(pa.int32()).cast(pa.int64()), _DAY)
        if pa.types.is_date64(kind):  # milliseconds, a whole day's by Arrow's rule
            return pc.multiply_checked(column.cast(pa.int64()), 1000)
    except pa.ArrowInvalid as exc:
        raise Unconvertible(f"column {name!r} holds a {kind} value whose microseconds since 1970-01-01 overflow "
                            f"a timestamp: {exc}") from None
    raise Unconvertible(f"column {name!r} is {kind}, which cannot be a timestamp (microseconds since 1970-01-01 "
                        "UTC): give timestamps, dates or integer microseconds")


def not_a_time_field(name: str, kind: pa.DataType, field_type: str) -> Unconvertible:
    """The error for a date or time column given for a number field (not a ``timestamp``, nor a ``long`` given
    a timestamp)."""
    return Unconvertible(f"column {name!r} is {kind}, but field {name!r} is {field_type}, not a timestamp: only a "
                         "timestamp field takes dates and times (a long field: timestamps, as microseconds; a "
                         "string field: their text)")


def _floor_div(values: pa.Array | pa.ChunkedArray, by: int) -> pa.Array:
    """``values // by`` rounded down, as Python's ``//`` (Arrow's integer division truncates toward zero)."""
    quotient = pc.divide(values, by)
    below = pc.and_(pc.less(values, 0), pc.not_equal(pc.multiply(quotient, by), values))
    return pc.if_else(below, pc.subtract(quotient, 1), quotient)
