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
}


@pytest.mark.parametrize("shape", shape_params(SHAPES))
def test_view_matches_duckdb(shape):
    check_against_duckdb(SHAPES[shape])


def test_aggregates_over_the_one_row_alone_are_still_refused_by_name():
    """``SELECT SUM(1) FROM (SELECT SUM(1) FROM R) t`` aggregates one row: left as written, refused by name."""
    with pytest.raises(CompileError, match="derived table with aggregates"):
        compile_sql(GENERIC + "SELECT SUM(1) AS s FROM (SELECT SUM(1) AS x FROM R) t")
