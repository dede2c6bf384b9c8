"""Borealis's fault-tolerance boxes inside a node (issue 35 item 2): an sunion and an soutput between two
publishers and a subscriber, as Borealis's own fault test wires them; the subscriber sees tentative rows (their
flag field and the control stream), their retraction and the stable rows, and the sunion's buckets are in the
node's snapshot.

In process: a :class:`~boreas.node.dataflow.Dataflow` fed batches by hand, its timers fired by hand.
"""

from __future__ import annotations

import msgspec
from boreas.catalog import Catalog, plan_submission, read_document
from boreas.catalog.model import Subscription
from boreas.m3.boxtype import box_types
from boreas.node.dataflow import Dataflow
from boreas.wire.columns import Columns

APP = """<borealis>
  <schema name="Empty"/>
  <schema name="Trivial"><field name="time" type="int"/><field name="value" type="int"/></schema>
  <input stream="A" schema="Trivial"/><input stream="B" schema="Trivial"/>
  <box name="merge" type="sunion"><in stream="A"/><in stream="B"/><out stream="Control"/><out stream="Union"/>
    <parameter name="interval" value="10"/><parameter name="location" value="input"/>
    <parameter name="max-delay.0" value="2000"/><parameter name="max-delay.1" value="2000"/>
    <parameter name="stagger" value="1"/><parameter name="order-on-field" value="time"/>
    <parameter name="tentative-field" value="tentative"/></box>
  <box name="out" type="soutput"><in stream="Union"/><out stream="OutControl"/><out stream="Out"/></box>
  <output stream="Control" schema="Empty"/>
</borealis>"""


def flow() -> Dataflow:
    catalog = plan_submission(Catalog(), [read_document(APP, "app.xml")], box_types()).catalog
    for stream in ("Out", "Control"):
        catalog.subscriptions[f"{stream}|c:9"] = Subscription(stream, "c:9")
    dataflow = Dataflow("n:1", None, "n:1#a", box_types=box_types())
    dataflow.reconfigure(catalog)
    return dataflow


def sent(dataflow: Dataflow, stream: str) -> list[tuple[tuple, int]]:
    out = []
    for _, rows, _, _ in dataflow.out.withdraw("c:9", {stream}):
        assert isinstance(rows, Columns) and rows.weights is not None, "an sunion's out streams are changelogs"
        out += list(zip(rows.rows(), rows.weight_list()))
    return out


async def enter(dataflow: Dataflow, stream: str, rows: list[tuple], seq: int, now: float) -> None:
    dataflow.clock.set_current(now)
    await dataflow.router.enter(stream, rows, f"pub-{stream}", seq, "")


async def test_tentative_rows_reach_the_subscriber_then_their_correction_and_survive_a_snapshot():
    dataflow = flow()
    await enter(dataflow, "A", [(1, 1)], 0, 0.0)
    await enter(dataflow, "B", [(2, 2), (12, 3)], 0, 0.0)
    assert sent(dataflow, "Out") == []  # bucket 0 waits for A
    await dataflow.timers.fire(dataflow.timers.next_deadline(), record=False)  # A silent past 2 s
    assert sent(dataflow, "Control") == [((), 1)]
    assert sent(dataflow, "Out") == [((1, 1, 1), 1), ((2, 2, 1), 1), ((12, 3, 1), 1)]
    captured = msgspec.msgpack.decode(msgspec.msgpack.encode(dataflow.state.capture()))

    await enter(dataflow, "A", [(15, 4)], 1, 3.0)  # A is back, past bucket 0
    corrected = [((15, 4, 1), 1),  # into bucket 1, which went out tentative: so does the row
                 ((1, 1, 1), -1), ((2, 2, 1), -1), ((12, 3, 1), -1), ((15, 4, 1), -1),  # the UNDO
                 ((1, 1, 0), 1), ((2, 2, 0), 1),  # bucket 0, stable
                 ((12, 3, 1), 1), ((15, 4, 1), 1)]  # bucket 1 again: B is not past it yet
    assert sent(dataflow, "Out") == corrected

    again = flow()  # a restart from the snapshot: the sunion still holds its buckets
    again.state.restore(captured)
    await enter(again, "A", [(15, 4)], 1, 3.0)
    assert sent(again, "Out") == corrected
    assert sent(again, "Control") == []  # still tentative: bucket 1 is
    await enter(again, "B", [(20, 5)], 1, 3.0)
    await enter(again, "A", [(22, 6)], 2, 3.0)  # both past bucket 1: all stable, bucket 2 waits
    assert sent(again, "Control") == [((), -1)]
    assert sent(again, "Out") == [((12, 3, 1), -1), ((15, 4, 1), -1), ((12, 3, 0), 1), ((15, 4, 0), 1)]
