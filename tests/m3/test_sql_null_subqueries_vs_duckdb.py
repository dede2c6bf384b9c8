"""Nullable columns read inside subqueries, NOT IN a subquery selecting one, and ``*`` over them agree with
DuckDB, NULLs as None, under NULL-heavy random inserts and deletes (issue 33 item 2, docs/m3.md "NULLs").

A subquery is rewritten in its own scope (:mod:`boreas.m3.compiler.nullsub`): a correlation by equality with a
nullable column never holds on NULL, a scalar subquery's aggregate skipping NULLs reads the rows where its
argument is present (NULL over only NULLs, as SQL's), ``x IN (SELECT y ...)`` needs ``y`` present, and
``x NOT IN (SELECT y ...)`` is false as soon as one ``y`` is NULL (SQL: unknown).  ``*`` lists the declared
columns (:mod:`boreas.m3.compiler.nullstar`).  Each shape runs on both backends: every map equal to its
definition, deleting every row empties every map, and each output row DuckDB's (:mod:`null_harness`).
"""

from __future__ import annotations

import pytest
from boreas.m3 import CompileError, compile_sql
from m3_harness import check_against_duckdb, new_runtime, shape_params
from null_harness import check_rows_against_duckdb, null_heavy

NULLABLE = """
CREATE STREAM R(a INT, b INT NULL, c FLOAT NULL);
CREATE STREAM S(b INT NULL, d INT);
"""

SHAPES: dict[str, str] = {
    "exists_correlated_by_two_nullable_columns": NULLABLE + """SELECT a, COUNT(*) AS n FROM R r WHERE EXISTS
        (SELECT 1 FROM S s WHERE s.b = r.b) GROUP BY a""",
    "not_exists_correlated_by_two_nullable_columns": NULLABLE + """SELECT a, SUM(c) AS m, COUNT(*) AS n FROM R r
        WHERE NOT EXISTS (SELECT 1 FROM S s WHERE s.b = r.b) GROUP BY a""",
    "exists_correlated_by_a_nullable_outer_column": NULLABLE + """SELECT b, COUNT(*) AS n FROM R r WHERE EXISTS
        (SELECT s.b FROM S s WHERE s.d = r.b) GROUP BY b""",
    "not_exists_with_a_nullable_inner_condition": NULLABLE + """SELECT a, COUNT(*) AS n FROM R r WHERE NOT EXISTS
        (SELECT 1 FROM S s WHERE s.d = r.a AND NOT (s.b < 2)) GROUP BY a""",
    "in_with_a_nullable_inner_condition": NULLABLE + """SELECT a, COUNT(*) AS n FROM R WHERE a IN
        (SELECT d FROM S WHERE S.b > 1 OR S.b IS NULL) GROUP BY a""",
    "in_selecting_a_nullable_column": NULLABLE + """SELECT r.b, COUNT(*) AS n FROM R r WHERE r.b IN
        (SELECT s.b FROM S s WHERE s.d > 0) GROUP BY r.b""",
    "not_in_selecting_a_nullable_column": NULLABLE + """SELECT a, COUNT(*) AS n, COUNT(c) AS k FROM R r
        WHERE r.a NOT IN (SELECT s.b FROM S s) GROUP BY a""",
    "not_in_with_a_condition": NULLABLE + """SELECT a, COUNT(*) AS n FROM R r WHERE NOT (r.a IN
        (SELECT s.b FROM S s WHERE s.d > 1)) AND r.c IS NOT NULL GROUP BY a""",
    "scalar_sum_of_a_nullable_column": NULLABLE + """SELECT a, COUNT(*) AS n FROM R r WHERE r.a < (SELECT SUM(s.b)
        FROM S s) GROUP BY a""",
    "scalar_correlated_by_a_nullable_key": NULLABLE + """SELECT a, COUNT(*) AS n FROM R r WHERE r.a <=
        (SELECT SUM(s.d) FROM S s WHERE s.b = r.b) GROUP BY a""",
    "scalar_avg_over_nulls_correlated": NULLABLE + """SELECT a, COUNT(*) AS n FROM R r WHERE r.a < (SELECT AVG(s.b)
        FROM S s WHERE s.d = r.a) GROUP BY a""",
    "scalar_count_of_a_nullable_column": NULLABLE + """SELECT a, COUNT(*) AS n FROM R r WHERE r.a <
        (SELECT COUNT(s.b) FROM S s) GROUP BY a""",
    "nullable_compared_with_a_max_over_nulls": NULLABLE + """SELECT a, COUNT(*) AS n FROM R r WHERE r.c >=
        (SELECT MAX(s.b) FROM S s WHERE s.d = r.a) GROUP BY a""",
    "nested_in_inside_exists_with_having": NULLABLE + """SELECT a, COUNT(*) AS n FROM R r WHERE EXISTS
        (SELECT 1 FROM S s WHERE s.d = r.a AND s.b IN (SELECT r2.b FROM R r2 WHERE r2.c > 0)) GROUP BY a
        HAVING SUM(r.c) > 0""",
    "star_over_nullable_columns": NULLABLE + "SELECT * FROM R WHERE a > 0 OR c IS NULL",
    "star_of_one_relation_in_a_join": NULLABLE + "SELECT r.*, s.d FROM R r, S s WHERE r.a = s.d",
    "distinct_star": NULLABLE + "SELECT DISTINCT * FROM S",
}


@pytest.mark.parametrize("shape", shape_params(SHAPES))
def test_view_matches_duckdb(shape):
    check_rows_against_duckdb(SHAPES[shape])


def test_scalar_subquery_over_nulls_in_the_select_list():
    """A SELECT-list subquery's SUM over only NULLs reads no row: NULL in SQL, shown 0 as a subquery over no rows
    is (docs/m3.md, the SELECT-list subqueries' row), so the maps and values are compared with NULL read as 0."""
    check_against_duckdb(NULLABLE + "SELECT a, SUM(a) * (SELECT SUM(s.b) FROM S s) AS x FROM R GROUP BY a",
                         value=null_heavy)


@pytest.mark.parametrize("query, says", [
    ("SELECT a, COUNT(*) AS n FROM R r WHERE r.b NOT IN (SELECT s.d FROM S s) GROUP BY a", "r.b NOT IN a subquery"),
    ("SELECT COUNT(*) AS n FROM R r WHERE r.a < (SELECT SUM(s.b) / COUNT(*) FROM S s)",
     "present under different conditions"),
    ("SELECT COUNT(*) AS n FROM R r WHERE EXISTS (SELECT s.d FROM S s GROUP BY s.d HAVING SUM(s.b) > 1)",
     "in a subquery's HAVING"),
    ("SELECT COUNT(*) AS n FROM R r WHERE r.a IN (SELECT SUM(s.b) FROM S s GROUP BY s.d)", "selected by an IN"),
    ("SELECT COUNT(*) AS n FROM R r WHERE r.a = (SELECT s.b FROM S s WHERE s.d = r.a)", "in a scalar subquery"),
    ("SELECT * FROM R r, S s WHERE r.a = s.d", "listing b twice"),
    ("SELECT COUNT(*) AS n FROM R r WHERE r.a < (SELECT SUM(s.b) FROM S s HAVING COUNT(*) > 1)", "with HAVING"),
    ("SELECT COUNT(*) AS n FROM R r WHERE r.a IN (SELECT s.b FROM S s LIMIT 2)", "with LIMIT or OFFSET"),
    ("SELECT COUNT(*) AS n FROM R r WHERE NOT EXISTS (SELECT 1 FROM S s WHERE s.d = r.b)",
     "r.b compared in NOT EXISTS with a column that is not nullable"),
    ("SELECT a, COUNT(*) AS n FROM R r WHERE r.a < (SELECT COUNT(*) FROM S s WHERE s.d = r.b) GROUP BY a",
     "r.b compared in a scalar subquery with a column that is not nullable"),
    ("SELECT a, COUNT(*) AS n FROM R r WHERE r.a NOT IN (SELECT s.b FROM S s WHERE s.d = r.b) GROUP BY a",
     "r.b compared in NOT IN with a column that is not nullable"),
])
def test_what_is_not_built_is_refused_by_name(query, says):
    with pytest.raises(CompileError, match="NULLs") as e:
        compile_sql(NULLABLE + query)
    assert says in str(e.value)


NOT_NULLABLE = """
CREATE STREAM T(x INT, y INT);
CREATE STREAM U(x INT, z INT);
"""


def _compiled(sql: str) -> str:
    """The maps and views a program compiles to, or the error it is refused with."""
    try:
        program = compile_sql(sql)
    except CompileError as e:
        return f"refused: {e.message}"
    return repr((program.maps, program.views, [t for t in program.triggers if t.statements]))


@pytest.mark.parametrize("query", [
    "SELECT * FROM T t, U u WHERE t.x = u.z",
    "SELECT t.*, u.z FROM T t, U u WHERE t.x = u.x",
    """SELECT x, COUNT(*) AS n FROM T t WHERE t.y IN (SELECT u.z FROM U u WHERE EXISTS (SELECT * FROM T t2
        WHERE t2.x = u.x AND t.x = 1)) GROUP BY x""",
    "SELECT x, COUNT(*) AS n FROM T t WHERE EXISTS (SELECT * FROM U u WHERE u.x = t.x) GROUP BY x",
])
def test_a_query_over_relations_without_nullable_columns_compiles_as_if_none_were_declared(query):
    """Declaring a stream with a nullable column elsewhere in the program changes neither the maps nor the
    refusal of a query reading none of its columns (a * there was refused, a second pass moved conditions)."""
    assert _compiled(NOT_NULLABLE + query) == _compiled(NOT_NULLABLE + NULLABLE + query)


@pytest.mark.parametrize("backend", ["python", "native"])
def test_one_null_in_the_subquery_makes_not_in_false(backend):
    """``a NOT IN (SELECT b ...)``: ``1 NOT IN (2, NULL)`` is unknown in SQL, so the row leaves the view while the
    subquery holds a NULL, and comes back when it is deleted; a subquery of no rows keeps every row."""
    program = compile_sql(NULLABLE + "SELECT a, COUNT(*) AS n FROM R r WHERE r.a NOT IN (SELECT s.b FROM S s) GROUP BY a")
    rt = new_runtime(program, backend)
    rt.apply_batch([("R", 1, (1, None, None)), ("S", 1, (2, 7))])
    assert dict(rt.view("Q1")) == {(1,): 1}
    rt.apply_batch([("S", 1, (None, 7))])
    assert dict(rt.view("Q1")) == {}
    rt.apply_batch([("S", -1, (None, 7)), ("S", 1, (1, 8))])
    assert dict(rt.view("Q1")) == {}
    rt.apply_batch([("S", -1, (1, 8)), ("S", -1, (2, 7))])
    assert dict(rt.view("Q1")) == {(1,): 1}
    rt.apply_batch([("R", -1, (1, None, None))])
    assert rt.entries() == 0
