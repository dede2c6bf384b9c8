"""A partitioned TUMBLE view's watermark over its coordinators (docs/cumulus.md §3.13), in process: producers
pinned to coordinators on different members, an idle timeout, members restored on another node's flow clock.
The windows emitted, and the late rows counted, equal the one-node rule's (tests/support/watermark_reference.py:
the least over active producers, an idle producer stops holding the stream back however the producers are
spread over the coordinators)."""

from __future__ import annotations

import functools
import math
from collections import Counter

import pytest
from boreas.m3.cumulus.coordinators import pick
from support.marks_cluster import DELAY, IDLE, SIZE, Cluster
from support.watermark_reference import WatermarkReference


class Reference(WatermarkReference):
    """Every TUMBLE window's row, row at a time, under the one-node watermark."""

    def __init__(self, idle: float = IDLE):
        super().__init__(DELAY, idle)
        self.open: dict[tuple, list[int]] = {}
        self.rows: list[tuple] = []

    def batch(self, producer: str, rows: list[tuple], now: float) -> None:
        self.move(now)
        for auction, price, ts in rows:
            start = ts - ts % SIZE
            if start + SIZE <= self.closed:
                self.late += 1
                continue
            acc = self.open.setdefault((auction, start, start + SIZE), [0, 0])
            acc[0] += 1
            acc[1] += price
        self.heard_from(producer, [r[2] for r in rows], now)

    def move(self, now: float) -> None:
        if self.advance(now):
            for key in sorted(k for k in self.open if k[2] <= self.closed):
                self.rows.append((*key, *self.open.pop(key)))


def send_row(cluster: Cluster, ref: Reference, member: int, producer: str, ts: int) -> None:
    """One row of ``producer`` at event time ``ts``, to ``member`` and to the reference."""
    rows = [(ts // 1000 % 6, 1, ts)]
    cluster.publish(member, producer, rows)
    ref.batch(producer, rows, cluster.now)


def test_an_idle_producer_alone_on_its_coordinator_stops_holding_the_stream_back():
    """p4, the only producer of member 0's coordinator, sends one row and goes quiet; p0, on member 1's, runs on
    for 20 s of flow clock: after the idle timeout the windows p0's watermark passes close, as on one node."""
    cluster, ref = Cluster(2), Reference()
    cluster.publish(0, "p4", [(4, 7, 100)])
    ref.batch("p4", [(4, 7, 100)], cluster.now)
    for i in range(1, 40):
        rows = [(i % 6, i, 500 * i)]
        cluster.publish(1, "p0", rows)
        ref.batch("p0", rows, cluster.now)
        cluster.settle(0.5)
    ref.move(cluster.now)
    assert ref.closed == 500 * 39 - DELAY
    assert len(ref.rows) > 30 and Counter(cluster.out) == Counter(ref.rows)  # closed while the stream runs
    cluster.end(0, "p4")
    cluster.end(1, "p0")
    cluster.settle()
    ref.ended = True
    ref.move(cluster.now)
    assert Counter(cluster.out) == Counter(ref.rows) and cluster.late() == 0


def test_a_producer_that_wakes_holds_the_stream_back_again():
    """Idle producers of two coordinators: the greatest idle mark closes; one wakes with an older row, which
    is on time: its coordinator's active mark holds the other's idle one back."""
    cluster, ref = Cluster(2), Reference()
    for member, producer, rows in [(0, "p4", [(1, 1, 2500)]), (1, "p0", [(2, 2, 5200)])]:
        cluster.publish(member, producer, rows)
        ref.batch(producer, rows, cluster.now)
    cluster.settle(2.0)  # both idle: the greatest mark, 4900, closes [0, 4000)
    ref.move(cluster.now)
    assert ref.closed == 4900 and Counter(cluster.out) == Counter(ref.rows) == Counter([(1, 2000, 3000, 1, 1)])
    for member, producer, rows in [(0, "p4", [(3, 3, 4950)]), (0, "p4", [(3, 4, 6100)]), (1, "p0", [(2, 5, 7000)])]:
        cluster.publish(member, producer, rows)
        ref.batch(producer, rows, cluster.now)
        cluster.settle(0.2)
    ref.move(cluster.now)
    assert ref.closed == 5800
    assert Counter(cluster.out) == Counter(ref.rows) and (3, 4000, 5000, 1, 3) in ref.rows
    assert cluster.late() == ref.late == 0


def test_idle_timers_continue_on_the_flow_clock_of_the_node_a_coordinator_is_restored_on():
    """Member 1 restored on a node whose flow clock is 1000 s ahead: its producer p4 turns idle a timeout after
    it was last heard on that clock, not at once, so its next row is on time."""
    cluster, ref = Cluster(2), Reference()
    for member, producer, rows in [(1, "p4", [(4, 1, 100)]), (0, "p0", [(2, 2, 5000)])]:
        cluster.publish(member, producer, rows)
        ref.batch(producer, rows, cluster.now)
    cluster.settle(0.3)
    cluster.restart(1, 1000.0)
    cluster.settle(0.4)
    rows = [(4, 3, 150)]  # on time: p4 is still active, the mark is -200
    cluster.publish(1, "p4", rows)
    ref.batch("p4", rows, cluster.now)
    cluster.settle(0.3)
    for member, producer in [(1, "p4"), (0, "p0")]:
        cluster.end(member, producer)
    cluster.settle()
    ref.ended = True
    ref.move(cluster.now)
    assert cluster.late() == ref.late == 0
    assert Counter(cluster.out) == Counter(ref.rows) and (4, 0, 1000, 2, 4) in ref.rows


@pytest.mark.parametrize("old_taken", [False, True])
def test_a_producer_handed_to_another_coordinator_takes_its_watermark_along(old_taken: bool):
    """No idle timeout.  P, coordinated by member 0, is handed to member 2 when it joins as a coordinator, and
    back when member 2 retires; Q stays on member 1.  Windows close as P's and Q's watermarks pass them, while
    the stream runs: member 0 does not hold P's old mark after the handover, and P's mark holds the stream
    back wherever it is coordinated (a row of P behind Q is on time).  Alike with ``Taken`` messages of a
    version before they named the epoch of the take-over."""
    cluster, ref = Cluster(2, idle=None), Reference(idle=math.inf)
    cluster.old_taken = old_taken
    p = next(f"p{i}" for i in range(100) if pick(f"p{i}", 2) == 0 and pick(f"p{i}", (0, 1, 2)) == 2)
    q = next(f"q{i}" for i in range(100) if pick(f"q{i}", 2) == 1 == pick(f"q{i}", (0, 1, 2)))

    def send(producer: str, ts: int) -> None:
        rows = [(ts // 1000 % 6, 1, ts)]
        cluster.publish(0 if producer == p else 1, producer, rows)  # (member 0 forwards P's while it is away)
        ref.batch(producer, rows, cluster.now)
        cluster.settle(0.3)

    for ts in (1000, 1500):
        send(p, ts)
        send(q, ts)
    new = cluster.grow()
    cluster.settle(1.0)
    assert cluster.members[0].layout.coordinators == (0, 1, 2)
    for ts in (3000, 5000):
        send(p, ts)
        send(q, ts)
    assert cluster.members[new].parts.handing.seen  # member 2 coordinated P
    ref.move(cluster.now)
    assert ref.closed == 4700 and Counter(cluster.out) == Counter(ref.rows)  # not held at P's old 1200
    cluster.retire(new)
    cluster.settle(1.0)
    assert cluster.members[0].layout.coordinators == (0, 1)
    send(q, 9000)
    send(p, 6000)  # on time: P's 5000 holds the stream at 4700
    ref.move(cluster.now)
    assert Counter(cluster.out) == Counter(ref.rows) and cluster.late() == 0
    cluster.end(0, p)
    cluster.end(1, q)
    cluster.settle()
    ref.ended = True
    ref.move(cluster.now)
    assert Counter(cluster.out) == Counter(ref.rows) and cluster.late() == ref.late == 0


def test_a_handed_producer_ends_after_its_batches_held_for_their_turn():
    """P, handed from member 1 to member 2, ends there while its batch forwarded by member 1 is still on the way
    (a slow link) and its next, sent to member 2 directly, waits for it; the leader's epochs go on.  P's end
    holds until both are stamped, so its rows are on time though Q's watermark is far ahead."""
    cluster, ref = Cluster(2, idle=None), Reference(idle=math.inf)
    p = next(f"p{i}" for i in range(100) if pick(f"p{i}", 2) == 1 and pick(f"p{i}", (0, 1, 2)) == 2)
    q = next(f"q{i}" for i in range(100) if pick(f"q{i}", 2) == 0 == pick(f"q{i}", (0, 1, 2)))

    send = functools.partial(send_row, cluster, ref)

    send(1, p, 1000)
    send(0, q, 1000)
    new = cluster.grow()
    cluster.settle(1.0)
    send(1, p, 5000)  # forwarded to member 2
    send(0, q, 9000)
    cluster.settle(0.5)
    cluster.blocked.add((1, new))
    send(1, p, 5200)  # forwarded: stuck on the link
    send(new, p, 5400)  # direct: waits for the one before it
    cluster.end(new, p)
    cluster.settle(0.5)  # epochs pass: P has not ended yet, its 4700 holds the stream
    cluster.blocked.clear()
    cluster.settle(0.5)
    cluster.end(0, q)
    cluster.settle()
    ref.ended = True
    ref.move(cluster.now)
    assert cluster.late() == ref.late == 0
    assert Counter(cluster.out) == Counter(ref.rows) and (5, 5000, 6000, 3, 3) in ref.rows


def _handed_and_staying() -> tuple[str, str]:
    """P, picked by member 1 of two and by member 2 once it joins; Q, by member 0 either way."""
    p = next(f"p{i}" for i in range(100) if pick(f"p{i}", 2) == 1 and pick(f"p{i}", (0, 1, 2)) == 2)
    q = next(f"q{i}" for i in range(100) if pick(f"q{i}", 2) == 0 == pick(f"q{i}", (0, 1, 2)))
    return p, q


def test_the_end_of_a_nodes_input_does_not_end_a_producer_handed_there_that_publishes_elsewhere():
    """P is handed to member 2 but its publisher still sends to node n1 (which forwards); R publishes to n2
    directly and ends, so n2's input ends.  Member 2's coordinator ends R only: P's watermark still holds the
    stream back, and its next rows are on time."""
    cluster, ref = Cluster(2, idle=None), Reference(idle=math.inf)
    p, q = _handed_and_staying()
    r = next(f"r{i}" for i in range(100) if pick(f"r{i}", (0, 1, 2)) == 2)

    send = functools.partial(send_row, cluster, ref)

    send(1, p, 1000)
    send(0, q, 1000)
    new = cluster.grow()
    cluster.settle(1.0)
    send(1, p, 2000)  # forwarded to member 2, which coordinates P now
    send(new, r, 2500)
    cluster.settle(0.5)
    cluster.end(new, r)  # n2's input ends
    cluster.settle(0.5)
    send(0, q, 9000)
    cluster.settle(0.5)
    send(1, p, 3000)  # on time: P's 2000 holds the stream at 1700
    cluster.settle(0.5)
    cluster.end(1, p)
    cluster.end(0, q)
    cluster.settle()
    ref.ended = True
    ref.move(cluster.now)
    assert cluster.late() == ref.late == 0
    assert Counter(cluster.out) == Counter(ref.rows) and (3, 3000, 4000, 1, 1) in ref.rows


def test_a_producer_counts_at_its_old_coordinator_until_its_new_one_closes_an_epoch_with_it():
    """The Handover of P (epoch E) waits on a slow link while the leader's epochs go on: member 2 takes P over at
    a later epoch than E, and member 1, held at E, hears its Taken before closing E.  P's watermark still
    counts in every Close before the one member 2's first carries it: its next row is on time."""
    cluster, ref = Cluster(2, idle=None), Reference(idle=math.inf)
    p, q = _handed_and_staying()

    send = functools.partial(send_row, cluster, ref)

    send(1, p, 5000)
    send(0, q, 9000)
    cluster.settle(0.3)
    cluster.blocked.add((1, 2))  # (the link to the joining member: the Handover waits on it)
    new = cluster.grow()
    h1 = cluster.members[1].parts.handing
    for _ in range(200):
        cluster.tick(0.01)
        if any(k[1] == p for k in h1.handed):
            break
    epoch = next(v for k, v in h1.handed.items() if k[1] == p)[2]
    cluster.blocked.add((0, 1))  # member 1 stays at epoch E
    c2 = cluster.members[new].parts.coordinator
    for _ in range(200):
        send(0, q, 9000)
        cluster.tick(0.05)
        if c2.epoch > epoch:
            break
    assert c2.epoch > epoch == cluster.members[1].parts.coordinator.epoch
    cluster.blocked.discard((1, 2))
    cluster.deliver()  # the Handover reaches member 2 past E; its Taken reaches member 1, still at E
    cluster.blocked.clear()
    cluster.settle(1.0)
    send(1, p, 5200)  # on time: P's 5000 holds the stream at 4700
    cluster.settle(1.0)
    cluster.end(1, p)
    cluster.end(0, q)
    cluster.settle()
    ref.ended = True
    ref.move(cluster.now)
    assert cluster.late() == ref.late == 0
    assert Counter(cluster.out) == Counter(ref.rows) and (5, 5000, 6000, 2, 2) in ref.rows


def test_a_producer_idle_before_a_coordinator_moved_stays_idle_on_the_new_node():
    """p4, member 1's only producer, turned idle; member 1 is restored on a node 1000 s ahead.  The idle timers
    shift by the flow clock that passed until the move, not until p4's last row: p4 stays idle, and p0's next
    row closes windows at once, as on one node."""
    cluster, ref = Cluster(2), Reference()
    for member, producer, rows in [(1, "p4", [(4, 1, 100)]), (0, "p0", [(2, 2, 5000)])]:
        cluster.publish(member, producer, rows)
        ref.batch(producer, rows, cluster.now)
    cluster.settle(3.0)  # both idle: the greatest idle mark (4700) closes [0, 1000)
    ref.move(cluster.now)
    assert Counter(cluster.out) == Counter(ref.rows) == Counter([(4, 0, 1000, 1, 1)])
    cluster.restart(1, 1000.0)
    rows = [(2, 3, 9000)]
    cluster.publish(0, "p0", rows)
    ref.batch("p0", rows, cluster.now)
    cluster.settle(0.5)  # (within p0's idle timeout: its active mark alone holds the stream)
    ref.move(cluster.now)
    assert ref.closed == 8700 and Counter(cluster.out) == Counter(ref.rows) and (2, 5000, 6000, 1, 2) in ref.rows


def test_the_end_of_input_alone_ends_the_producers_each_node_took_directly():
    """Producers whose ends reach the box only as its nodes' end of input (an upstream box's out stream ends
    without a producer's final for it): each coordinator ends the producers it took, every window closes, and
    no member holds the box's end any more."""
    cluster, ref = Cluster(2, idle=None), Reference(idle=math.inf)
    for member, producer, rows in [(0, "p4", [(4, 1, 100)]), (1, "p0", [(2, 2, 5000)])]:
        cluster.publish(member, producer, rows)
        ref.batch(producer, rows, cluster.now)
    cluster.settle(0.5)
    assert not cluster.out
    for member in range(2):
        cluster.end_input(member)
    cluster.settle()
    ref.ended = True
    ref.move(cluster.now)
    assert Counter(cluster.out) == Counter(ref.rows) == Counter([(4, 0, 1000, 1, 1), (2, 5000, 6000, 1, 2)])
    assert not any(op.holds_end() for op in cluster.members)
