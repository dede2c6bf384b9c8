"""Event-time windows in an ``m3`` box (TUMBLE, HOP; SESSION in tests/test_m3_sessions.py), fed by hand, against a row-at-a-time reference.

The reference (:class:`Reference`) keeps each (window, group) as a plain
dict entry, one row at a time, with its own watermark rules written out
(docs/m3.md, "Event time"): per producer the newest event time minus the
delay, the least over producers not idle and not ended, never back.
Hypothesis draws event times, producers, idle gaps, late rows, ends and a
move of the box (its state through msgpack into a new operator) and checks
the rows each step emits, the late count, and that no map entry of a closed
window is left.
"""

from __future__ import annotations

import copy
import math

import msgspec
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from boreas.catalog.model import Box, Field, FieldType, InPort, Schema
from boreas.m3.boxtype import infer_m3
from boreas.m3.errors import CompileError
from boreas.m3.nullable import GONE
from boreas.m3.compiler.pipeline import compile_sql
from boreas.node.operators.base import OperatorError
from boreas.node.operators.m3windows import WindowedM3Operator
from boreas.node.operators.registry import DEFAULT_REGISTRY
from boreas.wire.columns import Columns, arrow_schema, from_rows
from support.watermark_reference import WatermarkReference

BID = Schema("BidTuple", (Field("auction", FieldType.INT), Field("price", FieldType.INT),
                          Field("ts", FieldType.LONG)))
SIZE, SLIDE, IDLE = 10, 5, 3.0


def sql(kind: str, delay: int) -> str:
    window = (f"TUMBLE(TABLE Bid, DESCRIPTOR(ts), INTERVAL '{SIZE}' MILLISECOND)" if kind == "TUMBLE" else
              f"HOP(TABLE Bid, DESCRIPTOR(ts), {SLIDE}, {SIZE})")
    return (f"CREATE STREAM Bid(auction INT, price INT, ts INT, WATERMARK FOR ts AS ts - {delay});\n"
            f"SELECT auction, window_start, window_end, COUNT(*) AS n, SUM(price) AS total, MAX(price) AS top\n"
            f"FROM TABLE({window}) GROUP BY auction, window_start, window_end")


def build(kind: str, delay: int, backend: str = "python") -> WindowedM3Operator:
    box = Box("w", "m3", (InPort("Bid"),), ("Out",),
              (("sql", sql(kind, delay)), ("idle-timeout", str(IDLE)), ("backend", backend)))
    op = DEFAULT_REGISTRY.build(box, [BID], infer_m3(box, [BID]))
    assert isinstance(op, WindowedM3Operator)
    return op


class Reference(WatermarkReference):
    """The windows one row at a time: ``{(auction, start): [count, sum, max]}``, closed windows emitted once."""

    def __init__(self, kind: str, delay: int):
        super().__init__(delay, IDLE)
        self.slide = SIZE if kind == "TUMBLE" else SLIDE
        self.groups: dict[tuple[int, int], list[int]] = {}

    def starts(self, t: int) -> list[int]:
        return [s for s in range(t - t % self.slide, t - SIZE, -self.slide)]

    def batch(self, producer: str, rows: list[tuple], now: float) -> list[tuple]:
        for auction, price, t in rows:
            open_ = [s for s in self.starts(t) if s + SIZE > self.closed]
            if not open_:
                self.late += 1
            for s in open_:
                g = self.groups.setdefault((auction, s), [0, 0, -math.inf])
                g[0] += 1
                g[1] += price
                g[2] = max(g[2], price)
        self.heard_from(producer, [t for _, _, t in rows], now)
        return self.close(now)

    def close(self, now: float) -> list[tuple]:
        if not self.advance(now):
            return []
        out = sorted((a, s, s + SIZE, g[0], g[1], g[2]) for (a, s), g in self.groups.items() if s + SIZE <= self.closed)
        self.groups = {k: g for k, g in self.groups.items() if k[1] + SIZE > self.closed}
        return out


def emitted_rows(out) -> list[tuple]:
    rows = []
    for port, batch in out:
        assert port == 0
        rows.extend(batch.rows() if isinstance(batch, Columns) else batch)
    return sorted(rows)


row = st.tuples(st.integers(1, 3), st.integers(0, 50), st.integers(0, 120))
step = st.one_of(
    st.tuples(st.sampled_from(["batch", "columns"]), st.sampled_from(["p", "q"]), st.lists(row, max_size=6),
              st.floats(0, 2)),
    st.tuples(st.just("poll"), st.just(""), st.just([]), st.floats(0, 4)),
    st.tuples(st.just("move"), st.just(""), st.just([]), st.just(0.0)),
)


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(kind=st.sampled_from(["TUMBLE", "HOP"]), delay=st.integers(0, 15), steps=st.lists(step, max_size=25))
def test_windows_match_a_row_at_a_time_reference(kind, delay, steps):
    op, ref, now = build(kind, delay), Reference(kind, delay), 0.0
    for what, producer, rows, gap in steps:
        now += gap
        if what in ("batch", "columns"):  # as rows, or as Arrow columns (a publisher's batch)
            batch = (from_rows(rows, BID) or []) if what == "columns" else list(rows)
            got, want = op.process_from(0, batch, now, ("Bid", producer, 1)), ref.batch(producer, rows, now)
        elif what == "poll":
            got, want = op.poll(now), ref.close(now)
        else:  # the box moves: its state, through msgpack, into a new operator
            moved = build(kind, delay)
            moved.restore(msgspec.msgpack.decode(msgspec.msgpack.encode(op.state())), now)
            op, got, want = moved, [], []
        assert emitted_rows(got) == want
        assert op.counters()["late_tuples"] == ref.late
        state = op.runtime.state()["maps"]
        assert all(key[2] > ref.closed for entries in state.values() for key in (e[:-1] for e in entries)), \
            "a closed window's map entry is left"
    ref.ended = True
    assert emitted_rows(op.end_of_input(now)) == ref.close(now)
    assert op.state_entries() == 0


def test_a_late_row_is_counted_and_never_folded_in_and_windows_close_once():
    op = build("TUMBLE", 0)
    assert emitted_rows(op.process_from(0, [(1, 5, 3), (1, 7, 12)], 1.0, ("Bid", "p", 1))) == [(1, 0, 10, 1, 5, 5)]
    assert op.process_from(0, [(1, 100, 4)], 1.0, ("Bid", "p", 2)) == []  # window [0, 10) closed: late
    assert op.counters()["late_tuples"] == 1
    assert emitted_rows(op.end_of_input(2.0)) == [(1, 10, 20, 1, 7, 7)]
    assert op.end_of_input(3.0) == []


def test_an_idle_producer_stops_holding_the_watermark_back():
    op = build("TUMBLE", 0)
    op.process_from(0, [(1, 1, 2)], 0.0, ("Bid", "slow", 1))
    assert op.process_from(0, [(2, 1, 25)], 1.0, ("Bid", "fast", 1)) == []  # slow holds [0, 10) open
    assert op.next_deadline() == IDLE
    assert emitted_rows(op.poll(IDLE)) == [(1, 0, 10, 1, 1, 1)]  # slow idle: fast's 25 closes [0, 10)


def test_a_producers_end_stops_it_holding_the_watermark_back():
    op = build("TUMBLE", 0)
    op.process_from(0, [(1, 1, 2)], 0.0, ("Bid", "slow", 1))
    assert op.process_from(0, [(2, 1, 25)], 0.1, ("Bid", "fast", 1)) == []  # slow holds [0, 10) open
    assert emitted_rows(op.producer_ended(0, "slow", 0.2)) == [(1, 0, 10, 1, 1, 1)]  # fast's 25 closes [0, 10)
    assert emitted_rows(op.producer_ended(0, "fast", 0.3)) == [(2, 20, 30, 1, 1, 1)]  # both ended: all closed
    assert op.end_of_input(0.4) == []


def test_columns_in_and_the_native_backend_agree_with_rows():
    from support.native import skip_without_native
    skip_without_native()
    op = build("HOP", 2, backend="native")
    rows = [(1, 5, 3), (2, 6, 9), (1, 7, 14)]
    got = op.process_from(0, from_rows(rows, BID), 1.0, ("Bid", "p", 1))
    ref = Reference("HOP", 2)
    assert emitted_rows(got) == ref.batch("p", rows, 1.0)
    ref.ended = True
    assert emitted_rows(op.end_of_input(2.0)) == ref.close(2.0)
    assert op.state_entries() == 0


def test_cumulate_and_a_view_without_its_window_are_refused_saying_why():
    with pytest.raises(CompileError, match="CUMULATE windows are not supported: not implemented"):
        compile_sql("CREATE STREAM B(a INT, ts INT); SELECT a, COUNT(*) AS n "
                    "FROM TABLE(CUMULATE(TABLE B, DESCRIPTOR(ts), 5, 10)) GROUP BY a")
    with pytest.raises(CompileError, match="DESCRIPTOR\\(t\\) names no column of B"):
        compile_sql("CREATE STREAM B(a INT, ts INT); SELECT a, window_start, COUNT(*) AS n "
                    "FROM TABLE(TUMBLE(TABLE B, DESCRIPTOR(t), INTERVAL '1' SECOND)) GROUP BY a, window_start")
    box = Box("w", "m3", (InPort("Bid"),), ("Out",), (("sql", "SELECT auction, COUNT(*) AS n FROM TABLE(TUMBLE("
                                                              "TABLE Bid, DESCRIPTOR(ts), 10)) GROUP BY auction"),))
    with pytest.raises(OperatorError, match="does not GROUP BY window_start or window_end"):
        DEFAULT_REGISTRY.build(box, [BID], infer_m3(box, [BID]))


APP = """<borealis>
  <input stream="Bid" schema="BidTuple" {attrs}/>
  <output stream="PerWindow"/>
  <schema name="BidTuple"><field name="auction" type="int"/><field name="price" type="int"/>
    <field name="ts" type="long"/></schema>
  <query name="q"><box name="w" type="m3"><in stream="Bid"/><out stream="PerWindow"/>
    <parameter name="sql"><![CDATA[SELECT auction, window_start, window_end, COUNT(*) AS n
      FROM TABLE(TUMBLE(TABLE Bid, DESCRIPTOR(ts), INTERVAL '10' SECOND)) GROUP BY auction, window_start, window_end]]>
    </parameter></box></query>
</borealis>"""
NODE = "localhost:15100"


def plan_app(attrs: str):
    from boreas.catalog import Catalog, plan_submission, read_document
    from boreas.m3.boxtype import box_types
    deploy = f'<deploy><node endpoint="{NODE}" query="q"/><publish stream="Bid" node="{NODE}"/></deploy>'
    return plan_submission(Catalog(), [read_document(APP.format(attrs=attrs), "app.xml"),
                                       read_document(deploy, "deploy.xml")], box_types())


def test_an_inputs_watermark_reaches_the_box_through_the_nodes_slice_and_export():
    from boreas.catalog.elements import catalog_from_elements, to_elements
    from boreas.catalog.export import export_application
    from boreas.catalog.slices import node_slice
    from boreas.node.operators.m3windows import follow_watermarks
    result = plan_app('watermark="ts - INTERVAL \'2\' SECOND" idle-timeout="1.5"')
    assert result.ok, result.problems
    part = node_slice(result.catalog, NODE)
    assert (part.inputs["Bid"].watermark, part.inputs["Bid"].idle_timeout) == ("ts - INTERVAL '2' SECOND", "1.5")
    assert 'watermark="ts - INTERVAL' in export_application(result.catalog)
    assert catalog_from_elements(to_elements(result.catalog)) == result.catalog  # as the catalog store keeps it
    box = part.boxes["w"]
    op = DEFAULT_REGISTRY.build(box, [BID], infer_m3(box, [BID]))
    follow_watermarks([op], part.inputs)
    assert op.process_from(0, [(1, 1, 1000), (1, 1, 11000)], 0.0, ("Bid", "p", 1)) == []  # 11000 - 2000 < 10000
    assert emitted_rows(op.process_from(0, [(2, 1, 12000)], 0.5, ("Bid", "p", 2))) == [(1, 0, 10000, 1)]
    assert op.next_deadline() == 2.0  # idle 1.5s after its last batch


def test_a_bad_watermark_attribute_is_refused_naming_the_file_line_and_input():
    from boreas.catalog.diagnostics import ValidationFailed
    with pytest.raises(ValidationFailed, match="app.xml:2: /borealis/input: input 'Bid': watermark 'ts [+] 5' is not"):
        plan_app('watermark="ts + 5"')


def test_a_partitioned_tumble_view_plans_and_a_session_view_plans_where_its_sessions_stay_whole():
    from boreas.catalog.model import Partition
    from boreas.m3.boxtype import BoxError, plan_m3_partition
    tumble = sql("TUMBLE", 0).replace(", MAX(price) AS top", "")  # (a partitioned box's views: maps and AVGs)
    box = Box("w", "m3", (InPort("Bid"),), ("Out",), (("sql", tumble),))
    planned = plan_m3_partition(box, [BID], Partition("w", ("a:1", "b:1")))
    assert planned.planned and {s.member for s in planned.segments} == {0, 1}
    session = ("SELECT B.auction, COUNT(*) AS n, B.window_start, B.window_end FROM TABLE(SESSION(TABLE Bid "
               "PARTITION BY auction, DESCRIPTOR(ts), INTERVAL '10' SECOND)) B "
               "GROUP BY B.auction, B.window_start, B.window_end")
    box = Box("s", "m3", (InPort("Bid"),), ("Out",), (("sql", session),))
    planned = plan_m3_partition(box, [BID], Partition("s", ("a:1", "b:1")))  # (docs/cumulus.md §3.13)
    assert ("HELD_BID", "AUCTION", 0) in planned.maps and {c for _, c, _ in planned.maps} == {"AUCTION"}
    per_window = session.replace("B.auction, COUNT", "COUNT").replace("GROUP BY B.auction, ", "GROUP BY ")
    box = Box("s", "m3", (InPort("Bid"),), ("Out",), (("sql", per_window),))
    with pytest.raises(BoxError, match="not a column of its SESSION's PARTITION BY"):
        plan_m3_partition(box, [BID], Partition("s", ("a:1", "b:1")))


_WINDOWS: dict = {}  # a box's Windows per kind, built once (copied per example)


@settings(max_examples=40, deadline=None)
@given(kind=st.sampled_from(["TUMBLE", "HOP"]), rows=st.lists(row, max_size=12),
       signs=st.lists(st.sampled_from([1, -1, 2]), min_size=12, max_size=12), closed=st.integers(-20, 100),
       weighted_in=st.booleans())
def test_a_batch_of_columns_gets_the_windows_and_weights_the_row_path_gives(kind, rows, signs, closed, weighted_in):
    """``Windows.admit_columns`` (one take of the batch for every window a row falls in) against ``admit``
    (row by row): the same rows with the same windows and weights, the same late count, plain or weighted."""
    if kind not in _WINDOWS:
        _WINDOWS[kind] = build(kind, 0).windows
    by_columns, by_rows = copy.deepcopy(_WINDOWS[kind]), copy.deepcopy(_WINDOWS[kind])
    by_columns.closed = by_rows.closed = closed
    weights = signs[:len(rows)] if weighted_in else None
    batch = from_rows(rows, BID) if rows else Columns(pa.RecordBatch.from_pylist([], schema=arrow_schema(BID)))
    if weights is not None:
        batch = Columns(batch.batch, weights=pa.array(weights, pa.int64()))
    got = by_columns.admit_columns(0, "p", batch, 0.0)
    want, want_weights = by_rows.admit(0, "p", list(rows), weights, 0.0)
    assert sorted(zip(got.rows(), got.weight_list())) == sorted(zip(want, want_weights or [1] * len(want)))
    assert by_columns.late == by_rows.late


@settings(max_examples=40, deadline=None)
@given(pairs=st.lists(st.tuples(st.tuples(st.integers(0, 3), st.sampled_from([10, 20, 30])),
                                st.one_of(st.integers(-1, 2), st.tuples(st.integers(0, 1), st.integers(0, 1)),
                                          st.just(GONE)))))
def test_closed_rows_in_window_order_as_a_stable_sort_of_the_rows_not_gone(pairs):
    """Every row the views' reads give is a group that had rows, all zeros included (a SUM of 0: issue 34); only
    GONE (a hidden count of 0) is left out."""
    from boreas.node.operators.m3closing import in_window_order

    assert in_window_order(pairs, 1) == sorted((kv for kv in pairs if kv[1] is not GONE), key=lambda kv: kv[0][1])
