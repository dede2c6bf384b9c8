"""Subqueries nested in subqueries whose condition reads only the correlation columns (issue 33) agree with DuckDB after every batch of inserts and deletes, on both backends.

Such a condition is the outer row's (:mod:`boreas.m3.compiler.hoist`): it
moves out of the middle subquery with the middle columns replaced by the
outer columns they equal, and the query is a nested query one level less deep
(:mod:`boreas.m3.compiler.nested`).  Shapes: TPC-H Q18's (a SUM subquery
holding a comparison with a SUM subquery on the same key), a MAX subquery
holding an EXISTS, an IN subquery holding a comparison, an EXISTS holding an
IN, and three levels.  Every view equals DuckDB's, every map its definition,
and deleting every row empties every map.
"""

from __future__ import annotations

import re

import pytest
from boreas.m3 import CompileError, compile_to_text
from changes_check import changes_rebuild_view
from m3_harness import Harness, check_against_duckdb, shape_params

SCHEMA = """
CREATE STREAM R(a INT, b INT);
CREATE STREAM S(a INT, c INT);
CREATE STREAM T(d INT, f INT);
"""

SHAPES: dict[str, str] = {
    "q18_shape": SCHEMA + """SELECT r1.b, SUM(r1.a) AS s FROM R r1, S s0 WHERE s0.a = r1.b
        AND 1 <= (SELECT SUM(1) FROM R r2 WHERE r1.a = r2.a
                  AND 2 < (SELECT SUM(r3.b) FROM R r3 WHERE r2.a = r3.a)) GROUP BY r1.b""",
    "max_holding_exists": SCHEMA + """SELECT r.a, r.b FROM R r WHERE r.b < (SELECT MAX(s.c) FROM S s
        WHERE s.a = r.a AND EXISTS (SELECT 1 FROM T t WHERE t.d = s.a))""",
    "in_holding_comparison": SCHEMA + """SELECT r.a, COUNT(*) AS n FROM R r WHERE r.a IN (SELECT s.a FROM S s
        WHERE s.c = r.b AND 0 < (SELECT SUM(t.f) FROM T t WHERE t.d = s.c)) GROUP BY r.a""",
    "exists_holding_in": SCHEMA + """SELECT SUM(r.b) AS s FROM R r WHERE EXISTS (SELECT 1 FROM S s
        WHERE s.a = r.a AND s.a IN (SELECT t.f FROM T t WHERE t.d > 0))""",
    "three_levels": SCHEMA + """SELECT r.a FROM R r WHERE r.b >= (SELECT SUM(s.c) FROM S s WHERE s.a = r.a
        AND 1 < (SELECT SUM(t.f) FROM T t WHERE t.d = s.a
                 AND 0 < (SELECT SUM(r3.b) FROM R r3 WHERE r3.a = t.d)))""",
    # NOT EXISTS is not hoisted (no rows make it true): the nested EXISTS reads it one level down as before
    "not_exists_kept_nested": SCHEMA + """SELECT r.a FROM R r WHERE NOT EXISTS (SELECT 1 FROM S s WHERE s.a = r.a
        AND 1 < (SELECT SUM(t.f) FROM T t WHERE t.d = s.a))""",
}


@pytest.mark.parametrize("shape", shape_params(SHAPES))
def test_view_matches_duckdb(shape):
    check_against_duckdb(SHAPES[shape])


L_SCHEMA = "CREATE STREAM L(k INT, q INT);\n"
# the reviewer's rows: L(k, q) = (1, 5), (2, 1), (1, 2)
L_ROWS = [[("ins", "L", (1, 5)), ("ins", "L", (2, 1)), ("ins", "L", (1, 2))]]


def test_a_deeper_scope_rebinding_the_middle_alias_is_not_hoisted():
    """``FROM L l3, L l2`` deeper down reads its own ``l2``: hoisted, its ``l2.k`` became ``l1.k`` (a regression:
    {(1, 5), (1, 2)}, DuckDB all three rows)."""
    sql = L_SCHEMA + """SELECT l1.k, l1.q FROM L l1 WHERE EXISTS (SELECT 1 FROM L l2 WHERE l2.k = l1.k
        AND 6 < (SELECT SUM(l3.q) FROM L l3, L l2 WHERE l3.k = l2.k))"""
    Harness(sql).run(L_ROWS)


@pytest.mark.parametrize("sql", [
    # a COUNT of no rows is 0, which compares true here: the deeper condition is not the outer row's
    SCHEMA + """SELECT r.a FROM R r WHERE 0 = (SELECT COUNT(*) FROM S s WHERE s.a = r.a
        AND 1 < (SELECT SUM(t.f) FROM T t WHERE t.d = s.a))""",
    # GREATEST of no rows' NULL SUM and 0 is 0 (the reviewer's rows: hoisted, no row; DuckDB (2, 1))
    L_SCHEMA + """SELECT l1.k, l1.q FROM L l1 WHERE 0 = (SELECT GREATEST(SUM(l2.q), 0) FROM L l2 WHERE l2.k = l1.k
        AND 6 < (SELECT SUM(l3.q) FROM L l3 WHERE l3.k = l2.k))""",
    SCHEMA + """SELECT r.a FROM R r WHERE 1 = (SELECT COALESCE(MAX(s.c), 1) FROM S s WHERE s.a = r.a
        AND 1 < (SELECT SUM(t.f) FROM T t WHERE t.d = s.a))""",
    # the deeper condition reads a middle column no correlation fixes
    SCHEMA + """SELECT r.a FROM R r WHERE r.b < (SELECT SUM(s.a) FROM S s WHERE s.a = r.a
        AND s.c < (SELECT SUM(t.f) FROM T t WHERE t.d = s.c))""",
])
def test_other_nestings_stay_refused(sql):
    with pytest.raises(CompileError, match="unsupported subquery nested in a subquery"):
        compile_to_text(sql)


def test_in_an_aggregate_holding_a_subquery_stays_refused():
    """An aggregate without GROUP BY has its one row over no rows (IN reads its value): not hoisted, and IN over an
    aggregate is refused as before."""
    with pytest.raises(CompileError, match=re.escape("IN (SELECT ...) must select one column")):
        compile_to_text(SCHEMA + """SELECT r.a FROM R r WHERE r.b IN (SELECT MAX(s.c) FROM S s WHERE s.a = r.a
            AND 1 < (SELECT SUM(t.f) FROM T t WHERE t.d = s.a))""")


def test_exists_of_an_aggregate_holding_a_subquery_is_true():
    """EXISTS of an aggregate without GROUP BY is TRUE whatever the deeper condition (not hoisted: hoisted, it
    would make EXISTS false where the deeper condition fails)."""
    sql = L_SCHEMA + """SELECT l1.k, l1.q FROM L l1 WHERE EXISTS (SELECT COUNT(*) FROM L l2 WHERE l2.k = l1.k
        AND 6 < (SELECT SUM(l3.q) FROM L l3 WHERE l3.k = l2.k))"""
    Harness(sql).run(L_ROWS)


@pytest.mark.parametrize("backend", ["python", "auto"])
def test_changes_rebuild_the_view(backend):
    """The rows ``changes()`` reports after each batch, applied in order, rebuild the view (both backends)."""
    changes_rebuild_view(SHAPES["q18_shape"], backend)
