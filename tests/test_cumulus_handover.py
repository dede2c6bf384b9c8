"""Producers handed to a grown coordinator and back, with real processes (docs/cumulus.md §6.5).

A group-by partitioned over two node processes gets a third while
publishers stream: the resubmission makes it *joining*, and ``boreas
rebalance`` makes it a member and a coordinator (the layout's coordinator
list grows).  The producers the third node wins by the rendezvous pick are
handed over at the change's first epoch: their old coordinator forwards what
still reaches it, its acknowledgements name the third node, and the
publishers redirect there.  Afterwards the third node coordinates them (its
``/segments`` status says so), the view equals the expected result exactly
(nothing lost, nothing twice) and every stable read equals the input prefixes
it names; a publisher that starts after the change picks the third node by
the list the catalog now carries, and no batch of it is forwarded.  The second test empties and retires the third node while the
publishers stream: its producers go back, and the view stays exact.
"""

from __future__ import annotations

import asyncio

import pytest
from boreas.client.optimizer import Optimizer
from boreas.client.publisher import Publisher
from boreas.client.query import QueryClient
from boreas.m3.cumulus.coordinators import pick
from support.cluster import TOKEN, get_json
from test_cumulus_groupby import APP, BATCH, PrefixViews, deployment, expected_view, streaming, view_becomes, workload
from test_cumulus_relayout import catalogs_agree

pytestmark = pytest.mark.slow


def producers(count: int = 6) -> list[str]:
    """Producer ids of which half move to the third coordinator when it is listed, half stay."""
    moving = [p for p in (f"handover-{i}" for i in range(200)) if pick(p, (0, 1, 2)) == 2]
    staying = [p for p in (f"handover-{i}" for i in range(200)) if pick(p, (0, 1, 2)) != 2]
    return moving[:count // 2] + staying[:count - count // 2]


async def publish_then_end(head: str, producer: str, rows: list[tuple]) -> str:
    """Publish ``rows`` slowly (a layout change happens meanwhile), then end the producer with
    :meth:`Publisher.end`; the node its link ended at."""
    publisher = Publisher(head, "R", TOKEN, producer=producer, batch_size=BATCH)
    await publisher.start()
    for start in range(0, len(rows), 200):
        await publisher.send(rows[start:start + 200])
        await asyncio.sleep(0.1)
    await publisher.end()
    return publisher.links[0].endpoint


def coordinating(node: str, box: str = "v") -> dict:
    return get_json(f"http://{node}/segments/{box}")["coordinating"]


async def joining(cluster) -> list[str]:
    """Three nodes, the box partitioned over the first two, the third joining (resubmitted, docs/cumulus.md §6.4)."""
    await asyncio.to_thread(cluster.start_head)
    nodes = await asyncio.to_thread(cluster.start_nodes, 3)
    cluster.submit(cluster.write("app.xml", APP), cluster.write("deploy.xml", deployment(nodes[:2])))
    await asyncio.to_thread(cluster.wait_in_sync, *nodes[:2])
    await asyncio.to_thread(cluster.submit, cluster.write("grow.xml", deployment(nodes)))
    await asyncio.to_thread(cluster.wait_in_sync, *nodes)
    return nodes


async def test_a_grown_node_takes_over_coordinating_its_share_of_producers(cluster_factory):
    cluster = cluster_factory()
    nodes = await joining(cluster)
    data = {p: workload(p, 10000) for p in producers()}
    ender = next(p for p in (f"ender-{i}" for i in range(200)) if pick(p, (0, 1, 2)) == 2)
    ending = workload(ender, 20000)
    stable_reads: list = []
    async with streaming(cluster.head, data, stable_reads, lead=1.0), Optimizer(cluster.head, TOKEN) as optimizer:
        ended = asyncio.create_task(publish_then_end(cluster.head, ender, ending))
        done = (await optimizer.move("v/0", nodes[2])).relayout  # the change that makes it a member lists it as a coordinator
        redirected_to = await ended
    assert done["changed"] and done["layout"]["coordinators"] == [0, 1, 2], done
    assert redirected_to == nodes[2]  # the ender was redirected while it published, then ended
    await view_becomes(cluster.head, "v", expected_view([r for rows in [*data.values(), ending] for r in rows]))
    async with QueryClient(cluster.head, TOKEN) as client:
        final = await client.query("v", stable=True)
    assert {p: q for _, p, q in final.positions}[ender] == len(ending) // BATCH - 1  # every batch it sent
    # its end went where its batches went: the node it feeds now drops what is sent later under its id
    async with Publisher(cluster.head, "R", TOKEN, producer=ender, batch_size=BATCH) as again:
        assert again.entries == [nodes[2]]
        await again.send([(1, 1, 1)])
        await again.flush(timeout=30)
    assert again.duplicates == 1 and again.accepted == 0
    prefixes = PrefixViews({**data, ender: ending})
    assert stable_reads
    for result in stable_reads:
        assert result.as_dict() == prefixes.at(result.positions), f"stable epoch {result.epoch}"
    await asyncio.to_thread(catalogs_agree, cluster, nodes, "v")
    third = coordinating(nodes[2])
    assert third["producers"] >= 1, [coordinating(n) for n in nodes]  # the producers it won, stamped there
    assert sum(coordinating(n)["handed"] for n in nodes[:2]) >= 1
    # A publisher that starts now picks by the committed list (the Head's route carries it): the third node
    # coordinates a producer it wins from the first batch, and no member forwards any of them.
    late = next(p for p in (f"late-{i}" for i in range(200)) if pick(p, (0, 1, 2)) == 2)
    forwarded = [coordinating(n)["forwarded"] for n in nodes]
    rows = workload(late, 3000)
    async with Publisher(cluster.head, "R", TOKEN, producer=late, batch_size=100) as publisher:
        assert publisher.entries == [nodes[2]]
        await publisher.send(rows)
        await publisher.flush(timeout=30)
    await view_becomes(cluster.head, "v", expected_view([r for rows in [*data.values(), ending, rows] for r in rows]))
    assert [coordinating(n)["forwarded"] for n in nodes] == forwarded
    assert coordinating(nodes[2])["producers"] == third["producers"] + 1


async def test_a_grown_coordinator_is_emptied_and_retired_while_publishers_stream(cluster_factory):
    cluster = cluster_factory()
    nodes = await joining(cluster)
    data = {p: workload(p, 12000) for p in producers()}
    stable_reads: list = []
    optimizer = Optimizer(cluster.head, TOKEN)
    async with streaming(cluster.head, data, stable_reads, lead=1.0), optimizer:
        await optimizer.move("v/0", nodes[2])
        await asyncio.sleep(1.5)
        before = coordinating(nodes[2])
        async with QueryClient(cluster.head, TOKEN) as client:
            layout = await client.layout_of("v", fresh=True)
        for k, seg in enumerate(layout.segments_of(2)):
            await optimizer.move(f"v/{seg.id}", nodes[k % 2])
        retired = await asyncio.to_thread(cluster.boreas, "retire", "v", nodes[2], "--head", cluster.head)
        assert retired.returncode == 0 and f"{nodes[2]} retired" in retired.stdout, retired.stderr
    assert before["producers"] >= 1, before  # it coordinated producers before it retired
    await view_becomes(cluster.head, "v", expected_view([r for rows in data.values() for r in rows]))
    prefixes = PrefixViews(data)
    for result in stable_reads:
        assert result.as_dict() == prefixes.at(result.positions), f"stable epoch {result.epoch}"
    await asyncio.to_thread(catalogs_agree, cluster, nodes[:2], "v")
    assert "v" not in cluster.node_catalog(nodes[2]).partitions
