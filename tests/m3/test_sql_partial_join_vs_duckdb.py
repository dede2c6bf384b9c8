"""A grouped derived table joined with relations on some of its group columns (or none) agrees with DuckDB.

Each row of the relations pairs with every group of the derived table at its joined columns; the view ranges
over those pairs, a part of their own (``m3/compiler/liftpairs.py``), each weighted by the relations' row
count, reading the derived table's aggregates at its group (TPC-DS Q34/46/68/73/79's shape: grouped by ticket
and customer, joined with the customer only).  Random workloads over small domains (``m3_harness``), both
backends: every view equals DuckDB's after every batch, every map its definition, deleting every row empties
every map.
"""

from __future__ import annotations

import pytest
from m3_harness import check_against_duckdb, shape_params

GENERIC = """
CREATE STREAM R(a INT, b INT, c DOUBLE);
CREATE STREAM S(b INT, d INT, e DOUBLE);
"""

SHAPES: dict[str, str] = {
    "some_group_columns_rows": GENERIC + """SELECT S.d, t.a, t.n FROM S, (SELECT R.a, R.b, COUNT(*) AS n FROM R
        GROUP BY R.a, R.b) t WHERE S.b = t.b AND t.n >= 2""",
    "some_group_columns_sum": GENERIC + """SELECT S.d, SUM(t.s) AS x FROM S, (SELECT R.a, R.b, SUM(R.c) AS s
        FROM R WHERE R.a > 0 GROUP BY R.a, R.b) t WHERE S.b = t.b GROUP BY S.d""",
    "some_group_columns_grouped_by_inner": GENERIC + """SELECT t.a, COUNT(*) AS k, AVG(S.e) AS m FROM S,
        (SELECT R.a, R.b, COUNT(*) AS n FROM R GROUP BY R.a, R.b) t WHERE S.b = t.b AND S.d < 3 GROUP BY t.a""",
    "range_join_on_group_column": GENERIC + """SELECT r.a FROM R r, (SELECT S.b, COUNT(*) AS n FROM S GROUP BY
        S.b) s2 WHERE r.b < s2.b""",
    "no_group_column_joined": GENERIC + """SELECT S.d, t.a, t.n FROM S, (SELECT R.a, COUNT(*) AS n FROM R GROUP
        BY R.a) t WHERE S.b > 0""",
    "unqualified_names": GENERIC + """SELECT d, t.a, n FROM S, (SELECT a, b, COUNT(*) AS n FROM R GROUP BY a, b) t
        WHERE S.b = t.b AND n > 1""",
}


@pytest.mark.parametrize("shape", shape_params(SHAPES))
def test_view_matches_duckdb(shape):
    check_against_duckdb(SHAPES[shape])


def test_pairs_of_too_many_relations_are_refused_naming_the_cost():
    """A derived table of five relations joined with three more on one of its group columns: refused, saying why
    (at most 7: ``liftpairs.MAX_RELATIONS``)."""
    from boreas.m3 import compile_sql
    from boreas.m3.errors import CompileError

    decls = "".join(f"CREATE STREAM T{i}(k INT, v INT);\n" for i in range(8))
    with pytest.raises(CompileError, match="pairs join 8 relations"):
        compile_sql(decls + """SELECT T5.v, T6.v, t.g, t.n FROM (SELECT T0.k, T0.v AS g, COUNT(*) AS n
            FROM T0, T1, T2, T3, T4 WHERE T0.k = T1.k AND T1.k = T2.k AND T2.k = T3.k AND T3.k = T4.k
            GROUP BY T0.k, T0.v) t, T5, T6, T7 WHERE t.k = T5.k AND T5.v = T6.k AND T6.v = T7.k""")


def test_the_cost_line_names_the_pairs_view_domain_bound():
    """``boreas compile`` prints the view's cost class: it reads the pairs' groups and re-reads every row."""
    from boreas.m3 import compile_to_text

    first = compile_to_text(SHAPES["some_group_columns_rows"]).splitlines()[0]
    assert first.startswith("-- view Q1: domain-bound: an aggregate of a grouped derived table's values"), first
    assert "re-reads every row" in first
