"""``x = (SELECT c FROM ...)`` with ``c`` no aggregate agrees with DuckDB after every batch.

SQL lets such a subquery return at most one row (DuckDB raises an error on more), so the shapes here return
at most one row by construction (a GROUP BY or DISTINCT of the selected column, filtered to one value); the
compiler reads the equality as ``x IN (SELECT c ...)`` (``m3/compiler/scalarin.py``), which is existence in the
calculus.  Random workloads over small domains (``m3_harness``), both backends: every view equals DuckDB's
after every batch, every map its definition, deleting every row empties every map.
"""

from __future__ import annotations

import pytest
from boreas.m3 import compile_sql
from boreas.m3.errors import CompileError
from m3_harness import check_against_duckdb, shape_params

GENERIC = """
CREATE STREAM R(a INT, b INT, c DOUBLE);
CREATE STREAM S(b INT, d INT, e DOUBLE);
"""

SHAPES: dict[str, str] = {
    "grouped_constant_filter": GENERIC + """SELECT R.a, COUNT(*) AS n FROM R
        WHERE R.b = (SELECT S.b FROM S WHERE S.b = 2 GROUP BY S.b) GROUP BY R.a""",
    "distinct_on_the_left": GENERIC + """SELECT R.a, SUM(R.c) AS s FROM R
        WHERE (SELECT DISTINCT S.b FROM S WHERE S.b = 1 AND S.d > 0) = R.b AND R.a > 0 GROUP BY R.a""",
    "correlated_distinct": GENERIC + """SELECT R.a, COUNT(*) AS n FROM R
        WHERE R.b = (SELECT DISTINCT S.b FROM S WHERE S.b = R.a) GROUP BY R.a""",
    "rows_view": GENERIC + """SELECT R.a, R.b FROM R
        WHERE R.b = (SELECT S.d FROM S WHERE S.d = 1 GROUP BY S.d)""",
    "inside_derived_tables": GENERIC + """SELECT r1.a, COUNT(*) AS n FROM R r1,
        (SELECT r2.a FROM R r2 WHERE r2.b = (SELECT DISTINCT S.b FROM S WHERE S.b = 1)) t
        WHERE r1.a = t.a GROUP BY r1.a""",
}


@pytest.mark.parametrize("shape", shape_params(SHAPES, fast=1))  # one quick shape: the fast tier is at its limit
def test_view_matches_duckdb(shape):
    check_against_duckdb(SHAPES[shape])


@pytest.mark.parametrize("where", ["NOT R.b = (SELECT S.b FROM S)", "R.b = (SELECT S.b FROM S) OR R.a = 1",
                                   "R.b <> (SELECT S.b FROM S)"])
def test_equality_under_not_or_or_inequality_is_still_refused(where):
    """There an empty subquery's NULL differs from an IN's false: left as written, refused by name."""
    with pytest.raises(CompileError, match="subquery"):
        compile_sql(GENERIC + f"SELECT R.a, COUNT(*) AS n FROM R WHERE {where} GROUP BY R.a")


def test_several_rows_differ_from_sql_and_compile_says_so():
    """Where the subquery returns several rows DuckDB raises and the view keeps the rows equal to any of them:
    the difference is named in the compile notes (``boreas compile`` prints them as ``-- note:`` lines)."""
    import duckdb
    from boreas.m3.compiler.pipeline import compile_to_text, compile_with_notes
    from m3_harness import Harness

    sql = GENERIC + "SELECT R.a, COUNT(*) AS n FROM R WHERE R.b = (SELECT S.b FROM S WHERE S.d = 1) GROUP BY R.a"
    _, notes = compile_with_notes(sql)
    assert len(notes) == 1 and notes[0].startswith("Q1: x = (SELECT c ...) is read as x IN (SELECT c ...)") and \
        "several rows SQL raises an error" in notes[0]
    assert compile_to_text(sql).startswith("-- note: Q1: x = (SELECT c ...) is read as x IN")
    assert compile_with_notes(GENERIC + "SELECT R.a FROM R WHERE R.b IN (SELECT S.b FROM S)")[1] == ()
    con = duckdb.connect()
    con.execute("CREATE TABLE R(a INT, b INT, c DOUBLE); CREATE TABLE S(b INT, d INT, e DOUBLE)")
    con.execute("INSERT INTO R VALUES (1, 2, 0.5); INSERT INTO S VALUES (2, 1, 0.0), (3, 1, 0.0)")
    with pytest.raises(duckdb.Error, match="More than one row"):
        con.execute(sql.split(";")[-1]).fetchall()
    rt = Harness(sql).run([[("ins", "S", (2, 1, 0.0))]], delete_all=False)  # one row: as SQL
    rt.apply_batch([("S", 1, (3, 1, 0.0)), ("R", 1, (1, 2, 0.5))])
    assert dict(rt.view("Q1")) == {(1,): 1}  # several: read as IN
