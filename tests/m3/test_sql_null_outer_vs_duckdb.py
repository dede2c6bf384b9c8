"""Outer joins over nullable columns agree with DuckDB, NULLs included, under NULL-heavy random inserts and deletes
(issue 33 items 2 and 3, docs/m3.md "NULLs" and "Outer joins").

A LEFT, RIGHT or FULL join reading a nullable column is split into parts as any outer join (:mod:`.outer`), each
part rewritten over indicators (:mod:`.outernulls`): a NULL key never matches (the preserved row is padded), a
nullable column of a side present in a part is NULL or not per row, a SUM/AVG over only NULLs (of the column, or
padded) is NULL, and a nullable key of the preserved side is grouped with its indicator.  Each shape runs on
both backends; after every batch the maps equal their definitions, deleting every row empties every map, and
each output row as a user reads it (NULLs as None) is DuckDB's (:mod:`null_harness`).
"""

from __future__ import annotations

import pytest
from boreas.m3 import compile_sql
from boreas.m3.compiler.pipeline import compile_to_text
from boreas.m3.errors import CompileError
from m3_harness import new_runtime, shape_params
from null_harness import check_rows_against_duckdb

NULLABLE = """
CREATE STREAM R(a INT, b INT NULL, c FLOAT NULL);
CREATE STREAM S(b INT NULL, d INT);
CREATE STREAM T(d INT, e INT NULL);
"""

SHAPES: dict[str, str] = {
    "left_on_nullable_keys": NULLABLE + """SELECT r.a, SUM(s.d) AS t, COUNT(*) AS n, COUNT(s.b) AS k
        FROM R r LEFT JOIN S s ON r.b = s.b GROUP BY r.a""",
    "left_grouped_by_nullable_preserved": NULLABLE + """SELECT r.b, SUM(s.d) AS t, AVG(r.c) AS v, COUNT(*) AS n
        FROM R r LEFT JOIN S s ON r.b = s.b AND s.d > 1 GROUP BY r.b""",
    "left_on_nullable_with_not_nullable": NULLABLE + """SELECT r.a, COUNT(*) AS n, SUM(s.d) AS t
        FROM R r LEFT JOIN S s ON s.d = r.b GROUP BY r.a""",
    "left_where_is_null": NULLABLE + """SELECT r.a, r.b, COUNT(*) AS n FROM R r LEFT JOIN S s ON r.a = s.d
        WHERE s.b IS NULL GROUP BY r.a, r.b""",
    "left_rows_of_preserved_side": NULLABLE + "SELECT r.a, r.b FROM R r LEFT JOIN S s ON r.b = s.b",
    "left_preserved_condition_in_on": NULLABLE + """SELECT r.a, SUM(s.d) AS t, COUNT(*) AS n
        FROM R r LEFT JOIN S s ON r.b = s.b AND r.c > 0 GROUP BY r.a""",
    "left_sum_of_nullable_other_side": NULLABLE + """SELECT s.d, SUM(r.c) AS t, AVG(r.b) AS v, COUNT(r.c) AS k
        FROM S s LEFT JOIN R r ON s.d = r.a GROUP BY s.d""",
    "left_coalesce_of_padded_and_nullable": NULLABLE + """SELECT r.a, SUM(COALESCE(s.b, r.b, 7)) AS t,
        COUNT(*) AS n FROM R r LEFT JOIN S s ON r.a = s.d GROUP BY r.a""",
    "right_on_nullable_keys": NULLABLE + """SELECT s.d, COUNT(*) AS n, SUM(r.a) AS t FROM R r
        RIGHT JOIN S s ON r.b = s.b GROUP BY s.d""",
    "full_on_nullable_keys_no_group": NULLABLE + """SELECT COUNT(*) AS n, SUM(r.a) AS x, SUM(s.d) AS y,
        COUNT(r.b) AS k FROM R r FULL JOIN S s ON r.b = s.b""",
    "left_chain_nullable": NULLABLE + """SELECT r.a, COUNT(*) AS n, SUM(t.e) AS z FROM R r
        LEFT JOIN S s ON r.b = s.b LEFT JOIN T t ON s.d = t.d GROUP BY r.a""",
    "left_arithmetic_over_nullable_sums": NULLABLE + """SELECT r.a, SUM(s.d) * 2 + COUNT(*) AS x,
        SUM(r.c) + SUM(s.d) AS y FROM R r LEFT JOIN S s ON r.b = s.b GROUP BY r.a""",
    "left_where_not_on_nullable": NULLABLE + """SELECT r.a, COUNT(*) AS n FROM R r LEFT JOIN S s
        ON r.b = s.b WHERE NOT (r.c > 0.5) OR s.d IS NULL GROUP BY r.a""",
    "left_where_rejecting_nulls": NULLABLE + """SELECT r.b, COUNT(*) AS n, SUM(r.c) AS t FROM R r LEFT JOIN S s
        ON r.a = s.d WHERE s.b > 0 GROUP BY r.b""",
    "left_renamed_view": NULLABLE + """CREATE VIEW V(x, total) AS SELECT r.b, SUM(s.d) FROM R r
        LEFT JOIN S s ON r.a = s.d GROUP BY r.b;""",
}


@pytest.mark.parametrize("shape", shape_params(SHAPES))
def test_view_matches_duckdb(shape):
    check_rows_against_duckdb(SHAPES[shape])


def test_a_null_key_never_matches_and_its_sum_is_null_on_both_backends():
    """R's row whose b is NULL matches S's row whose b is NULL not: it is padded, its SUM(s.d) NULL (None),
    apart from a row with a match; the NULL group of r.b is apart from 0's; deleting every row empties it."""
    program = compile_sql(NULLABLE + "SELECT r.b, SUM(s.d) AS t, COUNT(*) AS n FROM R r LEFT JOIN S s "
                                     "ON r.b = s.b GROUP BY r.b")
    view = program.view("Q1")
    assert view.keys == ("b", "b__null") and view.internal == ("b__null",)
    for backend in ("python", "native"):
        rt = new_runtime(program, backend)
        rt.apply_batch([("R", 1, (1, None, None)), ("S", 1, (None, 5)), ("R", 1, (2, 0, None)),
                        ("S", 1, (0, 3))])
        assert rt.view("Q1") == {(None, 1): (None, 1), (0, 0): (3, 1)}
        rt.apply_batch([("S", -1, (0, 3))])
        assert rt.view("Q1") == {(None, 1): (None, 1), (0, 0): (None, 1)}
        rt.apply_batch([("R", -1, (1, None, None)), ("S", -1, (None, 5)), ("R", -1, (2, 0, None))])
        assert rt.view("Q1") == {} and rt.entries() == 0


def test_compile_shows_the_cost_class_of_each_view():
    """An outer join over nullable columns costs as its parts (the anti part's match count kept per join key),
    a WHERE rejecting NULLs its inner join alone: first-order; so are arithmetic keys and set operations."""
    lines = compile_to_text(NULLABLE + """SELECT r.a, SUM(s.d) AS t FROM R r LEFT JOIN S s ON r.b = s.b GROUP BY r.a;
        SELECT r.b, COUNT(*) AS n FROM R r LEFT JOIN S s ON r.a = s.d WHERE s.b > 0 GROUP BY r.b;
        SELECT b + a AS x, COUNT(*) AS n FROM R GROUP BY b + a;
        SELECT b FROM R UNION SELECT b FROM S""").splitlines()
    assert lines[0].startswith("-- view Q1: domain-bound per correlation key: nested subquery correlated by equalities")
    assert all(line.startswith(f"-- view Q{i}: first-order") for i, line in zip((2, 3, 4), lines[1:4]))


REFUSED = {
    "padded_key_joined_with_a_key": ("SELECT r.b, s.b AS sb, COUNT(*) FROM R r LEFT JOIN S s ON r.b = s.b "
                                     "GROUP BY r.b, s.b", "reading s.b and r.b as keys"),
    "min_of_nullable_preserved_not_by_the_join_key": (  # by r.a it compiles (sqlL): the nested-fold rule
        "SELECT r.a, MIN(r.c) FROM R r LEFT JOIN S s ON r.b = s.b GROUP BY r.a",
        "a fold over the values that meet a nested condition needs the condition to read only the folded column"),
    "subquery_beside": ("SELECT r.a, COUNT(*) FROM R r LEFT JOIN S s ON r.b = s.b WHERE r.a IN "
                        "(SELECT d FROM T) GROUP BY r.a", "outer join's query with a subquery"),
    "or_in_on": ("SELECT r.a, COUNT(*) FROM R r LEFT JOIN S s ON s.d = r.b OR r.a = s.b GROUP BY r.a",
                 "unsupported ON condition s.d = r.b OR r.a = s.b of a LEFT JOIN over a nullable column"),
    "greatest_of_nullable": ("SELECT r.a, SUM(GREATEST(s.b, r.b)) FROM R r LEFT JOIN S s ON r.a = s.d "
                             "GROUP BY r.a", "GREATEST"),
}


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_refused_by_name(name):
    sql, why = REFUSED[name]
    with pytest.raises(CompileError, match=why):
        compile_sql(NULLABLE + sql)
