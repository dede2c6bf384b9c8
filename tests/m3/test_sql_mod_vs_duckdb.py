"""``MOD(a, m)`` and ``a % m`` (Nexmark q2, issue 33/34) agree with DuckDB on both backends: in WHERE, as a key of
a view without aggregates, as a GROUP BY key, inside arithmetic keys, inside SUM, across a join.

The divisor is a nonzero integer constant; the remainder has the sign of the dividend, as SQL's (and C's ``%``):
the columns run over negative values too, and divisors of both signs.  Deleting every row empties every map (the
harness asserts it).
"""

from __future__ import annotations

import pytest
from boreas.m3 import CompileError, compile_sql
from hypothesis import strategies as st
from m3_harness import check_against_duckdb, shape_params

GENERIC = """
CREATE STREAM R(a INT, b INT);
CREATE STREAM S(b INT, c INT);
"""

SHAPES: dict[str, str] = {
    "where_mod_is_zero": GENERIC + "SELECT a, b FROM R WHERE MOD(a, 3) = 0",
    "where_percent_compared_with_a_column": GENERIC + "SELECT a, b FROM R WHERE a % 4 < b",
    "rows_negative_divisor": GENERIC + "SELECT MOD(a, -3) AS k, b FROM R",
    "group_by_mod": GENERIC + "SELECT a % 4 AS k, SUM(b) AS s, COUNT(*) AS n FROM R GROUP BY a % 4",
    "mod_inside_an_arithmetic_key": GENERIC + "SELECT MOD(a, 5) * 2 + b AS k FROM R",
    "sum_of_mod": GENERIC + "SELECT b, SUM(a % 3) AS s FROM R GROUP BY b",
    "mod_across_a_join": GENERIC + """SELECT r.a, s.c FROM R r, S s WHERE r.b = s.b AND MOD(s.c, 2) = 1""",
    "group_by_mod_across_a_join": GENERIC + """SELECT MOD(r.a, 2) AS k, SUM(s.c) AS t FROM R r JOIN S s
        ON r.b = s.b GROUP BY MOD(r.a, 2)""",
}


def _signed(column: str, t: str):
    """Negative and positive values, so the remainder's sign is exercised."""
    return st.integers(-7, 7)


@pytest.mark.parametrize("shape", shape_params(SHAPES))
def test_view_matches_duckdb(shape):
    check_against_duckdb(SHAPES[shape], value=_signed)


@pytest.mark.parametrize("sql, message", [
    ("SELECT a % b AS x FROM R", "unsupported MOD (a % b): its divisor is a nonzero integer constant"),
    ("SELECT a FROM R WHERE MOD(a, 0) = 1", "MOD by 0"),
    ("SELECT MOD(a + b, 2) AS x FROM R", "a function of a column, not of (a + b)"),
])
def test_refused_with_the_reason(sql, message):
    with pytest.raises(CompileError) as info:
        compile_sql(GENERIC + sql)
    assert message in str(info.value)


def test_compile_shows_the_cost_class_and_the_printed_program_reads_back():
    """``boreas compile`` prints MOD as a lift and a computed key (``Q[MOD(A, 4)] += B``), first-order; the M3
    parser reads every shape's program back as the same program."""
    from boreas.m3.compiler.pipeline import compile_to_text
    from boreas.m3.printer import format_program
    from boreas.m3.syntax import parse_program

    lines = compile_to_text(SHAPES["group_by_mod"]).splitlines()
    assert lines[0].startswith("-- view Q1: first-order")
    assert "  := R(A, B) * {MOD_A = MOD(A, 4)} * B;" in lines
    assert "  Q1_s[MOD(A, 4)] += B;" in lines
    for sql in SHAPES.values():
        program = compile_sql(sql)
        assert parse_program(format_program(program)) == program
