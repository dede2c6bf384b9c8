"""A group whose every value may be 0 while it has rows keeps its row, as SQL's (issue 33: NULLs; docs/m3.md "NULLs").

Why a module of its own: ``SELECT a, COUNT(b) AS n FROM R GROUP BY a`` over ``(1, NULL)`` and ``(2, 3)`` is
``(1, 0), (2, 1)`` in SQL, and Boreas showed ``{(2,): 1}``: the view kept no count of its group's rows (only a
SUM/AVG/MIN/MAX that may be NULL had one), so the group of only NULLs, whose maps are all 0, had no row; and the
harnesses excused a missing row of zeros, so no test saw it.  Now a grouped view of a query reading nullable
columns without a ``COUNT(*)`` item keeps its group's hidden ``COUNT(*)`` (``__rows__null``,
:func:`boreas.m3.compiler.nullshown.needs_rows`), and the harnesses excuse a missing row of zeros only where the
query reads no nullable column (``m3_harness.zero_groups_kept``).  Each shape runs NULL-heavy random inserts and
deletes against DuckDB on both backends: ``view()``, ``changes()`` folded batch by batch (GONE: a row left; a
row of zeros is a row), every map against its definition, and deleting every row empties every map.
"""

from __future__ import annotations

import pytest
from boreas.m3 import compile_sql
from boreas.m3.nullable import GONE
from m3_harness import new_runtime, shape_params, zero_groups_kept
from null_harness import check_rows_against_duckdb
from test_sql_null_changes_vs_duckdb import ChangesHarness

NULLABLE = "CREATE STREAM R(a INT, b INT NULL, c INT NULL, d INT);\nCREATE STREAM S(a INT, b INT NULL);\n"

SHAPES: dict[str, str] = {
    "count_col": "SELECT a, COUNT(b) AS n FROM R GROUP BY a",
    "count_distinct": "SELECT a, COUNT(DISTINCT b) AS n FROM R GROUP BY a",
    "count_col_filter": "SELECT a, COUNT(b) FILTER (WHERE c > 1) AS n FROM R GROUP BY a",
    "count_star_filter": "SELECT a, COUNT(*) FILTER (WHERE b > 1) AS n FROM R GROUP BY a",
    "sum_and_avg_filter": "SELECT a, SUM(b) FILTER (WHERE c > 1) AS s, AVG(b) FILTER (WHERE d > 0) AS m, "
                          "COUNT(*) AS n FROM R GROUP BY a",  # (NULL where the FILTER's rows hold only NULLs)
    "several_counts": "SELECT a, COUNT(b) AS n, COUNT(c) AS m, COUNT(DISTINCT c) AS k FROM R GROUP BY a",
    "count_by_nullable_key": "SELECT b, COUNT(c) AS n FROM R GROUP BY b",
    "count_group_not_selected": "SELECT COUNT(b) AS n FROM R GROUP BY a",
    "count_over_join": "SELECT R.a, COUNT(S.b) AS n, COUNT(R.c) AS m FROM R, S WHERE R.a = S.a GROUP BY R.a",
    "count_with_having": "SELECT a, COUNT(b) AS n FROM R GROUP BY a HAVING COUNT(c) < 2",
    "sum_of_zeros_beside_nulls": "SELECT a, SUM(d) AS s, COUNT(b) AS n FROM R WHERE c IS NULL GROUP BY a",
    "count_in_derived_table": "SELECT t.a, t.n FROM (SELECT a, COUNT(b) AS n FROM R GROUP BY a) t",
    "derived_table_regrouped": "SELECT t.a, SUM(t.n) AS s FROM (SELECT a, d, COUNT(b) AS n FROM R GROUP BY a, d) t "
                               "GROUP BY t.a",
    "derived_table_filtered": "SELECT t.a, t.n FROM (SELECT a, COUNT(b) AS n FROM R WHERE c IS NULL OR c > 0 "
                              "GROUP BY a) t WHERE t.a > 0",
}


@pytest.mark.parametrize("shape", shape_params(SHAPES, fast=4))
def test_view_matches_duckdb(shape, m3_backend):
    check_rows_against_duckdb(NULLABLE + SHAPES[shape], examples=25, harness=ChangesHarness)


@pytest.mark.parametrize("backend", ["python", "native"])
def test_a_group_of_only_nulls_counts_zero(backend):
    """The issue's case: ``(1, NULL)`` and ``(2, 3)`` give ``(1, 0)`` and ``(2, 1)``, in ``view()`` and in
    ``changes()``; the group leaves with its last row (GONE), not while its COUNT is 0."""
    program = compile_sql(NULLABLE + SHAPES["count_col"])
    rt = new_runtime(program, backend)
    rt.apply_batch([("R", 1, (1, None, None, 0)), ("R", 1, (2, 3, None, 0))])
    assert dict(rt.view("Q1")) == {(1,): 0, (2,): 1}
    assert sorted(rt.changes()["Q1"]) == [((1,), 0), ((2,), 1)]
    rt.apply_batch([("R", -1, (2, 3, None, 0)), ("R", 1, (2, None, None, 0))])
    assert dict(rt.view("Q1")) == {(1,): 0, (2,): 0}
    rt.apply_batch([("R", -1, (1, None, None, 0)), ("R", -1, (2, None, None, 0))])
    assert dict(rt.view("Q1")) == {} and rt.entries() == 0
    assert sorted(rt.changes()["Q1"]) == [((1,), GONE), ((2,), GONE)]
    assert all(v is GONE for _, v in rt.changes()["Q1"])  # (a row of zeros above is a row: only GONE says left)


@pytest.mark.parametrize("backend", ["python", "native"])
def test_a_filtered_count_skips_the_nulls_of_its_argument(backend):
    """``COUNT(c) FILTER (WHERE b > 0)`` counts the rows meeting the FILTER where ``c`` is present: the filtered
    COUNT counted every row meeting the FILTER, ``c`` NULL or not (its argument's presence was dropped)."""
    import duckdb

    query = "SELECT a, COUNT(c) FILTER (WHERE b > 0) AS n, COUNT(*) AS k FROM R GROUP BY a"
    rows = [(1, 1, None, 0), (1, 2, 5, 0), (2, None, 5, 0), (2, 1, None, 0)]
    rt = new_runtime(compile_sql(NULLABLE + query), backend)
    rt.apply_batch([("R", 1, r) for r in rows])
    con = duckdb.connect()
    con.execute("CREATE TABLE R(a BIGINT, b BIGINT, c BIGINT, d BIGINT)")
    con.executemany("INSERT INTO R VALUES (?, ?, ?, ?)", rows)
    assert {k + v for k, v in rt.view("Q1").items()} == {(a, n, k) for a, n, k in con.execute(query).fetchall()}


def test_the_harness_excuses_a_missing_row_of_zeros_only_where_the_query_reads_no_nullable_column():
    """The shared harness's one excuse for a missing group of zeros (``zero_groups_kept`` False): a query reading
    no nullable column (DBToaster's convention, docs/m3.md "NULLs", last open item); one reading a nullable column
    (also only in WHERE, or through ``*``) must show every group."""
    program = compile_sql(NULLABLE + SHAPES["count_col"])
    assert zero_groups_kept(program, SHAPES["count_col"])
    assert zero_groups_kept(program, "SELECT a, SUM(d) AS s FROM R WHERE c IS NULL GROUP BY a")
    assert zero_groups_kept(program, "SELECT * FROM R")
    assert not zero_groups_kept(program, "SELECT a, SUM(d) AS s FROM R GROUP BY a")
    assert not zero_groups_kept(program, "SELECT a, COUNT(*) AS n FROM R GROUP BY a")


@pytest.mark.parametrize("backend", ["python", "native"])
def test_a_filtered_sum_over_only_nulls_is_null(backend):
    """``SUM(b) FILTER (WHERE c > 0)`` where the rows the FILTER keeps hold only NULL b: NULL, as DuckDB (it read
    0: its hidden count counted the FILTER's rows, not those with ``b`` present)."""
    program = compile_sql(NULLABLE + "SELECT a, SUM(b) FILTER (WHERE c > 0) AS s FROM R GROUP BY a")
    rt = new_runtime(program, backend)
    rt.apply_batch([("R", 1, (2, None, 2, 2)), ("R", 1, (1, 5, 1, 0)), ("R", 1, (2, 7, 0, 0))])
    assert dict(rt.view("Q1")) == {(1,): 5, (2,): None}
