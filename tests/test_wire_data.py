"""Typed rows, frames, and data links: order, exactly-once across reconnects, back-pressure."""

from __future__ import annotations

import asyncio

import pytest
from boreas.catalog.model import Field, FieldType, Schema
from boreas.wire.digests import DigestBook
from boreas.wire.frames import Ack, Batch, Refused
from boreas.wire.links import OutboundLink
from boreas.wire.receiver import DataReceiver, Deferred
from boreas.wire.sequencing import Sequencer
from boreas.wire.server import HttpServer
from boreas.wire.tuples import RowError, RowType, SchemaMismatch

ALL = Schema("All", (
    Field("b", FieldType.BYTE), Field("s", FieldType.SHORT), Field("i", FieldType.INT),
    Field("l", FieldType.LONG), Field("f", FieldType.SINGLE), Field("d", FieldType.DOUBLE),
    Field("str", FieldType.STRING, 3), Field("t", FieldType.TIMESTAMP),
))
GOOD = (1, 2, 3, 2**40, 1.5, 2.5, "abc", 1_700_000_000_000_000)


def test_every_borealis_type_is_checked():
    rt = RowType(ALL)
    assert rt.check([GOOD, list(GOOD)]) == ([GOOD, GOOD], [])
    bad = [
        (128, *GOOD[1:]),                       # byte out of range
        (*GOOD[:1], 40000, *GOOD[2:]),          # short out of range
        (*GOOD[:2], 2**31, *GOOD[3:]),          # int out of range
        (*GOOD[:3], "7", *GOOD[4:]),            # long given a string
        (*GOOD[:5], None, *GOOD[6:]),           # double given null
        (*GOOD[:6], "abcd", GOOD[7]),           # string too long
        (*GOOD[:7], 1.5),                       # timestamp not integral
        GOOD[:7],                               # a field missing
        (True, *GOOD[1:]),                      # bool is not a byte
    ]
    good, errors = rt.check([GOOD, *bad, GOOD])
    assert good == [GOOD, GOOD]
    assert [(e.row, e.field) for e in errors] == [
        (1, "b"), (2, "s"), (3, "i"), (4, "l"), (5, "d"), (6, "str"), (7, "t"), (8, ""), (9, "b")]
    assert "out of range for byte" in errors[0].reason and "string longer than 3" in errors[5].reason
    assert "has 7 values" in errors[7].reason


def test_ints_are_accepted_for_doubles_and_mappings_by_name():
    rt = RowType(ALL)
    good, errors = rt.check([dict(zip([f.name for f in ALL.fields], (1, 2, 3, 4, 5, 6, "x", 7)))])
    assert errors == [] and good == [(1, 2, 3, 4, 5.0, 6.0, "x", 7)]
    assert isinstance(good[0][4], float)
    _, errors = rt.check([{"b": 1}])
    assert errors[0].field == "s" and errors[0].reason == "missing"


def test_rows_from_text():
    rt = RowType(ALL)
    row = rt.from_text(["1", "2", "3", "4", "5", "6.25", "xyz", "2024-01-01T00:00:00Z"])
    assert row == (1, 2, 3, 4, 5.0, 6.25, "xyz", 1_704_067_200_000_000)
    with pytest.raises(SchemaMismatch, match="'x' is not an int"):
        rt.from_text(["1", "2", "x", "4", "5", "6", "z", "0"])
    with pytest.raises(SchemaMismatch, match="'y' is not a double"):
        rt.from_text(["1", "2", "3", "4", "5", "y", "z", "0"])


def test_a_valid_batch_decodes_on_the_fast_path_and_a_bad_one_row_by_row():
    import msgspec

    rt = RowType(ALL)
    assert rt.decode(msgspec.msgpack.encode([GOOD] * 3)) == ([GOOD] * 3, [])
    good, errors = rt.decode(msgspec.msgpack.encode([GOOD, (*GOOD[:6], "long!", GOOD[7])]))
    assert good == [GOOD] and errors == [RowError(1, "str", "string longer than 3 characters")]
    assert rt.decode(b"\xc1")[1][0].row == -1  # not msgpack at all


def test_sequencer_restores_order_and_drops_duplicates_per_producer():
    s = Sequencer()
    kinds = [s.admit("S", "a", n, n, now=0.0).kind for n in (0, 3, 2, 1, 1, 0)]
    assert kinds == ["take", "hold", "hold", "take", "duplicate", "duplicate"]
    assert s.release("S", "a", now=0.0) == [2, 3]
    assert s.admit("S", "a", 3, 3).kind == "duplicate" and s.admit("S", "a", 4, 4).kind == "take"
    assert s.admit("S", "b", 7, 7).kind == "take"  # a new producer starts where it is first seen
    assert s.admit("T", "a", 0, 0).kind == "take"  # other stream, own sequence


def test_sequencer_handover_and_gaps():
    s = Sequencer(gap_timeout=1.0)
    s.expect("S", "box", 10)  # a moved box: its next batch is 10, whichever node sends it
    assert s.admit("S", "box", 11, "b11", now=0.0).kind == "hold"  # the new node is first
    assert s.admit("S", "box", 10, "b10", now=0.5).kind == "take"  # the old node forwards 10
    assert s.release("S", "box", now=0.5) == ["b11"]
    assert s.admit("S", "box", 13, "b13", now=1.0).kind == "hold"  # 12 is lost
    assert s.overdue(now=1.5) == [] and s.overdue(now=2.5) == [("S", "box")]
    assert s.release("S", "box", now=2.5) == ["b13"] and s.skipped == 1
    s.forget("S", "box", 13)  # the owner could not take it: its re-send is taken
    assert s.admit("S", "box", 13, "b13", now=3.0).kind == "take"


class Sink:
    """A receiver that records what it took; can be slowed down and can refuse a stream."""

    def __init__(self, token: str = "tok", delay: float = 0.0):
        self.rows: list[tuple] = []
        self.delay = delay
        self.row_type = RowType(Schema("S", (Field("n", FieldType.INT),)))
        self.receiver = DataReceiver(self.accept, token)
        self.server = HttpServer("sink", token)
        self.server.app.router.add_get("/data", self.receiver.handle)

    async def accept(self, batch: Batch) -> Ack | Refused:
        if batch.stream != "S":
            return Refused(batch.stream, batch.producer, batch.seq, "no such stream here")
        if self.delay:
            await asyncio.sleep(self.delay)
        rows, errors = self.row_type.decode(bytes(batch.rows))
        self.rows += rows
        return Ack(batch.stream, batch.producer, batch.seq, len(rows), [(e.row, e.field, e.reason) for e in errors])


async def test_link_delivers_in_order_and_reports_refusals():
    sink = Sink()
    await sink.server.start("127.0.0.1", 0)
    replies = []
    link = OutboundLink(sink.server.endpoint, "tok", "p1", window=4, on_reply=lambda b, r: replies.append(r))
    await link.start()
    try:
        for start in range(0, 1000, 10):
            await link.send("S", [(n,) for n in range(start, start + 10)])
        await link.send("S", [(1,), ("x",)])
        await link.send("Other", [(1,)])
        await link.flush(10)
    finally:
        await link.close()
        await sink.server.close()
    assert [r[0] for r in sink.rows[:1000]] == list(range(1000))
    assert sink.rows[1000:] == [(1,)]
    assert replies[-2].errors == [(1, "n", "expected int, got str 'x'")]
    assert isinstance(replies[-1], Refused) and link.counters["refused_batches"] == 1


async def test_reconnect_resends_and_the_receiver_drops_duplicates():
    """Cut the connection repeatedly mid-stream: every row arrives exactly once, in order."""
    sink = Sink(delay=0.001)
    await sink.server.start("127.0.0.1", 0)
    link = OutboundLink(sink.server.endpoint, "tok", "p1", window=8)
    await link.start()

    async def cut() -> None:
        for _ in range(5):
            await asyncio.sleep(0.03)
            await sink.receiver.close_all()

    cutter = asyncio.create_task(cut())
    try:
        for start in range(0, 3000, 10):
            await link.send("S", [(n,) for n in range(start, start + 10)])
        await link.flush(20)
        await cutter
    finally:
        await link.close()
        await sink.server.close()
    assert [r[0] for r in sink.rows] == list(range(3000))
    assert link.counters["connects"] > 1 and link.counters["resent_batches"] > 0


async def test_a_slow_receiver_makes_the_sender_wait_with_bounded_memory():
    sink = Sink(delay=0.02)
    await sink.server.start("127.0.0.1", 0)
    link = OutboundLink(sink.server.endpoint, "tok", "p1", window=2, capacity=4)
    await link.start()
    most = 0
    try:
        started = asyncio.get_running_loop().time()
        for n in range(20):
            await link.send("S", [(n,)])
            most = max(most, link.in_flight)
        elapsed = asyncio.get_running_loop().time() - started
        await link.flush(10)
    finally:
        await link.close()
        await sink.server.close()
    assert most <= 4                      # never more than `capacity` batches held
    assert elapsed > 0.02 * (20 - 4) / 2  # send() waited for the receiver
    assert [r[0] for r in sink.rows] == list(range(20))


class _Watched(dict):
    """A link's unacknowledged batches, remembering how many there ever were at once."""

    most = 0

    def __setitem__(self, key, value) -> None:
        super().__setitem__(key, value)
        self.most = max(self.most, len(self))


async def _connected(link: OutboundLink) -> None:
    """Until the link's connection is up (a send before it would be queued for the pump)."""
    for _ in range(500):
        if link.connection.live is not None:
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"the link to {link.endpoint} did not connect")


async def test_send_writes_at_once_on_an_idle_link_and_order_and_window_hold():
    """send() writes the frame itself when nothing waits before it (no turn of the pump task); sends racing
    the pump, a slow receiver and a full window still arrive in order, never more than ``window`` in flight."""
    sink = Sink(delay=0.003)
    await sink.server.start("127.0.0.1", 0)
    link = OutboundLink(sink.server.endpoint, "tok", "p1", window=3, capacity=64)
    link.queue.unacked = watched = _Watched()
    await link.start()
    try:
        await _connected(link)
        await link.send("S", [(0,)])
        assert link.counters["batches_sent"] == 1 and link.queue.queued.empty()  # written, not queued
        for n in range(1, 300):
            await link.send("S", [(n,)])
            if n % 7 == 0:
                await asyncio.sleep(0)  # the pump and the answers in between
            if n % 50 == 0:
                await link.flush(10)  # idle again: the next send writes at once
        await link.flush(10)
    finally:
        await link.close()
        await sink.server.close()
    assert [r[0] for r in sink.rows] == list(range(300))
    assert watched.most <= 3
    assert link.counters["batches_sent"] == 300


async def test_a_frame_that_could_wait_for_the_socket_goes_through_the_pump():
    """send() writes itself only what cannot make it wait for the receiver's socket to drain: a frame
    over aiohttp's writer limit (256 KiB) is queued for the pump, so a caller (the box task) never waits
    on one client's socket."""
    sink = Sink()
    await sink.server.start("127.0.0.1", 0)
    link = OutboundLink(sink.server.endpoint, "tok", "p1", window=4)
    await link.start()
    try:
        await _connected(link)
        await link.send("S", [(n,) for n in range(100_000)])  # ~400 KB
        assert link.queue.queued.qsize() == 1 and link.counters["batches_sent"] == 0
        await link.send("S", [(1,)])  # behind it: queued too, in order
        assert link.queue.queued.qsize() == 2
        await link.flush(10)
        await link.send("S", [(2,)])  # a small frame on the idle link: written at once
        assert link.queue.queued.empty() and link.counters["batches_sent"] == 3
        await link.flush(10)
    finally:
        await link.close()
        await sink.server.close()
    assert [r[0] for r in sink.rows] == [*range(100_000), 1, 2]


async def test_a_link_to_an_absent_subscriber_drops_instead_of_stalling(monkeypatch):
    import boreas.wire.links as links

    monkeypatch.setattr(links, "DOWN_GRACE", 0.3)
    link = OutboundLink("127.0.0.1:9", "tok", "p1", capacity=2, drop_when_down=True)
    await link.start()
    try:
        for n in range(100):  # the first batches wait out the grace period, then everything is dropped
            await asyncio.wait_for(link.send("S", [(n,)]), 2)
    finally:
        await link.abort()
    assert link.counters["dropped_batches"] == 98 and link.in_flight == 2


async def test_data_connections_need_the_token():
    sink = Sink(token="right")
    await sink.server.start("127.0.0.1", 0)
    link = OutboundLink(sink.server.endpoint, "wrong", "p1")
    await link.start()
    try:
        await link.send("S", [(1,)])
        await asyncio.sleep(0.3)
        assert sink.rows == [] and not link.connected
        assert sink.receiver.counters["unauthenticated"] >= 1
    finally:
        await link.abort()
        await sink.server.close()


async def test_replies_ready_together_go_as_one_frame_and_each_batch_is_answered_in_order():
    """While the receiver is busy with one batch, the next ones wait on the connection; their answers
    (refusals among them) then leave as one Replies frame, and the link settles every batch in order."""
    sink = Sink()
    slow_first = sink.accept

    async def accept(batch: Batch) -> Ack | Refused:
        if batch.seq == 0 and batch.stream == "S":
            await asyncio.sleep(0.2)  # the other batches are sent meanwhile
        return await slow_first(batch)

    sink.receiver.accept = accept
    await sink.server.start("127.0.0.1", 0)
    replies: list[tuple[str, int, str]] = []
    link = OutboundLink(sink.server.endpoint, "tok", "p1", window=32, capacity=64,
                        on_reply=lambda b, r: replies.append((b.stream, b.seq, type(r).__name__)))
    await link.start()
    try:
        for n in range(20):
            await link.send("S" if n < 19 else "Other", [(n,)])
        await link.flush(10)
    finally:
        await link.close()
        await sink.server.close()
    assert [r[0] for r in sink.rows] == list(range(19))
    assert replies == [("S", k, "Ack") for k in range(19)] + [("Other", 0, "Refused")]
    assert link.counters["acks"] == 20 and link.counters["refused_batches"] == 1 and link.in_flight == 0
    assert sink.receiver.counters["coalesced_replies"] >= 10  # not one frame per batch


class RecordingSink(Sink):
    """A receiver's owner that records the digests of what it takes, as a node does (node/box_state.py)."""

    def __init__(self) -> None:
        super().__init__()
        self.receiver.digests = DigestBook()

    async def accept(self, batch: Batch):
        reply = await super().accept(batch)
        self.receiver.digests.record(batch.stream, batch.producer, batch.seq, batch.digest)
        return reply


async def test_a_reused_producer_with_other_rows_is_refused_and_a_true_rerun_is_not():
    """Publishers' batches carry a digest: the same (producer, seq) with other rows is refused, not dropped as a
    duplicate, and so is the rest of that publish; the same rows again (a re-run) are duplicates as before."""
    sink = RecordingSink()
    await sink.server.start("127.0.0.1", 0)

    async def publish(rows_per_batch: list[list[tuple]]) -> list:
        replies: list = []
        link = OutboundLink(sink.server.endpoint, "tok", "producer-x", window=4, digests=True,
                            on_reply=lambda b, r: replies.append(r))
        await link.start()
        try:
            for rows in rows_per_batch:
                await link.send("S", rows)
            await link.flush(10)
        finally:
            await link.close()
        return replies

    try:
        first = [[(1,), (2,)], [(3,)]]
        assert [r.accepted for r in await publish(first)] == [2, 1]
        rerun = await publish(first)
        assert [r.duplicate for r in rerun] == [True, True]
        other = await publish([[(7,), (8,)], [(9,)], [(10,)]])  # batch 2 is new, but the publish conflicts
        assert all(isinstance(r, Refused) for r in other)
        assert "already published batch 0 of S with other rows" in other[0].reason
        again = await publish(first)  # the original content lifts the refusal
        assert [r.duplicate for r in again] == [True, True]
    finally:
        await sink.server.close()
    assert sink.rows == [(1,), (2,), (3,)]
    assert sink.receiver.counters["conflicting_batches"] == 3


async def test_replies_left_waiting_for_the_disk_when_a_connection_closes_are_dropped_quietly():
    """A node with an input log answers a batch once it is durable (``Deferred``).  A connection that closes
    first leaves those replies unsent (the sender re-sends); their waits are closed, not left never started
    (each was a "coroutine ... was never awaited" RuntimeWarning a node logged on such a close)."""
    import inspect

    disk = asyncio.Event()
    waits: list = []

    class Durable(Sink):
        async def accept(self, batch: Batch) -> Deferred:
            async def durable() -> None:
                await disk.wait()
            waits.append(durable())
            return Deferred(await super().accept(batch), waits[-1])

    sink = Durable()
    await sink.server.start("127.0.0.1", 0)
    link = OutboundLink(sink.server.endpoint, "tok", "p1", window=8)
    await link.start()
    try:
        for n in range(4):
            await link.send("S", [(n,)])
        for _ in range(500):  # (taken, and their replies waiting for the disk)
            if len(sink.rows) == 4:
                break
            await asyncio.sleep(0.01)
    finally:
        await link.close()
        disk.set()  # the first write is durable now, after its connection closed
        await sink.server.close()
    for _ in range(100):  # (the connection's handler ends after the server closed)
        if all(inspect.getcoroutinestate(w) == inspect.CORO_CLOSED for w in waits):
            break
        await asyncio.sleep(0.01)
    assert sink.rows == [(0,), (1,), (2,), (3,)]
    assert [inspect.getcoroutinestate(w) for w in waits] == [inspect.CORO_CLOSED] * 4
