"""Queries without FROM (issue 33): scalar subqueries combined by arithmetic agree with DuckDB after every batch.

Subqueries of one constant inside a query (``(SELECT 3)``, ``IN (SELECT 1)``, ``EXISTS (SELECT 2)``) are that
constant (``m3/compiler/constsub.py``).  Each scalar subquery of a query without FROM is an aggregate query of its own, compiled from the general rules as a part
(``m3/compiler/fromless.py``); the view has no keys and computes its columns from the parts' maps when read.
SQL's aggregate of no rows is NULL and makes its expression NULL: the view shows 0 there (the harness reads
DuckDB's NULL as 0), COUNT's 0 stays a value.  Random workloads over small domains (``m3_harness``), both
backends: every view equals DuckDB's after every batch, every map its definition, deleting every row empties
every map.  What is not one value per subquery stays refused by name.
"""

from __future__ import annotations

import re

import pytest
from boreas.m3 import CompileError, compile_sql, compile_to_text
from m3_harness import check_against_duckdb, shape_params

GENERIC = """
CREATE STREAM R(a INT, b INT, c DOUBLE);
CREATE STREAM S(b INT, d INT, e DOUBLE);
"""

SHAPES: dict[str, str] = {
    "sum_and_count": GENERIC + "SELECT (SELECT SUM(a) FROM R) AS x, (SELECT COUNT(*) FROM S) AS y",
    "plus_constant": GENERIC + "SELECT (SELECT SUM(c) FROM R WHERE a > 1) + 1 AS x, 2 * (SELECT COUNT(*) FROM S) AS y",
    "ratio_of_subqueries": GENERIC + "SELECT (SELECT SUM(c) FROM R) / (SELECT COUNT(*) FROM S WHERE d > 0) AS r",
    "avg_over_sum": GENERIC + "SELECT -(SELECT AVG(e) FROM S) * (SELECT SUM(b) FROM R) AS x",
    "divided_by_nullable": GENERIC + "SELECT (SELECT COUNT(*) FROM R) / (SELECT SUM(d) FROM S) AS x",
    "max_minus_min_joined": GENERIC + """SELECT (SELECT MAX(R.a) FROM R, S WHERE R.b = S.b) -
        (SELECT MIN(d) FROM S) AS spread""",
    "nested_inside_part": GENERIC + """SELECT (SELECT COUNT(*) FROM R WHERE R.b IN (SELECT b FROM S)) AS n,
        (SELECT SUM(e) FROM S WHERE EXISTS (SELECT * FROM R WHERE R.a = S.d)) AS s""",
    # subqueries of one constant, without FROM, inside a query: the constant (m3/compiler/constsub.py)
    "constant_scalar_subquery": GENERIC + "SELECT a, SUM(c) AS s FROM R WHERE b = (SELECT 2) GROUP BY a",
    "in_constant_subquery": GENERIC + "SELECT a, b FROM R WHERE b IN (SELECT 1)",
    "exists_constant_subquery": GENERIC + """SELECT a, COUNT(*) AS n FROM R
        WHERE EXISTS (SELECT 3) AND (NOT EXISTS (SELECT 1) OR a > (SELECT 1)) GROUP BY a""",
}


@pytest.mark.parametrize("shape", shape_params(SHAPES))
def test_view_matches_duckdb(shape):
    check_against_duckdb(SHAPES[shape])


def test_a_fromless_view_has_no_keys_and_shows_its_cost():
    program = compile_sql(SHAPES["sum_and_count"])
    assert [v.keys for v in program.views] == [()]
    assert [c.name for c in program.views[0].columns] == ["x", "y"]
    first = compile_to_text(SHAPES["sum_and_count"]).splitlines()[0]
    assert first.startswith("-- view Q1: first-order"), first


@pytest.mark.parametrize("sql, message", [
    (GENERIC + "SELECT (SELECT a FROM R) AS x", "unsupported scalar subquery (SELECT a FROM R) in a query without FROM"),
    (GENERIC + "SELECT (SELECT SUM(a) FROM R GROUP BY b) AS x", "in a query without FROM (one aggregate without GROUP"),
    (GENERIC + "SELECT ABS(1) AS x", "in a query without FROM"),  # constants alone: test_sql_constant_views
    # (a constant term, SELECT (SELECT COUNT(*) FROM R) + 1, compiles since sqlM: test_sql_keyless_always_vs_duckdb.py)
    (GENERIC + "SELECT ABS((SELECT SUM(a) FROM R)) AS x", "in a query without FROM (arithmetic over scalar subqueries"),
    (GENERIC + "SELECT (SELECT SUM(a) FROM R) AS x WHERE a = 1", "unsupported a in a query without FROM"),
    (GENERIC + "SELECT (SELECT SUM(a) FROM R) AS x WHERE 1 IN (SELECT SUM(a) FROM R GROUP BY b)",
     "unsupported 1 IN (SELECT SUM(a) FROM R GROUP BY b) in a query without FROM"),
])
def test_unsupported_fromless_shapes_are_refused_by_name(sql, message):
    with pytest.raises(CompileError, match=re.escape(message)):
        compile_sql(sql)
