"""Nullable stream columns in m3 views agree with DuckDB under NULL-heavy random inserts and deletes (issue 33
item 2, docs/m3.md "NULLs").

A nullable column is its value and an indicator column (:mod:`boreas.m3.nullable`); the front end makes every
reading of it explicit (:mod:`boreas.m3.compiler.threevalued`): three-valued WHERE and ON, IS [NOT] NULL,
COALESCE, NULLIF, CASE, COUNT(col) counting non-NULLs, SUM/AVG/MIN/MAX skipping NULLs.  Half the values drawn
are NULL, over domains of a few values; deleting every row empties every map (the harness checks it), and
every map equals its definition over the rows (NULLs split the same way).  A SUM/AVG/MIN/MAX over only NULLs
is NULL (None) in a view as in SQL; the shared harness reads both sides' NULL values as 0, and
test_sql_null_keys_vs_duckdb.py compares them exactly (docs/m3.md "NULLs" says what is left).
"""

from __future__ import annotations

import pytest
from boreas.m3 import CompileError, Runtime, compile_sql
from hypothesis import strategies as st
from m3_harness import check_against_duckdb, shape_params, value_strategy

NULLABLE = """
CREATE STREAM R(a INT, b INT NULL, c FLOAT NULL);
CREATE STREAM S(b INT NULL, d INT);
"""


def null_heavy(column, t):
    """Half NULL, else the small default domain (so groups meet only NULLs, and comparisons cross)."""
    return st.one_of(st.none(), value_strategy(t)) if column in ("b", "c") else value_strategy(t)


SHAPES: dict[str, str] = {
    "counts_and_sums_skip_nulls": NULLABLE + """SELECT a, COUNT(b) AS nb, COUNT(*) AS n, SUM(b) AS sb, SUM(c) AS sc,
        COUNT(c) AS nc FROM R GROUP BY a""",
    "avg_skips_nulls": NULLABLE + "SELECT a, AVG(c) AS v, AVG(b) AS w FROM R GROUP BY a",
    "is_null_and_is_not_null": NULLABLE + """SELECT a, COUNT(*) AS n FROM R WHERE b IS NULL AND c IS NOT NULL
        GROUP BY a""",
    "where_is_three_valued": NULLABLE + """SELECT a, COUNT(*) AS n, SUM(a) AS s FROM R WHERE NOT (b > 1 OR c < 0)
        GROUP BY a""",
    "where_or_with_null": NULLABLE + "SELECT COUNT(*) AS n, SUM(b) AS s FROM R WHERE b = 2 OR c >= 0.5 OR a = 0",
    "between_and_in": NULLABLE + """SELECT a, COUNT(*) AS n FROM R WHERE b BETWEEN 1 AND 2 OR NOT (b IN (0, 3))
        GROUP BY a""",
    "coalesce_and_nullif": NULLABLE + """SELECT a, SUM(COALESCE(b, c, -1)) AS x, COUNT(NULLIF(b, 2)) AS y,
        SUM(NULLIF(c, 0.5)) AS z FROM R WHERE COALESCE(b, 3) > 1 GROUP BY a""",
    "arithmetic_is_null_when_an_operand_is": NULLABLE + """SELECT a, SUM(b * 2 + c) AS x, COUNT(b + c) AS y
        FROM R GROUP BY a""",
    "case_over_nullable_columns": NULLABLE + """SELECT a, SUM(CASE WHEN b > 1 THEN c WHEN c IS NULL THEN 7
        ELSE b END) AS x, COUNT(CASE WHEN b IS NOT NULL THEN 1 END) AS y FROM R GROUP BY a""",
    "min_and_max_skip_nulls": NULLABLE + "SELECT a, MIN(b) AS lo, MAX(c) AS hi FROM R GROUP BY a",
    "equality_join_never_matches_null": NULLABLE + """SELECT r.a, COUNT(*) AS n, SUM(s.d) AS t FROM R r, S s
        WHERE r.b = s.b GROUP BY r.a""",
    "join_on_nullable_columns": NULLABLE + """SELECT s.d, COUNT(r.c) AS n FROM R r JOIN S s ON r.b = s.b AND
        r.c > 0 GROUP BY s.d""",
    "filter_clause_over_nulls": NULLABLE + """SELECT a, COUNT(*) FILTER (WHERE b IS NULL) AS n,
        SUM(c) FILTER (WHERE b <> 1) AS s FROM R GROUP BY a""",
    "count_distinct_skips_nulls": NULLABLE + """SELECT a, COUNT(DISTINCT b) AS nb, COUNT(DISTINCT c) FILTER
        (WHERE b > 0) AS nc, COUNT(*) AS n FROM R GROUP BY a""",
    "count_distinct_without_group_by": NULLABLE + "SELECT COUNT(DISTINCT b) AS nb, SUM(c) AS s FROM R",
    "expressions_and_having_over_counts": NULLABLE + """SELECT a, COUNT(b) * 2 + COUNT(*) AS x, SUM(a) AS s
        FROM R GROUP BY a HAVING COUNT(c) > 0 AND COUNT(b + c) < 3""",
}


@pytest.mark.parametrize("shape", shape_params(SHAPES))
def test_view_matches_duckdb(shape):
    check_against_duckdb(SHAPES[shape], value=null_heavy)


def test_rows_carry_none_on_both_backends():
    """The runtime takes None in a nullable column and hides the indicator from its in ports."""
    program = compile_sql(NULLABLE + "SELECT a, COUNT(b) AS n, COUNT(*) AS k FROM R WHERE c IS NULL GROUP BY a")
    for backend in ("python", "auto"):
        rt = Runtime(program, backend=backend)
        assert rt.relations["R"] == (("a", "INT"), ("b", "INT"), ("c", "FLOAT"))
        rt.apply_batch([("R", 1, (1, None, None)), ("R", 1, (1, 2, None)), ("R", 1, (2, 3, 0.5))])
        assert rt.view("Q1") == {(1,): (1, 2)}
        rt.apply_columns("R", -1, [[1, 1], [None, 2], [None, None]])
        assert rt.view("Q1") == {}


@pytest.mark.parametrize("query, says", [
    ("SELECT b / 2 AS x, COUNT(*) AS n FROM R GROUP BY b / 2", "only the column itself is a key"),  # + - *: built
    ("SELECT a, COUNT(*) AS n FROM R GROUP BY a ORDER BY b", "only the column itself is a key"),
    ("SELECT a, CASE WHEN SUM(b) > 1 THEN 1 ELSE 0 END AS s FROM R GROUP BY a", "under an expression over SUM(b)"),
    ("SELECT SUM(DISTINCT b) AS n FROM R", "under DISTINCT"),
    ("SELECT COUNT(DISTINCT COALESCE(b, 1)) AS n FROM R", "under DISTINCT"),
    ("SELECT SUM(GREATEST(b, 1)) AS n FROM R", "only arithmetic, CASE, COALESCE and NULLIF"),
    ("SELECT COUNT(*) AS n FROM R r LEFT JOIN S s ON r.a = s.d WHERE r.b IN (SELECT d FROM S)",
     "outer join's query with a subquery"),  # an outer join alone: built (test_sql_null_outer_vs_duckdb.py)
    ("SELECT COUNT(*) AS n FROM R WHERE b NOT IN (SELECT d FROM S)", "NOT IN a subquery"),
    ("SELECT MAX(c) AS m FROM R WHERE a < (SELECT SUM(d) FROM S)", "in a query with a subquery"),
])
def test_what_is_not_built_is_refused_by_name(query, says):
    with pytest.raises(CompileError, match="NULLs") as e:
        compile_sql(NULLABLE + query)
    assert says in str(e.value)


def test_not_null_column_is_not_nullable():
    """``NOT NULL`` (and no constraint) declares one column, as before: the program is unchanged."""
    plain = "CREATE STREAM R(a INT, b INT); SELECT a, SUM(b) AS s FROM R GROUP BY a"
    assert compile_sql(plain) == compile_sql(plain.replace("b INT)", "b INT NOT NULL)"))
