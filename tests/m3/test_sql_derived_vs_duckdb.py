"""Subqueries in FROM and WITH without aggregates (issue 14, item 1) agree with DuckDB after every batch.

A derived table or CTE that selects, joins and computes per-row
expressions is flattened into the query that reads it (:mod:`boreas.m3.compiler.derived`):
its relations join the outer FROM, its WHERE is ANDed, its expressions stand
where its columns are read.  The shapes cover TPC-H Q7-Q9's (a grouped
SUM over a joined derived table whose columns are expressions), CTEs read
once, twice (a self-join) and in a chain, a derived table joined with a
relation, ``*`` over one, a view of rows, nested subqueries around and
inside one.  Each runs random insert/delete batches over small domains
(``m3_harness``) on both backends: every view equals DuckDB's, every map its
definition, and deleting every row empties every map.
"""

from __future__ import annotations

import re

import pytest
from boreas.m3 import CompileError, compile_sql, compile_to_text
from m3_harness import check_against_duckdb, shape_params

GENERIC = """
CREATE STREAM R(a INT, b INT, c DOUBLE);
CREATE STREAM S(b INT, d INT, e DOUBLE);
CREATE TABLE T(d INT, f INT, g VARCHAR);
"""

SHAPES: dict[str, str] = {
    "projection": GENERIC + "SELECT x, SUM(y) AS s FROM (SELECT a AS x, c * 2 AS y FROM R WHERE b > 0) AS t GROUP BY x",
    "q7_joined_expressions": GENERIC + """SELECT k, g, SUM(v) AS revenue
        FROM (SELECT r.a AS k, t.g AS g, r.c * (1 - s.e) AS v FROM R r, S s, T t
              WHERE r.b = s.b AND s.d = t.d AND ((r.a = 1 AND t.g = 'A') OR (r.a = 2 AND t.g = 'B'))) AS shipping
        GROUP BY k, g""",
    "q8_case_over_derived": GENERIC + """SELECT k, SUM(CASE WHEN nation = 'A' THEN volume ELSE 0 END) / SUM(volume) AS share
        FROM (SELECT r.a AS k, r.c * s.e AS volume, t.g AS nation FROM R r, S s, T t
              WHERE r.b = s.b AND s.d = t.d) AS all_nations GROUP BY k""",
    "derived_joined_with_relation": GENERIC + """SELECT t.x, COUNT(*) AS n FROM (SELECT a AS x, b FROM R) t, S
        WHERE t.b = S.b AND S.d < 3 GROUP BY t.x""",
    "filter_on_derived_column": GENERIC + """SELECT x, COUNT(*) AS n, AVG(y) AS m
        FROM (SELECT a AS x, c AS y FROM R, S WHERE R.b = S.b) t WHERE y > 0 GROUP BY x""",
    "cte": GENERIC + """WITH v AS (SELECT b, c FROM R WHERE a <> 2)
        SELECT v.b, SUM(v.c) AS s, MAX(S.d) AS m FROM v JOIN S ON v.b = S.b GROUP BY v.b""",
    "cte_read_twice": GENERIC + """WITH v AS (SELECT a, b FROM R)
        SELECT v1.a, COUNT(*) AS n FROM v v1, v v2 WHERE v1.b = v2.a GROUP BY v1.a""",
    "cte_chain_renamed": GENERIC + """WITH v AS (SELECT a, b, c FROM R WHERE c > 0), w(k, amount) AS (SELECT a, c FROM v WHERE b < 3)
        SELECT k, SUM(amount) AS total FROM w GROUP BY k""",
    "derived_in_derived": GENERIC + """SELECT x, SUM(z) AS s
        FROM (SELECT u.x, u.y * S.e AS z FROM (SELECT a AS x, b AS y FROM R) u, S WHERE u.y = S.b) v GROUP BY x""",
    "rows_view_star": GENERIC + "SELECT * FROM (SELECT a, b AS x FROM R WHERE a < 2) t, S WHERE t.x = S.b",
    "rows_view_distinct": GENERIC + "SELECT DISTINCT k FROM (SELECT R.a AS k, S.d FROM R, S WHERE R.b = S.b) t",
    "exists_over_derived": GENERIC + """SELECT x, COUNT(*) AS n FROM (SELECT a AS x, b FROM R) t
        WHERE EXISTS (SELECT * FROM S WHERE S.b = t.b) GROUP BY x""",
    "not_exists_inside_derived": GENERIC + """SELECT x, SUM(y) AS s
        FROM (SELECT a AS x, c AS y FROM R WHERE NOT EXISTS (SELECT * FROM S WHERE S.d = R.a)) t GROUP BY x""",
    "derived_in_in_subquery": GENERIC + """SELECT a, COUNT(*) AS n FROM R
        WHERE b IN (SELECT y FROM (SELECT d AS y FROM S WHERE e > 0) u) GROUP BY a""",
    # aggregates over a grouped derived table that are aggregates of its rows (m3/compiler/regroup.py)
    "sum_of_sums": GENERIC + """SELECT g, SUM(s) AS total
        FROM (SELECT a AS g, b AS h, SUM(c) AS s FROM R GROUP BY a, b) t GROUP BY g""",
    "count_of_groups_and_avg": GENERIC + """SELECT g, COUNT(*) AS groups, AVG(n) AS per_group
        FROM (SELECT R.a AS g, S.d AS h, COUNT(*) AS n FROM R, S WHERE R.b = S.b GROUP BY R.a, S.d) t GROUP BY g""",
    "min_of_min_max_of_group_column": GENERIC + """SELECT MIN(lo) AS lo, MAX(h) AS hi
        FROM (SELECT a, b AS h, MIN(c) AS lo FROM R GROUP BY a, b) t WHERE a < 3""",
    "grouped_cte_read_as_rows": GENERIC + """WITH t AS (SELECT a, SUM(c) AS s, COUNT(*) AS n FROM R GROUP BY a)
        SELECT a, s, n FROM t WHERE s > 0 OR a = 1""",
    "having_over_regrouped": GENERIC + """SELECT g, SUM(s) AS total
        FROM (SELECT a AS g, d, SUM(e) AS s FROM R, S WHERE R.b = S.b GROUP BY a, d) t GROUP BY g HAVING COUNT(*) > 1""",
}


@pytest.mark.parametrize("shape", shape_params(SHAPES))
def test_view_matches_duckdb(shape):
    check_against_duckdb(SHAPES[shape])


def test_a_flattened_derived_table_is_first_order():
    """Flattening adds no map and no domain loop: Q7's shape is the join's SUM, first-order."""
    first = compile_to_text(SHAPES["q7_joined_expressions"]).splitlines()[0]
    assert first.startswith("-- view Q1: first-order"), first
    direct = compile_sql(GENERIC + """SELECT r.a AS k, t.g AS g, SUM(r.c * (1 - s.e)) AS revenue FROM R r, S s, T t
        WHERE r.b = s.b AND s.d = t.d AND ((r.a = 1 AND t.g = 'A') OR (r.a = 2 AND t.g = 'B')) GROUP BY r.a, t.g""")
    assert compile_sql(SHAPES["q7_joined_expressions"]) == direct


@pytest.mark.parametrize("sql, message", [
    # MAX of an inner COUNT, GROUP BY an inner aggregate, a grouped derived table joined with a relation:
    # compiled by m3/compiler/lifted.py (test_sql_lifted_vs_duckdb.py)
    (GENERIC + "SELECT SUM(x) AS s FROM (SELECT a AS x, COUNT(*) AS n FROM R) t",
     "unsupported derived table with aggregates (an aggregate of aggregates"),
    # (a DISTINCT derived table of columns is their GROUP BY: test_sql_distinct_derived_vs_duckdb.py)
    (GENERIC + "SELECT SUM(x) AS s FROM (SELECT DISTINCT a AS x, COUNT(*) AS n FROM R GROUP BY a) t",
     "unsupported DISTINCT in a grouped derived table"),
    (GENERIC + "SELECT SUM(x) AS s FROM (SELECT a AS x FROM R LIMIT 3) t", "unsupported LIMIT in a derived table"),
    (GENERIC + "WITH RECURSIVE v AS (SELECT a FROM R) SELECT SUM(a) AS s FROM v", "unsupported RECURSIVE of WITH"),
    (GENERIC + "SELECT SUM(b) AS s FROM (SELECT a, b FROM R) t, S", "ambiguous column b"),
    (GENERIC + "SELECT SUM(t.z) AS s FROM (SELECT a, b FROM R) t", "unknown column t.z"),
    (GENERIC + "SELECT SUM(x) AS s FROM (SELECT a AS x, b AS x FROM R) t", "derived table t has two columns x"),
    (GENERIC + "SELECT x, SUM(c) AS s FROM (SELECT a / b AS x, c FROM R) t GROUP BY x", "unsupported division in a key"),
])
def test_unsupported_derived_tables_are_refused_by_name(sql, message):
    with pytest.raises(CompileError, match=re.escape(message)):
        compile_sql(sql)
