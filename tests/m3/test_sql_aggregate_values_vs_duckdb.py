"""Aggregates of aggregates read by value agree with DuckDB after every batch, on both backends.

The shapes (our own, written after DBToaster's ``r_aggcomparison`` and TPC-H ``query11_2nest_1``/``query11_6``):

* a one-row derived table beside relations under ``*``, its column read unqualified inside a nested aggregate
  (``m3/compiler/onerowstar.py``), a SUM of a SUM subquery nested in WHERE (the sum over the join,
  ``m3/compiler/singleton.py``);
* a view of rows with an uncorrelated scalar subquery in its SELECT list: its rows counted per key, the value
  beside (``m3/compiler/rowvalues.py``);
* the groups of a grouped derived table (or of such a view of rows) selected by a nested condition in its
  WHERE, read by value: an aggregate over them is over their map under that condition, one entry per group
  (``m3/compiler/totaldomain.py``).

Random workloads over small domains (``m3_harness``): every view equals DuckDB's after every batch, every map its
definition, deleting every row empties every map.
"""

from __future__ import annotations

import pytest
from boreas.m3 import compile_sql
from m3_harness import check_against_duckdb, shape_params

GENERIC = """
CREATE STREAM R(a INT, b INT, c DOUBLE);
CREATE STREAM S(b INT, d INT, e DOUBLE);
"""

SHAPES: dict[str, str] = {
    "star_beside_one_row_compared_deeper": GENERIC + """SELECT * FROM R r1, (SELECT SUM(r3.b) AS t FROM R r3) q
        WHERE r1.a > (SELECT SUM(t * s2.b) FROM S s2)""",
    "one_row_column_beside_relation": GENERIC + """SELECT r1.a, q.t FROM R r1, (SELECT COUNT(*) AS t FROM S) q
        WHERE r1.b > 0""",
    "sum_of_sum_in_where": GENERIC + """SELECT R.a, COUNT(*) AS n FROM R WHERE R.b < (SELECT SUM((SELECT
        SUM(s1.b) FROM S s1)) FROM S s2) GROUP BY R.a""",
    "rows_with_an_uncorrelated_sum": GENERIC + "SELECT a, (SELECT SUM(d) FROM S) AS x FROM R",
    "rows_with_a_scalar_value": GENERIC + "SELECT R.a, R.b, (SELECT COUNT(*) FROM S) AS n FROM R WHERE R.a > 0",
    "rows_with_a_value_and_nested_where": GENERIC + """SELECT R.a, (SELECT SUM(S.b) FROM S) * 2 AS s FROM R
        WHERE R.b < (SELECT COUNT(*) FROM S)""",
    "groups_selected_by_nested_where_by_value": GENERIC + """SELECT t.s, COUNT(*) AS n FROM (SELECT R.a,
        SUM(R.b) AS s FROM R WHERE R.b > (SELECT COUNT(*) FROM S) GROUP BY R.a) t GROUP BY t.s""",
    "max_of_groups_selected_by_in": GENERIC + """SELECT MAX(n) AS m FROM (SELECT a, COUNT(*) AS n FROM R
        WHERE b IN (SELECT b FROM S) GROUP BY a) t""",
    "groups_selected_by_exists_by_value": GENERIC + """SELECT n, COUNT(*) AS g FROM (SELECT a, SUM(c) AS n
        FROM R WHERE EXISTS (SELECT 1 FROM S WHERE S.b = R.b) GROUP BY a) t GROUP BY n""",
    "max_of_groups_selected_by_nested_where": GENERIC + """SELECT MAX(t.s) AS m FROM (SELECT R.a, SUM(R.b) AS s
        FROM R WHERE R.b > (SELECT COUNT(*) FROM S) GROUP BY R.a) t""",
    "count_of_groups_selected_by_nested_where": GENERIC + """SELECT COUNT(*) AS n, SUM(t.s) AS z FROM (SELECT
        R.a, SUM(R.b) AS s FROM R WHERE R.b > (SELECT COUNT(*) FROM S) GROUP BY R.a) t WHERE t.s > 1""",
    "groups_selected_by_in_compared_with_correlated_sum": GENERIC + """SELECT p.d, p.b, SUM(p.v) AS q FROM
        (SELECT S.d, R.b, SUM(R.c * R.a) AS v FROM R, S WHERE R.b = S.b AND S.b IN (SELECT r2.b FROM R r2
        WHERE r2.a = 2) GROUP BY R.b, S.d) p WHERE p.v > (SELECT SUM(r3.c) * 0.5 FROM R r3, S s3
        WHERE r3.b = s3.b AND s3.d = p.d) GROUP BY p.d, p.b""",
}


@pytest.mark.parametrize("shape", shape_params(SHAPES))
def test_view_matches_duckdb(shape):
    check_against_duckdb(SHAPES[shape])


def test_an_aggregate_of_outer_columns_only_is_the_inner_querys():
    """``(SELECT SUM(t) FROM S s2)`` with ``t`` the outer one-row table's column is read as DBToaster reads it,
    the SUM over ``S``'s rows of ``t`` (the sum over the join of the two one-row aggregates), where the SQL
    standard (and DuckDB, which then refuses it in WHERE) makes it an aggregate of the outer query."""
    program = compile_sql(GENERIC + """SELECT * FROM R r1, (SELECT SUM(r3.b) AS t FROM R r3) q
        WHERE r1.a > (SELECT SUM(t) FROM S s2)""")
    assert [c.name for c in program.views[0].columns][-2:] == ["t", "count"]


def test_groups_selected_on_two_other_columns_are_refused_by_name():
    """A nested condition on two columns outside the GROUP BY keys the groups' map by both: a COUNT of the
    groups would need one pair per group of two variables, not built (``totaldomain``), so refused by name."""
    from boreas.m3.errors import CompileError

    with pytest.raises(CompileError, match="groups are not one map"):
        compile_sql(GENERIC + """SELECT n, COUNT(*) AS g FROM (SELECT a, SUM(c) AS n FROM R WHERE b < (SELECT
            COUNT(*) FROM S) AND c < (SELECT SUM(e) FROM S) GROUP BY a) t GROUP BY n""")
