"""A grouped derived table inside a subquery agrees with DuckDB after every batch of inserts and deletes.

A nested SELECT whose aggregate of a grouped derived table is an aggregate of its rows, or which reads only
its groups (all of its group columns selected, its WHERE a HAVING), is that one query
(``m3/compiler/subregroup.py``, the rule of ``m3/compiler/regroup.py`` applied below the outermost SELECT):
TPC-H Q18 written with its HAVING as a derived table's WHERE compiles as Q18.  Random workloads over small
domains (``m3_harness``), both backends: every view equals DuckDB's after every batch, every map its
definition, deleting every row empties every map.
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

SHAPES: dict[str, str] = {
    # IN over the groups of a derived table, its WHERE on an aggregate: Q18's HAVING
    "in_over_grouped_derived": GENERIC + """SELECT R.a, SUM(R.c) AS s FROM R WHERE R.b IN
        (SELECT t.k FROM (SELECT S.b AS k, SUM(S.e) AS v FROM S GROUP BY S.b) t WHERE t.v > 1) GROUP BY R.a""",
    "not_in_over_grouped_derived": GENERIC + """SELECT R.a, COUNT(*) AS n FROM R WHERE R.b NOT IN
        (SELECT t.b FROM (SELECT S.b, COUNT(*) AS m FROM S WHERE S.d > 0 GROUP BY S.b) t WHERE t.m >= 2)
        GROUP BY R.a""",
    "in_over_grouped_derived_rows": GENERIC + """SELECT R.a, R.b FROM R WHERE R.a IN
        (SELECT t.d FROM (SELECT S.d, MIN(S.e) AS lo FROM S GROUP BY S.d) t WHERE t.lo < 1 AND t.d <> 2)""",
    # a scalar subquery's SUM of a derived table's SUM: the SUM of the rows
    "scalar_sum_of_grouped_derived": GENERIC + """SELECT R.a, SUM(R.c) AS s FROM R WHERE R.c >
        (SELECT SUM(t.v) FROM (SELECT S.b, SUM(S.e) AS v FROM S GROUP BY S.b) t WHERE t.b > 0) GROUP BY R.a""",
    # the outermost SELECT reading only the groups: a WHERE on group columns stays a WHERE, the rest a HAVING
    "groups_where_on_group_column_and_aggregate": GENERIC + """SELECT t.a, t.s FROM (SELECT R.a, SUM(R.c) AS s
        FROM R GROUP BY R.a) t WHERE t.s > 0 AND t.a <> 1 AND (t.a < 3 OR t.s < 2)""",
    # the derived table in a join of the outer query's relations (TPC-H Q18's full shape)
    "in_over_grouped_derived_joined": GENERIC + """SELECT R.a, S.d, SUM(S.e) AS q FROM R, S WHERE R.b = S.b
        AND R.a IN (SELECT t.k FROM (SELECT r2.a AS k, SUM(r2.c) AS v FROM R r2 GROUP BY r2.a) t WHERE v > 1)
        GROUP BY R.a, S.d""",
}


@pytest.mark.parametrize("shape", shape_params(SHAPES))
def test_view_matches_duckdb(shape):
    check_against_duckdb(SHAPES[shape])


def test_a_subquery_over_some_of_the_groups_is_still_refused_by_name():
    """Selecting fewer than the derived table's group columns reads its values, one per group: not rewritten."""
    with pytest.raises(CompileError, match="derived table with aggregates"):
        compile_sql(GENERIC + """SELECT R.a FROM R WHERE R.b IN (SELECT t.b FROM (SELECT S.b, S.d, MAX(S.e) AS v
            FROM S GROUP BY S.b, S.d) t WHERE t.v > 1)""")
