"""Nullable fields end to end with real processes (issue 33 item 2): rows with None and a pyarrow table
with nulls are published into a stream whose fields may be NULL, go through a filter (a NULL predicate drops
the row), a map (NULL propagates, COALESCE replaces it) to a Python subscriber, which gets None.  The
durable node is killed with ``kill -9`` between two publications: it replays its logged batches, NULLs
included, and the subscriber then gets the rest exactly once.  A NULL in a field that is not nullable is
still refused, naming its row."""

from __future__ import annotations

import asyncio

import pyarrow as pa
import pytest
from boreas.client.publisher import Publisher
from boreas.client.subscriber import Subscriber
from support.cluster import TOKEN
from support.streams import collect

pytestmark = pytest.mark.slow

APP = """<borealis>
    <schema name="Reading">
        <field name="k" type="int"/>
        <field name="x" type="int" nullable="true"/>
        <field name="s" type="string" size="4" nullable="true"/>
    </schema>
    <input stream="In" schema="Reading"/>
    <query name="q">
    <box name="keep" type="filter"><in stream="In"/><out stream="Kept"/>
        <parameter name="expression.0" value="x &lt;&gt; 3 or k = 0"/></box>
    <box name="calc" type="map"><in stream="Kept"/><out stream="Calc"/>
        <parameter name="expression.0" value="k"/><parameter name="output-field-name.0" value="k"/>
        <parameter name="expression.1" value="x * 2"/><parameter name="output-field-name.1" value="x2"/>
        <parameter name="expression.2" value="coalesce(x, -1)"/><parameter name="output-field-name.2" value="xc"/>
        <parameter name="expression.3" value="s"/><parameter name="output-field-name.3" value="s"/></box>
    </query>
    <output stream="Calc"/>
</borealis>"""


def reading(n: int) -> tuple:
    return (n % 3, None if n % 4 == 1 else n % 5, None if n % 2 else "ab"[: n % 3])


def calc(rows: list[tuple]) -> list[tuple]:
    """What SQL's WHERE ``x <> 3 OR k = 0`` keeps (a NULL ``x`` is kept only where ``k = 0``), mapped."""
    kept = [r for r in rows if (r[1] is not None and r[1] != 3) or r[0] == 0]
    return [(k, None if x is None else x * 2, -1 if x is None else x, s) for k, x, s in kept]


async def test_nulls_flow_from_publishers_through_boxes_to_a_subscriber_across_a_kill(cluster_factory):
    cluster = cluster_factory()
    cluster.start_head()
    data_dir = cluster.workdir / "node-data"
    node = cluster.start_node(data_dir=data_dir)
    cluster.submit(cluster.write("app.xml", APP), cluster.write(
        "dep.xml", f'<deploy><publish stream="In" node="{node}"/><node endpoint="{node}" query="q"/></deploy>'))
    async with Subscriber(cluster.head, "Calc", TOKEN) as subscriber:
        assert [f.nullable for f in subscriber.schema.fields] == [False, True, False, True]
        first = [reading(n) for n in range(40)]
        async with Publisher(cluster.head, "In", TOKEN, batch_size=7, producer="rows") as publisher:
            await publisher.send(first + [(None, 1, "a")])
            await publisher.flush()
        assert publisher.accepted == len(first) and len(publisher.refused) == 1
        assert await collect(subscriber, len(calc(first)), timeout=30) == calc(first)

        await asyncio.to_thread(cluster.stop, node, True)  # kill -9: the log holds the batches with NULLs
        await asyncio.to_thread(cluster.start_node, node, True, data_dir)
        late = [reading(n) for n in range(100, 160)]
        table = pa.table({"k": pa.array([r[0] for r in late], pa.int32()), "x": [r[1] for r in late],
                          "s": [r[2] for r in late]})
        async with Publisher(cluster.head, "In", TOKEN, batch_size=16, producer="table") as publisher:
            await publisher.send(table)
            await publisher.flush()
        assert publisher.accepted == len(late) and not publisher.refused
        assert await collect(subscriber, len(calc(late)), timeout=60) == calc(late)
