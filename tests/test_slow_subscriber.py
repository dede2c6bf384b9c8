"""One subscriber that stops reading must not stall the node for everyone else (issue 15 item 1).

A client subscriber gets a bounded buffer on the node that sends to it; when
that is full, its subscription's policy applies (by default it is
disconnected with a reason it sees; ``on-slow="drop"`` drops batches,
``"block"`` keeps the old back-pressure), and the node's other streams and
subscribers go on.  Links between nodes keep their back-pressure.
"""

from __future__ import annotations

import asyncio

import pytest
from boreas.client.publisher import Publisher
from boreas.client.subscriber import Subscriber, SubscriberTooSlow
from support.cluster import TOKEN, get_json
from support.streams import collect

APP = """<borealis>
  <input stream="Packet" schema="P"/> <output stream="Result" schema="P"/>
  <schema name="P"> <field name="value" type="double"/> <field name="time" type="int"/> </schema>
  <box name="pass" type="filter"> <in stream="Packet"/> <out stream="Result"/>
    <parameter name="expression.0" value="time &gt;= 0"/> </box>
</borealis>"""


async def paced(publisher: Publisher, rows: list[tuple], chunk: int = 500, pause: float = 0.02) -> None:
    """Publish at a rate a reading subscriber keeps up with (~25k rows/s, far below the node's), so the only
    subscriber that falls a whole buffer behind is the one that stopped reading, not one that reads but
    shares this process's loop with a publisher bursting faster than the node's output can be read.
    (At ~50k rows/s, 5,000 ten-row batches a second, the reader in this process fell a buffer behind too
    when other work shared the two cores: load 4-7, before and after the links' direct write alike.)"""
    for i in range(0, len(rows), chunk):
        await publisher.send(rows[i:i + chunk])
        await asyncio.sleep(pause)


def one_node(cluster) -> str:
    cluster.start_head()
    node = cluster.start_node()
    app = cluster.write("app.xml", APP)
    dep = cluster.write("dep.xml", f'<deploy> <publish stream="Packet" node="{node}"/>'
                                   f' <node endpoint="{node}" query="pass"/> </deploy>')
    cluster.submit(app, dep)
    return node


@pytest.mark.slow
async def test_a_subscriber_that_stops_reading_is_disconnected_and_the_others_go_on(cluster_factory):
    cluster = cluster_factory()
    node = await asyncio.to_thread(one_node, cluster)
    rows = [(1.0, n) for n in range(30_000)]
    async with Subscriber(cluster.head, "Result", TOKEN) as reader, \
            Subscriber(cluster.head, "Result", TOKEN, queue_batches=1) as stalled:
        reading = asyncio.create_task(collect(reader, len(rows), timeout=90))
        async with Publisher(cluster.head, "Packet", TOKEN, producer="slow-test", batch_size=10) as publisher:
            await paced(publisher, rows)
        assert await reading == rows  # the stalled subscriber did not hold anyone up
        with pytest.raises(SubscriberTooSlow, match="read too slowly"):
            await collect(stalled, len(rows), timeout=30)
        links = get_json(f"http://{node}/status")["data"]["links"]
        assert links[stalled.endpoint]["slow_disconnects"] >= 1
        assert links[stalled.endpoint]["dropped_batches"] > 0
        assert links[reader.endpoint].get("slow_disconnects", 0) == 0


@pytest.mark.slow
async def test_a_subscription_may_choose_to_have_batches_dropped_instead(cluster_factory):
    """``on-slow="drop"`` (``boreas subscribe --on-slow drop``): the laggard stays connected and misses
    batches, counted; the subscription carries its policy through the catalog."""
    cluster = cluster_factory()
    node = await asyncio.to_thread(one_node, cluster)
    rows = [(1.0, n) for n in range(30_000)]
    async with Subscriber(cluster.head, "Result", TOKEN) as reader, \
            Subscriber(cluster.head, "Result", TOKEN, queue_batches=1, on_slow="drop") as lagging:
        subscription = cluster.head_catalog().subscriptions[f"Result|{lagging.endpoint}"]
        assert subscription.on_slow == "drop"
        reading = asyncio.create_task(collect(reader, len(rows), timeout=90))
        async with Publisher(cluster.head, "Packet", TOKEN, producer="drop-test", batch_size=10) as publisher:
            await paced(publisher, rows)
        assert await reading == rows
        link = get_json(f"http://{node}/status")["data"]["links"][lagging.endpoint]
        assert link["slow_drops"] > 0 and link.get("slow_disconnects", 0) == 0 and link["connected"]
        assert lagging.failure is None
