"""Moving a ``<table>``'s boxes with real processes (issue 35 item 3).

A table's rows live on the one node that runs every box accessing it, so
``boreas move`` of one of its boxes must not leave the others behind.
"""

from __future__ import annotations

import asyncio

import pytest
from boreas.catalog.slices import node_slice
from boreas.client.publisher import Publisher
from boreas.client.subscriber import Subscriber
from support.cluster import TOKEN, free_port, http, wait_until
from support.streams import collect

pytestmark = pytest.mark.slow

APP = """<borealis>
  <schema name="Stock"><field name="sym" type="string" size="4"/><field name="qty" type="int"/></schema>
  <schema name="Ask"><field name="sym" type="string" size="4"/></schema>
  <input stream="Trades" schema="Stock"/><input stream="Asks" schema="Ask"/>
  <query name="q">
  <table name="Stocks" schema="Stock"><key field="sym"/></table>
  <box name="add" type="insert"><in stream="Trades"/><access table="Stocks"/>
    <parameter name="sql" value="insert into Stocks values (sym, qty)"/></box>
  <box name="ask" type="select"><in stream="Asks"/><access table="Stocks"/><out stream="Held"/><out stream="Missing"/>
    <parameter name="sql" value="select * from Stocks where Stocks.sym == input.sym"/>
    <parameter name="pass-on-no-results" value="1"/></box>
  </query>
  <output stream="Held"/><output stream="Missing"/>
</borealis>"""


def table_on_first_node(cluster) -> list[str]:
    cluster.start_head()
    nodes = cluster.start_nodes(2)
    cluster.submit(cluster.write("app.xml", APP), cluster.write("dep.xml", f"""<deploy>
  <publish stream="Trades" node="{nodes[0]}"/><publish stream="Asks" node="{nodes[0]}"/>
  <node endpoint="{nodes[0]}" query="q"/> <node endpoint="{nodes[1]}" query=""/>
</deploy>"""))
    return nodes


async def test_moving_one_box_of_a_table_moves_all_its_boxes_with_its_rows(cluster_factory):
    """``boreas move add`` takes ``ask`` along (both access Stocks) while trades flow: the Head and both nodes
    agree where they run, and every row inserted before, during and after the move is selected there."""
    cluster = cluster_factory()
    nodes = await asyncio.to_thread(table_on_first_node, cluster)
    trades = [(f"S{n}", n) for n in range(400)]
    async with Subscriber(cluster.head, "Held", TOKEN) as held, \
            Subscriber(cluster.head, "Missing", TOKEN) as missing:
        async with Publisher(cluster.head, "Trades", TOKEN, batch_size=10) as publisher:
            async def publish() -> None:
                for start in range(0, len(trades), 40):
                    await publisher.send(trades[start:start + 40])
                    await asyncio.sleep(0.02)
            assert (await asyncio.to_thread(cluster.head_catalog)).tables["Stocks"].node == nodes[0]
            sending = asyncio.create_task(publish())
            await asyncio.sleep(0.2)
            result = await asyncio.to_thread(cluster.boreas, "move", "add", nodes[1])
            await sending
        assert result.returncode == 0, result.stderr
        assert f"moved box add from {nodes[0]} to {nodes[1]}, with the boxes sharing its table: ask" in result.stdout
        catalog = await asyncio.to_thread(cluster.head_catalog)
        assert {b.name: b.node for b in catalog.boxes.values()} == {"add": nodes[1], "ask": nodes[1]}
        assert catalog.tables["Stocks"].node == nodes[1]  # placed with its query, it moved with its boxes
        for node in nodes:
            await asyncio.to_thread(wait_until, lambda: cluster.node_catalog(node) == node_slice(catalog, node),
                                    10, f"{node} in its slice")
        assert sorted(cluster.node_catalog(nodes[1]).tables) == ["Stocks"]
        assert not cluster.node_catalog(nodes[0]).boxes and not cluster.node_catalog(nodes[0]).tables
        async with Publisher(cluster.head, "Asks", TOKEN) as asks:
            await asks.send([(sym,) for sym, _ in trades] + [("NONE",)])
        assert await collect(held, len(trades)) == trades
        assert await collect(missing, 1) == [("NONE",)]

        # An update naming both boxes moves them back at once; the second is done with the first.
        status, body = await asyncio.to_thread(http, "POST", f"http://{nodes[1]}/update", (
            f'<update><move box="ask" node="{nodes[0]}"/><move box="add" node="{nodes[0]}"/></update>').encode())
        assert status == 200, body
        await asyncio.to_thread(wait_until, lambda: {b.node for b in cluster.head_catalog().boxes.values()}
                                == {nodes[0]}, 10, "both boxes back on the first node at the Head")
        catalog = await asyncio.to_thread(cluster.head_catalog)
        assert catalog.tables["Stocks"].node == nodes[0]
        for node in nodes:
            await asyncio.to_thread(wait_until, lambda: cluster.node_catalog(node) == node_slice(catalog, node),
                                    10, f"{node} in its slice")
        async with Publisher(cluster.head, "Asks", TOKEN) as asks:
            await asks.send([(sym,) for sym, _ in trades[::50]])
        assert await collect(held, len(trades[::50])) == trades[::50]


async def test_a_failed_move_of_a_tables_box_leaves_all_its_boxes_and_rows_on_the_source(cluster_factory):
    """The target cannot be reached: both boxes run on the source again, with every row, and no catalog moved."""
    cluster = cluster_factory()
    nodes = await asyncio.to_thread(table_on_first_node, cluster)
    trades = [(f"S{n}", n) for n in range(50)]
    async with Subscriber(cluster.head, "Held", TOKEN) as held:
        async with Publisher(cluster.head, "Trades", TOKEN) as publisher:
            await publisher.send(trades[:25])
            result = await asyncio.to_thread(cluster.boreas, "move", "add", f"localhost:{free_port()}")
            assert result.returncode == 1 and "did not take box 'add'" in result.stderr
            await publisher.send(trades[25:])
        catalog = await asyncio.to_thread(cluster.head_catalog)
        assert {b.name: b.node for b in catalog.boxes.values()} == {"add": nodes[0], "ask": nodes[0]}
        for node in nodes:
            await asyncio.to_thread(wait_until, lambda: cluster.node_catalog(node) == node_slice(catalog, node),
                                    10, f"{node} in its slice")
        async with Publisher(cluster.head, "Asks", TOKEN) as asks:
            await asks.send([(sym,) for sym, _ in trades])
        assert await collect(held, len(trades)) == trades
