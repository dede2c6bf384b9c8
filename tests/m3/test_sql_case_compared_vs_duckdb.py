"""A comparison with a CASE over several columns agrees with DuckDB after every batch.

The compiler reads it as the OR of the CASE's branches, each under its conditions, and clears a division of
integers by a column its branch's condition gives a sign (``WHEN v > 0 THEN d / v``: TPC-DS Q34's shape;
``m3/compiler/casecmp.py``), in integers, so that ``7 / 25 < 0.28`` is false as in DuckDB (``0.28 * 25`` is
``7.000000000000001`` in floating point).  Random workloads over small domains (``m3_harness``: integers 0..3, so divisors
are often 0; floats -2..2), both backends: every view equals DuckDB's after every batch, every map its
definition, deleting every row empties every map.
"""

from __future__ import annotations

import pytest
from boreas.m3 import compile_sql
from boreas.m3.errors import CompileError
from m3_harness import Harness, check_against_duckdb, shape_params

GENERIC = """
CREATE STREAM R(a INT, b INT, c DOUBLE);
CREATE STREAM S(b INT, d INT, e DOUBLE);
"""

SHAPES: dict[str, str] = {
    "guarded_division_positive": GENERIC + """SELECT R.a, COUNT(*) AS n FROM R
        WHERE (CASE WHEN R.a > 0 THEN R.b / R.a ELSE 0 END) > 1 GROUP BY R.a""",
    "guarded_division_negative_and_second_branch": GENERIC + """SELECT R.a, R.b, R.c FROM R
        WHERE CASE WHEN R.a > 0 THEN (R.b + 1) / R.a WHEN R.b = 2 THEN R.c ELSE R.b END <= 1""",
    "under_not_in_or_over_a_join": GENERIC + """SELECT R.a, SUM(S.e) AS s FROM R, S WHERE R.b = S.b
        AND (NOT (CASE WHEN R.a > S.d THEN R.c ELSE S.e END >= 1) OR R.a = 1) GROUP BY R.a""",
    "simple_case_on_the_right": GENERIC + """SELECT R.b, COUNT(*) AS n FROM R
        WHERE 0.5 < CASE R.a WHEN 1 THEN R.b WHEN 2 THEN R.c ELSE R.c * 2 END GROUP BY R.b""",
    "in_a_grouped_derived_table": GENERIC + """SELECT t.k, COUNT(*) AS n FROM (SELECT R.a AS k, COUNT(*) AS cnt
        FROM R WHERE R.b > 0 AND (CASE WHEN R.b > 0 THEN R.a / R.b ELSE 0 END) >= 1 GROUP BY R.a) t
        WHERE t.cnt BETWEEN 1 AND 2 GROUP BY t.k""",
}


@pytest.mark.parametrize("shape", shape_params(SHAPES, fast=1))  # one quick shape: the fast tier is at its limit
def test_view_matches_duckdb(shape):
    check_against_duckdb(SHAPES[shape])


BOUNDARY = {"a": [-25, 0, 25], "b": [7, 14, 28]}
"""Quotients equal to the constants compared (7/25 = 0.28, 14/25 = 0.56, 28/25 = 1.12) whose cleared
floating-point comparison is off: ``0.28 * 25`` is ``7.000000000000001``."""


def _boundary_value(column, t):
    from hypothesis import strategies as st
    return st.sampled_from(BOUNDARY[column]) if column in BOUNDARY else st.integers(-8, 8).map(lambda i: i / 4)


@pytest.mark.parametrize("k", ["0.28", "0.56", "1.12"])
@pytest.mark.parametrize("cmp", ["<", ">=", "="])
def test_a_quotient_equal_to_the_constant_is_compared_as_duckdb_does(cmp, k):
    """One row each, on both backends: ``b / a`` exactly the constant (DuckDB: equal, neither < nor >)."""
    sql = GENERIC + f"""SELECT R.c, COUNT(*) AS n FROM R
        WHERE CASE WHEN R.a > 0 THEN R.b / R.a WHEN R.a < 0 THEN R.b / R.a ELSE R.c END {cmp} {k} GROUP BY R.c"""
    rows = [("ins", "R", (a, b, 1.0)) for a in BOUNDARY["a"] for b in BOUNDARY["b"]]
    Harness(sql).run([rows[:4], rows[4:]], moves={0: "python", 1: "native"})


@pytest.mark.slow
@pytest.mark.parametrize("sql", [
    GENERIC + "SELECT R.c, COUNT(*) AS n FROM R WHERE CASE WHEN R.a > 0 THEN R.b / R.a ELSE R.c END < 0.28 "
              "GROUP BY R.c",
    GENERIC + "SELECT R.a, SUM(R.c) AS s FROM R WHERE CASE WHEN R.a < 0 THEN (R.b + R.b) / R.a ELSE R.c END "
              "<= -1.12 GROUP BY R.a",
])
def test_boundary_quotients_match_duckdb(sql):
    check_against_duckdb(sql, value=_boundary_value)


def test_a_division_by_a_double_column_is_refused():
    """A quotient of floats may round onto the constant, which no cleared comparison reproduces: refused."""
    with pytest.raises(CompileError, match="division by R.c"):
        compile_sql(GENERIC + "SELECT R.b, COUNT(*) AS n FROM R WHERE (CASE WHEN R.c > 0 THEN R.b / R.c ELSE 0 END) "
                    "< 0.28 GROUP BY R.b")


def test_an_unguarded_division_by_a_column_is_still_refused():
    """DuckDB reads ``x / 0`` as inf or NaN, which a cleared comparison does not: refused by name."""
    with pytest.raises(CompileError, match="division by R.a"):
        compile_sql(GENERIC + "SELECT R.b, COUNT(*) AS n FROM R WHERE (CASE WHEN R.b > 0 THEN R.b / R.a ELSE 0 END) > 1 "
                    "GROUP BY R.b")
