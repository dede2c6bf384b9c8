"""random_drop -> window_drop -> delay inside a node (issue 30): a stream entered as Arrow columns reaches the
subscriber as the same rows as the same stream entered as rows, with columns between the boxes.

In process: two :class:`~boreas.node.dataflow.Dataflow` fed the same batches by hand (one as ``Columns``, one
as rows), their timers fired by hand.
"""

from __future__ import annotations

import pyarrow as pa
from boreas.catalog import Catalog, plan_submission, read_document
from boreas.catalog.model import Field, FieldType, Schema, Subscription
from boreas.m3.boxtype import box_types
from boreas.node.dataflow import Dataflow
from boreas.wire.columns import Columns, arrow_schema, as_rows

APP = """<borealis>
  <schema name="R"><field name="sensor" type="int"/><field name="time" type="int"/></schema>
  <input stream="In" schema="R"/>
  <box name="thin" type="random_drop"><in stream="In"/><out stream="Thin"/>
    <parameter name="drop_rate" value="0.2"/><parameter name="seed" value="5"/></box>
  <box name="windows" type="window_drop"><in stream="Thin"/><out stream="Kept"/>
    <parameter name="drop_rate" value="0.5"/><parameter name="window-size" value="10"/>
    <parameter name="order-on-field" value="time"/><parameter name="group-by" value="sensor"/>
    <parameter name="seed" value="6"/></box>
  <box name="later" type="delay"><in stream="Kept"/><out stream="Out"/><parameter name="delay-ms" value="100"/></box>
</borealis>"""
R = Schema("R", (Field("sensor", FieldType.INT), Field("time", FieldType.INT)))


def flow() -> Dataflow:
    catalog = plan_submission(Catalog(), [read_document(APP, "app.xml")], box_types()).catalog
    catalog.subscriptions["Out|c:9"] = Subscription("Out", "c:9")
    dataflow = Dataflow("n:1", None, "n:1#a", box_types=box_types())
    dataflow.reconfigure(catalog)
    return dataflow


async def run(as_columns: bool) -> tuple[list[tuple], list[bool]]:
    dataflow = flow()
    rows = [(t % 3, t) for t in range(200)]
    now = 0.0
    for seq, at in enumerate(range(0, 200, 37)):
        part = rows[at:at + 37]
        dataflow.clock.set_current(now)
        await dataflow.router.enter("In", columns_of(part) if as_columns else part, "pub", seq, "")
        now += 0.05
    for _ in range(10):
        deadline = dataflow.timers.next_deadline()
        if deadline is None:
            break
        await dataflow.timers.fire(max(deadline, now), record=False)
    out, kinds = [], []
    for _, sent, _, _ in dataflow.out.withdraw("c:9", {"Out"}):
        kinds.append(isinstance(sent, Columns))
        out += as_rows(sent)
    return out, kinds


def columns_of(rows: list[tuple]) -> Columns:
    target = arrow_schema(R)
    return Columns(pa.RecordBatch.from_arrays([pa.array([r[i] for r in rows], f.type) for i, f in enumerate(target)],
                                              schema=target))


async def test_columns_through_the_three_boxes_give_the_rows_rows_give():
    by_columns, kinds = await run(True)
    by_rows, _ = await run(False)
    assert by_columns == by_rows
    assert 0 < len(by_rows) < 200 and kinds and all(kinds)
