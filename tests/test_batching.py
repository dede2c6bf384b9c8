"""Adaptive batching inside a node (issue 30 item 4): a box's output batch closes at N rows or T ms of flow
clock, and every close is a point of the input log, so a replay produces the same batches under the same
numbers.

In process: a :class:`~boreas.node.dataflow.Dataflow` driven by hand as its box task drives it (batches taken,
timers fired, its input queue found empty, snapshots captured), its input log on disk; what it would send downstream is read from its outbox
(:meth:`Outputs.withdraw`).  The "crash" is the dataflow abandoned with its log: a fresh one replays the log.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import hypothesis.strategies as st
import msgspec
import pyarrow as pa
from boreas.catalog import Catalog, plan_submission, read_document
from boreas.catalog.model import Subscription
from boreas.node.coalescer import UNBATCHED, BatchLimits, Coalescer
from boreas.node.dataflow import Dataflow
from boreas.node.inbox import Arrival
from boreas.node.journal import payload
from boreas.node.recovery import records
from boreas.node.recovery.log import InputLog
from boreas.wire.columns import Columns, read_rows
from boreas.wire.frames import ARROW, Batch, decode
from hypothesis import HealthCheck, given, settings

APP = """<borealis>
  <schema name="S"><field name="k" type="int"/><field name="v" type="int"/></schema>
  <schema name="C"><field name="k" type="int"/><field name="n" type="int"/></schema>
  <input stream="V" schema="S"/>
  <box name="keep" type="filter"><in stream="V"/><out stream="F"/>
    <parameter name="expression.0" value="v % 3 &lt;&gt; 0"/></box>
  <box name="double" type="map"><in stream="F"/><out stream="G"/>
    <parameter name="expression.0" value="k"/><parameter name="output-field-name.0" value="k"/>
    <parameter name="expression.1" value="v * 2"/><parameter name="output-field-name.1" value="v"/></box>
  <box name="count" type="aggregate"><in stream="G"/><out stream="N"/>
    <parameter name="aggregate-function.0" value="count()"/>
    <parameter name="aggregate-function-output-name.0" value="n"/>
    <parameter name="window-size-by" value="TUPLES"/><parameter name="window-size" value="4"/>
    <parameter name="group-by" value="k"/><parameter name="timeout" value="0.003"/></box>
</borealis>"""
OUT = ("F", "G", "N")  # every box's output goes downstream to c:9 too


def local() -> Catalog:
    catalog = plan_submission(Catalog(), [read_document(APP, "app.xml")]).catalog
    for stream in OUT:
        catalog.subscriptions[f"{stream}|c:9"] = Subscription(stream, "c:9")
    return catalog


def flow(limits: BatchLimits, box_ids: dict[str, str] | None = None) -> Dataflow:
    dataflow = Dataflow("n:1", None, "n:1#a", batch_limits=limits)
    if box_ids:
        dataflow.state.adopt_identity(box_ids)
    dataflow.reconfigure(local())
    return dataflow


def sent(dataflow: Dataflow) -> list[tuple[str, list[tuple], str, int]]:
    """What the dataflow sent or queued for c:9 and c:9 did not acknowledge (nothing listens there): (stream,
    rows, producer, seq), in order."""
    out = []
    for endpoint, data, *_ in dataflow.out.unacknowledged():
        batch = decode(bytes(data))
        assert isinstance(batch, Batch) and endpoint == "c:9"
        rows = read_rows(bytes(batch.rows)) if batch.fmt == ARROW else msgspec.msgpack.decode(bytes(batch.rows))
        out.append((batch.stream, [tuple(r) for r in rows], batch.producer, batch.seq))
    return out


# one step of the box task: ("take", ms the clock moves on, rows), ("tick", ms, 0), ("idle", ms, 0): its input
# queue found empty, ("snapshot", ms, 0)
steps = st.lists(st.tuples(st.sampled_from(["take", "take", "take", "take", "tick", "idle", "snapshot"]),
                           st.floats(0.0, 4.0), st.integers(0, 7)), min_size=1, max_size=30)


async def run_live(log_dir: Path, limits: BatchLimits, plan: list[tuple[str, float, int]]):
    """Run ``plan`` on a durable dataflow; returns (its box ids, its outputs, the snapshots captured, every
    input row)."""
    log = InputLog(log_dir)
    await log.start()
    dataflow = flow(limits)
    dataflow.journal.attach(log)
    captures, rows_in, seq = [], [], 0
    for kind, ms, n in plan:
        dataflow.clock.offset += ms / 1000.0  # time passes
        if kind == "take":
            rows = [(len(rows_in) + i, (len(rows_in) + i) * 7 % 11) for i in range(max(n, 1))]
            rows_in += rows
            await dataflow.task.take(Arrival("V", rows, "pub", seq, "", payload(rows), None, 0))
            seq += 1
        elif kind == "tick":
            async with dataflow.lock:
                await dataflow.timers.fire(dataflow.clock.now(), record=True)
        elif kind == "idle":
            await dataflow.task.close_idle()
        else:
            async with dataflow.lock:
                captures.append(dataflow.replayer.capture(len(captures) + 1))
    await log.close()  # (what was appended is on disk: the process dies now)
    return dict(dataflow.state.box_ids), sent(dataflow), captures, rows_in


async def replay(log_dir: Path, limits: BatchLimits, box_ids: dict[str, str], captured: dict | None = None):
    """A restarted node: its identity, the snapshot (if any), then the log since."""
    log = InputLog(log_dir)
    log.open()
    dataflow = flow(limits, box_ids)
    start = log.first_position
    if captured is not None:
        dataflow.replayer.restore_capture(captured)
        start = captured["position"]
    await dataflow.replayer.replay_log(log.read(start))
    return sent(dataflow)


def check_replays(tmp: Path, limits: BatchLimits, plan: list[tuple[str, float, int]]) -> list:
    async def main():
        box_ids, live, captures, rows_in = await run_live(tmp, limits, plan)
        # killed and restarted with other limits: the log says how it batched
        assert await replay(tmp, BatchLimits(5, 0.5), box_ids) == live
        if captures:  # from the newest snapshot: its unacknowledged outputs, then the log after it
            assert await replay(tmp, limits, box_ids, captures[-1]) == live
        return live, rows_in
    return asyncio.run(main())


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(plan=steps, rows=st.integers(1, 12), ms=st.floats(0.0, 5.0))
def test_a_restarted_node_replays_its_batches_exactly_numbers_and_boundaries_included(tmp_path_factory, plan,
                                                                                         rows, ms):
    live, rows_in = check_replays(tmp_path_factory.mktemp("log"), BatchLimits(rows, ms), plan)
    # nothing lost or duplicated by batching: F's batches are the kept rows in order, numbered 0, 1, 2, ...
    f = [b for b in live if b[0] == "F"]
    assert [seq for _, _, _, seq in f] == list(range(len(f)))
    closed = [r for _, rows_, _, _ in f for r in rows_]
    assert closed == [r for r in rows_in if r[1] % 3 != 0][:len(closed)]


def kept(rows: list[tuple]) -> int:
    return sum(1 for _, v in rows if v % 3 != 0)


def test_unbatched_limits_send_every_emit_as_its_own_batch(tmp_path):
    plan = [("take", 0.0, 3), ("take", 0.0, 2), ("take", 0.0, 4)]
    live, rows_in = check_replays(tmp_path, UNBATCHED, plan)
    per_take = [kept(rows_in[:3]), kept(rows_in[3:5]), kept(rows_in[5:])]
    assert [len(rows) for stream, rows, _, _ in live if stream == "F"] == [n for n in per_take if n]


def test_a_batch_closes_at_its_row_limit_or_after_its_time_at_a_logged_tick(tmp_path):
    plan = [("take", 0.0, 3)] * 4 + [("tick", 10.0, 0)]  # 10 ms later: what is left is due, closed and logged
    live, rows_in = check_replays(tmp_path, BatchLimits(4, 5.0), plan)
    total = kept(rows_in)
    sizes = [len(rows) for stream, rows, _, _ in live if stream == "F"]
    assert sum(sizes) == total and all(n >= 4 for n in sizes[:-1]) and len(sizes) < 4  # fewer, larger batches
    ticks = [r for _, p in log_records(tmp_path) if isinstance(r := records.decode(p), records.Tick)]
    assert len(ticks) == 1


def test_an_idle_node_closes_what_its_boxes_hold_and_logs_it(tmp_path):
    plan = [("take", 0.0, 3), ("take", 0.0, 3), ("idle", 0.0, 0), ("take", 0.0, 3)]
    live, rows_in = check_replays(tmp_path, BatchLimits(1000, 1000.0), plan)
    assert [len(rows) for stream, rows, _, _ in live if stream == "F"] == [kept(rows_in[:6])]  # the last is held
    closing = [r.close for _, p in log_records(tmp_path) if isinstance(r := records.decode(p), records.Tick)]
    assert closing == [["F"], ["G"]]  # the filter's batch, then the map's it produced (the aggregate emits none)


def log_records(directory: Path) -> list[tuple[int, bytes]]:
    log = InputLog(directory)
    log.open()
    return list(log.read(0))


def test_a_log_written_before_batching_replays_every_emit_as_a_batch(tmp_path):
    """A log without Batching records (an old node's) replays unbatched, whatever the node is started with."""
    async def main():
        log = InputLog(tmp_path)
        await log.start()
        old = flow(UNBATCHED)
        for seq in range(3):
            rows = [(seq, 1), (seq, 2)]
            log.append(records.encode(records.Taken("V", "pub", seq, "", payload(rows), 1.0 + seq)))
            old.clock.set_current(1.0 + seq)
            old.router.enter_now("V", rows, "pub", seq, "")
        log.append(msgspec.msgpack.encode(["k", 4.5]))  # a Tick as old nodes wrote it: no ``close``
        async with old.lock:  # what the old node did when it wrote that Tick: its timers fired (the count times out)
            await old.timers.fire(4.5, record=False)
        await log.close()
        assert records.decode(log_records(tmp_path)[-1][1]) == records.Tick(4.5, [])
        assert await replay(tmp_path, BatchLimits(100, 1000.0), dict(old.state.box_ids)) == sent(old)
    asyncio.run(main())


def test_columns_join_columns_and_rows_join_rows():
    c = Coalescer(BatchLimits(10, 1.0))
    part = Columns(pa.record_batch({"x": [1, 2]}), weights=pa.array([1, -1], pa.int64()))
    assert c.fits("O", part) and not c.add("O", part, 0.0)
    assert c.fits("O", part) and not c.add("O", part, 0.0)
    assert not c.fits("O", [(3,)])  # rows after columns: the columns close first
    joined = c.take("O")
    assert joined.rows() == [(1,), (2,), (1,), (2,)] and joined.weight_list() == [1, -1, 1, -1]
