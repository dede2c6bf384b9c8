"""A SESSION view partitioned over 2-3 members in process (docs/cumulus.md §3.13, "SESSION views"): real operators,
messages between members delivered in random order, members restarted from their own state, failed over, and
segments moved, split and rebalanced while rows flow.  Every session's row leaves exactly once and equals both
the unpartitioned box's (the one-node operator fed the same batches) and the sessions found offline by sorting
each key's rows; late rows are counted once, over the members, and never folded in; the partitionings that
cannot keep a session's rows on one member are refused, saying why."""

from __future__ import annotations

import random
from collections import Counter

import pytest
from boreas.catalog.boxtypes import BoxError
from boreas.catalog.model import Box, Field, FieldType, InPort, Partition, Schema
from boreas.m3.boxtype import infer_m3, plan_m3_partition
from boreas.m3.cumulus import slot
from boreas.node.cumulus.windowing import SessionPartOperator
from boreas.node.operators.m3windows import WindowedM3Operator
from boreas.wire.columns import Columns, from_rows
from support.member_cluster import MemberCluster

BID = Schema("BidTuple", (Field("bidder", FieldType.INT), Field("price", FieldType.INT), Field("ts", FieldType.LONG)))
GAP, DELAY = 200, 300


def sql(partition: str = "PARTITION BY bidder, ") -> str:
    return (f"CREATE STREAM Bid(bidder INT, price INT, ts BIGINT, WATERMARK FOR ts AS ts - {DELAY});\n"
            "SELECT bidder, window_start, window_end, COUNT(*) AS n, SUM(price) AS total\n"
            f"FROM TABLE(SESSION(TABLE Bid {partition}DESCRIPTOR(ts), {GAP})) GROUP BY bidder, window_start, window_end")


#: Nexmark q11's form (Flink's older group window: m3/compiler/sessiongroup.py), the same view
GROUP_WINDOW = (f"CREATE STREAM Bid(bidder INT, price INT, ts BIGINT, WATERMARK FOR ts AS ts - {DELAY});\n"
                f"SELECT B.bidder, SESSION_START(B.ts, {GAP}) AS s, SESSION_END(B.ts, {GAP}) AS e, COUNT(*) AS n, "
                f"SUM(B.price) AS total FROM Bid B GROUP BY B.bidder, SESSION(B.ts, {GAP})")


def box(text: str | None = None, backend: str = "auto") -> Box:
    return Box("s", "m3", (InPort("Bid"),), ("Out",), (("sql", text or sql()), ("backend", backend)))


def sessions(rows: list[tuple]) -> list[tuple]:
    """Every session's view row, from all of the rows at once: per bidder sorted by time, cut at gaps of GAP."""
    out = []
    for bidder in {r[0] for r in rows}:
        mine = sorted((r for r in rows if r[0] == bidder), key=lambda r: r[2])
        run: list[tuple] = []
        for r in mine + [None]:
            if run and (r is None or r[2] - run[-1][2] >= GAP):
                prices = [x[1] for x in run]
                out.append((bidder, run[0][2], run[-1][2] + GAP, len(run), sum(prices)))
                run = []
            if r is not None:
                run.append(r)
    return out


class Cluster(MemberCluster):
    """Members of box ``s``; every row they emit, with the member that emitted it."""

    def __init__(self, members: int, rng: random.Random, columns: bool = False, backend: str = "auto",
                 text: str | None = None):
        super().__init__(box(text, backend), BID, "bidder", members, rng)
        assert all(isinstance(op, SessionPartOperator) for op in self.members)
        self.out: list[tuple[int, tuple]] = []
        self.columns = columns

    def emitted(self, member: int, rows) -> None:
        self.out.extend((member, tuple(r)) for r in (rows if isinstance(rows, list) else rows.rows()))

    def publish(self, producer: str, seq: int, rows: list[tuple]) -> None:
        super().publish(producer, seq, from_rows(rows, BID) if self.columns else rows)


class OneNode:
    """The unpartitioned box, fed the same batches by the same producers."""

    def __init__(self, text: str | None = None):
        self.op = WindowedM3Operator(box(text), [BID], infer_m3(box(text), [BID]))
        self.out: list[tuple] = []

    def take(self, emitted) -> None:
        for _, rows in emitted:
            self.out.extend(tuple(r) for r in (rows.rows() if isinstance(rows, Columns) else rows))

    def publish(self, producer: str, seq: int, rows: list[tuple], now: float) -> None:
        self.take(self.op.process_from(0, rows, now, ("Bid", producer, seq)))

    def end(self, producer: str, now: float) -> None:
        self.take(self.op.producer_ended(0, producer, now))


def stream(rng: random.Random, producers: list[str], count: int) -> list[tuple[str, list[tuple]]]:
    """Batches of each producer, event times rising with less than ``DELAY`` of disorder within a producer (no
    row is late, every producer heard from first), gaps now and then longer than GAP (sessions end), the producers interleaved."""
    clocks = {p: 0 for p in producers}
    out = []
    for i in range(count):
        if i < len(producers):  # each heard from at time 0 first: none starts behind another's watermark
            out.append((producers[i], [(rng.randrange(10), 1, 0)]))
            continue
        p = rng.choice(producers)
        rows = []
        for _ in range(rng.randrange(1, 10)):
            clocks[p] += rng.choice([0, 10, 40, 90, 250])
            rows.append((rng.randrange(10), rng.randrange(1, 100), max(0, clocks[p] - rng.randrange(0, DELAY))))
        out.append((p, rows))
    return out


@pytest.mark.parametrize(("seed", "columns", "backend", "text"),
                         [(0, False, "auto", None), (1, False, "python", None), (2, True, "auto", None),
                          (3, False, "auto", GROUP_WINDOW)], ids=["rows0", "python1", "arrow2", "q11form3"])
@pytest.mark.parametrize("moving", [False, True], ids=["still", "relayouts"])
def test_partitioned_sessions_equal_the_unpartitioned_box(seed, columns, backend, text, moving):
    """With ``moving``, segments move, split and rebalance and a member fails over while rows flow: the held rows
    of open sessions go with their segments."""
    rng = random.Random(f"sessions{seed}{moving}")
    cluster = Cluster(2 + seed % 2, rng, columns, backend, text)
    one = OneNode(text)
    producers = [f"p{i}" for i in range(3)]
    batches = stream(rng, producers, 150)
    seqs: Counter = Counter()
    everything: list[tuple] = []
    before_end, failed = 0, False
    for i, (producer, rows) in enumerate(batches):
        cluster.publish(producer, seqs[producer], rows)
        one.publish(producer, seqs[producer], rows, cluster.now)
        seqs[producer] += 1
        everything += rows
        for _ in range(rng.randrange(0, 6)):
            cluster.deliver_one()
        if rng.random() < 0.4:
            cluster.tick(0.05)
        if rng.random() < 0.03 and not failed:
            cluster.restart(rng.randrange(len(cluster.members)))
        if moving and rng.random() < 0.1:
            cluster.relayout()
        if moving and not failed and i == len(batches) * 2 // 3:
            cluster.settle()
            cluster.fail_over(len(cluster.members) - 1, 0)
            failed = True
        if i == len(batches) // 2:
            cluster.settle()
            before_end = len(cluster.out)
    cluster.settle(relayouts_too=True)
    for producer in producers:
        cluster.end(producer)
        one.end(producer, cluster.now)
    cluster.settle()
    assert before_end > 0  # sessions closed while the stream ran
    got = [row for _, row in cluster.out]
    assert len(got) == len(set(got))  # each session once
    assert Counter(got) == Counter(one.out) == Counter(sessions(everything))
    if moving:
        assert cluster.relayouts and cluster.members[0].layout.version > 1
    else:
        for member, row in cluster.out:  # from the member owning its key
            owner = next(s.member for s in cluster.partition.segments if s.lo <= slot(row[0]) < s.hi)
            assert member == owner
    assert all(op.runtime.entries() == 0 for op in cluster.members)  # every session closed: its rows gone
    assert sum(op.counters()["late_tuples"] for op in cluster.operators().values()) == 0


def test_a_late_row_is_counted_once_and_a_row_inside_an_open_session_is_not_late():
    cluster = Cluster(3, random.Random(5))
    cluster.publish("p0", 0, [(1, 10, 100), (2, 20, 150), (3, 7, 1000)])
    cluster.publish("p0", 1, [(4, 5, 1400)])  # the mark: 1100; bidder 1's and 2's sessions close
    cluster.tick(0.2)
    cluster.settle()
    assert sorted(row for _, row in cluster.out) == [(1, 100, 300, 1, 10), (2, 150, 350, 1, 20)]
    for bidder in range(6):  # behind the mark, in no open session: late wherever the bidder lives
        cluster.publish("p0", 2 + bidder, [(bidder, 99, 200)])
    cluster.publish("p0", 8, [(3, 50, 1050)])  # behind the mark, but inside bidder 3's open session [1000, 1200)
    cluster.tick(0.2)
    cluster.settle()
    cluster.end("p0")
    cluster.tick(0.2)
    cluster.settle()
    assert sorted(row for _, row in cluster.out) == [(1, 100, 300, 1, 10), (2, 150, 350, 1, 20),
                                                     (3, 1000, 1250, 2, 57), (4, 1400, 1600, 1, 5)]
    assert sum(op.counters()["late_tuples"] for op in cluster.members) == 6
    assert all(op.runtime.entries() == 0 for op in cluster.members)


def plan(text: str, key: str | None) -> Partition:
    return plan_m3_partition(box(text), [BID], Partition("s", ("a:1", "b:1"), count=4, key=key))


def test_a_partitioning_that_splits_a_session_is_refused_saying_why():
    assert plan(sql(), "bidder").planned and plan(sql(), None).planned
    by_price = sql().replace("SELECT bidder,", "SELECT price, bidder,").replace("GROUP BY bidder", "GROUP BY price, bidder")
    assert plan(by_price, "bidder").planned
    with pytest.raises(BoxError, match="not a column of its SESSION's PARTITION BY"):
        plan(by_price, "price")  # a bidder's session over several members
    with pytest.raises(BoxError, match="without PARTITION BY"):
        plan(sql(partition=", ").replace("bidder, window_start", "window_start", 1)
             .replace("GROUP BY bidder,", "GROUP BY"), None)
    by_window = sql().replace("SELECT bidder, window_start", "SELECT window_start").replace("GROUP BY bidder, ", "GROUP BY ")
    with pytest.raises(BoxError, match="not a column of its SESSION's PARTITION BY"):
        plan(by_window, None)  # the view's groups span bidders: its entries are not a bidder's member's
    with pytest.raises(BoxError, match="partitions map Q1_n by WINDOW_START, which is not a column of its SESSION"):
        plan(by_window, "bidder")  # the key keys only the held map: the view's map says why (not "no map")


@pytest.mark.parametrize("text", [None, GROUP_WINDOW], ids=["tvf", "q11form"])
def test_a_member_joining_by_a_move_drops_a_late_row_as_the_one_node_box_does(text):
    """A member a move adds starts with the frontier its sources closed up to (their final chunks carry it):
    a row of the change's first epoch behind it, in no open session, is late there as on one node."""
    cluster, one = Cluster(2, random.Random(7), text=text), OneNode(text)
    for seq, rows in enumerate([[(b, 1, 0) for b in range(10)], [(99, 1, 2000)]]):
        cluster.publish("p0", seq, rows)
        one.publish("p0", seq, rows, cluster.now)
    cluster.tick(0.2)
    cluster.settle()  # the frontier: 1700; every session of bidders 0..9 closed
    assert sorted(row for _, row in cluster.out) == sorted(one.out) and len(one.out) == 10
    cluster.move_to_a_new_node(slot(5), cluster.member_of("p0"))  # bidder 5's segment
    cluster.publish("p0", 2, [(5, 7, 100)])  # behind the frontier, in no open session of bidder 5: late
    one.publish("p0", 2, [(5, 7, 100)], cluster.now)
    cluster.settle(relayouts_too=True)
    cluster.end("p0")
    one.end("p0", cluster.now)
    cluster.tick(0.2)
    cluster.settle()
    assert Counter(row for _, row in cluster.out) == Counter(one.out)
    late = sum(op.counters()["late_tuples"] for op in cluster.operators().values())
    assert late == 1 == one.op.counters()["late_tuples"]


def test_a_bulk_load_of_a_session_box_is_refused_by_name():
    """load_view fills a box's maps from their definitions; a SESSION box's held maps (its open sessions' rows)
    have none that a load could give, so the load is refused saying so, before Spark runs."""
    from boreas.spark.load_plan import load_program
    from boreas.spark.load_tasks import LoadError

    with pytest.raises(LoadError, match="reads its stream through SESSION: load_view cannot load a SESSION view"):
        load_program(box(), [BID])
    tumble = sql().replace(f"SESSION(TABLE Bid PARTITION BY bidder, DESCRIPTOR(ts), {GAP})",
                           f"TUMBLE(TABLE Bid, DESCRIPTOR(ts), {GAP})")
    assert "HELD_BID" not in [m.name for m in load_program(box(tumble), [BID]).maps]  # (a TUMBLE box is not refused)
