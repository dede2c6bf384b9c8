"""A grouped derived table rolling up another of the same FROM agrees with DuckDB after every batch.

``FROM (... GROUP BY a, b) p, (... GROUP BY a) n WHERE p.a = n.a`` over the same FROM and WHERE: every row of
``p`` meets exactly one of ``n``, so ``n``'s aggregates are nested aggregates correlated on ``p``'s keys
(``m3/compiler/rollup.py``; TPC-H Q11's shape).  Random workloads over small domains (``m3_harness``), both
backends: every view equals DuckDB's after every batch, every map its definition, deleting every row empties
every map.
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

PER_AB = "(SELECT R.a, R.b, SUM(R.c) AS v FROM R WHERE R.c > 0 GROUP BY R.a, R.b) p"
PER_A = "(SELECT R.a, SUM(R.c) AS w, COUNT(*) AS k FROM R WHERE R.c > 0 GROUP BY R.a) n"
JOIN_AB = "(SELECT R.a, S.d, SUM(R.c * S.e) AS v FROM R, S WHERE R.b = S.b GROUP BY R.a, S.d) p"
JOIN_A = "(SELECT R.a FROM R, S WHERE R.b = S.b GROUP BY R.a) n"

SHAPES: dict[str, str] = {
    "share_of_the_total": GENERIC + f"""SELECT p.a, SUM(p.v) AS s FROM {PER_AB}, {PER_A}
        WHERE p.a = n.a AND p.v > 0.5 * n.w GROUP BY p.a""",
    "count_of_the_coarser_group": GENERIC + f"""SELECT p.b, COUNT(*) AS m FROM {PER_A}, {PER_AB}
        WHERE n.a = p.a AND n.k > 1 GROUP BY p.b""",
    "rows_view": GENERIC + f"SELECT p.a, p.b FROM {PER_AB}, {PER_A} WHERE p.a = n.a AND p.v * 2 >= n.w",
    "join_body_group_only_read_in_a_subquery": GENERIC + f"""SELECT p.a, p.d, SUM(p.v) AS s FROM {JOIN_AB}, {JOIN_A}
        WHERE p.a = n.a AND (SELECT SUM(R.c * S.e) FROM R, S WHERE R.b = S.b AND R.a = p.a AND S.d = p.d)
        > 0.25 * (SELECT SUM(R.c * S.e) FROM R, S WHERE R.b = S.b AND R.a = n.a) GROUP BY p.a, p.d""",
}


@pytest.mark.parametrize("shape", shape_params(SHAPES, fast=1))  # one quick shape: the fast tier is at its limit
def test_view_matches_duckdb(shape):
    check_against_duckdb(SHAPES[shape])


def test_a_grouped_table_with_having_beside_another_is_still_refused():
    """HAVING drops groups of ``n``: not read by value.  (Without it, ``n`` beside ``p`` joined on its group
    column is a lookup: tests/m3/test_sql_grouped_lookups_vs_duckdb.py.)"""
    per_a = "(SELECT R.a, SUM(R.c) AS w FROM R WHERE R.c > 0 GROUP BY R.a HAVING SUM(R.c) > 1) n"
    with pytest.raises(CompileError, match="HAVING in a grouped derived table"):
        compile_sql(GENERIC + f"SELECT p.a, SUM(p.v) AS s FROM {PER_AB}, {per_a} WHERE p.a = n.a AND p.v > n.w "
                    "GROUP BY p.a")
