"""``(SELECT agg ...) IN (SELECT c ...)`` (issue 33; DBToaster's ``simple/invalid_schema_fn`` shape) agrees with DuckDB
on both backends, under random inserts and deletes: the front end reads it as ``EXISTS (SELECT c ... WHERE w AND
c = (SELECT agg ...))`` (``m3/compiler/valuein.py``), which it compiles as a subquery compared in an EXISTS
subquery's WHERE.  ``NOT IN`` and a correlated value subquery are not rewritten and stay refused."""

from __future__ import annotations

import pytest
from boreas.m3 import CompileError, compile_sql
from m3_harness import check_against_duckdb, shape_params

GENERIC = """
CREATE STREAM R(a INT, b INT);
CREATE STREAM S(c INT, d INT);
"""

SHAPES: dict[str, str] = {
    "count_halved_in": GENERIC + "SELECT r1.a FROM R r1 WHERE (SELECT COUNT(*) / 2 FROM R) IN (SELECT r3.a FROM R r3)",
    "sum_in_a_filtered_subquery": GENERIC + "SELECT r.a, SUM(r.b) AS s FROM R r WHERE (SELECT SUM(s.d) FROM S s) IN "
                                            "(SELECT s2.c FROM S s2 WHERE s2.d > 0) GROUP BY r.a",
    "max_in_another_relation": GENERIC + "SELECT COUNT(*) AS n FROM R WHERE (SELECT MAX(d) FROM S) IN (SELECT b FROM R)",
}


@pytest.mark.parametrize("shape", shape_params(SHAPES, fast=1))
def test_view_matches_duckdb(shape):
    check_against_duckdb(SHAPES[shape])


@pytest.mark.parametrize("sql", [
    "SELECT r1.a FROM R r1 WHERE NOT (SELECT COUNT(*) FROM S) IN (SELECT r3.a FROM R r3)",
    "SELECT r1.a FROM R r1 WHERE (SELECT SUM(s.d) FROM S s WHERE s.c = r1.b) IN (SELECT r3.a FROM R r3)",
])
def test_not_in_and_correlated_values_stay_refused(sql):
    with pytest.raises(CompileError, match="IN"):
        compile_sql(GENERIC + sql)
