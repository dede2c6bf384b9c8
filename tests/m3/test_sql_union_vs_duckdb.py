"""UNION ALL, UNION, INTERSECT [ALL] and EXCEPT [ALL] (issue 14, item 3) agree with DuckDB after every batch of inserts and deletes, on both backends.

A query over ``A UNION ALL B`` is compiled as the query over ``A`` and over
``B``, each map's definition the sum of the two (:mod:`boreas.m3.compiler.union`):
aggregates over a UNION ALL in FROM (SUM, COUNT, AVG, MIN/MAX and COUNT
DISTINCT read the summed maps; HAVING; through a CTE; a branch joining two
relations; a branch over the same relation as another; three branches), and
a UNION ALL of views of rows (a count per distinct row over all branches),
a UNION of views of rows (each row once while any branch has it), and
INTERSECT and EXCEPT of views of rows (a row-count map per branch, the
view's condition over them: :mod:`boreas.m3.compiler.setops`), and their ALL
variants (multiset views: the count of a row is the LEAST of the branches'
counts, or the GREATEST of the first minus the others and 0).
Every view equals DuckDB's, every map its definition, and deleting every
row empties every map.
"""

from __future__ import annotations

import re

import pytest
from boreas.m3 import CompileError, compile_sql, compile_to_text
from boreas.m3.ast import RelAtom, walk
from changes_check import changes_rebuild_view
from m3_harness import check_against_duckdb, shape_params

GENERIC = """
CREATE STREAM R(a INT, b INT, c DOUBLE);
CREATE STREAM S(b INT, d INT, e DOUBLE);
CREATE TABLE T(d INT, f INT, g VARCHAR);
"""

STRINGS = """
CREATE STREAM R(a INT, b INT, c DOUBLE, g VARCHAR);
CREATE STREAM S(b INT, d INT, e DOUBLE, h VARCHAR);
"""

SHAPES: dict[str, str] = {
    "sum_over_union": GENERIC + """SELECT k, SUM(v) AS s, COUNT(*) AS n
        FROM (SELECT a AS k, c AS v FROM R UNION ALL SELECT d, e FROM S) u GROUP BY k""",
    "avg_max_distinct_over_union": GENERIC + """SELECT k, AVG(v) AS m, MAX(v) AS hi, COUNT(DISTINCT v) AS nd
        FROM (SELECT a AS k, c AS v FROM R UNION ALL SELECT d AS k, e AS v FROM S) u GROUP BY k""",
    "union_branch_with_join_and_filter": GENERIC + """SELECT g, SUM(x) AS s
        FROM (SELECT T.g AS g, S.e AS x FROM S, T WHERE S.d = T.d AND S.b < 3
              UNION ALL SELECT T.g, R.c FROM R, T WHERE R.a = T.d) u GROUP BY g""",
    "same_relation_twice_with_having": GENERIC + """SELECT k, SUM(v) AS s
        FROM (SELECT a AS k, c AS v FROM R WHERE b = 1 UNION ALL SELECT b, c FROM R WHERE a <> 2) u
        GROUP BY k HAVING COUNT(*) > 1""",
    "union_in_cte_three_branches": GENERIC + """WITH u AS (SELECT a AS k, b AS w FROM R UNION ALL SELECT b, d FROM S
                                    UNION ALL SELECT d, f FROM T)
        SELECT k, SUM(w) AS total FROM u GROUP BY k""",
    "union_joined_with_relation": GENERIC + """SELECT T.g, COUNT(*) AS n
        FROM (SELECT a AS k FROM R UNION ALL SELECT d FROM S) u, T WHERE u.k = T.d GROUP BY T.g""",
    "rows_union": GENERIC + "SELECT a, b FROM R WHERE c > 0 UNION ALL SELECT b, d FROM S",
    "rows_union_of_joins": GENERIC + """SELECT R.a, T.g FROM R, T WHERE R.b = T.d
        UNION ALL SELECT S.b, T.g FROM S, T WHERE S.d = T.d""",
    # UNION (a set): each row once while any branch has it
    "rows_set_union": GENERIC + "SELECT a, b FROM R WHERE c > 0 UNION SELECT b, d FROM S",
    "set_union_over_a_union_all": GENERIC + "SELECT a FROM R UNION ALL SELECT b FROM S UNION SELECT d FROM T",
    "set_union_of_joins_with_distinct_branch": GENERIC + """SELECT DISTINCT R.a, T.g FROM R, T WHERE R.b = T.d
        UNION SELECT S.b, T.g FROM S, T WHERE S.d = T.d""",
    "set_union_same_relation_in_cte": STRINGS + """WITH v AS (SELECT a, g FROM R WHERE c > 0)
        SELECT a, g FROM v UNION SELECT b, g FROM R WHERE g LIKE '%A%'""",
    # INTERSECT and EXCEPT (sets): a row-count map per branch, the view's condition over them
    "intersect_rows": GENERIC + "SELECT a, b FROM R WHERE c > 0 INTERSECT SELECT b, d FROM S",
    "except_chain": GENERIC + "SELECT a FROM R EXCEPT SELECT b FROM S EXCEPT SELECT d FROM T",
    "intersect_of_joins_three_branches": GENERIC + """SELECT R.a, T.g FROM R, T WHERE R.b = T.d
        INTERSECT SELECT S.b, T.g FROM S, T WHERE S.d = T.d INTERSECT SELECT d, g FROM T WHERE f <> 1""",
    "except_cte_and_like": STRINGS + """WITH v AS (SELECT a, g FROM R WHERE c > 0)
        SELECT a, g FROM v EXCEPT SELECT b, h FROM S WHERE h LIKE '%A%'""",
    # INTERSECT ALL and EXCEPT ALL (bags): a count map per branch, the view's count LEAST / GREATEST of them
    "intersect_all_rows": GENERIC + "SELECT a, b FROM R WHERE c > 0 INTERSECT ALL SELECT b, d FROM S",
    "except_all_chain": GENERIC + "SELECT a FROM R EXCEPT ALL SELECT b FROM S EXCEPT ALL SELECT d FROM T",
    "intersect_all_of_joins_three_branches": GENERIC + """SELECT R.a, T.g FROM R, T WHERE R.b = T.d
        INTERSECT ALL SELECT S.b, T.g FROM S, T WHERE S.d = T.d INTERSECT ALL SELECT d, g FROM T WHERE f <> 1""",
    "except_all_cte_and_like": STRINGS + """WITH v AS (SELECT a, g FROM R WHERE c > 0)
        SELECT a, g FROM v EXCEPT ALL SELECT b, h FROM S WHERE h LIKE '%A%'""",
    "except_all_of_a_theta_join": GENERIC + """SELECT R.a FROM R, S WHERE R.c - S.e > 1
        EXCEPT ALL SELECT d FROM T""",
    # combinations with the other new constructs: LIKE, a CTE, a HAVING subquery over a derived table
    "like_in_union_branches": STRINGS + """SELECT k, COUNT(*) AS n
        FROM (SELECT a AS k FROM R WHERE g LIKE '%U%' UNION ALL SELECT d FROM S WHERE h NOT LIKE '_S%') u GROUP BY k""",
    "cte_rows_union_with_like": STRINGS + """WITH v AS (SELECT a, g FROM R WHERE c > 0)
        SELECT a, g FROM v UNION ALL SELECT b, h FROM S WHERE h LIKE '%I%'""",
    "having_subquery_over_derived": STRINGS + """SELECT x, SUM(y) AS s
        FROM (SELECT a AS x, c AS y FROM R WHERE g LIKE '%A%') t GROUP BY x HAVING SUM(y) >= (SELECT AVG(e) FROM S)""",
}


@pytest.mark.parametrize("shape", shape_params(SHAPES))
def test_view_matches_duckdb(shape):
    check_against_duckdb(SHAPES[shape])


def test_an_except_keeps_one_first_order_count_map_per_branch():
    program = compile_sql(SHAPES["except_chain"])
    text = compile_to_text(SHAPES["except_chain"])
    assert text.splitlines()[0].startswith("-- view Q1: first-order"), text.splitlines()[0]
    counts = {m.name: {a.name for a in walk(m.definition) if isinstance(a, RelAtom)} for m in program.maps}
    assert counts == {"Q1_rows": {"R"}, "Q1_rows_2": {"S"}, "Q1_rows_3": {"T"}}
    assert "WHERE 0 < Q1_rows[A] AND Q1_rows_2[A] <= 0 AND Q1_rows_3[A] <= 0" in text


def test_a_bag_except_counts_rows_per_branch_and_subtracts_when_read():
    program = compile_sql(SHAPES["except_all_chain"])
    text = compile_to_text(SHAPES["except_all_chain"])
    assert text.splitlines()[0].startswith("-- view Q1: first-order"), text.splitlines()[0]
    counts = {m.name: {a.name for a in walk(m.definition) if isinstance(a, RelAtom)} for m in program.maps}
    assert counts == {"Q1_count": {"R"}, "Q1_count_2": {"S"}, "Q1_count_3": {"T"}}
    assert "(count := GREATEST(Q1_count[A] - Q1_count_2[A] - Q1_count_3[A], 0)) WHERE 0 < Q1_count[A]" in text


def test_a_union_adds_terms_to_one_map_per_aggregate():
    """First-order: the branches' sums are one map's definition, each branch's events update it."""
    text = compile_to_text(SHAPES["sum_over_union"])
    assert text.splitlines()[0].startswith("-- view Q1: first-order"), text.splitlines()[0]
    program = compile_sql(SHAPES["sum_over_union"])
    s = next(m for m in program.maps if m.name == "Q1_s")
    assert {a.name for a in program.maps if a.name.startswith("Q1_")} == {"Q1_s", "Q1_n"}
    assert {a.name for a in walk(s.definition) if isinstance(a, RelAtom)} == {"R", "S"}


@pytest.mark.parametrize("sql, message", [
    (GENERIC + "SELECT a FROM R UNION SELECT b FROM S UNION ALL SELECT d FROM T", "unsupported UNION (SELECT a"),
    (GENERIC + "SELECT a FROM R INTERSECT ALL SELECT b FROM S INTERSECT SELECT d FROM T",
     "unsupported INTERSECT ALL beside INTERSECT in one statement"),
    (GENERIC + "SELECT a FROM R EXCEPT SELECT b FROM S UNION SELECT d FROM T",
     "unsupported EXCEPT (SELECT a FROM R EXCEPT SELECT b FROM S) here"),
    (GENERIC + "SELECT a FROM R UNION SELECT b FROM S EXCEPT SELECT d FROM T", "unsupported UNION inside an EXCEPT"),
    (GENERIC + "SELECT a, b FROM R EXCEPT SELECT b FROM S", "EXCEPT branches of view Q1 select 2 and 1 columns"),
    (GENERIC + "SELECT a FROM R INTERSECT SELECT g FROM T", "a INT column beside a STRING one"),
    (GENERIC + "SELECT a, COUNT(*) AS n FROM R GROUP BY a EXCEPT SELECT b FROM S",  # (all aggregated: setagg)
     "unsupported EXCEPT of an aggregated query (SELECT a, COUNT(*) AS n FROM R GROUP BY a) and a view of rows"),
    (GENERIC + "SELECT a, COUNT(*) AS n FROM R GROUP BY a UNION ALL SELECT b FROM S",  # (all aggregated: setagg)
     "unsupported UNION ALL of aggregated queries"),
    (GENERIC + "SELECT DISTINCT a FROM R UNION ALL SELECT b FROM S", "unsupported DISTINCT in a UNION ALL branch"),
    (GENERIC + "SELECT a, b FROM R UNION ALL SELECT b FROM S", "select 2 and 1 columns"),
    (GENERIC + "SELECT a FROM R UNION ALL SELECT g FROM T", "a INT column beside a STRING one"),
    (GENERIC + "SELECT k, SUM(v) AS s FROM (SELECT a AS k, b AS v FROM R UNION SELECT b, d FROM S) u GROUP BY k",
     "unsupported UNION (SELECT a AS k, b AS v FROM R UNION SELECT b, d FROM S) here"),
])
def test_unsupported_unions_are_refused_by_name(sql, message):
    with pytest.raises(CompileError, match=re.escape(message)):
        compile_sql(sql)


@pytest.mark.parametrize("shape", ["rows_union", "rows_set_union", "except_chain", "intersect_all_rows",
                                   "except_all_chain",
                                   pytest.param("avg_max_distinct_over_union", marks=pytest.mark.slow)])
@pytest.mark.parametrize("backend", ["python", "auto"])
def test_changes_rebuild_the_view(shape, backend):
    """The rows ``changes()`` reports after each batch, applied in order, rebuild the view (both backends)."""
    changes_rebuild_view(SHAPES[shape], backend)
