"""LIKE with any constant pattern (issue 14, item 3) agrees with DuckDB after every batch, on both backends.

Exact and prefix patterns compile to comparisons; every other pattern
(``'%ING'``, ``'%U%'``, ``'B_I%'``) is a ``{X LIKE 'p'}`` condition that
the Python backend matches with a regular expression and the C backend
with ``str_like`` over the interned string's UTF-8 bytes
(:mod:`boreas.m3.like`).  The view shapes put LIKE and NOT LIKE in WHERE,
in OR, in CASE, on both sides of a join, inside a nested subquery (TPC-H
Q16's ``NOT IN (SELECT ... WHERE s_comment LIKE ...)``) and in a derived
table (Q9's).  The matchers themselves are checked against DuckDB's LIKE
on random strings and patterns over an alphabet holding ``%``, ``_``, a
backslash and characters of two, three and four UTF-8 bytes.
"""

from __future__ import annotations

import duckdb
import pytest
from boreas.m3 import Runtime, compile_sql
from boreas.m3.like import like
from hypothesis import given, settings
from hypothesis import strategies as st
from m3_harness import check_against_duckdb, shape_params

GENERIC = """
CREATE STREAM R(a INT, b INT, g VARCHAR);
CREATE STREAM S(b INT, d INT, h VARCHAR);
"""

SHAPES: dict[str, str] = {
    "suffix": GENERIC + "SELECT a, COUNT(*) AS n FROM R WHERE g LIKE '%ING' GROUP BY a",
    "infix_not_like": GENERIC + "SELECT a, SUM(b) AS s FROM R WHERE g NOT LIKE '%U%' GROUP BY a",
    "underscore": GENERIC + "SELECT g, COUNT(*) AS n FROM R WHERE g LIKE 'B_I%' OR g LIKE '_' GROUP BY g",
    "like_in_case": GENERIC + """SELECT a, SUM(CASE WHEN g LIKE '%A%' THEN b ELSE 0 END) AS s, COUNT(*) AS n
        FROM R GROUP BY a""",
    "like_on_both_sides_of_a_join": GENERIC + """SELECT r.a, COUNT(*) AS n FROM R r, S s
        WHERE r.b = s.b AND r.g LIKE '%S%' AND s.h NOT LIKE '%I%G' GROUP BY r.a""",
    "not_in_subquery_with_like": GENERIC + """SELECT a, COUNT(*) AS n FROM R
        WHERE b NOT IN (SELECT b FROM S WHERE h LIKE '%IL%') GROUP BY a""",
    "derived_table_with_like": GENERIC + """SELECT k, SUM(v) AS s
        FROM (SELECT r.a AS k, s.d AS v FROM R r, S s WHERE r.b = s.b AND r.g LIKE '%A') AS t GROUP BY k""",
    "rows_view": GENERIC + "SELECT a, g FROM R WHERE g LIKE '%_S%'",
}


@pytest.mark.parametrize("shape", shape_params(SHAPES))
def test_view_matches_duckdb(shape):
    check_against_duckdb(SHAPES[shape])


ALPHABET = ["a", "b", "%", "_", "\\", "é", "€", "😀", "A"]
TEXT = st.lists(st.sampled_from(ALPHABET), max_size=6).map("".join)


@pytest.mark.slow  # make test-fast: the LIKE shapes against DuckDB and test_native_like_is_pythons stay
@settings(max_examples=300, deadline=None)
@given(TEXT, TEXT)
def test_python_like_is_duckdbs(value, pattern):
    with duckdb.connect() as con:
        assert like(value, pattern) == con.execute("SELECT ? LIKE ?", [value, pattern]).fetchone()[0]


PATTERNS = ["%", "_", "__", "%a_", "a%b", "%é%", "_€%", "%😀", "a\\%", "%_%_", "%%a", "%a%a%", "b_%_"]


def test_native_like_is_pythons():
    """One native program with a view per pattern, fed strings over the alphabet: C counts what Python counts."""
    sql = "CREATE STREAM R(g VARCHAR);\n" + ";\n".join(
        f"SELECT COUNT(*) AS n FROM R WHERE g LIKE '{p}'" for p in PATTERNS) + ";"
    program = compile_sql(sql)
    native = Runtime(program, backend="auto")
    if native.backend != "native":
        pytest.skip(f"no native backend: {native.backend_reason}")
    python = Runtime(program, backend="python")

    @settings(max_examples=40, deadline=None)
    @given(st.lists(TEXT, min_size=1, max_size=20))
    def check(values):
        events = [("R", 1, (v,)) for v in values]
        for rt in (native, python):
            rt.apply_batch(events)
        for view, pattern in zip(program.views, PATTERNS):
            assert native.view(view.name) == python.view(view.name), pattern
        for rt in (native, python):
            rt.apply_batch([("R", -1, (v,)) for v in values])
            assert rt.entries() == 0

    check()


def test_like_conditions_round_trip_and_are_checked():
    """``{X LIKE 'p'}`` and ``IF X NOT LIKE 'p' THEN``: the printer's text parses back to the same program, and the
    checker refuses a LIKE of a non-string or against a non-constant."""
    from boreas.m3.check import check_errors
    from boreas.m3.printer import format_program
    from boreas.m3.syntax import parse_program

    program = compile_sql(SHAPES["like_on_both_sides_of_a_join"])
    text = format_program(program)
    assert "{G LIKE '%S%'}" in text and "IF H NOT LIKE '%I%G' THEN" in text
    assert parse_program(text) == program
    bad = parse_program("""CREATE STREAM R(a INT, g STRING);
        DECLARE MAP m[A: INT] : INT := R(A, G) * {A LIKE '%x'};
        ON +R(A, G) DO { m[A] += IF A LIKE 'x%' THEN 1 ELSE 0; }
        ON -R(A, G) DO { m[A] += IF G NOT LIKE 'x%' THEN -1 ELSE 0; }""")
    assert [m for m, _ in check_errors(bad)] == ["definition of map m: LIKE matches a STRING variable or a string",
                                                 "trigger on R: LIKE matches a STRING variable or a string"]
