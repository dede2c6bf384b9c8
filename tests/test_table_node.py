"""Table boxes inside a node (issue 35 item 3): the boxes of a ``<table>`` share its rows; the table is in the
node's snapshot and moves with its boxes.

In process: a :class:`~boreas.node.dataflow.Dataflow` fed batches by hand, as its input queue feeds it; a move
is the source's :meth:`~boreas.node.box_state.BoxStates.take` and the target's ``put``, through the handover's
wire encoding.
"""

from __future__ import annotations

import msgspec
from boreas.catalog import Catalog, plan_submission, read_document
from boreas.catalog.model import Node, Subscription
from boreas.catalog.slices import SliceMaker
from boreas.m3.boxtype import box_types
from boreas.node.box_state import BoxHandover
from boreas.node.dataflow import Dataflow

APP = """<borealis>
  <schema name="Stock"><field name="sym" type="string" size="4"/><field name="qty" type="int"/></schema>
  <schema name="Ask"><field name="sym" type="string" size="4"/></schema>
  <input stream="Trades" schema="Stock"/><input stream="Sold" schema="Stock"/><input stream="Asks" schema="Ask"/>
  <table name="Stocks" schema="Stock"><key field="sym"/></table>
  <box name="add" type="insert"><in stream="Trades"/><access table="Stocks"/>
    <parameter name="sql" value="insert into Stocks values (sym, qty)"/></box>
  <box name="sell" type="update"><in stream="Sold"/><access table="Stocks"/>
    <parameter name="sql" value="update Stocks set Stocks.qty = Stocks.qty - input.qty where Stocks.sym == input.sym"/>
  </box>
  <box name="ask" type="select"><in stream="Asks"/><access table="Stocks"/><out stream="Held"/><out stream="None"/>
    <parameter name="sql" value="select * from Stocks where Stocks.sym == input.sym"/>
    <parameter name="pass-on-no-results" value="1"/></box>
</borealis>"""


def flow() -> Dataflow:
    catalog = plan_submission(Catalog(), [read_document(APP, "app.xml")], box_types()).catalog
    for stream in ("Held", "None"):
        catalog.subscriptions[f"{stream}|c:9"] = Subscription(stream, "c:9")
    dataflow = Dataflow("n:1", None, "n:1#a", box_types=box_types())
    dataflow.reconfigure(catalog)
    return dataflow


def sent(dataflow: Dataflow) -> dict[str, list[tuple]]:
    out: dict[str, list[tuple]] = {}
    for stream, rows, _, _ in dataflow.out.withdraw("c:9", {"Held", "None"}):
        out.setdefault(stream, []).extend(rows)
    return out


async def test_a_tables_boxes_share_its_rows_and_a_restart_from_a_snapshot_keeps_them():
    dataflow = flow()
    await dataflow.router.enter("Trades", [("IBM", 10), ("SUN", 3), ("IBM", 12)], "pub", 0, "")
    await dataflow.router.enter("Sold", [("IBM", 2)], "pub", 0, "")
    await dataflow.router.enter("Asks", [("IBM",), ("HP",)], "pub", 0, "")
    assert sent(dataflow) == {"Held": [("IBM", 10)], "None": [("HP",)]}
    captured = msgspec.msgpack.decode(msgspec.msgpack.encode(dataflow.state.capture()))

    again = flow()  # a restart from the snapshot: the table is back
    again.state.restore(captured)
    await again.router.enter("Sold", [("SUN", 1)], "pub", 1, "")
    await again.router.enter("Asks", [("SUN",), ("IBM",)], "pub", 1, "")
    assert sent(again) == {"Held": [("SUN", 2), ("IBM", 10)]}


async def test_a_table_moves_with_its_boxes():
    source = flow()
    await source.router.enter("Trades", [("IBM", 10), ("SUN", 3)], "pub", 0, "")
    await source.router.enter("Sold", [("SUN", 1)], "pub", 0, "")
    handovers = [source.state.take(name, positions=[]).encode() for name in ("add", "sell", "ask")]
    assert "ask" not in source.state.operators

    target = flow()
    for encoded in handovers:
        target.state.put(BoxHandover.decode(encoded), now=0.0)
    await target.router.enter("Asks", [("SUN",), ("IBM",), ("HP",)], "pub", 0, "")
    assert sent(target) == {"Held": [("SUN", 2), ("IBM", 10)], "None": [("HP",)]}


def test_a_nodes_slice_carries_the_table_its_boxes_access():
    """A table placed nowhere itself lives where its boxes run: the node builds them with its declaration."""
    catalog = Catalog()
    catalog.nodes["n:1"] = Node("n:1")
    placed = APP.replace('type="insert"', 'type="insert" node="n:1"').replace('type="select"', 'type="select" node="n:1"')
    placed = placed.replace('type="update"', 'type="update" node="n:1"')
    catalog = plan_submission(catalog, [read_document(placed, "app.xml")], box_types()).catalog
    part = SliceMaker(catalog, registry=box_types()).slice("n:1")
    assert list(part.tables) == ["Stocks"] and "Stock" in part.schemas
