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
            await publisher.send(rows)
        assert await reading == rows  # the stalled subscriber did not hold anyone up
        with pytest.raises(SubscriberTooSlow, match="read too slowly"):
            await collect(stalled, len(rows), timeout=30)
        links = get_json(f"http://{node}/status")["data"]["links"]
        assert links[stalled.endpoint]["slow_disconnects"] >= 1
        assert links[stalled.endpoint]["dropped_batches"] > 0
        assert links[reader.endpoint].get("slow_disconnects", 0) == 0
