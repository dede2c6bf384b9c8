"""A top-N view (``ROW_NUMBER() OVER (PARTITION BY auction ...) <= N``) partitioned over 2-3 members in process
(docs/cumulus.md §3.14): real operators, messages between members delivered in random order (each link in its
order), members restarted from their own state, segments moved, split and rebalanced while rows flow.  The
changelog the members emit, summed, is the one-node top-N box's result over the same rows, and each member's
ranked rows are that result's partitions it owns; a partition column outside PARTITION BY is refused by name."""

from __future__ import annotations

import random
from collections import Counter

import pytest
from boreas.catalog.boxtypes import BoxError
from boreas.catalog.model import Box, Field, FieldType, InPort, Partition, Schema
from boreas.m3.boxtype import plan_m3_partition
from boreas.node.cumulus.ranking import RankedPartOperator
from boreas.node.operators.m3topn import TopNM3Operator
from boreas.wire.columns import Columns
from support.member_cluster import MemberCluster

BID = Schema("BidTuple", (Field("auction", FieldType.INT), Field("price", FieldType.INT), Field("bidder", FieldType.INT)))
SQL = ("CREATE STREAM Bid(auction INT, price INT, bidder INT);\n"
       "SELECT * FROM (SELECT auction, bidder, SUM(price) AS total, ROW_NUMBER() OVER (PARTITION BY auction "
       "ORDER BY SUM(price) DESC) AS rn FROM Bid GROUP BY auction, bidder) WHERE rn <= 2")
BOX = Box("t", "m3", (InPort("Bid"),), ("Out",), (("sql", SQL),))


def rows_of(batch) -> list[tuple[tuple, int]]:
    if isinstance(batch, Columns):
        return list(zip(batch.rows(), batch.weight_list()))
    return [(tuple(r), 1) for r in batch]


class Cluster(MemberCluster):
    """Members of top-N box ``t`` on nodes n0..n{k-1}; the changelog they emit, summed."""

    def __init__(self, members: int, rng: random.Random):
        super().__init__(BOX, BID, "auction", members, rng)
        assert all(isinstance(op, RankedPartOperator) for op in self.members)
        self.result: Counter = Counter()  # the changelog emitted so far, summed

    def emitted(self, member: int, rows) -> None:
        for row, w in rows_of(rows):
            self.result[row] += w


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
    cluster.settle(relayouts_too=True)
    want = +reference
    assert want and Counter(one.top_rows()) == want
    assert +cluster.result == want and not -cluster.result  # no row emitted away more than in
    assert Counter(r for op in cluster.members for r in op.top_rows()) == want  # each partition ranked once
    if moving:
        assert cluster.relayouts and cluster.members[0].layout.version > 1


def test_a_top_n_whose_partition_column_is_not_ranked_by_is_refused_by_name():
    with pytest.raises(BoxError, match=r"PARTITION BY auction.*\(bidder\)"):
        plan_m3_partition(BOX, [BID], Partition("t", ("a:1", "b:1"), count=4, key="bidder", epoch_ms=100))
