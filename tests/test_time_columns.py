"""Date and time columns as a ``timestamp`` field's microseconds: one rule (wire/time_columns.py) for a client's
columns and ``boreas publish`` of a Parquet file (issue 30, item 5).  In process; end to end through a node is
tests/test_publish_dataframes.py."""

from __future__ import annotations

import datetime as dt
import re

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from boreas.catalog.diagnostics import ValidationFailed
from boreas.catalog.model import Field, FieldType, Schema
from boreas.cli.input_batches import open_input
from boreas.wire.publish_columns import conform
from boreas.wire.time_columns import Unconvertible, as_micros

SCHEMA = Schema("T", (Field("k", FieldType.INT), Field("at", FieldType.TIMESTAMP)))
SECOND = 1_767_225_601  # 2026-01-01T00:00:01 UTC


@pytest.mark.parametrize(("unit", "value"), [("s", SECOND), ("ms", SECOND * 1000), ("us", SECOND * 10**6),
                                             ("ns", SECOND * 10**9)])
@pytest.mark.parametrize("tz", [None, "UTC", "Europe/Paris"])
def test_every_unit_with_or_without_a_zone_is_microseconds(unit, value, tz):
    column = pa.array([value, None, 0], pa.timestamp(unit, tz))
    assert as_micros(column, "at").to_pylist() == [SECOND * 10**6, None, 0]
    batch = conform(pa.record_batch({"k": pa.array([1, 2, 3], pa.int64()), "at": column}), SCHEMA)
    assert batch.schema.equals(pa.schema([("k", pa.int32()), ("at", pa.int64())]))
    assert batch.column(1).to_pylist() == [SECOND * 10**6, None, 0]


def test_nanoseconds_are_floored_to_the_microsecond_as_python_floors():
    ns = [-1, -1000, -1001, 999, 1000, 1_767_225_601_000_000_999]
    assert as_micros(pa.array(ns, pa.timestamp("ns")), "at").to_pylist() == [n // 1000 for n in ns]


def test_dates_are_their_midnights_utc():
    days = [dt.date(2026, 1, 1), dt.date(1969, 12, 31), None]
    want = [1_767_225_600_000_000, -86_400_000_000, None]
    assert as_micros(pa.array(days, pa.date32()), "at").to_pylist() == want
    assert as_micros(pa.array(days, pa.date64()), "at").to_pylist() == want


def test_what_cannot_be_a_timestamp_is_refused_naming_the_column():
    for kind in (pa.time32("s"), pa.time64("us"), pa.duration("ms")):
        with pytest.raises(Unconvertible, match=re.escape(f"column 'at' is {kind},")):
            conform(pa.record_batch({"k": [1], "at": pa.array([1], kind)}), SCHEMA)
    with pytest.raises(Unconvertible, match="column 'k' is date32.*field 'k' is int, not a timestamp"):
        conform(pa.record_batch({"k": pa.array([0], pa.date32()), "at": [1]}), SCHEMA)
    long_field = Schema("L", (Field("t", FieldType.LONG),))
    with pytest.raises(Unconvertible, match="column 't' is date32.*field 't' is long, not a timestamp"):
        conform(pa.record_batch({"t": pa.array([0], pa.date32())}), long_field)  # (a cast: its days)
    with pytest.raises(Unconvertible, match="column 'at' holds a timestamp\\[s\\] value whose microseconds"):
        conform(pa.record_batch({"k": [1], "at": pa.array([2**62], pa.timestamp("s"))}), SCHEMA)


def test_integers_stay_microseconds_and_other_columns_are_left_for_the_node():
    batch = pa.record_batch({"k": [1], "at": pa.array([5], pa.int64())})
    assert conform(batch, SCHEMA).column(1).to_pylist() == [5]
    extra = pa.record_batch({"k": [1], "at": pa.array([1], pa.timestamp("ms")), "other": pa.array([1], pa.date32())})
    conformed = conform(extra, SCHEMA)  # (a column of no field: the node refuses the batch, naming it)
    assert conformed.schema.names == ["k", "at", "other"] and conformed.column(1).to_pylist() == [1000]


@pytest.mark.parametrize("kind", [pa.timestamp("s"), pa.timestamp("ms", "UTC"), pa.timestamp("ns"), pa.date32()])
def test_boreas_publish_of_a_parquet_file_reads_each_unit_as_microseconds(tmp_path, kind):
    path = tmp_path / "times.parquet"
    if pa.types.is_date32(kind):
        at, want = pa.array([dt.date(2026, 1, 1)], kind), [1_767_225_600_000_000]
    else:
        per = {"s": 1, "ms": 1000, "ns": 10**9}[kind.unit]
        at, want = pa.array([SECOND * per], kind), [SECOND * 10**6]
    pq.write_table(pa.table({"k": pa.array([1], pa.int32()), "at": at}), path)
    batches = list(open_input(str(path), SCHEMA, 10).batches())
    assert pa.Table.from_batches(batches).column("at").to_pylist() == want


def test_boreas_publish_refuses_a_parquet_time_column_before_reading_a_row(tmp_path):
    path = tmp_path / "times.parquet"
    pq.write_table(pa.table({"k": pa.array([1], pa.int32()), "at": pa.array([1], pa.time64("us"))}), path)
    with pytest.raises(ValidationFailed, match="column 'at' is time64"):
        open_input(str(path), SCHEMA, 10)


MIXED = Schema("M", (Field("d", FieldType.STRING, 20), Field("t", FieldType.LONG)))
NEW_YEAR = dt.datetime(2026, 1, 1, 0, 0, 1)


def mixed_columns(unit: str = "us") -> dict:
    """What Spark's Arrow path hands conform for a string field given a DateType and a long field given a
    TimestampType (spark/columnar.py), or a Parquet file holds."""
    return {"d": pa.array([dt.date(2026, 1, 1), None], pa.date32()),
            "t": pa.array([NEW_YEAR, None], pa.timestamp(unit))}


@pytest.mark.parametrize("unit", ["s", "ms", "us", "ns"])
def test_a_date_for_a_string_field_is_its_text_and_a_timestamp_for_a_long_field_its_microseconds(unit):
    batch = conform(pa.record_batch(mixed_columns(unit)), MIXED)
    assert batch.schema.equals(pa.schema([("d", pa.string()), ("t", pa.int64())]))
    assert batch.to_pylist() == [{"d": "2026-01-01", "t": SECOND * 10**6}, {"d": None, "t": None}]


def test_boreas_publish_of_parquet_takes_a_date_for_a_string_field_and_a_timestamp_for_a_long_field(tmp_path):
    path = tmp_path / "mixed.parquet"
    pq.write_table(pa.table(mixed_columns("us")), path)
    batches = list(open_input(str(path), MIXED, 10).batches())
    assert pa.Table.from_batches(batches).to_pylist() == [{"d": "2026-01-01", "t": SECOND * 10**6},
                                                         {"d": None, "t": None}]


@pytest.mark.parametrize("unit", ["ms", "us", "ns"])
def test_an_array_field_of_timestamps_takes_lists_of_timestamps_each_as_its_microseconds(unit):
    stamps = Schema("A", (Field("ts", None, array="timestamp(0...2)"),))
    d1, d2, d3 = (NEW_YEAR + dt.timedelta(milliseconds=i) for i in range(3))
    want = [SECOND * 10**6 + i * 1000 for i in range(3)]
    column = pa.array([[d1, d2, d3], None, [d3, d2, d1]], pa.list_(pa.timestamp(unit)))
    batch = conform(pa.record_batch({"ts": column.slice(1)}), stamps)  # (sliced: the offsets kept)
    assert batch.column(0).to_pylist() == [None, want[::-1]]
    batch = conform(pa.record_batch({"ts": column}), stamps)
    assert batch.column(0).type == pa.list_(pa.int64(), 3) and batch.column(0).to_pylist() == [want, None, want[::-1]]
    nested = pa.array([[[d1], [d2, d3]]], pa.large_list(pa.list_(pa.timestamp(unit))))
    assert conform(pa.record_batch({"ts": nested}), stamps).column(0).to_pylist() == [[[want[0]], want[1:]]]
    fixed = pa.array([[d1, d2, d3], [d3, d2, d1]], pa.list_(pa.timestamp(unit), 3))
    assert conform(pa.record_batch({"ts": fixed.slice(1)}), stamps).column(0).to_pylist() == [want[::-1]]
