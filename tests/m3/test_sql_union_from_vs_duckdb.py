"""Set operations in FROM (and in a CTE) agree with DuckDB after every batch of inserts and deletes, on both backends.

A query over ``A UNION ALL B`` in FROM is the query over each branch, the
outer GROUP BY and WHERE pushed through the branch's column renaming, and
each map's definition the sum of the branches' (:mod:`boreas.m3.compiler.union`):
SUM, COUNT and AVG are sums of the per-branch sums; MIN, MAX, DISTINCT
aggregates and SELECT DISTINCT read one multiplicity map every branch writes
into.  A set ``UNION`` in FROM is read as its UNION ALL where duplicates do
not change the result (MIN, MAX, DISTINCT, GROUP BY without aggregates, a
view of every column of the union: :mod:`boreas.m3.compiler.setunion`) and
refused by name where they do; INTERSECT and EXCEPT in FROM stay refused.
Every view equals DuckDB's, every map its definition, and deleting every row
empties every map.
"""

from __future__ import annotations

import random
import re

import pytest
from boreas.m3 import CompileError, Runtime, compile_sql, compile_to_text
from boreas.m3.ast import RelAtom, walk
from changes_check import changes_rebuild_view
from m3_harness import check_against_duckdb, shape_params

GENERIC = """
CREATE STREAM R(a INT, b INT, c DOUBLE);
CREATE STREAM S(b INT, d INT, e DOUBLE);
CREATE TABLE T(d INT, f INT, g VARCHAR);
"""

#: the brief's union: two relations, their columns renamed to k, v
KV = "(SELECT a AS k, b AS v FROM R UNION ALL SELECT d AS k, b AS v FROM S)"
#: the same as a set union
KV_SET = "(SELECT a AS k, b AS v FROM R UNION SELECT d AS k, b AS v FROM S)"

SHAPES: dict[str, str] = {
    "sum_count_over_union": GENERIC + f"SELECT k, SUM(v) AS s, COUNT(*) AS n FROM {KV} t GROUP BY k",
    "outer_where_over_union_columns": GENERIC + """SELECT k, SUM(v) AS s, COUNT(*) AS n
        FROM (SELECT a AS k, c AS v FROM R UNION ALL SELECT d, e FROM S) t WHERE v > 0 AND k <> 1 GROUP BY k""",
    "branches_with_joins_and_where_outer_or": GENERIC + """SELECT g, SUM(x) AS s, COUNT(*) AS n
        FROM (SELECT T.g AS g, R.c AS x FROM R, T WHERE R.a = T.d AND T.f < 3
              UNION ALL SELECT T.g, S.e FROM S, T WHERE S.d = T.d AND S.b <> 1) u WHERE x > 0 OR g = 'A' GROUP BY g""",
    "min_max_over_union_with_where": GENERIC + f"""SELECT k, MIN(v) AS lo, MAX(v) AS hi
        FROM {KV} t WHERE v <> 2 GROUP BY k""",
    "avg_over_union_without_group_by": GENERIC + """SELECT AVG(v) AS m, SUM(v) AS s, COUNT(*) AS n
        FROM (SELECT c AS v FROM R WHERE a > 0 UNION ALL SELECT e FROM S) t""",
    "avg_and_count_distinct_over_union": GENERIC + f"""SELECT k, AVG(v) AS m, COUNT(DISTINCT v) AS nd,
        SUM(DISTINCT v) AS sd FROM {KV} t GROUP BY k""",
    "select_distinct_over_union": GENERIC + f"SELECT DISTINCT k FROM {KV} t WHERE v > 0",
    "having_over_union": GENERIC + f"""SELECT k, SUM(v) AS s FROM {KV} t GROUP BY k
        HAVING COUNT(*) > 1 AND MAX(v) < 3""",
    "rows_over_union": GENERIC + f"SELECT k, v FROM {KV} t WHERE v > 1",
    # a SELECT DISTINCT derived table over the union is its GROUP BY (m3/compiler/distinctgroup.py)
    "sum_over_distinct_rows_of_union": GENERIC + f"SELECT k, SUM(v) AS s FROM (SELECT DISTINCT k, v FROM {KV} t) x "
                                                 "GROUP BY k",
    "cte_union_with_where": GENERIC + f"""WITH t AS {KV}
        SELECT k, SUM(v) AS s, COUNT(*) AS n, MAX(v) AS hi FROM t WHERE k < 3 GROUP BY k""",
    "same_relation_in_two_branches": GENERIC + """SELECT k, COUNT(*) AS n, MAX(v) AS hi, SUM(v) AS s
        FROM (SELECT a AS k, b AS v FROM R UNION ALL SELECT b, a FROM R WHERE c > 0) t GROUP BY k""",
    "union_joined_with_relation": GENERIC + f"""SELECT tt.g, MAX(u.v) AS hi, COUNT(*) AS n
        FROM {KV} u, T tt WHERE u.k = tt.d GROUP BY tt.g""",
    "three_branches_in_cte_rows": GENERIC + """WITH t AS (SELECT a AS k FROM R UNION ALL SELECT d FROM S
                                   UNION ALL SELECT f FROM T WHERE g <> 'A')
        SELECT k FROM t WHERE k > 0""",
    "distinct_branch_under_max": GENERIC + """SELECT k, MAX(v) AS hi, COUNT(DISTINCT v) AS nd
        FROM (SELECT DISTINCT a AS k, b AS v FROM R UNION ALL SELECT d, b FROM S) t GROUP BY k""",
    # a derived table of rows over the union (also a CTE reading a CTE): the union of it over each branch
    "derived_rows_over_union": GENERIC + f"""SELECT k, SUM(v) AS s, COUNT(*) AS n
        FROM (SELECT t.k, t.v FROM {KV} t WHERE t.v > 0) x GROUP BY k""",
    "cte_chain_over_union": GENERIC + f"""WITH u AS {KV}, w AS (SELECT k, v FROM u WHERE k <> 1)
        SELECT k, SUM(v) AS s, MAX(v) AS hi FROM w GROUP BY k""",
    "grouped_cte_over_union": GENERIC + f"""WITH g AS (SELECT k, SUM(v) AS v FROM {KV} t GROUP BY k)
        SELECT SUM(v) AS s, MAX(v) AS hi FROM g""",
    # a set UNION in FROM where duplicates do not change the result: read as its UNION ALL
    "set_union_min_max_count_distinct": GENERIC + f"""SELECT k, MIN(v) AS lo, MAX(v) AS hi,
        COUNT(DISTINCT v) AS nd FROM {KV_SET} t WHERE v < 3 GROUP BY k HAVING MAX(v) > 0""",
    "set_union_select_distinct": GENERIC + f"SELECT DISTINCT v FROM {KV_SET} t WHERE k <> 2",
    "set_union_group_by_without_aggregates": GENERIC + f"SELECT k FROM {KV_SET} t GROUP BY k",
    "set_union_rows_of_every_column": GENERIC + f"SELECT v, k FROM {KV_SET} t WHERE v > 0",
    "set_union_over_union_all_in_cte_star": GENERIC + """WITH t AS (SELECT a AS k, b AS v FROM R
            UNION ALL SELECT d, b FROM S UNION SELECT d, f FROM T) SELECT * FROM t""",
    "set_union_under_derived_rows_max": GENERIC + f"""SELECT k, MAX(v) AS hi
        FROM (SELECT k, v FROM {KV_SET} t WHERE k <> 1) x GROUP BY k""",
}


@pytest.mark.parametrize("shape", shape_params(SHAPES))
def test_view_matches_duckdb(shape):
    check_against_duckdb(SHAPES[shape])


def _relations_of(program) -> dict[str, set[str]]:
    return {m.name: {a.name for a in walk(m.definition) if isinstance(a, RelAtom)} for m in program.maps}


def test_a_linear_aggregate_is_the_sum_of_the_branches_first_order():
    """SUM and COUNT over the union: one map each, defined over both branches' relations, first-order."""
    sql = SHAPES["sum_count_over_union"]
    assert compile_to_text(sql).splitlines()[0].startswith("-- view Q1: first-order"), compile_to_text(sql)
    assert _relations_of(compile_sql(sql)) == {"Q1_s": {"R", "S"}, "Q1_n": {"R", "S"}}


def test_min_max_over_a_set_union_share_one_multiplicity_map():
    """MIN, MAX and COUNT DISTINCT over a set UNION read one multiplicity map keyed by the value, which both
    branches write into; the cost class is the fold's."""
    sql = SHAPES["set_union_min_max_count_distinct"]
    first = compile_to_text(sql).splitlines()[0]
    assert first.startswith("-- view Q1: domain-bound: MIN over Q1_lo"), first
    maps = _relations_of(compile_sql(sql))
    assert maps["Q1_lo"] == {"R", "S"} and all(rels == {"R", "S"} for rels in maps.values()), maps


def test_a_view_of_every_column_of_a_set_union_holds_each_row_once():
    text = compile_to_text(SHAPES["set_union_rows_of_every_column"])
    assert text.splitlines()[0].startswith("-- view Q1: first-order"), text
    rt = Runtime(compile_sql(SHAPES["set_union_rows_of_every_column"]), backend="python")
    rt.apply_batch([("R", 1, (1, 2, 0.5)), ("R", 1, (1, 2, 0.5)), ("S", 1, (2, 1, 0.5)), ("S", 1, (7, 3, 0.0))])
    assert rt.view("Q1") == {(2, 1): 1, (7, 3): 1}  # (v, k) = (2, 1) from both branches, shown once
    rt.apply_batch([("R", -1, (1, 2, 0.5)), ("R", -1, (1, 2, 0.5))])
    assert rt.view("Q1") == {(2, 1): 1, (7, 3): 1}  # S still has it
    rt.apply_batch([("S", -1, (2, 1, 0.5))])
    assert rt.view("Q1") == {(7, 3): 1}


@pytest.mark.parametrize("backend", ["python", "auto"])
@pytest.mark.parametrize("shape", ["set_union_min_max_count_distinct", "same_relation_in_two_branches",
                                   "set_union_over_union_all_in_cte_star"])
def test_deleting_every_row_empties_every_map(shape, backend):
    """Random rows in, then all of them out in shuffled batches: no map keeps an entry (both backends)."""
    rng = random.Random(shape)
    rt = Runtime(compile_sql(SHAPES[shape]), backend=backend)
    rows = {"R": lambda: (rng.randint(0, 3), rng.randint(0, 3), rng.randint(-4, 4) / 4),
            "S": lambda: (rng.randint(0, 3), rng.randint(0, 3), rng.randint(-4, 4) / 4),
            "T": lambda: (rng.randint(0, 3), rng.randint(0, 3), rng.choice(["A", "B"]))}
    live = [(rel, rows[rel]()) for rel in rng.choices(sorted(rows), k=60)]
    rt.apply_batch([(rel, 1, row) for rel, row in live])
    assert rt.entries() > 0
    rng.shuffle(live)
    for i in range(0, len(live), 7):
        rt.apply_batch([(rel, -1, row) for rel, row in live[i:i + 7]])
    assert rt.entries() == 0 and all(not rows for rows in rt.view("Q1").values())


@pytest.mark.parametrize("sql, message", [
    (GENERIC + f"SELECT k, SUM(v) AS s FROM {KV_SET} t GROUP BY k",
     "unsupported UNION (SELECT a AS k, b AS v FROM R UNION SELECT d AS k, b AS v FROM S) here, under SUM(v): a set "
     "union removes duplicate rows, which SUM counts"),
    (GENERIC + f"SELECT k, MAX(v) AS hi FROM {KV_SET} t GROUP BY k HAVING COUNT(*) > 1",
     "here, under COUNT(*): a set union removes duplicate rows, which COUNT counts"),
    (GENERIC + f"SELECT AVG(v) AS m FROM {KV_SET} t", "here, under AVG(v)"),
    (GENERIC + f"SELECT k FROM {KV_SET} t", "here, under SELECT k FROM (SELECT a AS k, b AS v FROM R UNION SELECT "
     "d AS k, b AS v FROM S) AS t: a view of rows counts each row"),
    (GENERIC + f"SELECT t.k, t.v FROM {KV_SET} t, T WHERE t.k = T.f", "a view of rows counts each row"),
    (GENERIC + "SELECT k FROM (SELECT a AS k FROM R UNION SELECT d FROM S UNION ALL SELECT f FROM T) t",
     "unsupported UNION (SELECT a AS k FROM R UNION SELECT d FROM S) here"),
    (GENERIC + "SELECT k, COUNT(*) AS n FROM (SELECT DISTINCT a AS k FROM R UNION ALL SELECT d FROM S) t GROUP BY k",
     "unsupported DISTINCT in a UNION ALL branch in FROM (SELECT DISTINCT a AS k FROM R) under COUNT(*)"),
    (GENERIC + "SELECT k, SUM(v) AS s FROM (SELECT a AS k, SUM(b) AS v FROM R GROUP BY a "
     "UNION ALL SELECT d, b FROM S) t GROUP BY k",
     "unsupported aggregated UNION ALL branch in FROM (SELECT a AS k, SUM(b) AS v FROM R GROUP BY a)"),
    (GENERIC + "SELECT k, COUNT(*) AS n FROM (SELECT a AS k FROM R INTERSECT SELECT d FROM S) t GROUP BY k",
     "unsupported INTERSECT (SELECT a AS k FROM R INTERSECT SELECT d FROM S) here: INTERSECT and EXCEPT only as "
     "the statement"),
    (GENERIC + "WITH t AS (SELECT a AS k FROM R EXCEPT ALL SELECT d FROM S) SELECT k, MAX(k) AS m FROM t GROUP BY k",
     "unsupported EXCEPT (SELECT a AS k FROM R EXCEPT ALL SELECT d FROM S) here"),
    (GENERIC + f"SELECT k, SUM(v) AS s FROM (SELECT k, v FROM {KV_SET} t WHERE v > 0) x GROUP BY k",
     "unsupported UNION (SELECT a AS k, b AS v FROM R UNION SELECT d AS k, b AS v FROM S) here, under SUM(v)"),
    (GENERIC + "SELECT k, SUM(v) AS s FROM (SELECT a AS k, b AS v FROM R UNION ALL SELECT g, f FROM T) t GROUP BY k",
     "UNION ALL branches of view Q1: a INT column beside a STRING one"),
])
def test_what_stays_unsupported_is_refused_by_name(sql, message):
    with pytest.raises(CompileError, match=re.escape(message)):
        compile_sql(sql)


@pytest.mark.parametrize("shape", ["set_union_rows_of_every_column", "min_max_over_union_with_where",
                                   pytest.param("having_over_union", marks=pytest.mark.slow)])
@pytest.mark.parametrize("backend", ["python", "auto"])
def test_changes_rebuild_the_view(shape, backend):
    """The rows ``changes()`` reports after each batch, applied in order, rebuild the view (both backends)."""
    changes_rebuild_view(SHAPES[shape], backend)
