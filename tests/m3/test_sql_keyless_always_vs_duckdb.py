"""A view without keys has its one row over no rows, as SQL's aggregate without GROUP BY and query without FROM
have (issue 33, docs/m3.md "Rows"): a constant term (``(SELECT COUNT(*) FROM R) + 1``, ``COUNT(*) + 1``, a constant
column beside an aggregate) is shown while every map is empty.  Random NULL-heavy inserts and deletes against
DuckDB on both backends (the row compared exactly: present in both), deleting every row empties every map."""

from __future__ import annotations

import pytest
from boreas.m3 import compile_sql
from m3_harness import check_against_duckdb, new_runtime, shape_params
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
    "fromless_constant_terms": GENERIC + """SELECT 1 AS s, (SELECT COUNT(*) FROM R) AS n;
        SELECT (SELECT COUNT(*) FROM R WHERE a > 0) + 1 AS n, 2 - (SELECT SUM(d) FROM S) AS m;
        SELECT 1 AS one WHERE NOT EXISTS (SELECT * FROM R WHERE b = 1)""",
    "one_row_tables_with_constant_terms": GENERIC + """SELECT COUNT(*) AS n, SUM(t.x) AS v FROM (SELECT SUM(R.b) AS x
        FROM R) t;
        SELECT SUM(t.x) + 1 AS v, MIN(t.x - 5) AS m FROM (SELECT COUNT(*) AS x FROM R WHERE a > 0) t;
        SELECT 1 AS k, MAX(t.x) AS m FROM (SELECT COUNT(*) AS x FROM R) t;
        SELECT COUNT(*) AS n, (SELECT SUM(S.b) FROM S) AS v FROM (SELECT SUM(R.b) AS x FROM R) t""",
}

NULL_SHAPES: dict[str, str] = {
    "null_fromless_constant_terms": NULLABLE + """SELECT (SELECT COUNT(b) FROM R WHERE c > 0.3) + 1 AS n,
        5 AS k, (SELECT COUNT(*) FROM S WHERE b IS NULL) AS z""",
    # (a SUM of a nullable column in a query without FROM is shown 0 where SQL's is NULL: not built, docs/m3.md)
}


@pytest.mark.parametrize("shape", shape_params(SHAPES))
def test_view_matches_duckdb(shape):
    check_against_duckdb(SHAPES[shape], examples=8)


@pytest.mark.parametrize("shape", shape_params(NULL_SHAPES, fast=1))
def test_view_over_nullable_columns_matches_duckdb(shape):
    check_rows_against_duckdb(NULL_SHAPES[shape], examples=8)


@pytest.mark.parametrize("backend", ["python", "native"])
def test_the_one_row_is_there_before_any_row_and_after_every_delete(backend):
    """SQL: ``COUNT(*) + 1`` over no rows is 1 and ``SUM`` NULL (shown 0 without nullable columns); it was no row
    before sqlM (a view without keys showed its row only while a map it read had an entry)."""
    program = compile_sql(GENERIC + "SELECT (SELECT COUNT(*) FROM R) + 1 AS n, (SELECT SUM(b) FROM R) AS s;"
                          "SELECT (SELECT COUNT(*) FROM R) + 1 AS m;")
    rt = new_runtime(program, backend)
    assert dict(rt.view("Q1")) == {(): (1, 0)} and dict(rt.view("Q2")) == {(): 1}
    rt.apply_batch([("R", 1, (1, 2, 0.5)), ("R", 1, (2, 3, 0.5))])
    assert dict(rt.view("Q1")) == {(): (3, 5)} and dict(rt.view("Q2")) == {(): 3}
    rt.apply_batch([("R", -1, (1, 2, 0.5)), ("R", -1, (2, 3, 0.5))])
    assert dict(rt.view("Q1")) == {(): (1, 0)} and dict(rt.view("Q2")) == {(): 1}
    assert rt.entries() == 0


@pytest.mark.parametrize("backend", ["python", "native"])
def test_the_changes_of_an_always_row_from_a_fresh_runtime(backend):
    """The row is there before the first batch: the first batch removing it says so (0), and a row that did not
    change is not named (the row memo took a fresh runtime's every view as rowless)."""
    program = compile_sql(GENERIC + "SELECT 1 AS one WHERE NOT EXISTS (SELECT * FROM R);"
                                    "SELECT 1 AS one WHERE (SELECT COUNT(*) FROM R) < 2;")
    rt = new_runtime(program, backend)
    assert dict(rt.view("Q1")) == dict(rt.view("Q2")) == {(): 1}
    rt.apply_batch([("R", 1, (1, 2, 0.5))])
    assert rt.changes() == {"Q1": [((), 0)]} and dict(rt.view("Q1")) == {}
    rt.apply_batch([("R", 1, (2, 2, 0.5))])
    assert rt.changes() == {"Q2": [((), 0)]}
    rt.apply_batch([("R", -1, (1, 2, 0.5)), ("R", -1, (2, 2, 0.5))])
    assert sorted(rt.changes().items()) == [("Q1", [((), 1)]), ("Q2", [((), 1)])]
