"""Revision boxes inside a node (issue 35 item 1): a publisher's plain rows go through a revision aggregate and a
revision map, and what leaves for a subscriber is a changelog; the boxes' state is in the node's snapshot.

In process: a :class:`~boreas.node.dataflow.Dataflow` fed batches by hand, as its input queue feeds it.
"""

from __future__ import annotations

import msgspec
from boreas.catalog import Catalog, plan_submission, read_document
from boreas.catalog.model import Subscription
from boreas.m3.boxtype import box_types
from boreas.node.dataflow import Dataflow
from boreas.wire.columns import WEIGHT, Columns, read_ipc

APP = """<borealis>
  <schema name="Quote"><field name="time" type="int"/><field name="quote" type="string" size="4"/>
    <field name="price" type="int"/></schema>
  <input stream="Quotes" schema="Quote"/>
  <box name="sums" type="revisionaggregate"><in stream="Quotes"/><out stream="Sums"/>
    <parameter name="aggregate-function.0" value="sum(price)"/><parameter name="window-size-by" value="VALUES"/>
    <parameter name="window-size" value="10"/><parameter name="order-by" value="FIELD"/>
    <parameter name="order-on-field" value="time"/><parameter name="group-by" value="quote"/></box>
  <box name="cents" type="revisionmap"><in stream="Sums"/><out stream="Cents"/>
    <parameter name="expression.0" value="quote"/><parameter name="output-field-name.0" value="quote"/>
    <parameter name="expression.1" value="agg_0 * 100"/><parameter name="output-field-name.1" value="cents"/></box>
</borealis>"""


def flow() -> Dataflow:
    catalog = plan_submission(Catalog(), [read_document(APP, "app.xml")], box_types()).catalog
    catalog.subscriptions["Cents|c:9"] = Subscription("Cents", "c:9")
    dataflow = Dataflow("n:1", None, "n:1#a", box_types=box_types())
    dataflow.reconfigure(catalog)
    return dataflow


def sent(dataflow: Dataflow) -> list[tuple[list[tuple], list[int]]]:
    out = []
    for _, rows, _, _ in dataflow.out.withdraw("c:9", {"Cents"}):
        assert isinstance(rows, Columns) and rows.weights is not None, "a revision box's out stream is a changelog"
        assert WEIGHT in read_ipc(rows.ipc()).schema.names  # as it goes on the wire
        out.append((rows.rows(), rows.weight_list()))
    return out


async def test_plain_rows_become_a_changelog_that_revises_what_it_sent_and_survives_a_snapshot():
    dataflow = flow()
    await dataflow.router.enter("Quotes", [(1, "IBM", 10), (2, "SUN", 3)], "pub", 0, "")
    assert sent(dataflow) == [([("IBM", 1000, None), ("SUN", 300, None)], [1, 1])]
    captured = msgspec.msgpack.decode(msgspec.msgpack.encode(dataflow.state.capture()))
    await dataflow.router.enter("Quotes", [(4, "IBM", 5)], "pub", 1, "")
    assert sent(dataflow) == [([("IBM", 1000, None), ("IBM", 1500, None)], [-1, 1])]

    again = flow()  # a restart from the snapshot: the aggregate still knows IBM's 10
    again.state.restore(captured)
    await again.router.enter("Quotes", [(4, "IBM", 5)], "pub", 1, "")
    assert sent(again) == [([("IBM", 1000, None), ("IBM", 1500, None)], [-1, 1])]
