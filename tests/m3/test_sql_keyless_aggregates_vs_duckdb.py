"""An aggregate without GROUP BY over relations has exactly one row, also while it reads none (issue 33, sqlO):
``SELECT COUNT(*) + 1 FROM R`` is 1 over an empty R, ``SELECT SUM(a) + 1, COUNT(*) FROM R`` is ``(NULL, 0)``
(docs/m3.md "Rows", ``compiler/keyless.py``).  Random NULL-heavy inserts and deletes against DuckDB on both
backends, NULLs compared as None and the one row never missing; deleting every row empties every map; the
row's changes and the m3 box's changelog (its memo) keep the row."""

from __future__ import annotations

import pytest
from boreas.m3 import compile_sql
from m3_harness import check_against_duckdb, new_runtime, shape_params, value_strategy
from null_harness import check_rows_against_duckdb

GENERIC = """
CREATE STREAM R(a INT, b INT, c DOUBLE);
CREATE STREAM S(b INT, d INT, e DOUBLE);
"""

NULLABLE = """
CREATE STREAM R(a INT, b INT NULL, c FLOAT NULL);
CREATE STREAM S(b INT NULL, d INT);
"""

SHAPES: dict[str, str] = {
    "constant_terms": GENERIC + """SELECT COUNT(*) + 1 AS n FROM R;
        SELECT SUM(a) + 1 AS s, COUNT(*) AS n FROM R WHERE b > 1;
        SELECT 2 - SUM(c) AS s, 7 AS k FROM R""",
    "null_of_no_rows": GENERIC + """SELECT SUM(a) AS s FROM R;
        SELECT MIN(a) AS lo, MAX(c) AS hi, AVG(b) AS m FROM R WHERE a > 0;
        SELECT COUNT(*) AS n FROM R""",
    "joins_and_filters": GENERIC + """SELECT SUM(R.a * S.d) AS s, COUNT(*) AS n FROM R, S WHERE R.b = S.b;
        SELECT SUM(a) FILTER (WHERE b > 1) AS s, COUNT(*) - 1 AS n FROM R;
        SELECT COUNT(*) AS n, SUM(c) AS s FROM R WHERE EXISTS (SELECT * FROM S WHERE S.b = R.b)""",
}

NULL_SHAPES: dict[str, str] = {
    "null_sums": NULLABLE + """SELECT SUM(b) + 1 AS s, COUNT(*) AS n FROM R;
        SELECT SUM(a) AS s, MAX(c) AS m, COUNT(b) AS k FROM R WHERE a > 0;
        SELECT AVG(c) * 2 AS v, MIN(a) AS lo FROM R""",
    "null_joins": NULLABLE + """SELECT COUNT(*) + 1 AS n, SUM(R.c) AS s FROM R, S WHERE R.b = S.b;
        SELECT SUM(S.d) AS s FROM S WHERE S.b IS NULL""",
}


@pytest.mark.parametrize("shape", shape_params(SHAPES))
def test_view_matches_duckdb(shape):
    check_against_duckdb(SHAPES[shape], examples=10)


@pytest.mark.parametrize("m3_backend", ["python", "native"], indirect=True)
@pytest.mark.parametrize("shape", shape_params(NULL_SHAPES, fast=1))
def test_view_over_nullable_columns_matches_duckdb(shape):
    check_rows_against_duckdb(NULL_SHAPES[shape], examples=10)


@pytest.mark.parametrize("m3_backend", ["python", "native"], indirect=True)
@pytest.mark.parametrize("shape", shape_params(SHAPES, fast=1))
def test_view_rows_and_nulls_of_no_rows_match_duckdb(shape):
    """The shapes above with their NULLs compared as None (the shared harness reads them as 0)."""
    check_rows_against_duckdb(SHAPES[shape], examples=10, value=lambda column, t: value_strategy(t))


@pytest.mark.parametrize("backend", ["python", "native"])
def test_the_one_row_over_no_rows(backend):
    """It was no row while R was empty (the view showed its row only while a map it read had an entry)."""
    program = compile_sql(GENERIC + "SELECT COUNT(*) + 1 AS n FROM R; SELECT SUM(a) + 1 AS s, COUNT(*) AS n FROM R;"
                                    "SELECT MIN(a) AS m, AVG(c) AS v FROM R")
    assert all(v.always for v in program.views)
    rt = new_runtime(program, backend)
    assert [dict(rt.view(q)) for q in ("Q1", "Q2", "Q3")] == [{(): 1}, {(): (None, 0)}, {(): (None, None)}]
    rt.apply_batch([("R", 1, (1, 2, 0.5)), ("R", 1, (3, 3, 1.5))])
    assert [dict(rt.view(q)) for q in ("Q1", "Q2", "Q3")] == [{(): 3}, {(): (5, 2)}, {(): (1, 1.0)}]
    rt.apply_batch([("R", -1, (1, 2, 0.5)), ("R", -1, (3, 3, 1.5))])
    assert rt.changes() == {"Q1": [((), 1)], "Q2": [((), (None, 0))], "Q3": [((), (None, None))]}
    assert [dict(rt.view(q)) for q in ("Q1", "Q2", "Q3")] == [{(): 1}, {(): (None, 0)}, {(): (None, None)}]
    assert rt.entries() == 0


def test_not_always_where_one_count_cannot_say_null():
    """An aggregate under a function keeps the view as it was (no row while none is read): one count per item
    cannot say what ``GREATEST(SUM(a), 1)`` is (DuckDB: 1 over no rows); a HAVING decides the row."""
    program = compile_sql(GENERIC + "SELECT COUNT(*) AS n FROM R HAVING COUNT(*) > 1;"
                                    "SELECT COUNT(*) AS n, SUM(b) AS s FROM R GROUP BY a;"
                                    "SELECT GREATEST(SUM(a), 1) AS g FROM R")
    assert not any(v.always for v in program.views)


def test_an_alias_that_only_looks_like_a_hidden_count_is_the_users():
    """``AS __nonnull_0x`` is a user's name, not a hidden count's position (its compile raised ValueError)."""
    program = compile_sql(GENERIC + "SELECT SUM(a) AS __nonnull_0x FROM R")
    rt = new_runtime(program, "python")
    assert dict(rt.view("Q1")) == {(): None}
    rt.apply_batch([("R", 1, (4, 2, 0.5))])
    assert dict(rt.view("Q1")) == {(): 4}
