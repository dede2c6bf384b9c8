"""Several grouped derived tables in one FROM (issue 33) agree with DuckDB after every batch, on both backends.

The shapes are our own, written after DBToaster's finance ``chrissedtrades`` and mddb ``query3`` (grouped
derived tables joined on their group columns, their aggregates read by value): each table beside the first is a
lookup whose aggregates are lifted values at the variables its group columns are equal to
(:mod:`boreas.m3.compiler.liftlookup`).  Two tables over different relations and over one relation twice, in
the SELECT list, WHERE and an outer aggregate, joined through a relation, grouped by a lookup's value, and the
outer GROUP BY naming a selected column another way.  Random insert/delete batches over small domains
(``m3_harness``): every view equals DuckDB's, every map its definition, deleting every row empties every map.
"""

from __future__ import annotations

import pytest
from boreas.m3 import compile_sql
from m3_harness import check_against_duckdb

#: Every shape runs on both backends (conftest's ``m3_backend``).
BOTH = pytest.mark.parametrize("m3_backend", ["python", "native"], indirect=True)

STREAMS = """
CREATE STREAM R(a INT, b INT);
CREATE STREAM S(b INT, d INT);
CREATE STREAM T(a INT, c INT);
"""

SHAPES: dict[str, str] = {
    # two relations' grouped tables joined on the group column, read by value in the SELECT list and WHERE
    "two_relations_by_value": STREAMS + """SELECT x.k, x.s, y.n FROM
        (SELECT R.a AS k, SUM(R.b) AS s FROM R GROUP BY R.a) x,
        (SELECT S.b AS k, COUNT(*) AS n FROM S GROUP BY S.b) y
        WHERE x.k = y.k AND x.s > y.n""",
    # one relation twice (one of them filtered), an outer aggregate of their product per group
    "one_relation_twice_aggregated": STREAMS + """SELECT t1.a, SUM(t1.s * t2.n) AS v, COUNT(*) AS c FROM
        (SELECT a, SUM(b) AS s FROM R GROUP BY a) t1,
        (SELECT a, COUNT(*) AS n FROM R WHERE b > 1 GROUP BY a) t2
        WHERE t1.a = t2.a GROUP BY t1.a""",
    # an aggregate over the whole join, no outer GROUP BY (chrissedtrades' SUM(a.foo + b.foo))
    "sum_over_the_join": STREAMS + """SELECT SUM(x.s + y.m) AS tot, MAX(y.m - x.s) AS gap FROM
        (SELECT R.a AS k, SUM(R.b) AS s FROM R GROUP BY R.a) x,
        (SELECT S.b AS k, MAX(S.d) AS m FROM S GROUP BY S.b) y
        WHERE y.k = x.k""",
    # three tables, one bound through another's key (query3's BondE.t = AngleE.t = ...), grouped by a value
    "three_tables_grouped_by_a_value": STREAMS + """SELECT z.n, SUM(x.s + y.m) AS v FROM
        (SELECT R.a AS k, SUM(R.b) AS s FROM R GROUP BY R.a) x,
        (SELECT S.b AS k, SUM(S.d) AS m FROM S GROUP BY S.b) y,
        (SELECT T.a AS k, COUNT(*) AS n FROM T GROUP BY T.a) z
        WHERE x.k = y.k AND y.k = z.k GROUP BY z.n""",
    # the first table joined with a relation, the second bound by that relation's column
    "joined_through_a_relation": STREAMS + """SELECT T.c, SUM(x.s * y.m) AS v FROM T,
        (SELECT R.a AS k, SUM(R.b) AS s FROM R GROUP BY R.a) x,
        (SELECT S.b AS k, SUM(S.d) AS m FROM S GROUP BY S.b) y
        WHERE T.a = x.k AND y.k = T.a GROUP BY T.c""",
    # the first table finer than the second: grouped by (a, b), the lookup by a alone
    "finer_first_table": STREAMS + """SELECT t1.a, t1.b, t1.n + t2.n AS both_n FROM
        (SELECT a, b, COUNT(*) AS n FROM R GROUP BY a, b) t1,
        (SELECT T.a, COUNT(*) AS n FROM T GROUP BY T.a) t2
        WHERE t1.a = t2.a AND t2.n > 1""",
    # the coarser table written first: the finer one is the first whose variables bind the other
    "coarser_table_written_first": STREAMS + """SELECT t1.a, t1.b, t1.n * t2.n AS prod FROM
        (SELECT T.a, COUNT(*) AS n FROM T GROUP BY T.a) t2,
        (SELECT a, b, COUNT(*) AS n FROM R GROUP BY a, b) t1
        WHERE t2.a = t1.a""",
    # a free group column of the second table: it is the first (its groups the source), the other read at it
    "free_group_column_of_the_second": STREAMS + """SELECT x.k, y.d, x.s FROM
        (SELECT R.a AS k, SUM(R.b) AS s FROM R GROUP BY R.a) x,
        (SELECT S.b AS k, S.d, COUNT(*) AS n FROM S GROUP BY S.b, S.d) y WHERE x.k = y.k""",
    # a rollup over other rows (no WHERE in the coarser table): a group of n may be missing, the join drops p's
    "not_a_rollup_other_rows": """CREATE STREAM R(a INT, b INT, c DOUBLE);
        SELECT p.a, SUM(p.v) AS s FROM (SELECT R.a, R.b, SUM(R.c) AS v FROM R WHERE R.c > 0 GROUP BY R.a, R.b) p,
        (SELECT R.a, SUM(R.c) AS w FROM R WHERE R.b > 1 GROUP BY R.a) n WHERE p.a = n.a AND p.v > n.w
        GROUP BY p.a""",
    # a grouped table whose aggregate reads a one-row derived table (a part that is a plan of its own:
    # lifted.nestable), beside another; COUNT is never NULL, so SQL's value is DBToaster's
    "grouped_table_over_a_one_row_table": STREAMS + """SELECT x.k, SUM(x.v + y.m) AS s FROM
        (SELECT R.a AS k, SUM(R.b * c.n) AS v FROM R, (SELECT COUNT(*) AS n FROM S) c GROUP BY R.a) x,
        (SELECT T.a AS k, SUM(T.c) AS m FROM T GROUP BY T.a) y
        WHERE x.k = y.k GROUP BY x.k""",
    # chrissedtrades' shape: the one-row table's WHERE compares with a scalar subquery
    "one_row_table_with_a_nested_where": STREAMS + """SELECT x.k, SUM(x.v * y.m) AS s FROM
        (SELECT R.a AS k, SUM(R.b) AS v FROM R GROUP BY R.a) x,
        (SELECT T.a AS k, SUM(z.s) AS m FROM (SELECT COUNT(*) AS s FROM S WHERE S.d > (SELECT COUNT(*) FROM R)) z, T
         GROUP BY T.a) y
        WHERE x.k = y.k GROUP BY x.k""",
    # the outer GROUP BY names the selected aggregate column qualified (mddb query2's bucket_id)
    "group_by_a_value_qualified": STREAMS + """SELECT s, COUNT(*) AS n FROM
        (SELECT R.a, SUM(R.b) AS s FROM R GROUP BY R.a) t GROUP BY t.s""",
}


@BOTH
@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_grouped_tables_joined_match_duckdb(shape, m3_backend):
    check_against_duckdb(SHAPES[shape], examples=10)


def test_a_group_column_no_equality_binds_is_refused():
    """``x.b`` and ``y.d`` are equal to nothing, whichever table is first: the join ranges over pairs of both
    tables' groups, which is not built."""
    with pytest.raises(Exception, match="no equality binds"):
        compile_sql(STREAMS + """SELECT x.b, y.d FROM (SELECT R.a AS k, R.b, SUM(R.b) AS s FROM R GROUP BY R.a, R.b) x,
            (SELECT S.b AS k, S.d, COUNT(*) AS n FROM S GROUP BY S.b, S.d) y WHERE x.k = y.k""")


def test_a_part_keyed_by_an_inner_value_stays_refused():
    """``x`` groups by another table's SUM: its groups are values a view would have to iterate (a lifted key,
    DBToaster's domain maintenance), so it is not a part of the view beside ``y``."""
    with pytest.raises(Exception, match="one level of aggregates of aggregates"):
        compile_sql(STREAMS + """SELECT x.c, y.m FROM (SELECT r.s AS c, COUNT(*) AS n FROM
            (SELECT R.a, SUM(R.b) AS s FROM R GROUP BY R.a) r GROUP BY r.s) x,
            (SELECT T.a AS k, SUM(T.c) AS m FROM T GROUP BY T.a) y WHERE x.c = y.k""")
