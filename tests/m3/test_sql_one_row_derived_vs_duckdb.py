"""A derived table of aggregates without GROUP BY (one row) agrees with DuckDB after every batch.

Such a table has exactly one row, so its columns are scalar subqueries (``m3/compiler/onerow.py``): read in
WHERE, inside an aggregate, alone (``SELECT * FROM (SELECT COUNT(*) ...) t``: a query without FROM), or
correlated inside EXISTS (``EXISTS (SELECT 1 FROM (SELECT SUM(b) AS x FROM S WHERE S.d = R.b) t WHERE R.a <
t.x)``: the comparison itself).  Random workloads over small domains (``m3_harness``), both backends: every
view equals DuckDB's after every batch, every map its definition, deleting every row empties every map.
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
    "one_row_compared_in_where": GENERIC + """SELECT R.a, SUM(R.c) AS s FROM R, (SELECT SUM(S.e) AS x FROM S
        WHERE S.d > 0) t WHERE R.c > t.x GROUP BY R.a""",
    "one_row_inside_sum": GENERIC + """SELECT R.a, SUM(R.c * t.x) AS s FROM R, (SELECT COUNT(*) AS x FROM S) t
        GROUP BY R.a""",
    "one_row_alone_star": GENERIC + "SELECT * FROM (SELECT COUNT(*) AS n, SUM(R.c) AS s FROM R WHERE R.a > 0) t",
    "one_row_alone_arithmetic": GENERIC + "SELECT t.s * 2 + t.n AS v FROM (SELECT SUM(R.c) AS s, COUNT(*) AS n FROM R) t",
    "one_row_correlated_in_exists": GENERIC + """SELECT r1.a, SUM(1) AS n FROM R r1 WHERE EXISTS (SELECT 1 FROM
        (SELECT SUM(r2.b) AS b FROM R r2 WHERE r2.a = r1.b) n1 WHERE r1.a * 3 < n1.b) GROUP BY r1.a""",
    "one_row_count_correlated_in_exists": GENERIC + """SELECT R.a, COUNT(*) AS n FROM R WHERE EXISTS (SELECT 1
        FROM (SELECT COUNT(*) AS k FROM S WHERE S.b = R.b) t WHERE t.k > 1) GROUP BY R.a""",
    # aggregates over a FROM of one-row tables only: each ranges over one row (m3/compiler/singleton.py)
    "aggregates_over_one_row_values": GENERIC + """SELECT SUM(t.x) AS s, MAX(t.x * 2) - MIN(t.k) AS d
        FROM (SELECT SUM(R.c) AS x, COUNT(*) AS k FROM R WHERE R.a > 0) t""",
    "aggregates_over_two_one_row_tables": GENERIC + """SELECT SUM(t.x + u.y) AS s, MIN(u.y) AS n
        FROM (SELECT SUM(R.b) AS x FROM R) t, (SELECT COUNT(*) AS y FROM S WHERE S.d > 1) u""",
    "aggregate_over_one_row_unaliased_in_where": GENERIC + """SELECT R.a, COUNT(*) AS n FROM R WHERE R.b <
        (SELECT MAX(t.x) FROM (SELECT SUM(S.b) AS x FROM S) t) GROUP BY R.a""",
    # COUNT(e) of a column the table computes as a COUNT is 1 (never NULL), its column not read
    "count_of_a_count_column": GENERIC + """SELECT COUNT(t.x) * SUM(t.s) AS v, MAX(t.s) / COUNT(DISTINCT t.x)
        AS w FROM (SELECT COUNT(*) AS x, SUM(R.b) AS s FROM R WHERE R.a > 0) t""",
    # an aggregate of a SELECT without FROM: over its one row when of a constant, else the outer query's
    "fromless_count_times_a_group_sum": GENERIC + """SELECT R.a, SUM(R.b) * (SELECT COUNT(*)) AS x FROM R
        GROUP BY R.a""",
    "fromless_sum_of_one_beside_count": GENERIC + """SELECT R.a, (SELECT SUM(1)) AS x, COUNT(*) AS n FROM R
        GROUP BY R.a""",
    "fromless_count_in_having": GENERIC + """SELECT R.a, COUNT(*) AS n FROM R GROUP BY R.a
        HAVING COUNT(*) > (SELECT COUNT(*))""",
    "fromless_sum_of_an_outer_column": GENERIC + "SELECT R.a, (SELECT SUM(R.b)) AS x FROM R GROUP BY R.a",
}


@pytest.mark.parametrize("shape", shape_params(SHAPES))
def test_view_matches_duckdb(shape):
    check_against_duckdb(SHAPES[shape])


@pytest.mark.parametrize("query", [
    "SELECT AVG(t.x) AS v FROM (SELECT SUM(R.b) AS x FROM R) t",  # a DOUBLE of an INT: not built
    "SELECT COUNT(t.x) AS v FROM (SELECT SUM(R.b) AS x FROM R) t",  # 0 where the SUM is NULL: not built
    "SELECT SUM(t.x) AS v FROM (SELECT SUM(R.b) AS x FROM R) t WHERE t.x > 1",  # zero rows or one
    # (a constant term beside a value read compiles since sqlM: test_sql_keyless_always_vs_duckdb.py)
    # an aggregate of outer columns only is SQL's aggregate of the outer query, not one over the inner row
    "SELECT (SELECT SUM(R.b) FROM (SELECT COUNT(*) AS x FROM S) t) AS m FROM R",
])
def test_aggregates_over_one_row_not_built_are_refused_by_name(query):
    """What :mod:`singleton` leaves as written is refused naming the derived table, as before."""
    with pytest.raises(CompileError, match="derived table with aggregates"):
        compile_sql(GENERIC + query)


def test_constant_aggregates_over_one_row_are_a_constant_view():
    """``SUM(1)``, ``COUNT(*)`` over the one row are 1 whatever R holds (SQL's one row of ``SUM(1)`` over no
    rows is still a row): a constant view, no map at all; unaliased, named as the view names an aggregate."""
    from boreas.m3.ast import Const

    program = compile_sql(GENERIC + "SELECT SUM(1), COUNT(*) AS n FROM (SELECT SUM(1) AS x FROM R) t")
    assert [(c.name, c.expr) for c in program.views[0].columns] == [("sum_1", Const(1)), ("n", Const(1))]
    assert not program.maps


def test_counts_of_a_count_column_are_a_constant_view():
    """``COUNT(t.x)`` of a column the one-row table computes as a COUNT is 1 (a COUNT is never NULL), also
    DISTINCT: alone, a constant view reading no map."""
    from boreas.m3.ast import Const

    program = compile_sql(GENERIC + "SELECT COUNT(t.x) AS n, COUNT(DISTINCT t.x) AS d FROM (SELECT COUNT(*) AS x "
                          "FROM R) t")
    assert [(c.name, c.expr) for c in program.views[0].columns] == [("n", Const(1)), ("d", Const(1))]
    assert not program.maps
