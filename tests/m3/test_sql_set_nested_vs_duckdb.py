"""Set operations whose branches hold nested subqueries (issue 33) agree with DuckDB after every batch of inserts and deletes, on both backends.

Each branch is compiled as a part of its own (its nested subqueries read as
``TOTAL``s over first-order maps, :mod:`boreas.m3.compiler.nested`) and the
view combines the branches' row counts at each row
(:mod:`boreas.m3.compiler.setparts`): UNION ALL adds them, UNION keeps a row
while any is above 0, INTERSECT while all are, EXCEPT while the first is and
no other; INTERSECT ALL and EXCEPT ALL take their LEAST and GREATEST.  Shapes
mix IN over a subquery with its own subquery (``= (SELECT col ...)``), EXISTS
and NOT EXISTS correlated with the branch, NOT IN, a scalar subquery compared
with a column, a branch without subquery, and an ORDER BY of the statement
(ignored, noted).  Every view equals DuckDB's, every map its definition, and
deleting every row empties every map.
"""

from __future__ import annotations

import re

import pytest
from boreas.m3 import CompileError, compile_sql, compile_to_text
from boreas.m3.compiler.pipeline import compile_with_notes
from changes_check import changes_rebuild_view
from m3_harness import Harness, check_against_duckdb, shape_params

SCHEMA = """
CREATE STREAM J(j INT, f INT);
CREATE STREAM E(j INT, d INT, s INT);
CREATE STREAM D(d INT, n INT);
"""

IN_DEPT = "SELECT f FROM J WHERE j IN (SELECT j FROM E WHERE d IN (SELECT d FROM D WHERE n = {n}))"

SHAPES: dict[str, str] = {
    "union_all_of_in_in_branches": SCHEMA + IN_DEPT.format(n=1) + " UNION ALL " + IN_DEPT.format(n=2),
    "union_of_in_in_branches": SCHEMA + IN_DEPT.format(n=1) + " UNION " + IN_DEPT.format(n=2),
    "intersect_ordered": SCHEMA + IN_DEPT.format(n=1) + " INTERSECT " + IN_DEPT.format(n=2) + " ORDER BY f",
    "except_exists_and_plain": SCHEMA + """SELECT j, f FROM J WHERE EXISTS (SELECT 1 FROM E WHERE E.j = J.j AND s > 1)
        EXCEPT SELECT d, n FROM D""",
    "union_not_in_and_scalar": SCHEMA + """SELECT f FROM J WHERE j NOT IN (SELECT j FROM E)
        UNION SELECT s FROM E WHERE s > (SELECT SUM(n) FROM D WHERE D.d = E.d)""",
    "intersect_all_not_exists": SCHEMA + """SELECT f FROM J WHERE NOT EXISTS (SELECT 1 FROM D WHERE D.d = J.j)
        INTERSECT ALL SELECT s FROM E""",
    "except_all_in_branches": SCHEMA + """SELECT f FROM J WHERE j IN (SELECT d FROM D WHERE n < 2)
        EXCEPT ALL SELECT s FROM E WHERE d IN (SELECT d FROM D)""",
    "union_all_three_branches_one_plain": SCHEMA + """SELECT j AS k FROM J WHERE f IN (SELECT s FROM E)
        UNION ALL SELECT d FROM D UNION ALL SELECT j FROM E WHERE EXISTS (SELECT 1 FROM D WHERE D.n = E.s)""",
    # a DISTINCT branch under an ALL kind counts each row once (LEAST(c, 1))
    "intersect_all_distinct_first": SCHEMA + """SELECT DISTINCT f FROM J WHERE j IN (SELECT j FROM E)
        INTERSECT ALL SELECT s FROM E""",
    "except_all_distinct_second": SCHEMA + """SELECT f FROM J WHERE j IN (SELECT j FROM E)
        EXCEPT ALL SELECT DISTINCT s FROM E""",
}

# the reviewer's rows: J(j, f) = (1, 5) twice, E(j, d, s) = (1, 0, 5), (2, 0, 5)
REVIEW_ROWS = [[("ins", "J", (1, 5)), ("ins", "J", (1, 5)), ("ins", "E", (1, 0, 5)), ("ins", "E", (2, 0, 5))]]


@pytest.mark.parametrize("shape", shape_params(SHAPES))
def test_view_matches_duckdb(shape):
    check_against_duckdb(SHAPES[shape])


def test_the_branches_are_parts_and_order_by_is_noted():
    _, notes = compile_with_notes(SHAPES["intersect_ordered"])
    assert any("ORDER BY ignored" in n for n in notes), notes
    text = compile_to_text(SHAPES["union_of_in_in_branches"])
    assert "-- view Q1: domain-bound: nested subquery" in text, text.splitlines()[:3]
    assert "(count := 1) WHERE 0 < TOTAL(" in text and " OR 0 < TOTAL(" in text


@pytest.mark.parametrize("shape", ["intersect_all_distinct_first", "except_all_distinct_second"])
def test_a_distinct_branch_of_an_all_kind_matches_duckdb_on_the_reviewed_rows(shape):
    """DuckDB: one (5) for each; DISTINCT dropped from the part gave {(5,): 2} and no row."""
    Harness(SHAPES[shape]).run(REVIEW_ROWS)


def test_an_unaliased_expression_is_named_as_the_front_end_names_it():
    sql = SCHEMA + "SELECT j + 1 FROM J WHERE j IN (SELECT j FROM E) UNION ALL SELECT s FROM E"
    assert compile_sql(sql).views[0].keys == ("expr_1",)
    Harness(sql, lambda q: q.replace("j + 1", "j + 1 AS expr_1")).run(REVIEW_ROWS)


@pytest.mark.parametrize("sql, message", [
    (SCHEMA + "SELECT j, f FROM J WHERE j IN (SELECT j FROM E) UNION SELECT d FROM D", "select 2 and 1 columns"),
    # a constant column is a value column of its part, before the count the view reads (DuckDB: (1,5) x2, (5,9))
    (SCHEMA + "SELECT j, f FROM J WHERE j IN (SELECT j FROM E) UNION ALL SELECT s, 9 FROM E",
     "unsupported constant column 9 in the UNION ALL branch SELECT s, 9 FROM E of a set operation whose branches "
     "hold subqueries: select a column"),
    (SCHEMA + "SELECT 'x' AS t, j FROM J WHERE j IN (SELECT j FROM E) INTERSECT SELECT 'x', d FROM D",
     "unsupported constant column 'x' AS t in the INTERSECT branch"),
    (SCHEMA + "SELECT * FROM J WHERE j IN (SELECT j FROM E) UNION SELECT d, n FROM D", "unsupported * in the first"),
    (SCHEMA + IN_DEPT.format(n=1) + " INTERSECT " + IN_DEPT.format(n=2) + " ORDER BY j",
     "ORDER BY j of a set operation is not one of its output columns"),
])
def test_refused_with_the_reason(sql, message):
    with pytest.raises(CompileError, match=re.escape(message)):
        compile_to_text(sql)


@pytest.mark.parametrize("shape", ["union_of_in_in_branches", "except_exists_and_plain"])
@pytest.mark.parametrize("backend", ["python", "auto"])
def test_changes_rebuild_the_view(shape, backend):
    """The rows ``changes()`` reports after each batch, applied in order, rebuild the view (both backends): a
    change of a part's inner map alone reaches the rows it affects."""
    changes_rebuild_view(SHAPES[shape], backend)
