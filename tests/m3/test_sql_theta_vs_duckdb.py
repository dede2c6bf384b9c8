"""Comparisons between columns (issue 14, item 2) agree with DuckDB after every batch of inserts and deletes.

``R.a < S.b`` (and ``<=``, ``<>``, ``>``, column = column inside OR or NOT)
compile to *loop guards*: the trigger of an event loops over the entries of
the other side's map (at the event's slice, when an equi-join binds one) and
tests each.  Within one relation (``l_commitdate < l_receiptdate``) the
comparison is a guard on the event, or part of a map's definition.  Each
shape runs random insert/delete workloads over small domains
(``m3_harness``): every view equals DuckDB's after every batch, every map its
definition, and deleting every row empties every map.
"""

from __future__ import annotations

import pytest
from boreas.m3 import CheckError, compile_sql, compile_to_text
from m3_harness import check_against_duckdb, shape_params

GENERIC = """
CREATE STREAM R(a INT, b INT, c DOUBLE);
CREATE STREAM S(b INT, d INT, e DOUBLE);
CREATE TABLE T(d INT, f INT, g VARCHAR);
"""

ORDERS = """
CREATE STREAM orders(o_orderkey INT, o_orderdate DATE, o_orderpriority VARCHAR);
CREATE STREAM lineitem(l_orderkey INT, l_commitdate DATE, l_receiptdate DATE, l_quantity DOUBLE);
"""

SHAPES: dict[str, str] = {
    "within_one_relation": GENERIC + "SELECT a, COUNT(*) AS n, SUM(c) AS s FROM R WHERE b < a GROUP BY a",
    "tpch_q4_shape": ORDERS + """SELECT o_orderpriority, COUNT(*) AS order_count FROM orders, lineitem
                                 WHERE o_orderkey = l_orderkey AND l_commitdate < l_receiptdate
                                   AND o_orderdate >= DATE '1994-01-01' GROUP BY o_orderpriority""",
    "across_relations": GENERIC + "SELECT r.a, SUM(s.e) AS t, COUNT(*) AS n FROM R r, S s WHERE r.b < s.d GROUP BY r.a",
    "with_an_equi_join": GENERIC + """SELECT r.a, SUM(r.c * s.e) AS t FROM R r JOIN S s ON r.b = s.b
                                      WHERE r.a <= s.d GROUP BY r.a""",
    "greater_and_not_equal": GENERIC + """SELECT s.d, COUNT(*) AS n FROM R r, S s
                                          WHERE r.a > s.b AND r.b <> s.d GROUP BY s.d""",
    "inside_or": GENERIC + """SELECT r.a, COUNT(*) AS n FROM R r, S s WHERE r.b = s.b OR r.a < s.d GROUP BY r.a""",
    "inside_not_and_case": GENERIC + """SELECT r.a, SUM(CASE WHEN r.c < s.e THEN 1 ELSE 0 END) AS lower
                                        FROM R r, S s WHERE NOT (r.b = s.b) AND s.d < 3 GROUP BY r.a""",
    "three_relations": GENERIC + """SELECT r.a, COUNT(*) AS n FROM R r, S s, T t
                                    WHERE r.b = s.b AND s.d < t.f GROUP BY r.a""",
    "self_join": GENERIC + "SELECT r1.a, COUNT(*) AS n FROM R r1, R r2 WHERE r1.b < r2.b GROUP BY r1.a",
    "strings_and_dates": ORDERS + """SELECT o.o_orderkey, COUNT(*) AS n FROM orders o, lineitem l
                                     WHERE o.o_orderdate <= l.l_commitdate AND o.o_orderpriority <> 'A'
                                     GROUP BY o.o_orderkey""",
    "rows_view": GENERIC + "SELECT r.a, s.d FROM R r, S s WHERE r.a < s.d",
    "with_having_and_max": GENERIC + """SELECT r.a, MAX(s.e) AS m FROM R r, S s WHERE r.b < s.b GROUP BY r.a
                                        HAVING COUNT(*) > 1""",
}

@pytest.mark.parametrize("shape", shape_params(SHAPES))
def test_view_matches_duckdb(shape):
    check_against_duckdb(SHAPES[shape])


def test_a_comparison_across_relations_loops_and_is_domain_bound():
    sql = GENERIC + "SELECT r.a, SUM(s.e) AS t FROM R r, S s WHERE r.b < s.d GROUP BY r.a"
    text = compile_to_text(sql)
    assert text.startswith("-- view Q1: domain-bound: a comparison between columns")
    assert "IF B < D THEN" in text  # the loop guard, tested per entry of S's map
    within = compile_to_text(GENERIC + "SELECT a, COUNT(*) AS n FROM R WHERE b < a GROUP BY a")
    assert within.startswith("-- view Q1: first-order")  # a guard on the event: no loop


def test_a_loop_variable_only_in_a_condition_still_needs_a_map():
    from boreas.m3 import parse_program
    from boreas.m3.check import check_program

    with pytest.raises(CheckError, match="neither an event variable nor bound by a right-hand-side map"):
        check_program(parse_program("CREATE STREAM R(A INT); DECLARE MAP m[A: INT] : INT;"
                                    "ON +R(A) DO { m[A] += IF A < Z THEN 1 ELSE 0 }"))


def test_partitioned_boxes_refuse_loop_guards():
    from boreas.m3.cumulus import PlanError, plan_partition

    program = compile_sql(GENERIC + "SELECT r.a, COUNT(*) AS n FROM R r, S s WHERE r.b < s.d GROUP BY r.a")
    with pytest.raises(PlanError, match=r"compares a loop variable \(.*: a comparison between columns\); a "
                                        "partitioned m3 box runs restricted M3 only"):
        plan_partition(program, "g", ["n1", "n2"])


def test_comparing_columns_of_different_types_is_refused():
    from boreas.m3 import CompileError

    with pytest.raises(CompileError, match="cannot compare INT column r.a with STRING column t.g"):
        compile_sql(GENERIC + "SELECT COUNT(*) AS n FROM R r, T t WHERE r.a < t.g")
