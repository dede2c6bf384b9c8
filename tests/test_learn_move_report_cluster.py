"""Moves learnt from their reports, with real node processes: no node is read, each holds its slice.

box0 (Packet -> Source) and box1 (Source -> Result) on two of three nodes,
Packet published and Result subscribed while they move, one after the
other and back (chained: a node that took a box moves it on).  After each
move, every node's whole local catalog (inputs, publications,
subscriptions, not only boxes) is its slice of the Head's catalog, the
Head patched the source's and the target's records with what they reported
writing (tests/test_learn_move_report.py has the rules: serials,
restarts, a failed handover), and read no node; every row arrives once, in
order.
"""

from __future__ import annotations

import asyncio

from boreas.catalog.slices import node_slice
from boreas.client.optimizer import Optimizer
from boreas.client.publisher import Publisher
from boreas.client.subscriber import Subscriber
from support.cluster import TOKEN, wait_until
from support.streams import collect
from test_connect import BOREALIS


def _three_nodes(cluster) -> list[str]:
    """connect_Connect.xml: box0 (Packet -> Source) on the first node, box1 (Source -> Result) on the second."""
    cluster.start_head()
    nodes = cluster.start_nodes(3)
    app = cluster.write("app.xml", (BOREALIS / "connect_Connect.xml").read_text())
    dep = cluster.write("dep.xml", f"""<deploy>
  <publish stream="Packet" node="{nodes[0]}"/> <node endpoint="{nodes[0]}" query="box0"/>
  <node endpoint="{nodes[1]}" query="box1"/> <node endpoint="{nodes[2]}" query=""/>
</deploy>""")
    cluster.submit(dep, app)
    return nodes


def _counter(cluster, name: str) -> dict[str, int]:
    return {e: n["counters"].get(name, 0) for e, n in cluster.nodes().items()}


async def test_chained_moves_of_published_and_subscribed_boxes_read_no_node_and_each_holds_its_slice(cluster_factory):
    cluster = cluster_factory()
    nodes = await asyncio.to_thread(_three_nodes, cluster)
    rows = [(float(n), n) for n in range(3000)]
    async with Subscriber(cluster.head, "Result", TOKEN) as subscriber, Optimizer(cluster.head, TOKEN) as optimizer:
        await asyncio.to_thread(wait_until, lambda: "Result" in str(cluster.head_catalog().subscriptions), 30,
                                "Result subscribed")
        await asyncio.to_thread(cluster.wait_in_sync, *nodes)
        reads = await asyncio.to_thread(_counter, cluster, "catalog_reads")
        patched = await asyncio.to_thread(_counter, cluster, "patched")
        async with Publisher(cluster.head, "Packet", TOKEN, batch_size=50) as publisher:
            sending = asyncio.create_task(publisher.send(rows))
            await asyncio.sleep(0.2)  # (as tests/test_moves.py: the publisher under way before the first move)
            for box, target in (("box1", nodes[2]), ("box0", nodes[1]), ("box1", nodes[0]),
                                ("box0", nodes[2]), ("box1", nodes[2])):
                source = (await optimizer.move(box, target)).source
                await asyncio.to_thread(cluster.wait_in_sync, *nodes)
                head = await asyncio.to_thread(cluster.head_catalog)
                assert head.boxes[box].node == target
                for endpoint in nodes:
                    await asyncio.to_thread(
                        wait_until, lambda: cluster.node_catalog(endpoint) == node_slice(head, endpoint),
                        10, f"{endpoint} in its slice after {box} moved to {target}")
                now = await asyncio.to_thread(_counter, cluster, "patched")
                assert {e: now[e] - patched[e] for e in (source, target)} == {source: 1, target: 1}
                patched = now
            await sending
        got = await collect(subscriber, len(rows))
    assert got == rows
    assert await asyncio.to_thread(_counter, cluster, "catalog_reads") == reads  # no node read again
