"""The end of a partitioned box's out stream (docs/cumulus.md §3.13, "The end of input"; node/cumulus/end_marks.py):
on every node it comes after the last row the box emits there, for a plain GROUP BY, a top-N and a TUMBLE view.

In process, 3 members, messages between them in random order (each link in its order), the routers' stream
ends kept by the harness's copy of node/router.py's rules (tests/support/member_cluster.py; the router itself:
tests/test_stream_ends.py): one node's producers end while the
others' still publish rows that change its member; layouts change and members restart meanwhile.  A member
moved onto a node whose out stream waits (a failover) passes the end there, before the node's final mark.  No
row leaves a node after its out stream ended, every node's out stream ends, and the rows the members emitted
are the one-node box's result.  The multi-process check: tests/test_cumulus_ends_cluster.py."""

from __future__ import annotations

import random
import zlib
from collections import Counter, deque

import msgspec

import pytest
from boreas.catalog.model import Box, Field, FieldType, InPort, Schema
from boreas.node.cumulus import messages as msg
from boreas.node.cumulus.part import PartOperator
from boreas.node.cumulus.ranking import RankedPartOperator
from boreas.node.cumulus.windowing import WindowedPartOperator, part_operator
from boreas.node.operators.m3topn import TopNM3Operator
from boreas.wire.columns import Columns
from boreas.m3.cumulus.coordinators import pick
from support.marks_cluster import Cluster as PinnedCluster
from support.member_cluster import MemberCluster



def bid(ts: FieldType) -> Schema:
    return Schema("BidTuple", (Field("auction", FieldType.INT), Field("price", FieldType.INT),
                               Field("bidder", FieldType.INT), Field("ts", ts)))


STREAM = "CREATE STREAM Bid(auction INT, price INT, bidder INT, ts BIGINT{});\n"
SIZE = 1000
SQL = {
    "sum": STREAM.format("") + "SELECT auction, COUNT(*) AS n, SUM(price) AS total FROM Bid GROUP BY auction",
    "topn": STREAM.format("") + ("SELECT * FROM (SELECT auction, bidder, SUM(price) AS total, ROW_NUMBER() OVER "
                                 "(PARTITION BY auction ORDER BY SUM(price) DESC) AS rn FROM Bid "
                                 "GROUP BY auction, bidder) WHERE rn <= 2"),
    "tumble": STREAM.format(", WATERMARK FOR ts AS ts - 300") + (
        "SELECT auction, window_start, window_end, COUNT(*) AS n, SUM(price) AS total "
        f"FROM TABLE(TUMBLE(TABLE Bid, DESCRIPTOR(ts), INTERVAL '{SIZE}' MILLISECOND)) "
        "GROUP BY auction, window_start, window_end"),
}
KIND = {"sum": PartOperator, "topn": RankedPartOperator, "tumble": WindowedPartOperator}


def rows_of(batch) -> list[tuple[tuple, int]]:
    if isinstance(batch, Columns):
        return list(zip(batch.rows(), batch.weight_list()))
    return [(tuple(r), 1) for r in batch]


def producer_of(member: int, members: int, tag: str) -> str:
    """A producer id whose publisher picks ``member`` (crc32 % members, client/publisher.py)."""
    i = 0
    while zlib.crc32(f"{tag}-{i}".encode()) % members != member:
        i += 1
    return f"{tag}-{i}"


class Cluster(MemberCluster):
    """Members of box ``b`` of one shape; the rows they emitted, summed by weight."""

    def __init__(self, shape: str, members: int, rng: random.Random):
        box = Box("b", "m3", (InPort("Bid"),), ("Out",), (("sql", SQL[shape]),))
        super().__init__(box, bid(FieldType.LONG if shape == "tumble" else FieldType.INT), "auction", members, rng)
        assert all(type(op) is KIND[shape] for op in self.members)
        self.shape = shape
        self.result: Counter = Counter()
        self.fed: list[tuple] = []
        self.seqs: Counter = Counter()

    def emitted(self, member: int, rows) -> None:
        for row, w in rows_of(rows):
            self.result[row] += w

    def send(self, producer: str, rows: list[tuple]) -> None:
        self.publish(producer, self.seqs[producer], rows)
        self.seqs[producer] += 1
        self.fed += rows

    def want(self) -> Counter:
        """The one-node box's result over every row fed."""
        if self.shape == "topn":
            one = TopNM3Operator(self.box, [self.schema], self.outputs)
            got: Counter = Counter()
            for _, batch in one.process(0, self.fed, 0.0):
                for row, w in rows_of(batch):
                    got[row] += w
            return +got
        groups: dict[tuple, list[int]] = {}
        for auction, price, _, ts in self.fed:
            key = (auction,) if self.shape == "sum" else (auction, ts - ts % SIZE, ts - ts % SIZE + SIZE)
            acc = groups.setdefault(key, [0, 0])
            acc[0] += 1
            acc[1] += price
        return Counter({(*key, n, total): 1 for key, (n, total) in groups.items()})

    def late(self) -> int:
        return sum(op.counters().get("late_tuples", 0) for op in self.operators().values())


def bids(rng: random.Random, t: int) -> list[tuple]:
    """A batch of a producer whose event time is ``t`` (each producer's rows in event-time order: none late)."""
    return [(rng.randrange(8), rng.randrange(1, 100), rng.randrange(5), t + i) for i in range(rng.randrange(1, 6))]


def check(cluster: Cluster) -> None:
    assert not cluster.after_final, f"rows after the final mark: {cluster.after_final}"
    assert all(cluster.out_end[n] == "ended" for n in cluster.operators())
    want = cluster.want()
    assert want and +cluster.result == want and not -cluster.result
    assert cluster.late() == 0


@pytest.mark.parametrize("shape", ["sum", "topn", "tumble"])
@pytest.mark.parametrize("seed", [0, pytest.param(1, marks=pytest.mark.slow), pytest.param(2, marks=pytest.mark.slow)])
@pytest.mark.parametrize("moving", [False, True], ids=["still", "relayouts"])
def test_a_nodes_out_stream_ends_after_every_row_its_members_emit(shape, seed, moving):
    """Node 0's producers end first; the others' rows still change member 0's groups: its out stream ends only
    after the end of the input passed every member (before the fix, a non-windowed box ended it at once)."""
    rng = random.Random(seed)
    cluster = Cluster(shape, 3, rng)
    producers = {m: [producer_of(m, 3, f"p{m}"), producer_of(m, 3, f"q{m}")] for m in range(3)}
    clock = Counter()
    for m, ps in producers.items():
        for p in ps:
            cluster.send(p, bids(rng, 0))
    early, late = producers[0], producers[1] + producers[2]
    for step in range(120):
        p = rng.choice(early + late if step < 40 else late)
        clock[p] += rng.randrange(0, 60)
        cluster.send(p, bids(rng, clock[p]))
        if step == 40:
            for q in early:
                cluster.end(q)
        for _ in range(rng.randrange(0, 6)):
            cluster.deliver_one()
        if rng.random() < 0.4:
            cluster.tick(0.05)
        if rng.random() < 0.03 and shape != "tumble":  # (windowed restarts: tests/test_cumulus_windows.py)
            cluster.restart(rng.randrange(3))
        if moving and rng.random() < 0.08:
            cluster.relayout()
    assert cluster.out_end[0] in ("held", "ended")
    for q in late:
        cluster.end(q)
    cluster.settle(relayouts_too=True)
    check(cluster)


@pytest.mark.parametrize("shape", ["sum", "tumble"])
def test_a_member_moved_onto_a_node_after_its_input_ended_emits_before_its_final_mark(shape):
    """Member 2 has not passed the end (member 1's Work and Closes to it wait on a slow link) when the others did; its
    node fails and node 0, whose input ended, hosts it.  It passes the end there and emits its last rows: node 0's
    out stream waited for the end to settle (every member passed it), so they come before its final mark (before
    the fix, the hold asked only the members node 0 hosted when its input ended)."""
    rng = random.Random(7)
    cluster = Cluster(shape, 3, rng)
    ps = [producer_of(m, 3, f"p{m}") for m in range(3)]
    for p in ps:
        cluster.send(p, bids(rng, 0))
    cluster.settle()
    cluster.blocked.add((1, 2))
    for t, p in enumerate(ps):
        cluster.send(p, [(a, 5 + t, t, 200 + a) for a in range(8)])  # (groups on every member)
        cluster.end(p)
    for _ in range(40):
        while cluster.deliver_one():
            pass
        cluster.tick(0.05)
    passed = [op.parts.applier.ending.passed for op in cluster.members]
    assert passed == [True, True, False]  # (node 0's out stream waits: its input ended, the end has not settled)
    cluster.fail_over(2, to=0)
    cluster.blocked.clear()
    cluster.settle()
    check(cluster)


@pytest.mark.parametrize("shape", ["sum", "topn", "tumble"])
@pytest.mark.parametrize("moving", [False, True], ids=["still", "relayouts"])
def test_a_node_that_no_producer_publishes_to_ends_its_out_stream(shape, moving):
    """Producers publish to nodes 0 and 1 only; member 2 owns groups their rows change.  Its node's input never
    ends (no producer published there), yet the coordinators' Closes tell member 2 that every producer ended:
    once the end settled its node's out stream ends, after the last row it emitted.  What this checks is the
    members' side (the end settles at member 2, which then owes nothing) under the harness's copy of the
    router's rule (tests/support/member_cluster.py ``_collect``), not node/router.py itself: the router's
    ``_ended_everywhere`` is tested in tests/test_stream_ends.py (a settled member; an open, a handed-away and
    a failed node's producer; a batch that settles the member)."""
    rng = random.Random(11)
    cluster = Cluster(shape, 3, rng)
    ps = [producer_of(m, 3, f"p{m}") for m in (0, 0, 1)]
    clock: Counter = Counter()
    for step in range(60):
        p = rng.choice(ps)
        clock[p] += rng.randrange(0, 60)
        cluster.send(p, bids(rng, clock[p]))
        for _ in range(rng.randrange(0, 6)):
            cluster.deliver_one()
        if rng.random() < 0.4:
            cluster.tick(0.05)
        if moving and rng.random() < 0.1:
            cluster.relayout()
    for p in ps:
        cluster.end(p)
    cluster.settle(relayouts_too=True)
    assert not cluster.published[2] and cluster.members[2].parts.applier.ending.passed
    check(cluster)


def test_a_producer_handed_to_a_joining_coordinator_takes_its_end_along():
    """P is handed from member 1 to member 2, which joins (a grow), and sends nothing more for a while; Q ends.
    The old coordinator forgets P once the new one took it, and the new one has not stamped a batch of it: the
    Handover's entry keeps P open there, so the end does not pass until P ends (without it, no coordinator
    would know of P, and every node's out stream would end before P's next rows)."""
    sql = "CREATE STREAM Bid(auction INT, price INT, ts INT);\nSELECT auction, SUM(price) AS total FROM Bid GROUP BY auction"
    schema = Schema("BidTuple", (Field("auction", FieldType.INT), Field("price", FieldType.INT), Field("ts", FieldType.INT)))
    cluster = PinnedCluster(2, idle=None, sql=sql, schema=schema)
    assert type(cluster.members[0]) is PartOperator
    p = next(f"p{i}" for i in range(100) if pick(f"p{i}", 2) == 1 and pick(f"p{i}", (0, 1, 2)) == 2)
    q = next(f"q{i}" for i in range(100) if pick(f"q{i}", 2) == 0 == pick(f"q{i}", (0, 1, 2)))
    cluster.publish(1, p, [(1, 10, 100)])
    cluster.publish(0, q, [(2, 20, 100)])
    new = cluster.grow()
    cluster.settle(1.0)
    assert any(k[1] == p for k in cluster.members[1].parts.handing.handed)  # handed to member 2
    cluster.end(0, q)
    cluster.settle(1.0)
    assert not any(op.parts.applier.ending.passed for op in cluster.members)
    assert all(op.holds_end() for op in cluster.members)
    cluster.publish(new, p, [(3, 30, 200)])
    cluster.end(new, p)
    cluster.settle(1.0)
    assert all(op.parts.applier.ending.passed and not op.holds_end() for op in cluster.members)
    summed: Counter = Counter()
    for row in cluster.out:
        summed[row] += 1
    assert {(1, 10), (2, 20), (3, 30)} <= set(summed)


PLAIN = "CREATE STREAM Bid(auction INT, price INT, ts INT);\nSELECT auction, SUM(price) AS total FROM Bid GROUP BY auction"
PLAIN_BID = Schema("BidTuple", (Field("auction", FieldType.INT), Field("price", FieldType.INT),
                                Field("ts", FieldType.INT)))


def moving_pair() -> tuple[str, str]:
    """P, coordinated by member 1 of 2 and by member 2 once a third joins; Q, by member 0 throughout."""
    p = next(f"p{i}" for i in range(100) if pick(f"p{i}", 2) == 1 and pick(f"p{i}", (0, 1, 2)) == 2)
    q = next(f"q{i}" for i in range(100) if pick(f"q{i}", 2) == 0 == pick(f"q{i}", (0, 1, 2)))
    return p, q


def test_a_box_with_two_in_streams_ends_only_after_both_ended_on_a_node():
    """A join of A and B: node 1's producers of both end, node 0's of A only.  Stream A's end on node 0 ends its
    coordinator's producers of A alone: B's producer there keeps the end from passing, and its later rows come
    before every node's final mark (before the fix, one in stream's end ended every producer on every port)."""
    a = Schema("A", (Field("k", FieldType.INT), Field("v", FieldType.INT)))
    b = Schema("B", (Field("k", FieldType.INT), Field("w", FieldType.INT)))
    sql = ("CREATE STREAM A(k INT, v INT); CREATE STREAM B(k INT, w INT);\n"
           "SELECT A.k, SUM(A.v * B.w) AS s FROM A JOIN B ON A.k = B.k GROUP BY A.k")
    cluster = PinnedCluster(2, idle=None, sql=sql, streams={"A": a, "B": b}, key="k")
    for member, (pa, pb) in enumerate([("pa", "pb"), ("qa", "qb")]):
        cluster.publish(member, pa, [(k, 1) for k in range(6)], port=0)
        cluster.publish(member, pb, [(k, 1) for k in range(6)], port=1)
    cluster.settle(1.0)
    cluster.end(1, "qa", port=0)
    cluster.end(1, "qb", port=1)
    cluster.end(0, "pa", port=0)
    cluster.settle(1.0)
    assert not any(op.parts.applier.ending.passed for op in cluster.members)
    assert all(op.holds_end() for op in cluster.members)
    cluster.publish(0, "pb", [(k, 10) for k in range(6)], port=1)
    cluster.end(0, "pb", port=1)
    cluster.settle(1.0)
    assert all(op.parts.applier.ending.passed and not op.holds_end() for op in cluster.members)
    last: dict[int, int] = {}
    for row in cluster.out:  # (a changelog: the last row of a group is its sum over every row fed)
        last[row[0]] = row[1]
    assert last == {k: 2 * (1 + 1 + 10) for k in range(6)}


def test_an_end_passing_in_an_epoch_with_no_work_settles():
    """P, handed from member 1 to member 2 (a grow), publishes and ends there, Q ends, node 1's input ends, and
    the leader goes idle; member 2's Taken reaches member 1 only then (its Handover was slow).  Member 1 forgets P
    in an epoch with no work, and the end passes with that epoch's Close: the epoch ends and the leader goes on
    until it is stable, so the end settles and every node's out stream ends (before the fix, no epoch ended
    after the forget: every node held its final mark for good)."""
    cluster = PinnedCluster(2, idle=None, sql=PLAIN, schema=PLAIN_BID)
    p, q = moving_pair()
    cluster.publish(1, p, [(1, 10, 100)])
    cluster.publish(0, q, [(2, 20, 100)])
    new = cluster.grow()
    late: list[list] = []

    def settle_without_taken(seconds: float) -> None:  # (member 2's Taken to member 1 waits; the rest goes on)
        cluster.blocked.add((2, 1))
        for _ in range(round(seconds / 0.05)):
            cluster.tick(0.05)
            link = cluster.links.get((2, 1), deque())
            for batch in link:
                late.extend(m for m in batch if m[0] == msg.TAKEN)
                batch[:] = [m for m in batch if m[0] != msg.TAKEN]
            cluster.blocked.discard((2, 1))
            cluster.deliver()
            cluster.blocked.add((2, 1))
        cluster.blocked.discard((2, 1))

    settle_without_taken(1.0)
    cluster.publish(new, p, [(3, 30, 200)])
    cluster.end(new, p)
    cluster.end(0, q)
    cluster.end_input(1)
    settle_without_taken(3.0)
    assert late and not any(op.parts.applier.ending.passed for op in cluster.members)
    assert all(op.next_deadline() is None for op in cluster.members)  # (the leader is idle)
    cluster.links.setdefault((2, 1), deque()).append(late)
    cluster.settle(5.0)
    assert all(op.parts.applier.ending.passed and not op.holds_end() for op in cluster.members)
    assert {(1, 10), (2, 20), (3, 30)} <= set(cluster.out)


def test_a_state_from_before_the_end_marks_does_not_let_the_end_pass_early():
    """Members restored from states without the end entries (a version before them): node 0's coordinator knows
    P from the batches it stamped, so Q's end on node 1 does not pass the end while P still publishes (before the
    fix, it had heard of no producer and the end passed: node 1 emitted P's later rows after its final mark)."""
    cluster = PinnedCluster(2, idle=None, sql=PLAIN, schema=PLAIN_BID)
    cluster.publish(0, "p", [(1, 10, 100)])
    cluster.publish(1, "q", [(2, 20, 100)])
    cluster.settle(1.0)
    for member, op in enumerate(cluster.members):
        state = msgspec.msgpack.decode(msgspec.msgpack.encode(op.state()))
        for guest in [state, *state.get("guests", {}).values()] if isinstance(state.get("guests"), dict) else [state]:
            for key in ("ends", "ending", "close_ends"):
                guest.pop(key, None)
        fresh = part_operator(cluster.box, cluster.schemas, cluster.outputs, cluster.partition, op.endpoint)
        fresh.restore(state, cluster.clock(member))
        cluster.members[member] = fresh
    cluster.end(1, "q")
    cluster.settle(1.0)
    assert not any(op.parts.applier.ending.passed for op in cluster.members)
    assert all(op.holds_end() for op in cluster.members)
    cluster.publish(0, "p", [(1, 5, 200)])
    cluster.end(0, "p")
    cluster.settle(1.0)
    assert all(op.parts.applier.ending.passed and not op.holds_end() for op in cluster.members)
    assert (1, 15) in cluster.out
