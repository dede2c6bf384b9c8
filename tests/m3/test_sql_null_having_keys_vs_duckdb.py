"""A nullable group key read by its own name in HAVING, over an outer join and over one relation, agrees with
DuckDB under random NULL-heavy inserts and deletes; a name two FROM items hold is refused as ambiguous, as DuckDB
refuses it (issue 33, docs/m3.md "Outer joins").  Both backends; deleting every row empties every map."""

from __future__ import annotations

import pytest
from boreas.m3 import CompileError, compile_sql
from m3_harness import shape_params
from null_harness import check_rows_against_duckdb

NULLABLE = """
CREATE STREAM R(a INT, b INT NULL, c FLOAT NULL);
CREATE STREAM S(b INT NULL, d INT);
"""

SHAPES: dict[str, str] = {
    "left_key_by_its_name": NULLABLE + """SELECT r.b, COUNT(*) AS n, SUM(s.d) AS t FROM R r LEFT JOIN S s
        ON r.b = s.b GROUP BY r.b HAVING r.b IS NULL OR r.b > 0;
        SELECT r.b, r.a, COUNT(*) AS n FROM R r LEFT JOIN S s ON r.b = s.b GROUP BY r.b, r.a
        HAVING NOT (r.b IS NULL) AND a > 0""",
    "right_key_and_one_relation": NULLABLE + """SELECT s.b, COUNT(*) AS n FROM R r RIGHT JOIN S s ON r.b = s.b
        GROUP BY s.b HAVING s.b IS NOT NULL AND COUNT(*) > 1;
        SELECT r.b, COUNT(*) AS n FROM R r GROUP BY r.b HAVING r.b IS NULL OR NOT (r.b <= 0);
        SELECT b, SUM(a) AS t FROM R GROUP BY b HAVING b = 1 OR b IS NULL""",
}


@pytest.mark.parametrize("shape", shape_params(SHAPES))
def test_view_matches_duckdb(shape):
    check_rows_against_duckdb(SHAPES[shape], examples=8)


@pytest.mark.parametrize("query", [
    "SELECT r.b, COUNT(*) AS n FROM R r LEFT JOIN S s ON r.b = s.b GROUP BY r.b HAVING b IS NULL",
    "SELECT r.a AS b, COUNT(*) AS n FROM R r LEFT JOIN S s ON r.b = s.b GROUP BY r.a HAVING b > 1",
])
def test_a_name_both_relations_hold_is_refused_as_ambiguous(query):
    """DuckDB: "Ambiguous reference to column name b"; read silently as ``r.b`` before sqlM."""
    with pytest.raises(CompileError, match="ambiguous column b"):
        compile_sql(NULLABLE + query + ";")


def test_a_nullable_key_beside_a_nullable_aggregate_in_one_comparison_is_refused_by_name():
    with pytest.raises(CompileError, match="in HAVING beside"):
        compile_sql(NULLABLE + "SELECT b, SUM(c) AS t FROM R GROUP BY b HAVING b < SUM(c);")
