"""Outer joins (``LEFT``, ``RIGHT``, ``FULL``), ``NATURAL JOIN``, ``JOIN ... USING``, ``COALESCE``, ``NULLIF``,
``IS [NOT] NULL`` of a padded column and ``GREATEST``/``LEAST`` agree with DuckDB (issue 33 items 3 and 4).

An outer join is compiled as the inner join plus the anti-join parts padded with NULLs
(:mod:`boreas.m3.compiler.outer`), each aggregate split per part; a key domain of a few values makes match
counts cross 0 both ways within a batch, and deleting every row empties every map (the harness checks it).
A group whose aggregated inputs are all NULL reads 0, as every aggregate of no rows in Boreas does (the
harness reads DuckDB's NULL aggregate as 0).
"""

from __future__ import annotations

import pytest
from boreas.m3 import CompileError, compile_sql
from boreas.m3.compiler.pipeline import compile_to_text
from m3_harness import check_against_duckdb, shape_params

GENERIC = """
CREATE STREAM R(a INT, b INT);
CREATE STREAM S(b INT, c INT);
CREATE STREAM T(c INT, e INT);
"""

SHAPES: dict[str, str] = {
    "left_grouped": GENERIC + """SELECT r.a, SUM(s.c) AS t, COUNT(*) AS n, COUNT(s.c) AS k, AVG(s.c) AS v
        FROM R r LEFT JOIN S s ON r.b = s.b GROUP BY r.a""",
    "left_outer_scalar": GENERIC + "SELECT SUM(r.a) AS t, COUNT(*) AS n, AVG(s.c) AS v FROM R r LEFT OUTER JOIN S s ON r.b = s.b",
    "right_grouped": GENERIC + "SELECT s.c, COUNT(*) AS n, SUM(r.a) AS t FROM R r RIGHT JOIN S s ON r.b = s.b GROUP BY s.c",
    "full_scalar": GENERIC + """SELECT COUNT(*) AS n, COUNT(r.a) AS nr, COUNT(s.c) AS ns,
        SUM(COALESCE(r.a, 0) + COALESCE(s.c, 10)) AS t FROM R r FULL OUTER JOIN S s ON r.b = s.b""",
    "on_conditions_of_either_side": GENERIC + """SELECT r.a, COUNT(s.c) AS k, COUNT(*) AS n FROM R r
        LEFT JOIN S s ON r.b = s.b AND r.a > 1 AND s.c < 3 GROUP BY r.a""",
    "where_is_null_anti_join": GENERIC + """SELECT r.a, COUNT(*) AS n FROM R r LEFT JOIN S s ON r.b = s.b
        WHERE s.c IS NULL GROUP BY r.a""",
    "where_rejecting_nulls_is_the_inner_join": GENERIC + """SELECT r.a, s.c FROM R r LEFT JOIN S s ON r.b = s.b
        WHERE s.c > 1""",
    "rows_of_the_preserved_side": GENERIC + "SELECT r.a, r.b FROM R r LEFT JOIN S s ON r.b = s.b",
    "star_of_the_preserved_side": GENERIC + "SELECT r.* FROM R r LEFT JOIN S s ON r.b = s.b AND s.c > 0",
    "distinct_rows_with_is_null_or": GENERIC + """SELECT DISTINCT r.a FROM R r LEFT JOIN S s ON r.b = s.b
        WHERE s.c IS NULL OR s.c > 2""",
    "chain_of_left_joins": GENERIC + """SELECT r.a, COUNT(*) AS n, COUNT(t.e) AS m, SUM(t.e) AS s FROM R r
        LEFT JOIN S s ON r.b = s.b LEFT JOIN T t ON s.c = t.c GROUP BY r.a""",
    "left_join_using": GENERIC + "SELECT b, SUM(c) AS t, COUNT(*) AS n FROM R LEFT JOIN S USING (b) GROUP BY b",
    "natural_left_join": GENERIC + "SELECT a, COUNT(c) AS k, COUNT(*) AS n FROM R NATURAL LEFT JOIN S GROUP BY a",
    "right_join_using": GENERIC + "SELECT b, COUNT(a) AS k FROM R RIGHT JOIN S USING (b) GROUP BY b",
    "coalesce_nullif_greatest": GENERIC + """SELECT r.a, SUM(COALESCE(s.c, -1)) AS x, COUNT(NULLIF(s.c, 2)) AS y,
        SUM(GREATEST(s.c, r.a)) AS g, SUM(CASE WHEN s.c IS NOT NULL THEN 1 ELSE 0 END) AS m
        FROM R r LEFT JOIN S s ON r.b = s.b GROUP BY r.a""",
    "expressions_over_the_parts": GENERIC + """SELECT r.a, SUM(s.c) * 2 + COUNT(*) AS x, GREATEST(1, SUM(s.c)) AS g,
        -LEAST(COUNT(s.c), 1) AS l FROM R r LEFT JOIN S s ON r.b = s.b GROUP BY r.a""",
    "inner_join_then_left_join": GENERIC + """SELECT r.a, COUNT(*) AS n, SUM(s.c) AS t FROM R r JOIN T t ON r.a = t.c
        LEFT JOIN S s ON r.b = s.b GROUP BY r.a""",
    "greatest_over_aggregates": GENERIC + """SELECT a, SUM(b) / GREATEST(1, SUM(a)) AS m, LEAST(COUNT(*), 2) AS l
        FROM R GROUP BY a""",
    "constants_is_null_coalesce_nullif": GENERIC + """SELECT a, SUM(COALESCE(NULL, b)) AS s, COUNT(NULLIF(b, 2)) AS n,
        SUM(NULLIF(a, b)) AS m FROM R WHERE 3 IS NOT NULL AND NOT (NULL IS NOT NULL) GROUP BY a""",
}


@pytest.mark.parametrize("shape", shape_params(SHAPES))
def test_view_matches_duckdb(shape):
    check_against_duckdb(SHAPES[shape])


def test_natural_join_without_common_columns_is_a_cross_join():
    """SQL's rule (and DBToaster's): the join of every pair of rows; DuckDB refuses it, so the oracle is the
    cross join written out."""
    assert compile_sql(GENERIC + "SELECT R.* FROM R NATURAL JOIN T") == compile_sql(GENERIC + "SELECT R.* FROM R, T")


def test_listmax_and_listmin_over_aggregates_are_greatest_and_least():
    listed = compile_sql(GENERIC + "SELECT a, SUM(b) / LISTMAX(1, SUM(a)) AS m, LISTMIN(COUNT(*), 2) AS l FROM R GROUP BY a")
    assert listed == compile_sql(SHAPES["greatest_over_aggregates"])


def test_compile_shows_the_cost_class_of_each_part():
    text = compile_to_text(GENERIC + """SELECT r.a, COUNT(*) AS n FROM R r LEFT JOIN S s ON r.b = s.b GROUP BY r.a;
        SELECT r.a, s.c FROM R r LEFT JOIN S s ON r.b = s.b WHERE s.c > 1""")
    lines = text.splitlines()
    assert lines[0].startswith("-- view Q1: domain-bound per correlation key: nested subquery correlated by "
                               "equalities")  # the anti part's match count, kept per join key
    assert lines[1].startswith("-- view Q2: first-order")  # a WHERE rejecting NULLs: the inner join alone


@pytest.mark.parametrize("sql, message", [
    ("SELECT r.b, s.b AS sb, COUNT(*) AS n FROM R r LEFT JOIN S s ON r.b = s.b GROUP BY r.b, s.b",
     "unsupported LEFT JOIN reading s.b and r.b as keys: the ON condition makes them one key where rows match"),
    ("SELECT b, COUNT(*) AS n FROM R FULL JOIN S USING (b) GROUP BY b", "unsupported FULL JOIN ... USING (b)"),
    ("SELECT * FROM R r LEFT JOIN S s ON r.b = s.b", "unsupported LEFT JOIN reading s.b and r.b as keys"),
    ("SELECT r.a, COUNT(DISTINCT r.b) AS m FROM R r LEFT JOIN S s ON r.b = s.b GROUP BY r.a",
     "unsupported COUNT(DISTINCT r.b) over an outer join reading rows of several of its parts"),
    ("SELECT r.a, COUNT(*) AS n FROM R r LEFT JOIN S s ON r.b = s.b GROUP BY r.a HAVING COUNT(*) BETWEEN 1 AND 2",
     "in HAVING over an outer join (comparisons, AND, OR, NOT and IS [NOT] NULL"),
    ("SELECT COUNT(*) AS n FROM R r JOIN T t ON r.a = t.c FULL JOIN S s ON r.b = s.b",
     "unsupported FULL JOIN after another join"),
    ("SELECT COUNT(*) AS n FROM R r LEFT JOIN (SELECT b FROM S) s ON r.b = s.b",
     "unsupported outer join with a derived table"),
    ("SELECT COUNT(*) AS n FROM R r LEFT JOIN U u ON r.b = u.b", "unknown relation U"),
])
def test_refusals_name_the_construct_and_why(sql, message):
    with pytest.raises(CompileError, match=None) as err:
        compile_sql(GENERIC + sql)
    assert message in str(err.value)
