"""``ANY``/``SOME``/``ALL`` around a subquery (issue 33) agree with DuckDB after every batch of inserts and deletes.

The front end rewrites ``x op ANY (q)`` into ``EXISTS (q WHERE x op b)`` and ``x op ALL (q)`` into
``NOT EXISTS (q WHERE x op' b)`` (``m3/compiler/quantified.py``), which the compiler maintains by its general
rules for existence: correlated or not, by an equality or by a range of the compared column.  Each shape runs
random workloads over small domains (``m3_harness``), both backends: every view equals DuckDB's after every
batch, every map its definition, and deleting every row empties every map.  The shapes DuckDB reads otherwise
or the rewrite cannot express stay refused by name.
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

THREE = GENERIC + "CREATE STREAM T(d INT, b INT, f INT);\n"

SHAPES: dict[str, str] = {
    "gt_all_uncorrelated": GENERIC + "SELECT a, COUNT(*) AS n FROM R WHERE a > ALL (SELECT d FROM S) GROUP BY a",
    "eq_any_filtered": GENERIC + """SELECT a, SUM(c) AS s FROM R
        WHERE b = ANY (SELECT d FROM S WHERE S.e > 0) GROUP BY a""",
    "ge_all_correlated": GENERIC + """SELECT r.a, SUM(r.c) AS s FROM R r
        WHERE r.c >= ALL (SELECT s.e FROM S s WHERE s.b = r.b) GROUP BY r.a""",
    "lt_some_correlated": GENERIC + """SELECT COUNT(*) AS n FROM R
        WHERE a < SOME (SELECT d FROM S WHERE S.b = R.b)""",
    "neq_all_rows": GENERIC + "SELECT a, b FROM R WHERE b <> ALL (SELECT d FROM S)",
    "not_le_any": GENERIC + "SELECT a, COUNT(*) AS n FROM R WHERE NOT (a <= ANY (SELECT d FROM S)) GROUP BY a",
    "all_with_same_column_name": GENERIC + "SELECT a, COUNT(*) AS n FROM R WHERE b < ALL (SELECT b FROM S) GROUP BY a",
    "any_beside_exists": THREE + """SELECT a, COUNT(*) AS n, SUM(c) AS s FROM R
        WHERE a >= ANY (SELECT f FROM T WHERE T.b = R.b) AND EXISTS (SELECT * FROM S WHERE S.d = R.a) GROUP BY a""",
    "lt_all_of_a_sum": GENERIC + "SELECT a, COUNT(*) AS n FROM R WHERE b < ALL (SELECT SUM(d) FROM S) GROUP BY a",
    "ge_any_of_a_correlated_avg": GENERIC + """SELECT r.a, SUM(r.c) AS s FROM R r
        WHERE r.c >= ANY (SELECT AVG(s.e) FROM S s WHERE s.b = r.b) GROUP BY r.a""",
    "all_in_in_subquery": THREE + """SELECT a, COUNT(*) AS n FROM R
        WHERE b IN (SELECT S.b FROM S WHERE S.d <> ALL (SELECT T.f FROM T WHERE T.b = S.b)) GROUP BY a""",
}


@pytest.mark.parametrize("shape", shape_params(SHAPES))
def test_view_matches_duckdb(shape):
    check_against_duckdb(SHAPES[shape])


def test_a_quantified_view_shows_the_cost_of_its_existence_test():
    """``boreas compile`` names the cost class of the EXISTS the comparison became."""
    first = compile_to_text(SHAPES["ge_all_correlated"]).splitlines()[0]
    assert first.startswith("-- view Q1: domain-bound: nested subquery"), first


@pytest.mark.parametrize("sql, message", [
    (GENERIC + "SELECT a, COUNT(*) FROM R WHERE a > ANY (SELECT d FROM S GROUP BY d) GROUP BY a",
     "unsupported ANY over a grouped subquery"),
    (GENERIC + "SELECT a, COUNT(*) FROM R WHERE a > ANY (SELECT b, d FROM S) GROUP BY a",
     "ANY (SELECT ...) must select one column"),
    (GENERIC + "SELECT a, COUNT(*) FROM R GROUP BY a HAVING SUM(c) > ALL (SELECT e FROM S)",
     "unsupported ALL comparing an aggregate"),
    (GENERIC + "SELECT a, COUNT(*) FROM R WHERE b < 2 OR a > ALL (SELECT d FROM S) GROUP BY a",
     "unsupported subquery inside OR"),
    (GENERIC + "SELECT a, COUNT(*) FROM R WHERE a + b > ALL (SELECT d FROM S WHERE S.b = R.b) GROUP BY a",
     "unsupported correlated condition"),
])
def test_unsupported_quantified_shapes_are_refused_by_name(sql, message):
    with pytest.raises(CompileError, match=re.escape(message)):
        compile_sql(sql)
