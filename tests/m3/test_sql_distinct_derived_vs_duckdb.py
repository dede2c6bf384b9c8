"""A DISTINCT derived table agrees with DuckDB after every batch of inserts and deletes.

``(SELECT DISTINCT cols FROM ... WHERE ...) t`` is ``(SELECT cols FROM ... WHERE ... GROUP BY cols) t``
(``m3/compiler/distinctgroup.py``), then read by the rules for grouped derived tables: joined with relations
on its columns (``*`` over the join, its columns selected, the joined rows aggregated), or aggregated alone.
Random workloads over small domains (``m3_harness``), both backends: every view equals DuckDB's after every
batch, every map its definition, deleting every row empties every map.
"""

from __future__ import annotations

import pytest
from m3_harness import check_against_duckdb, shape_params

GENERIC = """
CREATE STREAM R(a INT, b INT, c DOUBLE);
CREATE STREAM S(b INT, d INT, e DOUBLE);
"""

SHAPES: dict[str, str] = {
    "distinct_derived_joined_star": GENERIC + """SELECT * FROM (SELECT DISTINCT S.b FROM S WHERE S.d = 1) d
        JOIN R r ON d.b = r.b""",
    "distinct_derived_two_columns_joined": GENERIC + """SELECT r.a, d.b FROM (SELECT DISTINCT S.b, S.d FROM S
        WHERE S.e > 0) d, R r WHERE d.b = r.b AND d.d = r.a""",
    "distinct_derived_counted": GENERIC + "SELECT COUNT(*) AS n FROM (SELECT DISTINCT S.b FROM S) d",
    "distinct_derived_joined_sum": GENERIC + """SELECT r.a, SUM(r.c) AS s FROM (SELECT DISTINCT S.b FROM S
        WHERE S.d > 0) d, R r WHERE d.b = r.b GROUP BY r.a""",
    "distinct_derived_summed": GENERIC + "SELECT SUM(x) AS s FROM (SELECT DISTINCT a AS x, c FROM R WHERE b > 1) t",
    "distinct_derived_alone": GENERIC + "SELECT d.b FROM (SELECT DISTINCT S.b FROM S) d WHERE d.b > 0",
}


@pytest.mark.parametrize("shape", shape_params(SHAPES))
def test_view_matches_duckdb(shape):
    check_against_duckdb(SHAPES[shape])
