"""A window join partitioned over 2-3 members in process (docs/cumulus.md §3.13, "Window joins"): Nexmark's q5
shape (the keys with the most rows per window: a count per key and window, the MAX of those counts per window,
joined back) over TUMBLE and HOP, messages between members delivered in random order, members restarted from
their own state, segments moved, split and rebalanced while rows flow, a member failed over to member 0's node.  Each member's closed leaf rows are
gathered to member 0, which evaluates the stages per window: every window's rows leave once, equal to the
unpartitioned box's (the one-node operator fed the same batches) and to the answer computed from all rows."""

from __future__ import annotations

import dataclasses
import random
from collections import Counter

import pytest
from boreas.catalog.model import Box, Field, FieldType, InPort, Schema
from boreas.m3.boxtype import infer_m3
from boreas.m3.cumulus import slot
from boreas.node.cumulus.windowing import JoinPartOperator
from boreas.node.operators.m3windows import WindowedM3Operator
from boreas.wire.columns import Columns, from_rows
from support.member_cluster import MemberCluster

A = Schema("ATuple", (Field("k", FieldType.INT), Field("v", FieldType.INT), Field("ts", FieldType.LONG)))
SIZE, SLIDE, DELAY = 1000, 500, 300


def window(kind: str) -> str:
    return (f"TABLE(TUMBLE(TABLE A, DESCRIPTOR(ts), {SIZE}))" if kind == "TUMBLE" else
            f"TABLE(HOP(TABLE A, DESCRIPTOR(ts), {SLIDE}, {SIZE}))")


def sql(kind: str) -> str:
    counts = (f"(SELECT k, COUNT(*) AS n, window_start AS s, window_end AS e FROM {window(kind)} "
              "GROUP BY k, window_start, window_end)")
    return (f"CREATE STREAM A(k INT, v INT, ts BIGINT, WATERMARK FOR ts AS ts - {DELAY});\n"
            f"SELECT X.k, X.n, X.s FROM {counts} X JOIN (SELECT MAX(C.n) AS m, C.s, C.e FROM {counts} C "
            "GROUP BY C.s, C.e) Y ON X.s = Y.s AND X.e = Y.e AND X.n >= Y.m")


def box(kind: str) -> Box:
    return Box("j", "m3", (InPort("A"),), ("Out",), (("sql", sql(kind)),))


def answer(kind: str, rows: list[tuple]) -> Counter:
    """Per window, the keys with the most rows (each with its count and the window's start), from all rows."""
    slide = SIZE if kind == "TUMBLE" else SLIDE
    per: dict[int, Counter] = {}
    for k, _, t in rows:
        for s in range(t - t % slide, t - SIZE, -slide):
            per.setdefault(s, Counter())[k] += 1
    out: Counter = Counter()
    for s, counts in per.items():
        most = max(counts.values())
        out.update((k, n, s, 1) for k, n in counts.items() if n == most)
    return out


class Cluster(MemberCluster):
    def __init__(self, kind: str, members: int, rng: random.Random, columns: bool):
        super().__init__(box(kind), A, "k", members, rng)
        assert all(isinstance(op, JoinPartOperator) for op in self.members)
        self.out: list[tuple[int, tuple]] = []
        self.columns = columns

    def emitted(self, member: int, rows) -> None:
        self.out.extend((member, tuple(r)) for r in (rows if isinstance(rows, list) else rows.rows()))

    def publish(self, producer: str, seq: int, rows: list[tuple]) -> None:
        super().publish(producer, seq, from_rows(rows, A) if self.columns else rows)


def stream(rng: random.Random, producers: list[str], count: int) -> list[tuple[str, list[tuple]]]:
    """Each producer heard at time 0 first, then batches with event times rising and less than DELAY of disorder
    (no row is late)."""
    clocks = {p: 0 for p in producers}
    out = [(p, [(rng.randrange(8), 1, 0)]) for p in producers]
    for _ in range(count):
        p = rng.choice(producers)
        rows = []
        for _ in range(rng.randrange(1, 10)):
            clocks[p] += rng.randrange(0, 60)
            rows.append((rng.randrange(8), rng.randrange(1, 100), max(0, clocks[p] - rng.randrange(0, DELAY))))
        out.append((p, rows))
    return out


@pytest.mark.parametrize("kind", ["TUMBLE", "HOP"])
@pytest.mark.parametrize(("seed", "columns"), [(0, False), (1, True)], ids=["rows0", "arrow1"])
@pytest.mark.parametrize("moving", [False, True], ids=["still", "relayouts"])
def test_a_partitioned_window_join_equals_the_unpartitioned_box(kind, seed, columns, moving):
    rng = random.Random(f"winjoin{kind}{seed}{moving}")
    cluster = Cluster(kind, 2 + seed % 2, rng, columns)
    one = WindowedM3Operator(box(kind), [A], infer_m3(box(kind), [A]))
    one_out: list[tuple] = []

    def take(emitted) -> None:
        for _, rows in emitted:
            one_out.extend(tuple(r) for r in (rows.rows() if isinstance(rows, Columns) else rows))

    producers = [f"p{i}" for i in range(3)]
    seqs: Counter = Counter()
    everything: list[tuple] = []
    before_end, failed = 0, False
    batches = stream(rng, producers, 120)
    for i, (producer, rows) in enumerate(batches):
        cluster.publish(producer, seqs[producer], rows)
        take(one.process_from(0, rows, cluster.now, ("A", producer, seqs[producer])))
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
        if moving and not failed and i == len(batches) * 2 // 3:  # the last member's node fails: node 0 hosts it
            cluster.settle()
            cluster.fail_over(len(cluster.members) - 1, 0)
            failed = True
        if i == len(batches) // 2:
            cluster.settle()
            before_end = len(cluster.out)
    cluster.settle(relayouts_too=True)
    for producer in producers:
        cluster.end(producer)
        take(one.producer_ended(0, producer, cluster.now))
    cluster.settle()
    assert before_end > 0  # windows closed and joined while the stream ran
    got = Counter(row for _, row in cluster.out)
    assert got == Counter(one_out) == answer(kind, everything) and len(got) > 5
    assert {member for member, _ in cluster.out} == {0}  # where member 0 gathers
    if moving:
        assert cluster.relayouts and cluster.members[0].layout.version > 1
    assert all(op.runtime.entries() == 0 for op in cluster.members)
    assert not cluster.members[0].gather.waiting


@pytest.mark.slow  # (reads the bench's queries, as tests/test_nexmark_winjoin.py)
def test_nexmarks_windowed_queries_partition_or_are_refused_saying_why(monkeypatch):
    """q11 (sessions per bidder) plans partitioned by bidder, and q5 (a window join of counts) by auction, also as
    Nexmark writes it (an inner count grouped by a column it does not select: an internal key); q7 (a MAX per
    window and a stream's rows) by auction, its MAX by the window; q8 (GROUP BY without aggregates) by the person.
    A leaf computed when read pinned off its keys (q7's MAX by the price) is refused, saying so."""
    from boreas.catalog.boxtypes import BoxError
    from boreas.catalog.model import Partition
    from boreas.m3.boxtype import plan_m3_partition
    from support.bench import bench_importable

    for _ in bench_importable(monkeypatch, ("nexmark_gen", "nexmark_boreas", "nexmark_queries")):
        from boreas.catalog import Catalog, plan_submission, read_document
        from boreas.catalog.validate import stream_schemas
        from boreas.m3.boxtype import box_types
        from nexmark_boreas import app_xml
        from nexmark_queries import BY_NAME

        def partition(name: str, key: str, edit=lambda sql: sql, pins=()) -> Partition:
            q = dataclasses.replace(BY_NAME[name], text=edit(BY_NAME[name].text))
            made = plan_submission(Catalog(), [read_document(app_xml(q), f"{name}.xml")], box_types())
            box = made.catalog.boxes[name]
            schemas = stream_schemas(made.catalog, box_types())
            return plan_m3_partition(box, [schemas[p.stream] for p in box.inputs],
                                     Partition(name, ("a:1", "b:1"), count=4, key=key, pins=pins))

        assert partition("q11", "bidder").planned
        assert partition("q5", "auction", lambda sql: sql.replace("(SELECT count(*) AS num,",
                                                                  "(SELECT auction, count(*) AS num,")).planned
        for name, key in (("q5", "auction"), ("q7", "auction"), ("q8", "person.id")):
            assert partition(name, key).planned
        assert dict((m, k) for m, k, _ in partition("q7", "auction").maps)["Q2_maxprice"] == "WINDOW_END"
        with pytest.raises(BoxError, match="map Q2_maxprice is partitioned on PRICE, which is not a key of the view"):
            partition("q7", "auction", pins=(("Q2_maxprice", "PRICE"),))


def test_a_date_key_reaches_member_0_as_a_date_through_msgpack():
    """Leaf rows keyed by a DATE column travel to member 0 in msgpack (as a real link carries them) and in its
    snapshot: their keys come back as dates, so the stages join them as the one-node box does."""
    day = 86400 * 10**6  # a TIMESTAMP field carries microseconds; the SQL reads the column as a DATE
    schema = Schema("ATuple", (Field("k", FieldType.TIMESTAMP), Field("v", FieldType.INT), Field("ts", FieldType.LONG)))
    dated = Box("j", "m3", (InPort("A"),), ("Out",), (("sql", sql("TUMBLE").replace("k INT", "k DATE")),))
    rng = random.Random(11)
    cluster = Cluster("TUMBLE", 2, rng, False)
    MemberCluster.__init__(cluster, dated, schema, "k", 2, rng)
    cluster.wire = True
    one = WindowedM3Operator(dated, [schema], infer_m3(dated, [schema]))
    one_out: list[tuple] = []
    rows = [[((9200 + k) * day, 1, t) for k in range(6) for t in range(0, 3000, 200)]]  # ties: every key
    for seq, batch in enumerate(rows + [[(9200 * day, 1, 5000)]]):
        cluster.publish("p0", seq, batch)
        one_out += [tuple(r) for _, out in one.process_from(0, batch, cluster.now, ("A", "p0", seq)) for r in out]
        cluster.tick(0.2)
        cluster.settle()
        cluster.restart(0)  # member 0 from its snapshot (through msgpack): waiting steps keep their dates
    cluster.end("p0")
    one_out += [tuple(r) for _, out in one.producer_ended(0, "p0", cluster.now) for r in out]
    cluster.tick(0.2)
    cluster.settle()
    got = Counter(row for _, row in cluster.out)
    assert got == Counter(one_out) and len({row[0] for row in got}) == 6
    assert {type(row[0]) for row in got} == {type(r[0]) for r in one_out}


def test_a_member_joining_by_a_move_sends_member_0_no_row_of_a_window_evaluated_before():
    """A late row of the change's first epoch reaching a member the move adds is late there (its frontier is its
    sources'): no leaf row of a window member 0 evaluated before is gathered again, as on one node."""
    cluster = Cluster("TUMBLE", 2, random.Random(3), False)
    one = WindowedM3Operator(box("TUMBLE"), [A], infer_m3(box("TUMBLE"), [A]))
    one_out: list[tuple] = []
    batches = [[(k, 1, t) for k in range(6) for t in range(0, 1000, 100 * (k + 1))], [(0, 1, 3000)]]
    for seq, rows in enumerate(batches + [None]):
        if rows is None:  # the frontier is 2700: windows [0, 1000) and [1000, 2000) evaluated; then the move
            cluster.move_to_a_new_node(slot(5), cluster.member_of("p0"))
            rows = [(5, 1, 100), (5, 1, 200), (0, 1, 3500)]  # late rows of a window evaluated; the mark moves
        cluster.publish("p0", seq, rows)
        one_out += [tuple(r) for _, out in one.process_from(0, rows, cluster.now, ("A", "p0", seq)) for r in out]
        cluster.tick(0.2)
        cluster.settle(relayouts_too=True)
    cluster.end("p0")
    one_out += [tuple(r) for _, out in one.producer_ended(0, "p0", cluster.now) for r in out]
    cluster.tick(0.2)
    cluster.settle()
    assert Counter(row for _, row in cluster.out) == Counter(one_out) == Counter([(0, 10, 0, 1), (0, 2, 3000, 1)])
    late = sum(op.counters()["late_tuples"] for op in cluster.operators().values())
    assert late == 2 == one.counters()["late_tuples"]
