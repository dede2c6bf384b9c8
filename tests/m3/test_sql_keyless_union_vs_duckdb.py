"""UNION [ALL] of aggregated queries without GROUP BY agree with DuckDB (issue 33, docs/m3.md, the row "a set
operation statement of aggregated queries"): one row per branch always, also over no rows (NULL for SUM, MIN,
MAX, AVG, 0 for COUNT), UNION removing equal rows (NULL equal to NULL).  The view is keyed by the internal branch
number and ``ALWAYS AT`` each branch's key (``m3/compiler/setagg.py``).  Both backends, random inserts and
deletes, deleting every row empties every map; the rows read exactly as DuckDB's, also before any row."""

from __future__ import annotations

import pytest
from boreas.m3 import compile_sql
from m3_harness import check_against_duckdb, new_runtime, shape_params

GENERIC = """
CREATE STREAM R(a INT, b INT);
CREATE STREAM S(b INT, c INT);
"""
NULLABLE = """
CREATE STREAM R(a INT, b INT NULL);
CREATE STREAM S(b INT NULL, c INT);
"""

SHAPES: dict[str, str] = {
    "sum_and_count": GENERIC + "SELECT SUM(a) AS s FROM R UNION ALL SELECT COUNT(*) FROM S",
    "three_branches_extremes_avg": GENERIC + """SELECT MIN(a) AS m, COUNT(*) AS n FROM R
        UNION ALL SELECT MAX(c), SUM(b) FROM S WHERE b > 0 UNION ALL SELECT AVG(b), COUNT(*) FROM R""",
    "over_a_join": GENERIC + """SELECT SUM(r.a * s.c) AS t FROM R r, S s WHERE r.b = s.b
        UNION ALL SELECT COUNT(*) FROM R""",
    "nullable_sums_and_counts": NULLABLE + """SELECT SUM(b) AS s, COUNT(b) AS n FROM R
        UNION ALL SELECT SUM(b), COUNT(*) FROM S""",
    "nullable_extremes": NULLABLE + "SELECT MAX(b) AS m FROM R UNION ALL SELECT MIN(b) FROM S",
    # rows a condition keeps (UNION's equal rows dropped, a branch's HAVING): the view's WHERE
    "union_of_counts": GENERIC + "SELECT COUNT(*) AS n FROM R UNION SELECT COUNT(*) FROM S",
    "union_of_three_sums": GENERIC + """SELECT SUM(a) AS s FROM R UNION SELECT SUM(c) FROM S
        UNION SELECT SUM(b) FROM S""",
    "union_all_with_having": GENERIC + """SELECT SUM(a) AS s FROM R HAVING COUNT(*) > 1
        UNION ALL SELECT COUNT(*) FROM S""",
    "nullable_union": NULLABLE + "SELECT MAX(b) AS m FROM R UNION SELECT MIN(b) FROM S",
}


@pytest.mark.parametrize("shape", shape_params(SHAPES))
def test_view_matches_duckdb(shape):
    check_against_duckdb(SHAPES[shape], examples=8)


ROWS = [("R", (1, 2)), ("R", (2, None)), ("S", (None, 5)), ("S", (2, 3))]


@pytest.mark.parametrize("backend", ["python", "native"])
@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_a_row_per_branch_over_no_rows(shape, backend):
    """Before any row, after some, and once every row is deleted the view reads exactly DuckDB's rows (the
    property harness excuses a missing row of NULLs and zeros, so it cannot tell)."""
    import duckdb

    sql = SHAPES[shape]
    query = sql.split(";")[-1]
    rt = new_runtime(compile_sql(sql), backend)
    con = duckdb.connect()
    con.execute("CREATE TABLE R(a BIGINT, b BIGINT); CREATE TABLE S(b BIGINT, c BIGINT)")
    rows = [(r, row if "NULL" in sql else tuple(0 if x is None else x for x in row)) for r, row in ROWS]

    def same() -> None:
        want = sorted(con.execute(query).fetchall(), key=repr)
        got = sorted((v if isinstance(v, tuple) else (v,) for v in rt.view("Q1").values()), key=repr)
        assert got == pytest.approx(want) if "AVG" in query else got == want, f"{got} vs DuckDB's {want}"

    same()
    rt.apply_batch([(r, 1, row) for r, row in rows])
    for r, row in rows:
        con.execute(f"INSERT INTO {r} VALUES (?, ?)", list(row))
    same()
    rt.apply_batch([(r, -1, row) for r, row in rows])
    con.execute("DELETE FROM R; DELETE FROM S")
    same()


@pytest.mark.parametrize("shape, cost", [("sum_and_count", "first-order"), ("over_a_join", "first-order"),
                                         ("nullable_extremes", "domain-bound")])
def test_compile_shows_the_cost_class_and_the_printed_program_reads_back(shape, cost):
    """``boreas compile`` names the view's cost class (its parts'), and the printed program, its ``ALWAYS AT``
    rows included, reads back as the same program."""
    from boreas.m3.compiler.pipeline import compile_to_text
    from boreas.m3.printer import format_program
    from boreas.m3.syntax import parse_program

    assert compile_to_text(SHAPES[shape]).splitlines()[0].startswith(f"-- view Q1: {cost}")
    program = compile_sql(SHAPES[shape])
    assert "ALWAYS AT [0], [1]" in format_program(program)
    assert parse_program(format_program(program)) == program


@pytest.mark.parametrize("text, says", [
    ("DECLARE VIEW v[k := K](n := m[K]) ALWAYS;", "ALWAYS of a view with keys names its rows"),
    ("DECLARE VIEW v[k := K](n := m[K]) ALWAYS AT [0, 1];", "an ALWAYS row names 2 keys, the view has 1"),
    ("DECLARE VIEW v[k := K](n := m[K]) ALWAYS AT ['x'];", "an ALWAYS row's key is an integer"),
    ("DECLARE VIEW v[k](n := m) ALWAYS AT [0];", "needs its key variables"),
])
def test_always_at_is_checked_where_read(text, says):
    from boreas.m3.syntax import ParseError, parse_program

    with pytest.raises(ParseError, match=says):
        parse_program("DECLARE MAP m[K: INT] : INT := 0;\n" + text)
