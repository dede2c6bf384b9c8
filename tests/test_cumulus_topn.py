"""A top-N view (``ROW_NUMBER() OVER (PARTITION BY auction ...) <= N``) partitioned over 2-3 members in process
(docs/cumulus.md §3.14): real operators, messages between members delivered in random order (each link in its
order), members restarted from their own state, segments moved, split and rebalanced while rows flow.  The
changelog the members emit, summed, is the one-node top-N box's result over the same rows, and each member's
ranked rows are that result's partitions it owns; a partition column outside PARTITION BY is refused by name."""

from __future__ import annotations

import random
import zlib
from collections import Counter, deque

import msgspec
import pytest
from boreas.catalog.boxtypes import BoxError
from boreas.catalog.model import Box, Field, FieldType, InPort, Partition, Schema
from boreas.m3.boxtype import infer_m3, plan_m3_partition
from boreas.m3.cumulus import relayout as changes
from boreas.node.cumulus import messages as msg
from boreas.node.cumulus.ranking import RankedPartOperator
from boreas.node.cumulus.windowing import part_operator
from boreas.node.operators.m3topn import TopNM3Operator
from boreas.wire.columns import Columns

BID = Schema("BidTuple", (Field("auction", FieldType.INT), Field("price", FieldType.INT), Field("bidder", FieldType.INT)))
SQL = ("CREATE STREAM Bid(auction INT, price INT, bidder INT);\n"
       "SELECT * FROM (SELECT auction, bidder, SUM(price) AS total, ROW_NUMBER() OVER (PARTITION BY auction "
       "ORDER BY SUM(price) DESC) AS rn FROM Bid GROUP BY auction, bidder) WHERE rn <= 2")
BOX = Box("t", "m3", (InPort("Bid"),), ("Out",), (("sql", SQL),))


def rows_of(batch) -> list[tuple[tuple, int]]:
    if isinstance(batch, Columns):
        return list(zip(batch.rows(), batch.weight_list()))
    return [(tuple(r), 1) for r in batch]


class Cluster:
    """Members of top-N box ``t`` on nodes n0..n{k-1}, their links, a flow clock."""

    def __init__(self, members: int, rng: random.Random):
        nodes = tuple(f"n{i}:1" for i in range(members))
        self.outputs = infer_m3(BOX, [BID])
        self.partition = plan_m3_partition(BOX, [BID], Partition("t", nodes, count=6, key="auction", epoch_ms=100))
        self.members = [part_operator(BOX, [BID], self.outputs, self.partition, n) for n in nodes]
        assert all(isinstance(op, RankedPartOperator) for op in self.members)
        self.links: dict[tuple[int, int], deque] = {}
        self.rng, self.now = rng, 0.0
        self.result: Counter = Counter()  # the changelog emitted so far, summed
        self.relayouts = 0

    def _collect(self, src: int, emitted) -> None:
        op = self.members[src]
        for port, rows in emitted:
            if port == 0:
                for row, w in rows_of(rows):
                    self.result[row] += w
                continue
            dst = int(op.internal_streams().outputs[port - 1][0].rsplit("@", 1)[1])
            self.links.setdefault((src, dst), deque()).append([list(m) for m in rows])

    def publish(self, producer: str, seq: int, rows: list[tuple]) -> None:
        member = zlib.crc32(producer.encode()) % len(self.members)
        self._collect(member, self.members[member].process_from(0, rows, self.now, ("Bid", producer, seq)))

    def deliver_one(self) -> bool:
        busy = [k for k, q in self.links.items() if q]
        if not busy:
            return False
        src, dst = self.rng.choice(busy)
        op = self.members[dst]
        self._collect(dst, op.process(op.internal_streams().inputs[f"t@{dst}"], self.links[(src, dst)].popleft(),
                                      self.now))
        return True

    def tick(self, seconds: float) -> None:
        self.now += seconds
        for i, op in enumerate(self.members):
            deadline = op.next_deadline()
            if deadline is not None and deadline <= self.now:
                self._collect(i, op.poll(self.now))

    def settle(self) -> None:
        for _ in range(100_000):
            if self.deliver_one():
                continue
            if any(op.next_deadline() is not None and op.next_deadline() <= self.now + 0.2 for op in self.members):
                self.tick(0.1)
                continue
            if any(op.relayout_busy() is not None for op in self.members[:1]):
                self.tick(0.1)
                continue
            return
        raise AssertionError("the members did not settle")

    def relayout(self) -> None:
        leader = self.members[0]
        if leader.relayout_busy() is not None:
            return
        lay = leader.latest_layout
        kind = self.rng.choice(["move", "split", "rebalance"])
        try:
            if kind == "move":
                seg = self.rng.choice(lay.segments)
                new = changes.move(lay, seg.id, self.rng.choice([m for m in range(len(lay.members)) if m != seg.member]))
            elif kind == "split":
                new = changes.split(lay, self.rng.choice(lay.segments).id)
            else:
                counts = Counter()
                for op in self.members:
                    for sid, per_map in op.segment_entries().items():
                        counts[sid] += sum(per_map.values())
                new = changes.rebalance(lay, counts)
        except (ValueError, IndexError):
            return
        self.relayouts += 1
        self._collect(0, leader.process(1, [msg.request(f"change/{self.relayouts}", new.to_dict())], self.now))

    def restart(self, member: int) -> None:
        op = self.members[member]
        fresh = part_operator(BOX, [BID], self.outputs, self.partition, op.endpoint)
        fresh.restore(msgspec.msgpack.decode(msgspec.msgpack.encode(op.state())), self.now)
        self.members[member] = fresh


@pytest.mark.parametrize("seed", [0, pytest.param(1, marks=pytest.mark.slow), pytest.param(2, marks=pytest.mark.slow)])
@pytest.mark.parametrize("moving", [False, True], ids=["still", "relayouts"])
def test_a_partitioned_top_n_equals_the_one_node_top_n(seed, moving):
    rng = random.Random(seed)
    cluster = Cluster(2 + seed % 2, rng)
    one = TopNM3Operator(BOX, [BID], cluster.outputs)
    reference: Counter = Counter()
    seqs: Counter = Counter()
    for _ in range(150):
        producer = rng.choice(["p0", "p1", "p2"])
        rows = [(rng.randrange(8), rng.randrange(1, 100), rng.randrange(6)) for _ in range(rng.randrange(1, 10))]
        cluster.publish(producer, seqs[producer], rows)
        seqs[producer] += 1
        for _, batch in one.process(0, rows, 0.0):
            for row, w in rows_of(batch):
                reference[row] += w
        for _ in range(rng.randrange(0, 6)):
            cluster.deliver_one()
        if rng.random() < 0.4:
            cluster.tick(0.05)
        if rng.random() < 0.03:
            cluster.restart(rng.randrange(len(cluster.members)))
        if moving and rng.random() < 0.1:
            cluster.relayout()
    cluster.settle()
    want = +reference
    assert want and Counter(one.top_rows()) == want
    assert +cluster.result == want and not -cluster.result  # no row emitted away more than in
    assert Counter(r for op in cluster.members for r in op.top_rows()) == want  # each partition ranked once
    if moving:
        assert cluster.relayouts and cluster.members[0].layout.version > 1


def test_a_top_n_whose_partition_column_is_not_ranked_by_is_refused_by_name():
    with pytest.raises(BoxError, match=r"PARTITION BY auction.*\(bidder\)"):
        plan_m3_partition(BOX, [BID], Partition("t", ("a:1", "b:1"), count=4, key="bidder", epoch_ms=100))
