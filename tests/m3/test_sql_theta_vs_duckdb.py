"""Comparisons between columns (issue 14, item 2) agree with DuckDB after every batch of inserts and deletes.

``R.a < S.b`` (and ``<=``, ``<>``, ``>``, column = column inside OR or NOT)
compile to *loop guards*: the trigger of an event loops over the entries of
the other side's map (at the event's slice, when an equi-join binds one) and
tests each.  Within one relation (``l_commitdate < l_receiptdate``) the
comparison is a guard on the event, or part of a map's definition.  Each
shape runs random insert/delete workloads over small domains
(``m3_harness``): every view equals DuckDB's after every batch, every map its
definition, and deleting every row empties every map.

:data:`EXPRESSIONS` compare arithmetic over columns (``r.c - s.e > 1``,
``r.a + 1 < s.d``, in OR, NOT and CASE, over three relations, a self-join, a
computed value against an expression, inside a subquery): the loop binds the
columns of its map's entry, then evaluates the expression.
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

EXPRESSIONS: dict[str, str] = {  # comparisons whose sides are arithmetic over columns (``arithcmp``)
    "expr_within_one_relation": GENERIC + "SELECT a, SUM(c) AS s FROM R WHERE a + b > 3 AND c * 2 <= a GROUP BY a",
    "expr_with_a_constant": GENERIC + """SELECT r.a, SUM(s.e) AS t, COUNT(*) AS n FROM R r, S s
                                         WHERE r.c - s.e > 1 GROUP BY r.a""",
    "expr_with_a_column": GENERIC + "SELECT s.d, COUNT(*) AS n FROM R r, S s WHERE r.a + 1 < s.d GROUP BY s.d",
    "expr_with_expr_in_or": GENERIC + """SELECT r.a, SUM(r.c + s.e) AS t FROM R r JOIN S s ON r.b = s.b
                                         WHERE r.a * 2 >= s.d + 1 OR r.c / 2 < s.e - 1 GROUP BY r.a""",
    "expr_in_case_and_not": GENERIC + """SELECT r.a, SUM(CASE WHEN r.c + s.e > 0 THEN r.c ELSE 0 END) AS up
                                         FROM R r, S s WHERE NOT (r.a - s.d = 0) GROUP BY r.a""",
    "expr_over_three_relations": GENERIC + """SELECT r.a, COUNT(*) AS n FROM R r, S s, T t
                                              WHERE r.b = s.b AND s.d + r.a > t.f GROUP BY r.a""",
    "expr_self_join": GENERIC + """SELECT r1.a, COUNT(*) AS n FROM R r1, R r2
                                   WHERE r1.a + r2.a > r1.b + r2.b GROUP BY r1.a""",
    "expr_rows_view": GENERIC + "SELECT r.a, s.d FROM R r, S s WHERE r.a - s.d >= 1",
    "expr_computed_and_column": ORDERS + """SELECT o.o_orderkey, COUNT(*) AS n FROM orders o, lineitem l
        WHERE EXTRACT(YEAR FROM l.l_commitdate) = o.o_orderkey + 1993 AND EXTRACT(MONTH FROM o.o_orderdate) <= l.l_orderkey
        GROUP BY o.o_orderkey""",
    "expr_in_a_subquery": GENERIC + """SELECT r.a, SUM(r.c) AS s FROM R r
                                       WHERE EXISTS (SELECT * FROM S s WHERE s.b = r.b AND s.d + s.e > 1) GROUP BY r.a""",
    "expr_with_having_and_max": GENERIC + """SELECT r.a, MAX(s.e) AS m FROM R r, S s WHERE r.b - s.b < -1
                                             GROUP BY r.a HAVING COUNT(*) > 1""",
}
SHAPES.update(EXPRESSIONS)

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


def test_an_expression_compared_across_relations_loops_and_is_domain_bound():
    text = compile_to_text(GENERIC + EXPRESSIONS["expr_with_a_constant"].split(";")[-1])
    assert text.startswith("-- view Q1: domain-bound: a comparison between columns"), text.splitlines()[0]
    assert "IF 1 < (C + -1 * E) THEN" in text  # an R event against S's map keyed by e, evaluated per entry
    within = compile_to_text(EXPRESSIONS["expr_within_one_relation"])
    assert within.startswith("-- view Q1: first-order"), within.splitlines()[0]  # a guard on the event
    assert "IF 3 < (A + B) THEN" in within


@pytest.mark.parametrize("where, message", [
    ("r.a / s.d > 1", r"unsupported division by s\.d in a comparison \(only by a non-zero integer constant\)"),
    ("r.a / 0.1 > s.d", r"unsupported division by 0\.1 in a comparison \(only by a non-zero integer constant\)"),
    ("t.g || 'x' = r.a + 1", r"unsupported DPIPE \(t\.g \|\| 'x'\) in a comparison with arithmetic"),
    ("t.g + 1 > r.a", r"unsupported arithmetic on STRING t\.g in a comparison \(only on numbers\)"),
    ("r.a + 1 > 'x'", r"cannot compare arithmetic with a non-number"),
    ("EXISTS (SELECT * FROM S s WHERE s.d + r.a > 1)", r"unsupported correlated condition s\.d \+ r\.a > 1"),
])
def test_unsupported_expressions_are_refused_by_name(where, message):
    from boreas.m3 import CompileError

    with pytest.raises(CompileError, match=message):
        compile_sql(GENERIC + f"SELECT r.a, COUNT(*) AS n FROM R r, T t WHERE r.a = t.d AND {where} GROUP BY r.a")


@pytest.mark.parametrize("backend", ["python", "native"])
def test_a_division_in_a_comparison_decides_as_sql_does_at_its_boundary(backend):
    """``a / 49 = c`` holds at a = 49, c = 1 and ``a / 10 > c`` does not at a = 30, c = 3: the division is
    cleared (``a = c * 49``), where multiplying by a rounded 1 / 49 (0.999... at 49) or 1 / 10 (3.0000000000000004
    at 30) would not decide as SQL does."""
    import duckdb
    from boreas.m3 import Runtime
    from support.native import skip_without_native

    if backend == "native":
        skip_without_native()
    rows = [(49, 1, 100), (30, 3, 10), (31, 3, 1), (-49, -1, 1000), (98, 2, 7)]
    db = duckdb.connect()
    db.execute("CREATE TABLE R(a INT, c INT, b INT)")
    db.executemany("INSERT INTO R VALUES (?, ?, ?)", rows)
    for where in ("a / 49 = c", "a / 10 > c", "a / 10 >= c", "c * 7 < a / 7 + 1", "-a / 49 = -c", "(a + 1) / 2 > c * 10"):
        rt = Runtime(compile_sql(f"CREATE STREAM R(a INT, c INT, b INT); SELECT SUM(b) AS s FROM R WHERE {where}"),
                     backend=backend)
        rt.apply_grouped([("R", 1, rows)])
        (want,), = db.execute(f"SELECT SUM(b) FROM R WHERE {where}").fetchall()
        assert rt.view("Q1").get((), None) == want, where
