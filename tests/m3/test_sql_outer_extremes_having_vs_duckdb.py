"""MIN, MAX, COUNT(DISTINCT) and HAVING over outer joins agree with DuckDB under random inserts and deletes,
NULL-heavy ones included (issue 33 items 2 and 3, docs/m3.md "Outer joins").

An outer join is compiled as its parts (the inner join, the anti parts padded with NULLs: :mod:`.outer`); MIN and
MAX do not add across parts, so each part keeps its own MIN/MAX and the COUNT of the argument, and the view reads
the least (greatest) of the parts that have a value (:func:`.outerview.extreme`), NULL where none has;
COUNT(DISTINCT) of the padded side's column is the one part's that reads it.  HAVING is a condition of the view
over the parts' aggregates, TRUE where SQL's three-valued one is (:mod:`.outerhaving`).  ``ON NOT (r.b = s.b)``
over a nullable ``r.b`` of the preserved side needs ``r.b`` present as ``r.b = s.b`` does.  MIN/MAX of a nullable
column of the preserved side skip its NULLs in the anti part too (a filtered fold beside its match count).  Without nullable
columns a NULL aggregate reads 0 (the shared harness reads DuckDB's as 0); over nullable columns it is shown None
(each row compared with DuckDB's).  Both backends; deleting every row empties every map.
"""

from __future__ import annotations

import pytest
from boreas.m3 import CompileError, compile_sql
from m3_harness import check_against_duckdb, new_runtime, shape_params
from null_harness import check_rows_against_duckdb

GENERIC = """
CREATE STREAM R(a INT, b INT);
CREATE STREAM S(b INT, c INT);
CREATE STREAM T(c INT, e INT);
"""

NULLABLE = """
CREATE STREAM R(a INT, b INT NULL, c FLOAT NULL);
CREATE STREAM S(b INT NULL, d INT);
"""

SHAPES: dict[str, str] = {
    "left_extremes_of_both_sides": GENERIC + """SELECT r.b, MIN(s.c) AS m, MAX(s.c) - MAX(r.a) AS x,
        COUNT(DISTINCT s.c) AS d, COUNT(*) AS n FROM R r LEFT JOIN S s ON r.b = s.b GROUP BY r.b
        HAVING COUNT(*) > 1 OR NOT (SUM(s.c) <= 2) OR MIN(s.c) IS NULL""",
    "right_and_chain_extremes": GENERIC + """SELECT r.a, MAX(t.e) AS m, MIN(s.c) AS z FROM R r
        LEFT JOIN S s ON r.b = s.b AND r.a > 0 LEFT JOIN T t ON s.c = t.c GROUP BY r.a;
        SELECT s.c, MIN(r.a) - MAX(r.b) AS m, COUNT(*) AS n FROM R r RIGHT JOIN S s ON r.b = s.b GROUP BY s.c
        HAVING m >= 1 AND MIN(r.b) IS NOT NULL OR COUNT(DISTINCT r.a) > 1""",
    "having_on_a_group_column_alias": GENERIC + """SELECT r.a AS k, COUNT(*) AS n, MAX(s.c) AS m FROM R r
        LEFT JOIN S s ON r.b = s.b GROUP BY k HAVING k > 1 OR n > 2 AND NOT (k = 0);
        SELECT s.b AS g, SUM(s.c) AS t, COUNT(*) AS n FROM R r RIGHT JOIN S s ON r.b = s.b GROUP BY s.b
        HAVING g < 2 AND n > 1""",  # a key's name read as its column, as the inner join's path does (sqlL c)
    # (not ``g < 2 AND t > 0``: DuckDB 2.0.1 returns no row for it over S = {(0, 0), (0, 1)} and R empty)
}

NULL_SHAPES: dict[str, str] = {
    "null_left_extremes_of_padded_side": NULLABLE + """SELECT r.a, MIN(s.d) AS m, MAX(s.d) + 1 AS x,
        MIN(s.b) AS y, COUNT(DISTINCT s.b) AS z, COUNT(*) AS n FROM R r LEFT JOIN S s ON r.b = s.b GROUP BY r.a
        HAVING MIN(s.d) < 2 OR COUNT(s.b) = 0;
        SELECT s.d, COUNT(*) AS n, MAX(r.a) AS m FROM R r RIGHT JOIN S s ON NOT (r.b = s.b) AND s.d > 1
        GROUP BY s.d""",
    "null_left_max_of_preserved_by_its_nullable_key": NULLABLE + """SELECT r.b, MIN(s.d) AS m, MAX(r.a) AS x
        FROM R r LEFT JOIN S s ON r.b = s.b AND s.d > 1 GROUP BY r.b;
        SELECT r.a, AVG(r.c) AS v, COUNT(*) AS n FROM R r LEFT JOIN S s ON r.b = s.b GROUP BY r.a
        HAVING AVG(r.c) > 0.3 OR NOT (SUM(s.d) > 1) OR SUM(s.d) IS NULL""",
    "null_extremes_of_a_nullable_preserved_column": NULLABLE + """SELECT r.b, MIN(r.c) AS m, MAX(r.c) AS x,
        COUNT(*) AS n FROM R r LEFT JOIN S s ON r.b = s.b GROUP BY r.b HAVING COUNT(*) > 1 OR SUM(s.d) IS NULL;
        SELECT s.d, MAX(s.b) AS m, MIN(s.b) AS z, SUM(r.c) AS t FROM R r RIGHT JOIN S s ON r.a = s.d GROUP BY s.d;
        SELECT r.a, MIN(r.b) AS m, MAX(s.b) AS y FROM R r LEFT JOIN S s ON r.a = s.d AND r.b > 0
        GROUP BY r.a;
        SELECT r.a, MIN(r.b) AS m, MAX(r.b) AS x FROM R r LEFT JOIN S s ON r.b = s.b GROUP BY r.a""",
    # a filtered fold (NULLs skipped) in the anti part, beside its match count (sqlL b); the last: of the join
    # column itself, which the nested condition may read
}


@pytest.mark.parametrize("shape", shape_params(SHAPES))
def test_view_matches_duckdb(shape):
    check_against_duckdb(SHAPES[shape], examples=10)


@pytest.mark.parametrize("shape", shape_params(NULL_SHAPES))
def test_view_over_nullable_columns_matches_duckdb(shape):
    check_rows_against_duckdb(NULL_SHAPES[shape], examples=10)


def test_having_on_a_group_column_alias_compiles_as_over_an_inner_join():
    """``HAVING k > 1`` with ``r.a AS k`` was refused as an "unsupported expression k" over an outer join while
    the inner join compiled it: the key's name is read as its column there too, on both backends."""
    sql = GENERIC + "SELECT r.a AS k, COUNT(*) AS n FROM R r LEFT JOIN S s ON r.b = s.b GROUP BY r.a HAVING k > 1"
    program = compile_sql(sql)
    for backend in ("python", "native"):
        rt = new_runtime(program, backend)
        rt.apply_batch([("R", 1, (1, 0)), ("R", 1, (2, 0)), ("S", 1, (0, 5)), ("S", 1, (0, 6))])
        assert rt.view("Q1") == {(2,): 2}
        rt.apply_batch([("R", -1, (1, 0)), ("R", -1, (2, 0)), ("S", -1, (0, 5)), ("S", -1, (0, 6))])
        assert rt.view("Q1") == {} and rt.entries() == 0


def test_min_of_the_padded_side_is_null_without_a_match_on_both_backends():
    """A row of R without a match has MIN(s.d) NULL (None) apart from a row with one; deleting the match makes
    it NULL, deleting every row empties every map."""
    program = compile_sql(NULLABLE + "SELECT r.a, MIN(s.d) AS m, MAX(s.d) AS x FROM R r LEFT JOIN S s "
                                     "ON r.b = s.b GROUP BY r.a")
    for backend in ("python", "native"):
        rt = new_runtime(program, backend)
        rt.apply_batch([("R", 1, (1, None, None)), ("R", 1, (2, 0, None)), ("S", 1, (0, 3)), ("S", 1, (0, 5)),
                        ("S", 1, (None, 9))])
        assert rt.view("Q1") == {(1,): (None, None), (2,): (3, 5)}
        rt.apply_batch([("S", -1, (0, 3))])
        assert rt.view("Q1") == {(1,): (None, None), (2,): (5, 5)}
        rt.apply_batch([("S", -1, (0, 5))])
        assert rt.view("Q1") == {(1,): (None, None), (2,): (None, None)}
        rt.apply_batch([("R", -1, (1, None, None)), ("R", -1, (2, 0, None)), ("S", -1, (None, 9))])
        assert rt.view("Q1") == {} and rt.entries() == 0


def test_min_of_a_nullable_preserved_column_skips_its_nulls_on_both_backends():
    """MIN(r.c) of the rows of R without a match skips their NULL c (a filtered fold in the anti part, beside
    its match count): NULL where every c is; a match moving a row between the parts is seen; deleting every row
    empties every map."""
    program = compile_sql(NULLABLE + "SELECT r.b, MIN(r.c) AS m, COUNT(*) AS n FROM R r LEFT JOIN S s "
                                     "ON r.b = s.b GROUP BY r.b")
    rows = [("R", 1, (1, 0, None)), ("R", 1, (2, 0, 0.5)), ("R", 1, (3, 0, -1.0)), ("R", 1, (4, 1, None))]
    for backend in ("python", "native"):
        rt = new_runtime(program, backend)
        rt.apply_batch(rows)
        assert rt.view("Q1") == {(0, 0): (-1.0, 3), (1, 0): (None, 1)}
        rt.apply_batch([("S", 1, (0, 7)), ("R", -1, (3, 0, -1.0))])  # matched now: the inner part's MIN
        assert rt.view("Q1") == {(0, 0): (0.5, 2), (1, 0): (None, 1)}
        rt.apply_batch([("S", -1, (0, 7))])  # back to the anti part
        assert rt.view("Q1") == {(0, 0): (0.5, 2), (1, 0): (None, 1)}
        rt.apply_batch([("R", -1, r) for _, _, r in rows if r != (3, 0, -1.0)])
        assert rt.view("Q1") == {} and rt.entries() == 0


REFUSED = {
    "nullable_preserved_max_not_by_the_join_key": (  # as a column that is not nullable: the nested-fold rule
        NULLABLE + "SELECT r.a, MAX(r.c) FROM R r LEFT JOIN S s ON r.b = s.b GROUP BY r.a",
        r"unsupported MAX of c in a query whose nested subquery reads B: a fold over the values that meet a "
        "nested condition"),
    "nullable_preserved_min_under_arithmetic": (  # the NULL rules, as of the padded side's
        NULLABLE + "SELECT r.b, MIN(r.c) + 1 AS m FROM R r LEFT JOIN S s ON r.b = s.b GROUP BY r.b",
        r"under an expression over MIN\(r.c\)"),
    "sum_distinct": (GENERIC + "SELECT r.a, SUM(DISTINCT s.c) FROM R r LEFT JOIN S s ON r.b = s.b "
                     "GROUP BY r.a", "other DISTINCT aggregates do not combine yet"),
    "count_distinct_of_preserved": (GENERIC + "SELECT COUNT(DISTINCT r.a) AS d FROM R r FULL JOIN S s ON r.b = s.b",
                                    r"unsupported COUNT\(DISTINCT r.a\) over an outer join reading rows of several"),
    "coalesce_of_preserved_in_on": (NULLABLE + "SELECT r.a, COUNT(*) AS n FROM R r LEFT JOIN S s "
                                    "ON COALESCE(r.b, 0) = s.d GROUP BY r.a",
                                    r"unsupported ON condition COALESCE\(r.b, 0\) = s.d of a LEFT JOIN over a "
                                    "nullable column of its preserved side"),
    "or_in_on_over_preserved": (NULLABLE + "SELECT s.d, COUNT(*) AS n FROM R r RIGHT JOIN S s "
                                "ON s.b = r.a OR s.d = r.a GROUP BY s.d",
                                "unsupported ON condition .* of a RIGHT JOIN"),
    "min_of_a_date": ("CREATE STREAM R(a INT, b INT); CREATE STREAM S(b INT, n VARCHAR, d DATE); "
                      "SELECT r.a, MIN(s.d) AS m FROM R r LEFT JOIN S s ON r.b = s.b GROUP BY r.a",
                      r"unsupported MIN\(s.d\) over an outer join reading s.d, a DATE"),
    "max_of_a_string": ("CREATE STREAM R(a INT, b INT, n VARCHAR); CREATE STREAM S(b INT, c INT); "
                        "SELECT r.b, MAX(r.n) AS m FROM R r LEFT JOIN S s ON r.b = s.b GROUP BY r.b",
                        r"unsupported MAX\(r.n\) over an outer join reading r.n, a STRING"),
    "having_in_list": (GENERIC + "SELECT r.a, COUNT(*) AS n FROM R r LEFT JOIN S s ON r.b = s.b GROUP BY r.a "
                       "HAVING COUNT(*) IN (1, 2)",
                       r"unsupported COUNT\(\*\) IN \(1, 2\) in HAVING over an outer join"),
}


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_refused_by_name(name):
    sql, why = REFUSED[name]
    with pytest.raises(CompileError, match=why):
        compile_sql(sql)


CHAIN = GENERIC + """CREATE STREAM U(x INT, y INT);
SELECT r.b, MAX(r.a) AS m, MIN(r.a) AS z FROM R r LEFT JOIN S s ON r.b = s.b AND r.a > 0
    LEFT JOIN T t ON r.a = t.c AND r.b > 1 LEFT JOIN U u ON r.b = u.x AND r.a > 2 GROUP BY r.b"""


def test_min_max_over_a_chain_of_outer_joins_is_refused_past_four_parts_and_compiles_quickly_below():
    """A review found the running result named twice per part (2^n: this chain's compile did not end in 5
    minutes); now each part's extreme is named at most once per later part, and more than 4 parts reading a
    MIN/MAX are refused by name; two LEFT JOINs (4 parts) compile small and agree with DuckDB."""
    with pytest.raises(CompileError, match=r"unsupported MAX\(r.a\) over an outer join of \d+ parts"):
        compile_sql(CHAIN)
    two = GENERIC + """SELECT r.b, MAX(r.a) AS m, MIN(r.a) AS z FROM R r LEFT JOIN S s ON r.b = s.b
        LEFT JOIN T t ON r.a = t.c GROUP BY r.b"""
    assert len(str(compile_sql(two).views)) < 200_000
    check_against_duckdb(two, examples=4)
