"""Cumulus stage 1's planning layer (m3/cumulus/): hashing, layouts, placement, classification.

That the partitioning a LOCAL plan describes is exact is test_cumulus_plan_exact.py's.
"""

from __future__ import annotations

import datetime
import doctest
import importlib
import json
import os
import subprocess
import sys
from pathlib import Path

import msgspec
import pytest
from boreas.m3 import compile_sql, parse_program
from boreas.m3.cumulus import (
    BCAST_GATHER,
    BCAST_PUSH,
    GATHER,
    LOCAL,
    LOOP,
    PIPELINE,
    POINT,
    POINT_PUSH,
    REPART,
    SLOTS,
    Layout,
    LayoutError,
    PlacementError,
    Segment,
    all_local,
    classify,
    even_layout,
    key_classes,
    place,
    plan_partition,
    slot,
    slots_of,
)
from hypothesis import given
from hypothesis import strategies as st
from test_views_vs_duckdb import SHAPES

Q3 = (Path(__file__).parents[2] / "examples" / "tpch_q3.sql").read_text()
GROUP_BY = "CREATE STREAM R(a INT, b INT); SELECT a, SUM(b) AS total, COUNT(*) AS n FROM R GROUP BY a"

_programs: dict[str, object] = {}


def program(sql: str):
    if sql not in _programs:
        _programs[sql] = compile_sql(sql) if "SELECT" in sql else parse_program(sql)
    return _programs[sql]


@pytest.mark.parametrize("module", ["hashing", "layout", "placement", "plan", "locality", "member", "roles", "stable", "relayout", "definitions", "__init__"])
def test_doctests(module):
    name = "boreas.m3.cumulus" + ("" if module == "__init__" else f".{module}")
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0 and result.failed == 0


# -- hashing ---------------------------------------------------------------

GOLDEN = [(0, 0), (1, 2531), (3, 3498), (7, 1336), (-1, 1564), (2**63 - 1, 3612), (3.0, 3498), (-0.0, 0),
          (0.25, 4033), ("", 0), ("BUILDING", 629), ("q3", 3202), (datetime.date(1995, 3, 15), 2303)]


@pytest.mark.parametrize("value,expected", GOLDEN)
def test_slot_golden_values(value, expected):
    assert slot(value) == expected


def test_slot_is_stable_across_processes():
    """Not Python's hash(): a string's slot is the same under any hash seed."""
    code = "from boreas.m3.cumulus import slot; import datetime; print([slot('BUILDING'), slot('ASIA'), slot(7), slot(2.5)])"
    outs = {subprocess.run([sys.executable, "-c", code], env={**os.environ, "PYTHONHASHSEED": seed},
                           capture_output=True, text=True, check=True).stdout for seed in ("1", "2", "12345")}
    assert outs == {f"{[slot('BUILDING'), slot('ASIA'), slot(7), slot(2.5)]}\n"}


@given(st.one_of(st.integers(-(2**80), 2**80), st.floats(allow_nan=True), st.text(), st.dates()))
def test_slot_in_range_and_equal_values_share_a_slot(v):
    assert 0 <= slot(v) < SLOTS
    if isinstance(v, float) and v.is_integer() and abs(v) < 2**63:
        assert slot(v) == slot(int(v))  # 3.0 and 3 are one dict key: one owner


def test_slots_of_and_bad_values():
    assert slots_of((7, "x"), 0) == slot(7) and slots_of((7, "x"), 1) == slot("x")
    for bad in (True, None, b"x"):
        with pytest.raises(TypeError, match="cannot hash"):
            slot(bad)


# -- layouts ----------------------------------------------------------------

def test_layout_validation_messages():
    segs = lambda *t: tuple(Segment(*s) for s in t)
    cases = [
        (segs((0, 0, 1024, 0), (1, 2048, 4096, 1)), "segments of box 'q3' leave slots 1024-2047 unowned"),
        (segs((0, 0, 2048, 0), (1, 2000, 4096, 1)), "segments of box 'q3' overlap at slot 2000"),
        (segs((0, 0, 2048, 0), (0, 2048, 4096, 1)), "segments of box 'q3' have id 0 twice"),
        (segs((0, 0, 2048, 0), (2, 2048, 4096, 5)), "segment 2 of box 'q3' is on member 5; the partition has 2"),
        (segs((0, 0, 4097, 0)), "segment 0 of box 'q3' has slots 0-4096"),
        (segs((0, 0, 4000, 0)), "leave slots 4000-4095 unowned"),
    ]
    for segments, message in cases:
        with pytest.raises(LayoutError, match=message):
            Layout("q3", ("a", "b"), segments)
    with pytest.raises(LayoutError, match="lists no members"):
        Layout("q3", (), segs((0, 0, 4096, 0)))
    with pytest.raises(LayoutError, match="places map 'm1' twice"):
        Layout("q3", ("a",), segs((0, 0, 4096, 0)), maps=(("m1", 0), ("m1", 1)))
    with pytest.raises(LayoutError, match="partition column -1"):
        Layout("q3", ("a",), segs((0, 0, 4096, 0)), maps=(("m1", -1),))
    with pytest.raises(LayoutError, match="segments=5000, between 1 and 4096"):
        even_layout("q3", ["a"], 5000)
    lay = even_layout("q3", ["a"], 1, maps=[("m1", 9)])
    with pytest.raises(LayoutError, match="does not place map 'Q1_revenue'"):
        lay.check_program(program(Q3))
    with pytest.raises(LayoutError, match="does not place map 'zz'"):
        lay.owner("zz", (1,))


def test_layout_round_trips_through_json_and_msgpack():
    lay = even_layout("q3", ["localhost:15001", "localhost:15002", "localhost:15003"], 8,
                      maps=[("Q1_revenue", 0), ("m2", 0), ("home", None)], version=4, first_epoch=9213)
    assert Layout.from_dict(json.loads(json.dumps(lay.to_dict()))) == lay
    assert Layout.from_dict(msgspec.msgpack.decode(msgspec.msgpack.encode(lay.to_dict()))) == lay
    assert json.loads(json.dumps(lay.to_dict()))["segments"][2] == [2, 1024, 1536, 2]
    assert Layout.from_dict(lay.to_dict()).owner("m2", (7,)) == lay.owner("m2", (7,))


@given(st.integers(1, 8), st.integers(1, 200))
def test_even_layout_spreads_evenly(n_members, n_segments):
    lay = even_layout("b", [f"n{i}" for i in range(n_members)], n_segments)
    sizes = [s.hi - s.lo for s in lay.segments]
    assert sum(sizes) == SLOTS and max(sizes) - min(sizes) <= 1
    per_member = [len(lay.segments_of(m)) for m in range(n_members)]
    assert sum(per_member) == n_segments and max(per_member) - min(per_member) <= 1
    for s in lay.segments:
        assert lay.owner_of_slot(s.lo) == lay.owner_of_slot(s.hi - 1) == s.member
        assert lay.segment_of_slot(s.lo) == s


def test_owner_and_home():
    lay = even_layout("q3", ["a", "b", "c"], 8, maps=[("m", 0), ("h", None)])
    assert lay.owner("m", (7,)) == lay.owner_of_slot(1336) == lay.segment_of_slot(1336).member == 2  # q3/2 on C (§3.7)
    assert lay.owner("m", (3,)) == lay.segment_of_slot(3498).member == 0  # q3/6 on A
    assert lay.owner("h", ()) == lay.home == lay.owner_of_slot(slot("q3"))


def test_describe_lines():
    lay = even_layout("q3", ["localhost:15001", "localhost:15002"], 2, maps=[("m1", 1), ("m2", 0)], version=4)
    assert lay.describe() == ["q3/0  slots 0-2047     localhost:15001  m1  m2",
                              "q3/1  slots 2048-4095  localhost:15002  m1  m2", "layout 4, 2 members, 2 segments"]
    lines = lay.describe({(0, "m1"): 52118, (0, "m2"): 1904, (1, "m1"): 7})
    assert lines[0].endswith("localhost:15001  m1 52,118  m2 1,904") and lines[1].endswith("m1 7  m2 0")
    assert lines[-1] == "layout 4, 2 members, 2 segments, 54,029 entries"


# -- placement ----------------------------------------------------------------

def test_placement_single_relation_group_by():
    pl = place(program(GROUP_BY))
    assert pl.columns == {"Q1_total": 0, "Q1_n": 0}
    assert pl.reason("Q1_total").startswith("its only key column; all 2 statements")


def test_placement_group_by_join_key():
    assert place(program(SHAPES["group_by_join_key"])).columns == {"Q1_s": 0, "m1": 0, "m2": 0}


def test_placement_q3_follows_the_design():
    p = program(Q3)
    classes = key_classes(p)
    assert classes[0].maps == (("Q1_revenue", 0), ("m1", 1), ("m3", 0), ("m4", 0), ("m5", 0))
    assert classes[0].columns == (("orders", "o_orderkey"), ("lineitem", "l_orderkey"))
    custkey = next(c for c in classes if ("customer", "c_custkey") in c.columns)
    assert custkey.maps == (("m1", 0), ("m2", 0), ("m5", 1)) and custkey.columns[1] == ("orders", "o_custkey")
    pl = place(p, box="q3")  # every map on the orderkey class except m2 (custkey), §3.2
    assert pl.columns == {"Q1_revenue": 0, "m1": 1, "m2": 0, "m3": 0, "m4": 0, "m5": 0}
    assert pl.cost == 4 * 1 + 4 * 2  # the four m2 reads of ON +/-orders, the four LOOPs of ON +/-customer
    assert "in the class of orders.o_orderkey, lineitem.l_orderkey" in pl.reason("m1")
    assert pl.reason("m2").startswith("its only key column; read from another member by 4 statements")
    assert place(p, key="ORDERS.O_ORDERKEY").columns == pl.columns


def test_placement_honours_key_and_pins():
    p = program(Q3)
    pl = place(p, key="c_custkey", box="q3")
    assert pl.columns == {"Q1_revenue": 0, "m1": 0, "m2": 0, "m3": 0, "m4": 0, "m5": 1}
    assert pl.reason("m1").startswith("key='c_custkey': C_CUSTKEY is in the class of customer.c_custkey")
    assert pl.reason("m3").startswith("its only key column")
    pinned = place(p, pins={"m5": "c_custkey"})
    assert pinned.columns["m5"] == 1 and pinned.reason("m5").startswith("pinned by <map name='m5' key='c_custkey'>")
    rs = program(SHAPES["group_by_join_key"])
    assert place(rs, key="b").columns == {"Q1_s": 0, "m1": 0, "m2": 0}  # r.b and s.b: one class


def test_placement_errors():
    p = program(Q3)
    with pytest.raises(PlacementError, match=r"key 'okey' is not a column of any relation of box 'q3' \(customer: c_custkey, c_mktsegment; orders: o_orderkey"):
        place(p, key="okey", box="q3")
    with pytest.raises(PlacementError, match="key 'c_mktsegment' partitions no map of box 'q3' \\(no map is keyed by it\\)"):
        place(p, key="c_mktsegment", box="q3")
    with pytest.raises(PlacementError, match=r"box 'q3' has no map 'm9' \(maps: Q1_revenue, m1, m2, m3, m4, m5\)"):
        place(p, pins={"m9": "X"}, box="q3")
    with pytest.raises(PlacementError, match=r"map 'm2' has no key 'X' \(keys: O_CUSTKEY\)"):
        place(p, pins={"m2": "X"}, box="q3")
    two = program("CREATE STREAM R(a INT, b INT, c INT); SELECT a, b, SUM(c) AS s, COUNT(*) AS n FROM R GROUP BY a, b")
    with pytest.raises(PlacementError, match="maps Q1_s and Q1_n of view Q1 must be partitioned on the same key column"):
        place(two, pins={"Q1_s": "A", "Q1_n": "B"})
    shared = place(two, pins={"Q1_n": "B"})
    assert shared.columns == {"Q1_s": 1, "Q1_n": 1} and "shares its view's column with Q1_n" in shared.reason("Q1_s")


# -- classification ---------------------------------------------------------------

def test_single_relation_group_by_is_all_local():
    plan = classify(program(GROUP_BY), place(program(GROUP_BY)).columns, box="g")
    assert {(s.kind, s.cls) for _, s in plan.statements()} == {(POINT, LOCAL)}
    assert all_local(plan) == (True, "box 'g': all 4 statements of 2 triggers are LOCAL; each event is applied where its keys live")


@pytest.mark.parametrize("shape", ["single_no_group", "single_group", "avg", "several_aggregates", "group_by_join_key",
                                   "arithmetic", "selection", "selection_or", "between_in", "string_selection"])
def test_local_shapes_are_all_local(shape):
    pp = plan_partition(program(SHAPES[shape]), shape, ["a", "b", "c"])
    assert pp.local, pp.reason


@pytest.mark.parametrize("shape", ["two_way", "three_way", "self_join", "two_queries", "tpch_q3", "tpch_q5", "tpch_q10"])
def test_cross_segment_shapes_are_not_local(shape):
    pp = plan_partition(program(SHAPES[shape]), shape, ["a", "b"])
    assert not pp.local and pp.reason.endswith("members push such entries to each other, in version order")
    assert not any(t.sequential for t in pp.plan.triggers)  # self_join included (§3.3)


def test_q3_is_not_local_and_the_reason_names_the_statement():
    pp = plan_partition(program(Q3), "q3", ["a", "b", "c"], segments=8)
    assert [name for name, _ in PIPELINE] == ["hash", "place", "classify"]
    assert not pp.local
    assert pp.reason.startswith("box 'q3': statement 1 of trigger ON +orders (Q1_revenue[O_ORDERKEY, O_ORDERDATE, "
                                "O_SHIPPRIORITY] += IF O_ORDERDATE < DATE '1995-03-15' THEN m2[O_CUSTKEY] * m3[O_ORDERKEY] ELSE 0) "
                                "reads map m2 partitioned on O_CUSTKEY (key 0) at O_CUSTKEY from another member")
    # the plan table of docs/cumulus.md §3.7 (insert triggers)
    table = {t.name: [(s.kind, str(s.arg), [(r.ref.name, r.cls, r.id) for r in s.refs]) for s in t.statements]
             for t in pp.plan.triggers if t.sign > 0}
    assert table["ON +lineitem"] == [(POINT, "L_ORDERKEY", [("m4", LOCAL, None)])] * 2 + \
        [(POINT, "L_ORDERKEY", [("m5", LOCAL, None)])] * 2 + [(POINT, "L_ORDERKEY", [])] * 2
    assert table["ON +orders"] == [(POINT, "O_ORDERKEY", [("m2", POINT_PUSH, 0), ("m3", LOCAL, None)]),
                                   (POINT, "O_ORDERKEY", [("m3", LOCAL, None)]),
                                   (POINT, "O_ORDERKEY", [("m2", POINT_PUSH, 0)]),  # same ref id: fetched once
                                   (POINT, "O_ORDERKEY", [])]
    assert table["ON +customer"] == [(LOOP, "O_ORDERKEY", [("m1", LOCAL, None)]), (LOOP, "L_ORDERKEY", [("m5", LOCAL, None)]),
                                     (POINT, "C_CUSTKEY", [])]


CLASSES = """
CREATE STREAM R1(A INT, B INT); CREATE STREAM R2(A INT, B INT); CREATE STREAM R3(A INT, B INT);
CREATE STREAM R4(A INT, B INT); CREATE STREAM R5(A INT, B INT); CREATE STREAM R6(A INT, B INT);
DECLARE MAP q[A: INT, C: INT] : INT; DECLARE MAP n[C: INT] : INT; DECLARE MAP nn[A: INT, C: INT] : INT;
DECLARE MAP p[A: INT] : INT; DECLARE MAP qq[C: INT, D: INT] : INT; DECLARE MAP t[] : INT; DECLARE MAP u[] : INT;
ON +R1(A, B) DO { q[A, C] += n[C] }
ON +R2(A, B) DO { n[C] += nn[A, C] }
ON +R3(A, B) DO { n[C] += nn[C, A] * p[B] }
ON +R4(A, B) DO { qq[C, D] += n[C] * n[D] }
ON +R5(A, B) DO { p[A] += IF A = B THEN n[B] ELSE 0; t[] += u[]; u[] += p[A] }
ON +R6(A, B) DO { p[A] += 3 * nn[4, 4]; t[] += nn[4, 5] }
"""


def test_every_class_of_the_design():
    plan = classify(program(CLASSES), {"q": 0, "n": 0, "nn": 0, "p": 0, "qq": 0, "t": None, "u": None})
    got = {(t.relation, s.index): (s.kind, [r.cls for r in s.refs]) for t, s in plan.statements()}
    assert got == {
        ("R1", 1): (POINT, [GATHER]),                 # slice of n over C, spread over every member
        ("R2", 1): (LOOP, [REPART]),                  # nn holds C but lives at owner(A)
        ("R3", 1): (LOOP, [LOCAL, BCAST_PUSH]),       # nn on C: local; p[B] goes to every writer
        ("R4", 1): (LOOP, [LOCAL, BCAST_GATHER]),     # n[D] over another loop variable
        ("R5", 1): (POINT, [LOCAL]),                  # A = B: the guard makes n[B] local
        ("R5", 2): (POINT, [LOCAL]),                  # home to home
        ("R5", 3): (POINT, [POINT_PUSH]),             # home reads p at A
        ("R6", 1): (POINT, [POINT_PUSH]),
        ("R6", 2): (POINT, [POINT_PUSH]),
    }
    assert plan.trigger("R5", 1).sequential  # u is written in phase 2 (statement 3) and read by statement 2
    plan2 = classify(program(CLASSES), {"q": 0, "n": 0, "nn": 1, "p": 0, "qq": 0, "t": None, "u": None})
    assert plan2.trigger("R2", 1).statements[0].cls == LOCAL


def test_sequential_triggers():
    """A trigger is sequential when phase 2 writes a map the trigger reads, or reads locally one it writes."""
    p = program("""CREATE STREAM R(A INT, B INT); DECLARE MAP m[A: INT] : INT; DECLARE MAP n[B: INT] : INT;
                   ON +R(A, B) DO { m[A] += n[B]; n[B] += m[A] }""")
    plan = classify(p, {"m": 0, "n": 0})
    assert [s.phase for s in plan.trigger("R", 1).statements] == [2, 2] and plan.trigger("R", 1).sequential
    assert plan.cost == 2 + 100


@pytest.mark.parametrize("select", [
    "SELECT a, SUM(b) / COUNT(*) AS r FROM R GROUP BY a",
    "SELECT a, SUM(b) AS s FROM R GROUP BY a HAVING COUNT(*) > 1",
    "SELECT a, MAX(b) AS m FROM R GROUP BY a",
    "SELECT DISTINCT a FROM R",
    "SELECT a, a, b FROM R",
])
def test_a_view_computed_when_read_is_refused_at_deploy(select):
    """Members merge views of plain maps and AVGs only: anything else is refused clearly, not run wrong."""
    from boreas.m3.cumulus import PlanError, plan_partition

    program = compile_sql("CREATE STREAM R(a INT, b INT); " + select)
    with pytest.raises(PlanError, match="view Q1 is computed from its maps when it is read .* deploy this box "
                                        "unpartitioned"):
        plan_partition(program, "g", ["n1", "n2"])
    for plain in ("SELECT a, SUM(b) AS s, AVG(b) AS v FROM R GROUP BY a", "SELECT * FROM R"):  # a count per row
        assert plan_partition(compile_sql("CREATE STREAM R(a INT, b INT); " + plain), "g", ["n1", "n2"]).local
