"""Changelogs inside a node (issue 30): a publisher cannot send weights on a plain input stream, and a box
that moved in and orders its own inputs keeps a changelog's weights while it holds and orders them.

In process: a :class:`~boreas.node.dataflow.Dataflow` fed frames by hand, as its ``/data`` receiver feeds it.
"""

from __future__ import annotations

import msgspec
import pyarrow as pa
from boreas.catalog import Catalog, plan_submission, read_document
from boreas.catalog.model import Field, FieldType, Schema, Subscription
from boreas.node.box_state import BoxHandover
from boreas.node.dataflow import Dataflow
from boreas.wire.columns import WEIGHT, Columns, arrow_schema, payload
from boreas.wire.frames import ARROW, Ack, Batch, Refused

APP = """<borealis>
  <schema name="S"><field name="k" type="int"/><field name="v" type="int"/></schema>
  <input stream="V" schema="S"/>
  <box name="big" type="filter"><in stream="V"/><out stream="F"/><parameter name="expression.0" value="v &gt; 1"/></box>
</borealis>"""
S = Schema("S", (Field("k", FieldType.INT), Field("v", FieldType.INT)))


def local() -> Catalog:
    """The node's local catalog: F goes to a downstream node c:9 (its queued batches are what the node sends)."""
    catalog = plan_submission(Catalog(), [read_document(APP, "app.xml")]).catalog
    catalog.subscriptions["F|c:9"] = Subscription("F", "c:9")
    return catalog


def flow() -> Dataflow:
    catalog = local()
    dataflow = Dataflow("n:1", None, "n:1#a")
    dataflow.reconfigure(catalog)
    return dataflow


def signed(rows: list[tuple], weights: list[int]) -> Columns:
    arrays = [pa.array([r[i] for r in rows], f.type) for i, f in enumerate(arrow_schema(S))]
    return Columns(pa.RecordBatch.from_arrays(arrays, schema=arrow_schema(S)), weights=pa.array(weights, pa.int64()))


def frame(columns: Columns, producer: str, seq: int, box: str = "") -> Batch:
    return Batch("V", producer, seq, msgspec.Raw(payload(columns)), box=box, fmt=ARROW)


async def test_a_publishers_weight_column_on_a_plain_input_stream_is_refused_naming_stream_and_column():
    dataflow = flow()
    answer = await dataflow.intake.accept(frame(signed([(1, 5)], [-1]), "pub", 0))
    assert isinstance(answer, Refused)
    assert "stream 'V' is a plain input stream" in answer.reason and f"{WEIGHT!r} column" in answer.reason
    assert not answer.retry  # refused for good: the receiver consumes its number (no gap before the next batch)
    assert dataflow.queued == 0  # nothing of it was taken
    plain = await dataflow.intake.accept(frame(Columns(signed([(1, 5)], [1]).batch), "pub", 0))
    assert isinstance(plain, Ack) and plain.accepted == 1  # the same rows without weights are taken


async def test_a_box_that_moved_in_keeps_a_changelogs_weights_while_it_orders_its_inputs():
    dataflow = flow()
    moved = dataflow.state.take("big", positions=[("V", "view~1", 0)])  # it leaves, and comes back as moved
    dataflow.reconfigure(local())
    dataflow.state.put(BoxHandover("big", moved.producer, moved.out_seq, [("V", "view~1", 0)], moved.state), 0.0)
    dataflow.router.rewire({})
    # batch 1 comes first: held for the gap (and kept by a snapshot with its weights), then batch 0 frees both
    await dataflow.router.enter("V", signed([(1, 5), (2, 1)], [-1, 1]), "view~1", 1, "big")
    captured = msgspec.msgpack.decode(msgspec.msgpack.encode(dataflow.state.capture()))
    assert dataflow.out.withdraw("c:9", {"F"}) == []
    await dataflow.router.enter("V", signed([(1, 5), (3, 7)], [1, 2]), "view~1", 0, "big")
    out = [(rows.rows(), rows.weight_list()) for _, rows, _, _ in dataflow.out.withdraw("c:9", {"F"})]
    assert out == [([(1, 5), (3, 7)], [1, 2]), ([(1, 5)], [-1])]

    again = flow()  # a restart from the snapshot taken while batch 1 was held
    again.state.take("big", positions=[])
    again.reconfigure(local())
    again.state.restore(captured)
    again.router.rewire({})
    await again.router.enter("V", signed([(1, 5), (3, 7)], [1, 2]), "view~1", 0, "big")
    out = [(rows.rows(), rows.weight_list()) for _, rows, _, _ in again.out.withdraw("c:9", {"F"})]
    assert out == [([(1, 5), (3, 7)], [1, 2]), ([(1, 5)], [-1])]
