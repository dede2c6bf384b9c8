"""A partitioned window join whose leaves are computed when read (docs/cumulus.md §3.13, "Window joins"), members in
process: Nexmark's q5 as written (an inner count grouped by a key it does not select: an internal key), q7's
shape (a stream's rows joined to a MAX per window) and q8's (GROUP BY without aggregates on both sides).  Each
member evaluates its leaves' closed rows from its own entries (every leaf's maps partitioned on one of its keys:
m3/cumulus/computed.py) and gathers them to member 0; the rows equal the one-node box's on random events, batches
cut anywhere, windows closing across members, segments moved mid-stream and members restarted from their state.
A leaf whose map is partitioned on a column that is not among its keys is refused by name."""

from __future__ import annotations

import random
from collections import Counter

import msgspec
import pytest
from boreas.catalog.boxtypes import BoxError
from boreas.catalog.model import Box, Field, FieldType, InPort, Partition, Schema
from boreas.m3.boxtype import infer_m3, plan_m3_partition
from boreas.m3.cumulus import slot
from boreas.node.cumulus.windowing import part_operator
from boreas.node.operators.m3windows import WindowedM3Operator
from boreas.wire.columns import Columns
from support.member_cluster import MemberCluster
from test_cumulus_winjoin import DELAY, SIZE, SLIDE, A, Cluster, stream

HEAD = f"CREATE STREAM A(k INT, v INT, ts BIGINT, WATERMARK FOR ts AS ts - {DELAY});\n"
TUMBLE = f"TABLE(TUMBLE(TABLE A, DESCRIPTOR(ts), {SIZE}))"
HOP = f"TABLE(HOP(TABLE A, DESCRIPTOR(ts), {SLIDE}, {SIZE}))"

SHAPES = {
    # q5 as Nexmark writes it: the inner counts group by k without selecting it (an internal key of the leaf)
    "q5": ("SELECT X.k, X.n FROM (SELECT k, COUNT(*) AS n, window_start AS s, window_end AS e FROM " + HOP +
           " GROUP BY k, window_start, window_end) X JOIN (SELECT MAX(C.n) AS m, C.s, C.e FROM (SELECT COUNT(*) AS n,"
           " window_start AS s, window_end AS e FROM " + HOP + " GROUP BY k, window_start, window_end) C GROUP BY "
           "C.s, C.e) Y ON X.s = Y.s AND X.e = Y.e AND X.n >= Y.m"),
    # q7: the rows (a stream's, as q7 reads them) whose v is the MAX of v of a window they fall in
    "q7": ("SELECT B.k, B.v, B.ts FROM A B JOIN (SELECT MAX(v) AS m, window_end AS t FROM " + TUMBLE +
           f" GROUP BY window_start, window_end) M ON B.v = M.m WHERE B.ts BETWEEN M.t - {SIZE} AND M.t"),
    # q8: the keys with a row of v > 50 in a window, each with its values there (GROUP BY without aggregates)
    "q8": ("SELECT P.k, P.v, P.s FROM (SELECT k, v, window_start AS s, window_end AS e FROM " + TUMBLE +
           " GROUP BY k, v, window_start, window_end) P JOIN (SELECT k, window_start AS s, window_end AS e FROM " +
           TUMBLE + " WHERE v > 50 GROUP BY k, window_start, window_end) Q ON P.k = Q.k AND P.s = Q.s AND P.e = Q.e"),
}


def box(shape: str) -> Box:
    return Box("j", "m3", (InPort("A"),), ("Out",), (("sql", HEAD + SHAPES[shape]),))


class Computed(Cluster):
    """:class:`test_cumulus_winjoin.Cluster` over one of :data:`SHAPES`."""

    def __init__(self, shape: str, members: int, rng: random.Random, columns: bool):
        super().__init__("TUMBLE", members, rng, columns)
        MemberCluster.__init__(self, box(shape), A, "k", members, rng)


def one_node(shape: str) -> tuple[WindowedM3Operator, list[tuple]]:
    return WindowedM3Operator(box(shape), [A], infer_m3(box(shape), [A])), []


def rows_of(emitted) -> list[tuple]:
    return [tuple(r) for _, rows in emitted for r in (rows.rows() if isinstance(rows, Columns) else rows)]


@pytest.mark.parametrize("shape", sorted(SHAPES))
@pytest.mark.parametrize(("seed", "columns"), [(0, False), (1, True)], ids=["rows0", "arrow1"])
@pytest.mark.parametrize("moving", [False, True], ids=["still", "relayouts"])
def test_leaves_computed_when_read_partitioned_equal_the_one_node_box(shape, seed, columns, moving):
    rng = random.Random(f"computed{shape}{seed}{moving}")
    cluster = Computed(shape, 2 + seed % 2, rng, columns)
    one, one_out = one_node(shape)
    producers = [f"p{i}" for i in range(3)]
    seqs: Counter = Counter()
    before_end = 0
    batches = stream(rng, producers, 120)
    for i, (producer, rows) in enumerate(batches):
        cluster.publish(producer, seqs[producer], rows)
        one_out += rows_of(one.process_from(0, rows, cluster.now, ("A", producer, seqs[producer])))
        seqs[producer] += 1
        for _ in range(rng.randrange(0, 6)):
            cluster.deliver_one()
        if rng.random() < 0.4:
            cluster.tick(0.05)
        if rng.random() < 0.04:
            cluster.restart(rng.randrange(len(cluster.members)))  # its state() through msgpack, restore()d
        if moving and rng.random() < 0.1:
            cluster.relayout()
        if i == len(batches) // 2:
            cluster.settle()
            before_end = len(cluster.out)
    cluster.settle(relayouts_too=True)
    for producer in producers:
        cluster.end(producer)
        one_out += rows_of(one.producer_ended(0, producer, cluster.now))
    cluster.settle()
    assert before_end > 0  # windows closed and joined while the stream ran
    got = Counter(row for _, row in cluster.out)
    assert got == Counter(one_out) and len(got) > 5
    assert {member for member, _ in cluster.out} == {0}
    if moving:
        assert cluster.relayouts and cluster.members[0].layout.version > 1
    assert all(op.runtime.entries() == 0 for op in cluster.members)
    assert not cluster.members[0].gather.waiting


def test_leaf_rows_of_a_window_come_from_several_members():
    """The windows' groups are spread: more than one member sends member 0 leaf rows of one step (else the test
    above could pass with every group on member 0)."""
    cluster = Computed("q8", 2, random.Random(5), False)
    sent: list[int] = []
    original = cluster.members[0].gathered

    def spy(step, member, leaves):
        if any(leaves.values()):
            sent.append(member)
        original(step, member, leaves)

    cluster.members[0].gathered = spy
    rows = [(k, 60 + k, t) for k in range(8) for t in range(0, 1000, 250)] + [(0, 1, 2000)]
    cluster.publish("p0", 0, rows)
    cluster.tick(0.2)
    cluster.settle()
    assert 1 in sent and sorted(row for _, row in cluster.out) == [(k, 60 + k, 0, 1) for k in range(8)]


def test_a_member_joining_by_a_move_gives_the_one_node_rows():
    """A segment moves to a new node between windows: the leaf rows its member closes afterwards reach member 0
    and the rows equal the one-node box's."""
    cluster = Computed("q5", 2, random.Random(3), False)
    one, one_out = one_node("q5")
    batches = [[(k, 1, t) for k in range(6) for t in range(0, 1000, 100 * (k + 1))], [(0, 1, 3000)]]
    for seq, rows in enumerate(batches + [None]):
        if rows is None:
            cluster.move_to_a_new_node(slot(5), cluster.member_of("p0"))
            rows = [(5, 1, t) for t in range(3000, 3900, 50)] + [(0, 1, 3100), (1, 1, 6000)]
        cluster.publish("p0", seq, rows)
        one_out += rows_of(one.process_from(0, rows, cluster.now, ("A", "p0", seq)))
        cluster.tick(0.2)
        cluster.settle(relayouts_too=True)
    cluster.end("p0")
    one_out += rows_of(one.producer_ended(0, "p0", cluster.now))
    cluster.tick(0.2)
    cluster.settle()
    got = Counter(row for _, row in cluster.out)
    assert got == Counter(one_out) and (5, 18, 1) in got


@pytest.mark.parametrize(("shape", "pin", "why"), [
    ("q7", ("Q2_m", "V"), "view Q2 is computed from its maps when it is read, and its map Q2_m is partitioned on V, "
                          "which is not a key of the view"),
])
def test_a_leaf_partitioned_off_its_keys_is_refused_by_name(shape, pin, why):
    """Pinned to a column that is not a key of the leaf (a MAX per window by the value it takes the maximum of), a
    member would compute a row from part of its entries: refused when planned, naming the map."""
    with pytest.raises(BoxError, match=why):
        plan_m3_partition(box(shape), [A], Partition("j", ("a:1", "b:1"), count=4, key="k", pins=(pin,)))
    assert plan_m3_partition(box(shape), [A], Partition("j", ("a:1", "b:1"), count=4, key="k")).planned


def test_a_view_computed_when_read_outside_a_window_join_is_still_refused():
    sql = HEAD + f"SELECT k, MAX(v) AS m, window_start FROM {TUMBLE} GROUP BY k, window_start"
    with pytest.raises(BoxError, match="view Q1 is computed from its maps when it is read"):
        plan_m3_partition(Box("w", "m3", (InPort("A"),), ("Out",), (("sql", sql),)), [A],
                          Partition("w", ("a:1", "b:1"), count=4, key="k"))


def test_the_query_api_refuses_a_members_view_computed_when_read_and_reads_its_maps():
    """A read of a member's leaf computed when read is refused by the query API (not at submission), naming the maps
    to read instead; a map of it reads as ever, and the members' entries merged are the one-node box's."""
    import asyncio
    import json

    from aiohttp.test_utils import make_mocked_request
    from boreas.node.query import QueryApi

    cluster = Computed("q5", 2, random.Random(7), False)
    one, _ = one_node("q5")
    rows = [(k, 1, t) for k in range(6) for t in range(0, 900, 100 * (k + 1))]
    cluster.publish("p0", 0, rows)
    one.process_from(0, rows, cluster.now, ("A", "p0", 0))
    cluster.tick(0.2)
    cluster.settle()

    def ask(op, query: str) -> tuple[int, dict]:
        api = QueryApi(type("Flow", (), {"operators": {"j": op}})(), op.endpoint)
        request = make_mocked_request("GET", f"/query/j?{query}", match_info={"box": "j"})
        response = asyncio.run(api.handle(request))
        return response.status, json.loads(response.body)

    status, answer = ask(cluster.members[1], "map=Q2")
    assert status == 422 and "view Q2 of partitioned m3 box 'j' is computed" in answer["error"]
    assert "(Q1_n)" in answer["error"]
    merged = Counter()
    for op in cluster.operators().values():
        status, answer = ask(op, "map=Q1_n")
        assert status == 200
        merged.update({tuple(r["key"]): r["value"] for r in answer["rows"]})
    assert merged == Counter(dict(one.runtime.read_slice("Q1_n"))) and len(merged) > 6


P = Schema("PTuple", (Field("id", FieldType.INT), Field("name", FieldType.INT), Field("ts", FieldType.LONG)))
Q = Schema("QTuple", (Field("seller", FieldType.INT), Field("ts", FieldType.LONG)))
Q8 = (f"CREATE STREAM P(id INT, name INT, ts BIGINT, WATERMARK FOR ts AS ts - {DELAY});\n"
      f"CREATE STREAM Q(seller INT, ts BIGINT, WATERMARK FOR ts AS ts - {DELAY});\n"
      "SELECT P.id, P.name, P.s FROM (SELECT id, name, window_start AS s, window_end AS e FROM "
      f"TABLE(TUMBLE(TABLE P, DESCRIPTOR(ts), {SIZE})) GROUP BY id, name, window_start, window_end) P JOIN "
      f"(SELECT seller, window_start AS s, window_end AS e FROM TABLE(TUMBLE(TABLE Q, DESCRIPTOR(ts), {SIZE})) "
      "GROUP BY seller, window_start, window_end) A ON P.id = A.seller AND P.s = A.s AND P.e = A.e")


class Inputs(Cluster):
    """The harness over a box of several in ports (its one port made many): ``publish_to`` and ``end_of`` a port."""

    def __init__(self, box: Box, schemas: list[Schema], key: str, members: int, rng: random.Random):
        super().__init__("TUMBLE", members, rng, False)
        self.box, self.schemas = box, schemas
        self.outputs = infer_m3(box, schemas)
        nodes = tuple(f"n{i}:1" for i in range(members))
        self.partition = plan_m3_partition(box, schemas, Partition(box.name, nodes, count=6, key=key, epoch_ms=100))
        self.members = [part_operator(box, schemas, self.outputs, self.partition, n) for n in nodes]

    def publish_to(self, port: int, producer: str, seq: int, batch) -> None:
        member = self.member_of(producer)
        self.published[self.node_of(member)].add(producer)
        origin = (self.box.inputs[port].stream, producer, seq)
        self._collect(member, self.members[member].process_from(port, batch, self.now, origin))

    def end_of(self, port: int, producer: str) -> None:
        member = self.member_of(producer)
        node, op = self.node_of(member), self.members[member]
        self.published[node].add(producer)
        self.ended[node].add(producer)
        self._collect(member, op.producer_ended(port, producer, self.now))
        if self.ended[node] >= self.published[node] and self.out_end[node] == "open":
            self._collect(member, op.end_of_input(self.now))
            self.out_end[node] = "held" if op.holds_end() else "ended"

    def restart(self, member: int) -> None:
        op = self.members[member]
        fresh = part_operator(self.box, self.schemas, self.outputs, self.partition, op.endpoint)
        fresh.restore(msgspec.msgpack.decode(msgspec.msgpack.encode(op.state())), self.now)
        self.members[member] = fresh


@pytest.mark.parametrize("seed", range(2))
def test_q8_over_two_streams_partitioned_equals_the_one_node_box(seed):
    """People and auctions on their own streams and producers (one each per member), both leaves GROUP BY without
    aggregates, partitioned by the person's id and the seller; rows equal the one-node box's, with random layout
    changes and members restarted from their state."""
    rng = random.Random(f"q8{seed}")
    box = Box("q8", "m3", (InPort("P"), InPort("Q")), ("Out",), (("sql", Q8),))
    cluster = Inputs(box, [P, Q], "p.id", 2 + seed, rng)
    one = WindowedM3Operator(cluster.box, cluster.schemas, cluster.outputs)
    one_out: list[tuple] = []
    producers = {"pp0": 0, "pp1": 0, "qq0": 1, "qq1": 1}
    clocks, seqs = Counter(), Counter()
    for producer, port in producers.items():  # each heard at time 0 first
        rows = [(1, 1, 0)] if port == 0 else [(1, 0)]
        cluster.publish_to(port, producer, 0, rows)
        one_out += rows_of(one.process_from(port, rows, cluster.now, (cluster.box.inputs[port].stream, producer, 0)))
        seqs[producer] = 1
    for i in range(150):
        producer = rng.choice(sorted(producers))
        port = producers[producer]
        rows = []
        for _ in range(rng.randrange(1, 8)):
            clocks[producer] += rng.randrange(0, 80)
            t = max(0, clocks[producer] - rng.randrange(0, DELAY))
            rows.append((rng.randrange(10), rng.randrange(3), t) if port == 0 else (rng.randrange(10), t))
        cluster.publish_to(port, producer, seqs[producer], rows)
        origin = (cluster.box.inputs[port].stream, producer, seqs[producer])
        one_out += rows_of(one.process_from(port, rows, cluster.now, origin))
        seqs[producer] += 1
        for _ in range(rng.randrange(0, 6)):
            cluster.deliver_one()
        if rng.random() < 0.4:
            cluster.tick(0.05)
        if rng.random() < 0.04:
            cluster.restart(rng.randrange(len(cluster.members)))
        if rng.random() < 0.08:
            cluster.relayout()
    cluster.settle(relayouts_too=True)
    for producer, port in producers.items():
        cluster.end_of(port, producer)
        one_out += rows_of(one.producer_ended(port, producer, cluster.now))
    cluster.settle()
    got = Counter(row for _, row in cluster.out)
    assert got == Counter(one_out) and len(got) > 10
    assert cluster.relayouts and cluster.members[0].layout.version > 1
    assert {member for member, _ in cluster.out} == {0}
    assert all(op.runtime.entries() == 0 for op in cluster.members)


@pytest.mark.slow  # (reads the bench's queries and generator, as tests/test_nexmark_winjoin.py)
@pytest.mark.parametrize(("name", "key"), [("q5", "auction"), ("q7", "auction"), ("q8", "person.id")])
def test_nexmarks_q5_q7_q8_as_written_run_partitioned_as_on_one_node(monkeypatch, name, key):
    """The bench's own texts of q5, q7 and q8 (leaves computed when read), over generated events (60 s of event
    time, one producer per kind, batches cut anywhere), on three members with layout changes: the rows equal the
    one-node box's."""
    from support.bench import bench_importable

    for _ in bench_importable(monkeypatch, ("nexmark_gen", "nexmark_boreas", "nexmark_queries")):
        import nexmark_gen
        from boreas.catalog import Catalog, plan_submission, read_document
        from boreas.catalog.validate import stream_schemas
        from boreas.m3.boxtype import box_types
        from boreas.node.operators import build_operator
        from nexmark_boreas import app_xml, boreas_batch
        from nexmark_queries import BY_NAME

        q = BY_NAME[name]
        made = plan_submission(Catalog(), [read_document(app_xml(q), f"{name}.xml")], box_types())
        box = made.catalog.boxes[name]
        schemas = stream_schemas(made.catalog, box_types())
        ins = [schemas[p.stream] for p in box.inputs]
        rng = random.Random(name)
        cluster = Inputs(box, ins, key, 3, rng)
        one = build_operator(box, ins, [schemas[s] for s in box.outputs])
        one_out: list[tuple] = []
        seqs: Counter = Counter()
        for block in nexmark_gen.blocks(nexmark_gen.GeneratorConfig(12_000, seed=3, rate=200)):
            for port, kind in enumerate(q.reads):
                batch, at = boreas_batch(kind, block[kind]), 0
                while at < batch.num_rows:
                    cut = rng.randrange(1, 400)
                    rows = Columns(batch.slice(at, cut))
                    at += cut
                    origin = (box.inputs[port].stream, kind, seqs[kind])
                    cluster.publish_to(port, kind, seqs[kind], rows)
                    one_out += rows_of(one.process_from(port, rows, cluster.now, origin))
                    seqs[kind] += 1
                    for _ in range(rng.randrange(0, 8)):
                        cluster.deliver_one()
                    if rng.random() < 0.3:
                        cluster.tick(0.05)
                    if rng.random() < 0.02 or sum(seqs.values()) == 4:  # (q8's kinds come in few batches)
                        cluster.relayout()
        cluster.settle(relayouts_too=True)
        for port, kind in enumerate(q.reads):
            cluster.end_of(port, kind)
            one_out += rows_of(one.producer_ended(port, kind, cluster.now))
        cluster.settle()
        got = Counter(row for _, row in cluster.out)
        assert got == Counter(one_out) and len(got) > 3, (len(got), len(one_out))
        assert cluster.relayouts
        assert all(op.runtime.entries() == 0 for op in cluster.members)


def test_a_partition_kept_as_the_catalog_wrote_it_is_checked_by_its_members():
    """A partition in the catalog form (its maps placed, ``<map ... position=...>``) is kept, not planned again;
    a member placed so that it would compute a leaf's rows from part of their entries, or a view computed when
    read outside a window join, is refused when the member is built (it used to run, a partial MAX as a row)."""
    from dataclasses import replace

    from boreas.catalog.model import SegmentPlacement
    from boreas.m3.boxtype import plan_box
    from boreas.m3.cumulus import PlanError
    from boreas.node.cumulus.part import PartOperator

    planned = plan_m3_partition(box("q7"), [A], Partition("j", ("a:1", "b:1"), count=4, key="k"))
    outputs = infer_m3(box("q7"), [A])
    part_operator(box("q7"), [A], outputs, planned, "a:1")  # as planned: builds
    keys = {m.name: [k.name for k in m.keys] for m in plan_box(box("q7"), [A]).program.maps}
    off = replace(planned, maps=tuple((n, "V", keys[n].index("V")) if n == "Q2_m" else (n, k, p)
                                      for n, k, p in planned.maps))
    with pytest.raises(PlanError, match="its map Q2_m is partitioned on V, which is not a key of the view"):
        part_operator(box("q7"), [A], outputs, off, "a:1")

    sql = "CREATE STREAM A(k INT, v INT); SELECT k, MAX(v) AS m FROM A GROUP BY k"
    plain = Box("w", "m3", (InPort("A"),), ("Out",), (("sql", sql),))
    two = Schema("KV", A.fields[:2])
    placed = Partition("w", ("a:1", "b:1"), (SegmentPlacement(0, 0, 2048, 0), SegmentPlacement(1, 2048, 4096, 1)),
                       maps=(("Q1_m", "V", 1),), layout=1, id="feedbeef0000")
    with pytest.raises(PlanError, match="view Q1 is computed from its maps when it is read"):
        PartOperator(plain, [two], infer_m3(plain, [two]), placed, "a:1")


@pytest.mark.parametrize("aggregates", ["MAX(v) AS m, SUM(k) AS n", "SUM(k) AS n, MAX(v) AS m"])
def test_a_leaf_whose_maps_have_different_keys_plans_or_is_refused_by_name(aggregates):
    """A leaf's MAX map has one more key (the value) than its SUM map: planned on a key both have, and a pin to
    the one only the MAX map has is refused by name (it used to crash planning: KeyError, IndexError)."""
    sql = HEAD + (f"SELECT B.k, B.v FROM A B JOIN (SELECT {aggregates}, window_end AS t FROM {TUMBLE} GROUP BY "
                  f"window_start, window_end) M ON B.v = M.m WHERE B.ts BETWEEN M.t - {SIZE} AND M.t")
    leaf = Box("j", "m3", (InPort("A"),), ("Out",), (("sql", sql),))
    planned = plan_m3_partition(leaf, [A], Partition("j", ("a:1", "b:1"), count=4, key="k"))
    assert {(n, k) for n, k, _ in planned.maps if n.startswith("Q2")} == {("Q2_m", "WINDOW_END"), ("Q2_n", "WINDOW_END")}
    with pytest.raises(BoxError, match="pinned to key column 2, which map Q2_n of the same view does not have"):
        plan_m3_partition(leaf, [A], Partition("j", ("a:1", "b:1"), count=4, key="k", pins=(("Q2_m", "V"),)))
