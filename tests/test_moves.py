"""Moving boxes while tuples flow (paper section 3.1), with real node processes."""

from __future__ import annotations

import asyncio

import pytest
from boreas.catalog.slices import node_slice
from boreas.client.optimizer import Optimizer
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
    nodes = cluster.start_nodes(2)
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
            async with Optimizer(cluster.head, TOKEN) as optimizer:
                source = (await optimizer.move("box1", nodes[1])).source
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


@pytest.mark.slow
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
    async with Optimizer(cluster.head, TOKEN) as optimizer:
        while not publish.done():
            await optimizer.move(box, nodes[(moves + 1) % 2])
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


async def run_with_moves(cluster, box: str, nodes: list[str], rows: list[tuple], out: str,
                         count: int) -> tuple[int, list[tuple]]:
    """Publish ``rows`` to Packet in batches while ``box`` moves; the moves and ``count`` rows of ``out``."""
    async with Subscriber(cluster.head, out, TOKEN) as subscriber:
        reading = asyncio.create_task(collect(subscriber, count))
        async with Publisher(cluster.head, "Packet", TOKEN, batch_size=20) as publisher:
            async def publish():
                for start in range(0, len(rows), 100):
                    await publisher.send(rows[start:start + 100])
                    await asyncio.sleep(0.03)
            moves = await move_back_and_forth(cluster, box, nodes, asyncio.create_task(publish()))
        return moves, await reading


@pytest.mark.slow
async def test_a_filter_moves_back_and_forth_every_100ms(cluster_factory):
    """Modeled on the Borealis move test: two nodes, a regional component, 10,000 numbered tuples."""
    cluster = cluster_factory()
    nodes = await asyncio.to_thread(two_nodes_with_a_filter, cluster, True)
    rows = [(float(n), n) for n in range(10_000)]
    moves, got = await run_with_moves(cluster, "box1", nodes, rows, "Result", len(rows))
    assert moves >= 6
    assert got == rows
    await asyncio.to_thread(assert_everyone_agrees, cluster, "box1", nodes)
    members = (await asyncio.to_thread(cluster.region_status, cluster.region))["members"]
    assert sorted(members) == sorted(nodes)


AGGREGATE = """<borealis>
  <input stream="Packet" schema="PacketTuple"/> <output stream="Sums" schema="SumTuple"/>
  <schema name="PacketTuple"> <field name="value" type="double"/> <field name="time" type="int"/> </schema>
  <schema name="SumTuple"> <field name="band" type="int"/> <field name="time" type="int"/>
    <field name="count" type="int"/> <field name="total" type="double"/> </schema>
  <box name="banded" type="map"> <in stream="Packet"/> <out stream="Banded"/>
    <parameter name="expression.0" value="time % 7"/> <parameter name="output-field-name.0" value="band"/>
    <parameter name="expression.1" value="time"/> <parameter name="output-field-name.1" value="time"/>
    <parameter name="expression.2" value="value"/> <parameter name="output-field-name.2" value="value"/>
  </box>
  <box name="sums" type="aggregate"> <in stream="Banded"/> <out stream="Sums"/>
    <parameter name="aggregate-function.0" value="count()"/>
    <parameter name="aggregate-function-output-name.0" value="count"/>
    <parameter name="aggregate-function.1" value="sum(value)"/>
    <parameter name="aggregate-function-output-name.1" value="total"/>
    <parameter name="group-by" value="band"/>
    <parameter name="window-size-by" value="VALUES"/> <parameter name="window-size" value="350"/>
    <parameter name="advance" value="350"/>
    <parameter name="order-by" value="FIELD"/> <parameter name="order-on-field" value="time"/>
  </box>
</borealis>"""


def without_moves(rows: list[tuple]) -> list[tuple]:
    """What the same boxes emit on one node with no moves: the operators run in this process."""
    from boreas.catalog import plan_submission, read_document
    from boreas.catalog.model import Catalog
    from boreas.catalog.validate import stream_schemas
    from boreas.node.operators import build_operator

    catalog = plan_submission(Catalog(), [read_document(AGGREGATE.encode(), "app")]).catalog
    schemas = stream_schemas(catalog)
    ops = [build_operator(catalog.boxes[b], [schemas[p.stream] for p in catalog.boxes[b].inputs],
                          [schemas[s] for s in catalog.boxes[b].outputs]) for b in ("banded", "sums")]
    out: list[tuple] = []
    for start in range(0, len(rows), 20):
        for _, banded in ops[0].process(0, rows[start:start + 20], 0.0):
            for _, sums in ops[1].process(0, banded, 0.0):
                out += sums
    return out


@pytest.mark.slow
async def test_an_aggregate_moves_back_and_forth_with_its_state(cluster_factory):
    """Its windows and groups move with it: the outputs equal those of a run with no moves."""
    cluster = cluster_factory()

    def deploy() -> list[str]:
        cluster.start_head()
        nodes = cluster.start_nodes(2)
        app = cluster.write("agg.xml", AGGREGATE)
        dep = cluster.write("agg_dep.xml", f"""<deploy> <publish stream="Packet" node="{nodes[0]}"/>
  <node endpoint="{nodes[0]}" query="banded sums"/> <node endpoint="{nodes[1]}" query=""/> </deploy>""")
        cluster.submit(app, dep)
        return nodes

    nodes = await asyncio.to_thread(deploy)
    rows = [(float(n % 13), n) for n in range(6_000)]
    expected = without_moves(rows)
    moves, got = await run_with_moves(cluster, "sums", nodes, rows, "Sums", len(expected))
    assert moves >= 4
    assert got == expected


@pytest.mark.slow
async def test_requests_for_a_moving_box_complete_on_its_new_node(cluster_factory):
    """Paper 3.1.2: a modify, a subscribe and a delete sent while the box moves all land where it is."""
    cluster = cluster_factory()
    nodes = await asyncio.to_thread(two_nodes_with_a_filter, cluster)
    done = asyncio.Event()

    async def keep_moving() -> int:
        moves = 0
        async with Optimizer(cluster.head, TOKEN) as optimizer:
            while not done.is_set():
                await optimizer.move("box1", nodes[(moves + 1) % 2])
                moves += 1
                await asyncio.sleep(0.05)
        return moves

    moving = asyncio.create_task(keep_moving())
    try:
        await asyncio.sleep(0.2)
        for n in range(3):
            modify = cluster.write(f"m{n}.xml", '<borealis><modify box="box1"><parameter name="expression.0" '
                                                f'value="time &gt; {n}"/></modify></borealis>')
            await asyncio.to_thread(cluster.submit, modify)
        async with Subscriber(cluster.head, "Result", TOKEN) as subscriber:
            async with Publisher(cluster.head, "Packet", TOKEN) as publisher:
                await publisher.send([(1.0, t) for t in range(10)])
            assert await collect(subscriber, 7) == [(1.0, t) for t in range(3, 10)]
    finally:
        done.set()
        moves = await moving
    assert moves >= 2
    catalog = await asyncio.to_thread(cluster.head_catalog)
    where = catalog.boxes["box1"].node
    assert catalog.boxes["box1"].param("expression.0") == "time > 2"
    await asyncio.to_thread(wait_until, lambda: cluster.node_catalog(where).boxes["box1"].param("expression.0")
                            == "time > 2", 10, "the modified box on its node")
    delete = cluster.write("del.xml", '<borealis><delete box="box1"/></borealis>')
    await asyncio.to_thread(cluster.submit, delete)
    for node in nodes:
        assert "box1" not in (await asyncio.to_thread(cluster.node_catalog, node)).boxes


@pytest.mark.slow
async def test_a_regional_component_moves_a_box_of_its_region(cluster_factory):
    from boreas.regional.component import RegionalComponent

    cluster = cluster_factory()
    nodes = await asyncio.to_thread(two_nodes_with_a_filter, cluster, True)
    region = RegionalComponent(cluster.head, TOKEN, name="default")  # takes over the default region
    await region.start()
    try:
        await region.wait_until(lambda: region.catalog.location("box1") == nodes[0], 10, "box1 on the source")
        assert await region.move("box1", nodes[1]) == nodes[0]
        assert "box1" in region.catalog.application_xml()
        await asyncio.to_thread(wait_until, lambda: cluster.head_catalog().boxes["box1"].node == nodes[1], 10,
                                "the Head to learn the move")
    finally:
        await region.close()


@pytest.mark.slow
@pytest.mark.parametrize("target", ["unreachable", "refusing"])
async def test_a_failed_move_leaves_the_regional_catalog_as_it_was(cluster_factory, target):
    """Regions hear of a move before the handover; when it fails they get the box back."""
    from boreas.client.optimizer import OptimizerFailed
    from boreas.regional.component import RegionalComponent
    from support.cluster import free_port

    cluster = cluster_factory()
    nodes = await asyncio.to_thread(two_nodes_with_a_filter, cluster, True)
    where = f"localhost:{free_port()}" if target == "unreachable" else cluster.head.removeprefix("http://")
    region = RegionalComponent(cluster.head, TOKEN, name="default")
    await region.start()
    try:
        await region.wait_until(lambda: region.catalog.location("box1") == nodes[0], 10, "box1 on the source")
        with pytest.raises(OptimizerFailed):
            await region.move("box1", where, timeout=5)
        await region.wait_until(lambda: region.catalog.location("box1") == nodes[0], 10,
                                "box1 back on the source in the region")
        assert 'name="box1"' in region.catalog.application_xml()
        assert cluster.head_catalog().boxes["box1"].node == nodes[0]
        assert "box1" in cluster.node_catalog(nodes[0]).boxes
    finally:
        await region.close()


@pytest.mark.slow
async def test_a_box_moves_onto_the_node_that_reads_its_output(cluster_factory):
    """README's `boreas move valid NODE`: the target briefly has the stream as input and as the
    box's output (until the Head re-syncs it); the move must be taken, not refused."""
    cluster = cluster_factory()
    nodes, _ = await asyncio.to_thread(cluster.sensor_chain)
    done = await asyncio.to_thread(cluster.boreas, "move", "valid", nodes[1])
    assert done.returncode == 0, done.stderr
    await asyncio.to_thread(wait_until, lambda: cluster.head_catalog().boxes["valid"].node == nodes[1], 10,
                            "the Head to learn the move")
    await asyncio.to_thread(wait_until, lambda: "valid" in cluster.node_catalog(nodes[1]).boxes, 10,
                            "valid on the node that reads its output")
