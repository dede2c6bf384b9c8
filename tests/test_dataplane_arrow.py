"""Arrow batches end to end with real processes (issue 30): a publisher sends pyarrow tables, the node checks
and logs them as columns, an ``m3`` box applies them without making rows, the view equals DuckDB's; a
durable node killed with ``kill -9`` replays its logged Arrow batches and loses nothing; a row subscriber
downstream of a filter gets the rows a row publisher's batches give."""

from __future__ import annotations

import asyncio

import pyarrow as pa
import pytest
from boreas.client.publisher import Publisher, PublishRefused
from boreas.client.query import QueryClient
from boreas.client.subscriber import Subscriber
from support.cluster import TOKEN, get_json
from support.m3_q3 import APP, STREAMS, duckdb_q3, q3_rows, view_becomes, wire
from support.streams import collect

pytestmark = pytest.mark.slow


def q3_table(rows: list[tuple], names: list[str]) -> pa.Table:
    return pa.table({name: [row[i] for row in rows] for i, name in enumerate(names)})


async def publish_tables(head: str, data: dict[str, list[tuple]], batch_size: int = 100, run: str = "arrow") -> None:
    for stream, name in STREAMS:
        async with Publisher(head, stream, TOKEN, batch_size=batch_size, producer=f"{run}-{name}") as publisher:
            names = [f for f in publisher.fields]
            await publisher.send(q3_table(wire(data[name]), names))
            await publisher.flush()
        assert publisher.accepted == len(data[name]) and not publisher.refused, (publisher.refused[:3], publisher.duplicates, publisher.refusals, publisher.sent_rows)


async def test_q3_from_arrow_tables_on_a_durable_node_killed_and_recovered(cluster_factory):
    cluster = cluster_factory()
    cluster.start_head()
    data_dir = cluster.workdir / "node-data"
    node = cluster.start_node(data_dir=data_dir)
    publish = "".join(f'<publish stream="{s}" node="{node}"/>' for s, _ in STREAMS)
    cluster.submit(APP, cluster.write("dep.xml", f'<deploy>{publish}<node endpoint="{node}" query="q3"/></deploy>'))
    data = q3_rows(7)
    half = {name: rows[: len(rows) // 2] for name, rows in data.items()}
    await publish_tables(cluster.head, half)
    status = get_json(f"http://{node}/status")
    assert status["data"]["in"]["batches"] > 0
    async with QueryClient(cluster.head, TOKEN) as client:
        await view_becomes(client, duckdb_q3(half))
    await asyncio.to_thread(cluster.stop, node, True)  # kill -9: the log holds Arrow batches
    await asyncio.to_thread(cluster.start_node, node, True, data_dir)
    async with QueryClient(cluster.head, TOKEN) as client:
        await view_becomes(client, duckdb_q3(half))  # replayed from the log
    with pytest.raises(PublishRefused, match="already published batch 0 of Customer with other rows"):
        await publish_tables(cluster.head, data)  # the same producers with more rows: refused, after the restart too
    rest = {name: rows[len(rows) // 2:] for name, rows in data.items()}
    await publish_tables(cluster.head, rest, run="rest")
    async with QueryClient(cluster.head, TOKEN) as client:
        await view_becomes(client, duckdb_q3(data))


FILTER = """<borealis>
  <input stream="Reading" schema="R"/> <output stream="Warm" schema="R"/>
  <schema name="R"> <field name="sensor" type="int"/> <field name="time" type="long"/>
    <field name="celsius" type="double"/> <field name="place" type="string" size="8"/> </schema>
  <box name="warm" type="filter"> <in stream="Reading"/> <out stream="Warm"/>
    <parameter name="expression.0" value="celsius &gt; 0.0"/> </box>
</borealis>"""


async def test_a_filter_passes_arrow_batches_as_it_passes_rows_and_bad_rows_are_named(cluster_factory):
    """The same readings as rows and as a pyarrow table (columns in another order, wider types): the row
    subscriber behind the filter gets the same rows for both; a string too long is refused by its row."""
    cluster = cluster_factory()
    cluster.start_head()
    node = cluster.start_node()
    cluster.submit(cluster.write("app.xml", FILTER), cluster.write(
        "dep.xml", f'<deploy><publish stream="Reading" node="{node}"/><node endpoint="{node}" query="warm"/></deploy>'))
    readings = [(n % 7, n, float(n % 150) - 40.0, f"p{n % 5}") for n in range(3_000)]
    warm = [r for r in readings if r[2] > 0.0]
    table = pa.table({"celsius": [r[2] for r in readings], "place": [r[3] for r in readings],
                      "time": pa.array([r[1] for r in readings], pa.int64()),
                      "sensor": pa.array([r[0] for r in readings], pa.int64())})
    async with Subscriber(cluster.head, "Warm", TOKEN) as subscriber:
        async with Publisher(cluster.head, "Reading", TOKEN, batch_size=100, producer="rows") as publisher:
            await publisher.send(readings)
        assert await collect(subscriber, len(warm), timeout=30) == warm
        async with Publisher(cluster.head, "Reading", TOKEN, batch_size=100, producer="columns") as publisher:
            await publisher.send(table)
        assert publisher.accepted == len(readings) and not publisher.refused
        assert await collect(subscriber, len(warm), timeout=30) == warm
        bad = pa.table({"sensor": pa.array([1, 2], pa.int32()), "time": pa.array([1, 2], pa.int64()),
                        "celsius": [5.0, 6.0], "place": ["far too long", "ok"]})
        async with Publisher(cluster.head, "Reading", TOKEN, producer="bad") as publisher:
            await publisher.send(bad)
        assert publisher.accepted == 1 and [(e.row, e.field) for e in publisher.refused] == [(0, "place")]
        assert await collect(subscriber, 1, timeout=30) == [(2, 2, 6.0, "ok")]
