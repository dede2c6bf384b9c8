"""Grouped derived tables read by value (issue 33, item 1) agree with DuckDB after every batch, on both backends.

The shapes are our own, written after DBToaster's suite (TPC-DS Q53/63/89's CASE over a grouped derived
table's SUM and AVG): a comparison with a CASE over the derived table's values is the OR of its branches, each
under its conditions (:mod:`boreas.m3.compiler.casecmp`, ``values=True``), whether the query reads the derived
table by value (:mod:`boreas.m3.compiler.liftscope`: a group column not selected, so one output row per
inner group) or it is rewritten into the derived table's HAVING (:mod:`boreas.m3.compiler.viewexpr`).
Random insert/delete batches over small domains (``m3_harness``): every view equals DuckDB's, every map its
definition, deleting every row empties every map.
"""

from __future__ import annotations

import pytest
from boreas.m3 import compile_sql
from m3_harness import check_against_duckdb

#: Every shape runs on both backends (conftest's ``m3_backend``).
BOTH = pytest.mark.parametrize("m3_backend", ["python", "native"], indirect=True)

GENERIC = """
CREATE STREAM R(a INT, b INT, p INT);
CREATE STREAM S(b INT, d INT);
"""

CASES: dict[str, str] = {
    # a group column (d) not selected: the view reads the derived table's groups by value
    "case_over_sum_and_avg_by_value": GENERIC + """SELECT * FROM (SELECT R.a, SUM(R.p) AS s, AVG(R.p) AS m
        FROM R, S WHERE R.b = S.b GROUP BY R.a, S.d) t
        WHERE (CASE WHEN m > 0 THEN (s - m) / m ELSE 0 END) > 0.1""",
    # every group column selected: the outer WHERE is the derived table's HAVING
    "case_over_sum_and_avg_as_having": GENERIC + """SELECT * FROM (SELECT R.a, S.d, SUM(R.p) AS s, AVG(R.p) AS m
        FROM R, S WHERE R.b = S.b GROUP BY R.a, S.d) t
        WHERE (CASE WHEN (m <> 0) THEN ((s - m) / m) ELSE 0 END) > 0.1""",
    "case_with_two_branches_under_not": GENERIC + """SELECT t.a, t.n FROM (SELECT R.a, R.b, COUNT(*) AS n,
        SUM(R.p) AS s FROM R GROUP BY R.a, R.b) t
        WHERE NOT (CASE WHEN n > 1 THEN s WHEN s < 0 THEN n ELSE s - n END <= 1)""",
}


@BOTH
@pytest.mark.parametrize("shape", sorted(CASES))
def test_case_over_grouped_values_matches_duckdb(shape, m3_backend):
    check_against_duckdb(CASES[shape], examples=12)


def test_case_without_else_stays_refused():
    """A CASE without ELSE is NULL where no branch holds, which compares neither true nor false: not expanded."""
    with pytest.raises(Exception, match="CASE"):
        compile_sql(GENERIC + """SELECT * FROM (SELECT R.a, S.d, SUM(R.p) AS s FROM R, S WHERE R.b = S.b
            GROUP BY R.a, S.d) t WHERE (CASE WHEN s > 0 THEN s END) > 1""")


FUNCTIONS: dict[str, str] = {
    # a function of a group column beside the group's aggregates, the derived table joined on one of its groups
    "substring_of_a_group_column_joined": """CREATE STREAM R(a INT, c VARCHAR, p INT);
        CREATE STREAM C(a INT, nm INT);
        SELECT C.nm, SUBSTRING(c, 1, 1) AS s1, t.amt FROM (SELECT R.a, R.c, SUM(R.p) AS amt FROM R GROUP BY R.a, R.c) t, C
        WHERE t.a = C.a""",
    "substring_of_a_group_column_alone": """CREATE STREAM R(a INT, c VARCHAR, p INT);
        SELECT SUBSTRING(c, 2, 1) AS s, n FROM (SELECT R.c, R.a, COUNT(*) AS n FROM R GROUP BY R.c, R.a) t
        WHERE n > 1""",
}


@BOTH
@pytest.mark.parametrize("shape", sorted(FUNCTIONS))
def test_function_of_a_group_column_matches_duckdb(shape, m3_backend):
    check_against_duckdb(FUNCTIONS[shape], examples=12)


NESTED: dict[str, str] = {
    # the distinct per-key counts: a grouped derived table over another's values, only its group column read
    "distinct_counts_of_counts": """CREATE STREAM R(a INT, b INT);
        SELECT t.c FROM (SELECT r.c, COUNT(*) AS k FROM (SELECT R.a, COUNT(*) AS c FROM R GROUP BY R.a) r
        GROUP BY c) t""",
    "distinct_sums_filtered": """CREATE STREAM R(a INT, b INT);
        SELECT s, s AS s2 FROM (SELECT r.s, MAX(r.a) AS top FROM (SELECT R.a, SUM(R.b) AS s FROM R GROUP BY R.a) r
        WHERE r.a > 0 GROUP BY r.s) t WHERE s <> 1""",
}


@BOTH
@pytest.mark.parametrize("shape", sorted(NESTED))
def test_group_columns_of_a_nested_grouped_table_match_duckdb(shape, m3_backend):
    check_against_duckdb(NESTED[shape], examples=12)


def test_a_group_column_not_read_keeps_the_rows_apart():
    """Reading one of two group columns repeats a value per group, which a DISTINCT would merge: left as it
    was (refused, naming the nesting), not rewritten."""
    with pytest.raises(Exception, match="grouped derived table"):
        compile_sql("""CREATE STREAM R(a INT, b INT);
            SELECT t.c FROM (SELECT r.c, r.a, COUNT(*) AS k FROM (SELECT R.a, COUNT(*) AS c FROM R GROUP BY R.a) r
            GROUP BY r.c, r.a) t""")
