"""A TUMBLE or HOP view partitioned over 2-3 members in process (docs/cumulus.md §3.13): real operators, messages
between members delivered in random order (each link in its order), the leader's epochs on simulated time,
members restarted from their own state at random points.  Every window's row leaves exactly once, from the
member owning its group, and equals the row-at-a-time reference's (tests/test_m3_windows.py's, a watermark per
producer); windows close while the stream runs (before the end); closed windows' entries are gone; late rows
are counted once, over the members."""

from __future__ import annotations

import math
import random
from collections import Counter

import pytest
from boreas.catalog.model import Box, Field, FieldType, InPort, Schema
from boreas.m3.cumulus import slot
from boreas.node.cumulus.windowing import WindowedPartOperator
from boreas.wire.columns import from_rows
from support.member_cluster import MemberCluster
from support.watermark_reference import WatermarkReference

BID = Schema("BidTuple", (Field("auction", FieldType.INT), Field("price", FieldType.INT), Field("ts", FieldType.LONG)))
SIZE, SLIDE, DELAY = 1000, 500, 300


def sql(kind: str) -> str:
    window = (f"TUMBLE(TABLE Bid, DESCRIPTOR(ts), INTERVAL '{SIZE}' MILLISECOND)" if kind == "TUMBLE" else
              f"HOP(TABLE Bid, DESCRIPTOR(ts), {SLIDE}, {SIZE})")
    return (f"CREATE STREAM Bid(auction INT, price INT, ts BIGINT, WATERMARK FOR ts AS ts - {DELAY});\n"
            "SELECT auction, window_start, window_end, COUNT(*) AS n, SUM(price) AS total\n"
            f"FROM TABLE({window}) GROUP BY auction, window_start, window_end")


class Reference(WatermarkReference):
    """Every window's row, row at a time: a row falls in each window containing it whose end the mark has not
    passed; a window's row is final when the mark passes its end (docs/m3.md, "Event time")."""

    def __init__(self, kind: str):
        super().__init__(DELAY, math.inf)
        self.slide = SIZE if kind == "TUMBLE" else SLIDE
        self.open: dict[tuple, list[int]] = {}
        self.rows: list[tuple] = []

    def batch(self, producer: str, rows: list[tuple], now: float) -> None:
        for auction, price, ts in rows:
            starts = [s for s in range(ts - ts % self.slide, ts - SIZE, -self.slide) if s + SIZE > self.closed]
            if not starts:
                self.late += 1
            for s in starts:
                acc = self.open.setdefault((auction, s, s + SIZE), [0, 0])
                acc[0] += 1
                acc[1] += price
        self.heard_from(producer, [r[2] for r in rows], now)

    def close_to(self, mark: float) -> None:
        for key in sorted(k for k in self.open if k[2] <= mark):
            self.rows.append((*key, *self.open.pop(key)))
        self.closed = max(self.closed, mark)


class Cluster(MemberCluster):
    """Members of box ``w`` on nodes n0..n{k-1}; every row they emit, with the member that emitted it."""

    def __init__(self, kind: str, members: int, rng: random.Random, columns: bool = False):
        super().__init__(Box("w", "m3", (InPort("Bid"),), ("Out",), (("sql", sql(kind)),)), BID, "auction",
                         members, rng)
        assert all(isinstance(op, WindowedPartOperator) for op in self.members)
        self.out: list[tuple[int, tuple]] = []  # (member, row) of every row emitted
        self.columns = columns  # batches published as Arrow columns (the coordinators' and members' numpy paths)

    def emitted(self, member: int, rows) -> None:
        self.out.extend((member, tuple(r)) for r in (rows if isinstance(rows, list) else rows.rows()))

    def publish(self, producer: str, seq: int, rows: list[tuple]) -> None:
        super().publish(producer, seq, from_rows(rows, BID) if self.columns else rows)


def stream(rng: random.Random, producers: list[str], count: int) -> list[tuple[str, list[tuple]]]:
    """Batches of each producer, event times rising with at most ``DELAY`` of disorder within a producer
    (so no row is late), the producers interleaved."""
    clocks = {p: 0 for p in producers}
    out = []
    for _ in range(count):
        p = rng.choice(producers)
        rows = []
        for _ in range(rng.randrange(1, 12)):
            clocks[p] += rng.randrange(0, 60)
            rows.append((rng.randrange(12), rng.randrange(1, 100), max(0, clocks[p] - rng.randrange(0, DELAY))))
        out.append((p, rows))
    return out


@pytest.mark.parametrize("kind", ["TUMBLE", "HOP"])
@pytest.mark.parametrize(("seed", "columns"), [(0, False), (1, False), (2, False), (3, True)],
                         ids=["rows0", "rows1", "rows2", "arrow3"])
@pytest.mark.parametrize("moving", [False, pytest.param(True, marks=pytest.mark.slow)], ids=["still", "relayouts"])
def test_partitioned_windows_equal_the_row_at_a_time_reference(kind, seed, columns, moving):
    """With ``moving``, segments move, split and rebalance while rows flow: open windows go with them; with
    ``columns``, batches are Arrow."""
    rng = random.Random(f"{kind}{seed}")
    cluster = Cluster(kind, 2 + seed % 2, rng, columns)
    producers = [f"p{i}" for i in range(3)]
    batches = stream(rng, producers, 120)
    seqs = Counter()
    ref = Reference(kind)
    before_end = 0
    for i, (producer, rows) in enumerate(batches):
        cluster.publish(producer, seqs[producer], rows)
        seqs[producer] += 1
        ref.batch(producer, rows, cluster.now)
        for _ in range(rng.randrange(0, 6)):
            cluster.deliver_one()
        if rng.random() < 0.4:
            cluster.tick(0.05)
        if rng.random() < 0.03:
            cluster.restart(rng.randrange(len(cluster.members)))
        if moving and rng.random() < 0.1:
            cluster.relayout()
        if i == len(batches) // 2:
            cluster.settle()
            before_end = len(cluster.out)
    cluster.settle()
    for producer in producers:
        cluster.end(producer)
    ref.ended = True
    ref.close_to(math.inf)
    cluster.settle()
    assert before_end > 0  # windows closed while the stream ran
    got = [row for _, row in cluster.out]
    assert Counter(got) == Counter(ref.rows) and len(got) == len(set(got))  # each window once
    if moving:
        assert cluster.relayouts and cluster.members[0].layout.version > 1
    else:
        for member, row in cluster.out:  # from the member owning its group
            owner = next(s.member for s in cluster.partition.segments if s.lo <= slot(row[0]) < s.hi)
            assert member == owner
    assert all(op.runtime.entries() == 0 for op in cluster.members)  # every window closed: its state gone
    assert sum(op.counters()["late_tuples"] for op in cluster.members) == 0


@pytest.mark.parametrize("columns", [False, True], ids=["rows", "arrow"])
def test_a_late_row_is_counted_once_over_the_members_and_never_folded_in(columns):
    rng = random.Random(7)
    cluster = Cluster("TUMBLE", 3, rng, columns)
    cluster.publish("p0", 0, [(1, 10, 100), (2, 20, 900)])
    cluster.publish("p0", 1, [(3, 5, 5000)])  # the mark: 4700, [0, 1000) closes
    cluster.tick(0.2)
    cluster.settle()
    assert sorted(row for _, row in cluster.out) == [(1, 0, 1000, 1, 10), (2, 0, 1000, 1, 20)]
    for auction in range(6):  # late wherever its group lives
        cluster.publish("p0", 2 + auction, [(auction, 99, 500)])
    cluster.tick(0.2)
    cluster.settle()
    cluster.end("p0")
    cluster.tick(0.2)
    cluster.settle()
    assert sorted(row for _, row in cluster.out) == [(1, 0, 1000, 1, 10), (2, 0, 1000, 1, 20), (3, 5000, 6000, 1, 5)]
    assert sum(op.counters()["late_tuples"] for op in cluster.members) == 6
