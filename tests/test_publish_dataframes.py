"""``Publisher.send`` of columns: pandas and polars DataFrames, pyarrow tables of every time unit (issue 30, item 5).

Each goes end to end, through a node to a subscriber, and must arrive as the
same values as the rows a row publisher sends: a ``timestamp`` field carries
microseconds since 1970-01-01 UTC (a pandas frame's ``datetime64[ns]`` once
arrived a thousand times too big: ``conform`` cast it to int64 in its own
unit), NULLs stay NULLs on nullable fields, strings stay strings.  A column
that cannot be converted is refused at ``send``, naming it.  The conversion
itself, unit by unit, is tests/test_time_columns.py.
"""

from __future__ import annotations

import asyncio
import datetime as dt

import pandas as pd
import polars as pl
import pyarrow as pa
import pytest
from boreas.client.head_api import submit_documents, wait_submission
from boreas.client.publisher import Publisher
from boreas.client.subscriber import Subscriber
from boreas.wire.client import PeerClient
from boreas.wire.time_columns import Unconvertible
from support.cluster import TOKEN
from support.inprocess import in_process

APP = b"""<borealis>
  <input stream="E" schema="ES"/> <output stream="Kept" schema="ES"/>
  <schema name="ES"><field name="k" type="int"/><field name="at" type="timestamp" nullable="true"/>
    <field name="name" type="string" size="8" nullable="true"/><field name="v" type="double"/></schema>
  <query name="keep"><box name="keep" type="filter"><in stream="E"/><out stream="Kept"/>
    <parameter name="expression.0" value="k &gt; 0"/></box></query>
</borealis>"""

UTC = dt.timezone.utc
#: (k, at, name, v) as a caller holds them: a datetime (naive: UTC), a string or None.
EVENTS = [
    (1, dt.datetime(2026, 1, 1, 0, 0, 1), "tcp", 1.5),
    (2, dt.datetime(1969, 12, 31, 23, 59, 59, 999999), None, -2.0),  # before the epoch: -1 µs
    (3, None, "udp", 0.0),
    (4, dt.datetime(2026, 11, 30, 3, 12, 0, 123456), "héllo", 4.25),
]


def micros(at: dt.datetime | None) -> int | None:
    return None if at is None else (at.replace(tzinfo=UTC) - dt.datetime(1970, 1, 1, tzinfo=UTC)) // dt.timedelta(
        microseconds=1)


#: What the rows of EVENTS are for a row publisher: the timestamp as its microseconds.
ROWS = [(k, micros(at), name, v) for k, at, name, v in EVENTS]


async def deploy(cluster) -> None:
    node = cluster.nodes[0].endpoint
    deploy = f'<deploy><publish stream="E" node="{node}"/><node endpoint="{node}" query="keep"/></deploy>'.encode()
    async with PeerClient(TOKEN) as peers:
        status = await submit_documents(peers, cluster.url, [("events.xml", APP), ("deploy.xml", deploy)])
        status = await wait_submission(peers, cluster.url, status, 20)
    assert status["state"] == "deployed", status


async def arrive(cluster, subscriber: Subscriber, data, count: int, batch_size: int = 3) -> list[tuple]:
    """What the subscriber gets of ``data`` published (``count`` rows); the publisher's refusals must be none."""
    async with Publisher(cluster.url, "E", TOKEN, batch_size=batch_size) as publisher:
        await publisher.send(data)
    assert (publisher.accepted, publisher.refused, publisher.refusals) == (count, [], [])
    got: list[tuple] = []

    async def read() -> None:
        async for row in subscriber:
            got.append(row)
            if len(got) == count:
                return

    await asyncio.wait_for(read(), 30)
    return got


def frame_columns() -> dict[str, list]:
    return {"k": [e[0] for e in EVENTS], "at": [e[1] for e in EVENTS], "name": [e[2] for e in EVENTS],
            "v": [e[3] for e in EVENTS]}


def arrow_table(unit: str, tz: str | None) -> pa.Table:
    """EVENTS as a pyarrow table whose ``at`` is ``timestamp[unit, tz]`` (the same instants; ``s`` and ``ms``
    lose what they cannot hold, as the expected rows do)."""
    per = {"s": 1_000_000, "ms": 1_000, "us": 1, "ns": None}[unit]
    values = [None if m is None else (m * 1000 if per is None else m // per) for _, m, _, _ in ROWS]
    return pa.table({"k": pa.array([e[0] for e in EVENTS], pa.int64()), "at": pa.array(values, pa.timestamp(unit, tz)),
                     "name": [e[2] for e in EVENTS], "v": [e[3] for e in EVENTS]})


def rows_at(unit: str) -> list[tuple]:
    """ROWS as a table of ``unit`` holds them (floored to whole units)."""
    per = {"s": 1_000_000, "ms": 1_000, "us": 1, "ns": 1}[unit]
    return [(k, None if m is None else m // per * per, name, v) for k, m, name, v in ROWS]


async def test_pandas_and_polars_dataframes_arrive_as_the_rows_do_times_nulls_and_strings():
    frame = pd.DataFrame(frame_columns())
    assert str(frame["at"].dtype) == "datetime64[ns]"  # (what makes pandas' times nanoseconds in Arrow)
    polars_us = pl.DataFrame(frame_columns())
    polars_ns = polars_us.with_columns(pl.col("at").cast(pl.Datetime("ns")))
    polars_ms = polars_us.with_columns(pl.col("at").cast(pl.Datetime("ms", "UTC")))
    async with in_process(nodes=1) as cluster:
        await deploy(cluster)
        async with Subscriber(cluster.url, "Kept", TOKEN) as subscriber:
            by_rows = await arrive(cluster, subscriber, ROWS, len(ROWS))
            assert by_rows == ROWS
            assert by_rows[0][1] == 1767225601000000  # 2026-01-01T00:00:01 UTC, in microseconds
            assert await arrive(cluster, subscriber, frame, len(ROWS)) == by_rows
            in_ms = frame.assign(at=frame["at"].astype("datetime64[ms]"))
            assert await arrive(cluster, subscriber, in_ms, len(ROWS)) == rows_at("ms")
            aware = frame.assign(at=frame["at"].dt.tz_localize("UTC").dt.tz_convert("America/New_York"))
            assert await arrive(cluster, subscriber, aware, len(ROWS)) == by_rows  # the same instants
            assert await arrive(cluster, subscriber, polars_us, len(ROWS)) == by_rows
            assert await arrive(cluster, subscriber, polars_ns, len(ROWS)) == by_rows
            assert await arrive(cluster, subscriber, polars_ms, len(ROWS)) == rows_at("ms")


@pytest.mark.parametrize("tz", [None, "UTC", "Asia/Tokyo"])
async def test_pyarrow_tables_of_every_time_unit_arrive_as_microseconds(tz):
    async with in_process(nodes=1) as cluster:
        await deploy(cluster)
        async with Subscriber(cluster.url, "Kept", TOKEN) as subscriber:
            for unit in ("s", "ms", "us", "ns"):
                table = arrow_table(unit, tz)
                assert await arrive(cluster, subscriber, table, len(ROWS)) == rows_at(unit), unit
                batch = table.to_batches()[0]  # a RecordBatch too, in one batch
                assert await arrive(cluster, subscriber, batch, len(ROWS), batch_size=100) == rows_at(unit), unit
            days = pa.table({"k": [1, 2], "at": pa.array([dt.date(2026, 1, 1), dt.date(1969, 12, 31)], pa.date32()),
                             "name": ["a", "b"], "v": [0.0, 1.0]})
            expected = [(1, 1767225600000000, "a", 0.0), (2, -86400000000, "b", 1.0)]
            assert await arrive(cluster, subscriber, days, 2) == expected  # a day: its midnight, UTC
            days64 = days.set_column(1, "at", days["at"].cast(pa.date64()))
            assert await arrive(cluster, subscriber, days64, 2) == expected


async def test_a_column_that_cannot_be_a_timestamp_is_refused_at_send_naming_it():
    async with in_process(nodes=1) as cluster:
        await deploy(cluster)
        async with Publisher(cluster.url, "E", TOKEN) as publisher:
            times_of_day = pa.table({"k": [1], "at": pa.array([3600], pa.time32("s")), "name": ["a"], "v": [0.0]})
            with pytest.raises(Unconvertible, match="column 'at' is time32"):
                await publisher.send(times_of_day)
            stamped_k = pa.table({"k": pa.array([1], pa.timestamp("ns")), "at": [1], "name": ["a"], "v": [0.0]})
            with pytest.raises(Unconvertible, match="column 'k' is timestamp.*field 'k' is int, not a timestamp"):
                await publisher.send(pd.DataFrame({"k": pd.to_datetime(["2026-01-01"]), "at": [1], "name": ["a"],
                                                   "v": [0.0]}))
            with pytest.raises(Unconvertible, match="column 'k'"):
                await publisher.send(stamped_k)
            assert publisher.sent_rows == 0  # nothing of a refused table went
