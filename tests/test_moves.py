"""Moving boxes while tuples flow (paper section 3.1), with real node processes."""

from __future__ import annotations

import asyncio

from boreas.catalog.slices import node_slice
from boreas.cli.optimize import move_box
from boreas.client.publisher import Publisher
from boreas.client.subscriber import Subscriber
from support.cluster import EXAMPLES, TOKEN, http, wait_until
from support.streams import collect

BOREALIS = EXAMPLES.parents[1] / "tests" / "data" / "borealis"


def two_nodes_with_a_filter(cluster, region: bool = False) -> list[str]:
    """move_Move.xml: box1 filters Packet into Result; Packet enters at the first node.

    With ``region``, both nodes are in the default region, as in the
    Borealis move test (move_MoveDeploy.xml), and its regional component runs.
    """
    cluster.start_head()
    nodes = [cluster.start_node() for _ in range(2)]
    if region:
        cluster.region = cluster.start_region()
    app = cluster.write("app.xml", (BOREALIS / "move_Move.xml").read_text())
    regions = "".join(f'<region node="{n}"/>' for n in nodes) if region else ""
    dep = cluster.write("dep.xml", f"""<deploy>
  <publish stream="Packet" node="{nodes[0]}"/>
  <node endpoint="{nodes[0]}" query="box1"/> <node endpoint="{nodes[1]}" query=""/> {regions}
</deploy>""")
    cluster.submit(app, dep)
    return nodes


async def test_a_box_moves_once_while_tuples_flow(cluster_factory):
    cluster = cluster_factory()
    nodes = await asyncio.to_thread(two_nodes_with_a_filter, cluster)
    rows = [(float(n), n) for n in range(4000)]
    async with Subscriber(cluster.head, "Result", TOKEN) as subscriber:
        async with Publisher(cluster.head, "Packet", TOKEN, batch_size=50) as publisher:
            sending = asyncio.create_task(publisher.send(rows))
            await asyncio.sleep(0.2)
            source = await move_box(cluster.head, TOKEN, "box1", nodes[1])
            await sending
        got = await collect(subscriber, len(rows))
    assert source == nodes[0]
    assert got == rows
    catalog = await asyncio.to_thread(cluster.head_catalog)
    assert catalog.boxes["box1"].node == nodes[1]
    for node in nodes:
        await asyncio.to_thread(wait_until, lambda: cluster.node_catalog(node) == node_slice(catalog, node),
                                10, f"{node} in its slice")
    assert "box1" in cluster.node_catalog(nodes[1]).boxes


def test_moving_a_box_that_is_not_there_is_refused(cluster_factory):
    cluster = cluster_factory()
    nodes = two_nodes_with_a_filter(cluster)
    status, body = http("POST", f"http://{nodes[1]}/update",
                        f'<update><move box="box1" node="{nodes[0]}"/></update>'.encode())
    assert status == 409 and b"not on node" in body
    result = cluster.boreas("move", "nosuch", nodes[1])
    assert result.returncode == 1 and "no box 'nosuch'" in result.stderr



async def move_back_and_forth(cluster, box: str, nodes: list[str], publish, every: float = 0.1) -> int:
    """Move ``box`` between the nodes every ``every`` seconds until ``publish`` finishes; the move count."""
    moves = 0
    while not publish.done():
        await move_box(cluster.head, TOKEN, box, nodes[(moves + 1) % 2])
        moves += 1
        await asyncio.sleep(every)
    await publish
    return moves


def assert_everyone_agrees(cluster, box: str, nodes: list[str]) -> None:
    """The global catalog, the regional catalog and both local catalogs put ``box`` on one node."""
    where = cluster.head_catalog().boxes[box].node
    wait_until(lambda: cluster.region_status(cluster.region)["boxes"].get(box) == where, 10,
               f"the regional catalog to put {box} on {where}")
    for node in nodes:
        wait_until(lambda: (box in cluster.node_catalog(node).boxes) == (node == where), 10,
                   f"{node}'s local catalog to agree on {box}")


async def test_a_filter_moves_back_and_forth_every_100ms(cluster_factory):
    """Modeled on the Borealis move test: two nodes, a regional component, 10,000 numbered tuples."""
    cluster = cluster_factory()
    nodes = await asyncio.to_thread(two_nodes_with_a_filter, cluster, True)
    rows = [(float(n), n) for n in range(10_000)]
    async with Subscriber(cluster.head, "Result", TOKEN) as subscriber:
        async with Publisher(cluster.head, "Packet", TOKEN, batch_size=20) as publisher:
            async def publish():
                for start in range(0, len(rows), 100):
                    await publisher.send(rows[start:start + 100])
                    await asyncio.sleep(0.03)
            moves = await move_back_and_forth(cluster, "box1", nodes, asyncio.create_task(publish()))
        got = await collect(subscriber, len(rows))
    assert moves >= 6
    assert got == rows
    await asyncio.to_thread(assert_everyone_agrees, cluster, "box1", nodes)
    members = (await asyncio.to_thread(cluster.region_status, cluster.region))["members"]
    assert sorted(members) == sorted(nodes)
