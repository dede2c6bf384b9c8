"""DBToaster's ``COUNT(DISTINCT)`` of no expression (issue 33) agrees with DuckDB's ``COUNT(DISTINCT 1)``.

The distinct tuples of zero expressions are the one empty tuple wherever a group has rows: 1 per group, and 0
without GROUP BY over no rows (``m3/compiler/countnone.py``: ``LEAST(COUNT(*), 1)``).  DuckDB refuses the
spelling, so it reads each SELECT with ``COUNT(DISTINCT 1)``, which means the same.  Random insert/delete
workloads (``m3_harness``), both backends, beside the other COUNTs of the same relation.
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
    "whole_relation": GENERIC + "SELECT COUNT(DISTINCT) AS n, COUNT(*) AS m FROM R",
    "per_group": GENERIC + "SELECT a, COUNT(DISTINCT) AS n, COUNT(DISTINCT b) AS k FROM R GROUP BY a",
    "over_a_join": GENERIC + "SELECT S.d, COUNT(DISTINCT) AS n FROM R, S WHERE R.b = S.b AND R.a > 0 GROUP BY S.d",
}


def as_duckdb(sql: str) -> str:
    return sql.replace("COUNT(DISTINCT)", "COUNT(DISTINCT 1)")


@pytest.mark.parametrize("shape", shape_params(SHAPES))
def test_view_matches_duckdb(shape):
    check_against_duckdb(SHAPES[shape], to_duckdb=as_duckdb)


def test_an_unaliased_count_of_nothing_keeps_counts_name():
    program = compile_sql(GENERIC + "SELECT a, COUNT(DISTINCT) FROM R GROUP BY a")
    assert [c.name for c in program.views[0].columns] == ["count"]
