"""Aggregates over nullable columns in HAVING and under arithmetic in a SELECT item agree with DuckDB, NULLs as
None, under NULL-heavy random inserts and deletes (issue 33 item 2, docs/m3.md "NULLs").

A SUM/AVG over only NULLs is NULL: in HAVING a comparison with it is not TRUE (``SUM(c) > 1`` holds where the
COUNT of what the SUM reads is > 0, NOT pushed down first), and ``SUM(c) * 2 + 1`` is NULL where ``SUM(c)`` is,
shown None by the hidden count a plain ``SUM(c)`` item keeps (:mod:`boreas.m3.compiler.nullhaving`).  Each shape
runs on both backends: every map equal to its definition, deleting every row empties every map, and each output
row DuckDB's (:mod:`null_harness`).
"""

from __future__ import annotations

import pytest
from boreas.m3 import CompileError, compile_sql
from m3_harness import new_runtime, shape_params
from null_harness import check_rows_against_duckdb

NULLABLE = """
CREATE STREAM R(a INT, b INT NULL, c FLOAT NULL);
"""

SHAPES: dict[str, str] = {
    "having_sum_compared": NULLABLE + "SELECT a, COUNT(*) AS n FROM R GROUP BY a HAVING SUM(c) > 0.5",
    "having_not_avg_or_count": NULLABLE + """SELECT a, COUNT(*) AS n, SUM(b) AS s FROM R GROUP BY a
        HAVING NOT (AVG(b) >= 1) OR COUNT(b) = 0""",
    "having_sum_is_null": NULLABLE + "SELECT a, COUNT(*) AS n FROM R GROUP BY a HAVING SUM(b) IS NULL",
    "having_sum_is_not_null_grouped_by_nullable": NULLABLE + """SELECT b, COUNT(*) AS n FROM R GROUP BY b
        HAVING SUM(c) IS NOT NULL AND SUM(c + b) < 2""",
    "having_filtered_sum": NULLABLE + """SELECT a, COUNT(*) AS n FROM R GROUP BY a
        HAVING SUM(a) FILTER (WHERE b > 0) > 0""",
    "having_by_the_alias_of_a_sum": NULLABLE + "SELECT a, SUM(c) AS s FROM R GROUP BY a HAVING NOT (s > 1)",
    "arithmetic_over_a_sum": NULLABLE + "SELECT a, SUM(b) * 2 + 1 AS x, COUNT(*) AS n FROM R GROUP BY a",
    "sum_over_count": NULLABLE + "SELECT a, SUM(c) / COUNT(*) AS x, AVG(c) - SUM(c) AS y FROM R GROUP BY a",
    "arithmetic_without_group_by": NULLABLE + "SELECT SUM(b) * 3 - COUNT(b) AS x FROM R",
}


@pytest.mark.parametrize("shape", shape_params(SHAPES))
def test_view_matches_duckdb(shape):
    check_rows_against_duckdb(SHAPES[shape])


@pytest.mark.parametrize("query, says", [
    ("SELECT a, SUM(b) + SUM(c) AS x FROM R GROUP BY a", "NULL where different values are"),
    ("SELECT a, MAX(b) + 1 AS x FROM R GROUP BY a", "under an expression over MAX(b)"),
    ("SELECT a, COUNT(*) AS n FROM R GROUP BY a HAVING MIN(b) > 1", "in HAVING under MIN(b)"),
    ("SELECT a, COUNT(*) AS n FROM R GROUP BY a HAVING COALESCE(SUM(b), 0) > 1", "in HAVING under COALESCE"),
    ("SELECT a, COUNT(*) AS n FROM R GROUP BY a, b HAVING b < SUM(c)", "in HAVING beside SUM(c)"),
    # (``GROUP BY a, b HAVING b > 1``, a nullable key read by name, compiles since sqlM:
    # test_sql_null_having_keys_vs_duckdb.py)
])
def test_what_is_not_built_is_refused_by_name(query, says):
    with pytest.raises(CompileError, match="NULLs") as e:
        compile_sql(NULLABLE + query)
    assert says in str(e.value)


@pytest.mark.parametrize("backend", ["python", "native"])
def test_a_group_whose_sum_is_null_fails_having(backend):
    """``HAVING NOT (SUM(c) > 0.5)``: a group of only NULL ``c`` is not kept (SQL: NOT NULL is NULL), one of a
    small sum is; an arithmetic item over the SUM is None where the SUM is."""
    program = compile_sql(NULLABLE + "SELECT a, SUM(c) * 2 AS x FROM R GROUP BY a HAVING NOT (SUM(c) > 0.5)")
    rt = new_runtime(program, backend)
    rt.apply_batch([("R", 1, (1, None, None)), ("R", 1, (2, None, 0.25))])
    assert dict(rt.view("Q1")) == {(2,): 0.5}
    rt.apply_batch([("R", 1, (1, 3, 0.0))])
    assert dict(rt.view("Q1")) == {(1,): 0.0, (2,): 0.5}
    rt.apply_batch([("R", -1, (1, None, None)), ("R", -1, (2, None, 0.25)), ("R", -1, (1, 3, 0.0))])
    assert rt.entries() == 0


@pytest.mark.parametrize("backend", ["python", "native"])
@pytest.mark.parametrize("having", ["s <= 1", "NOT (s > 1)"])
def test_having_by_a_select_alias_drops_a_group_whose_sum_is_null(having, backend):
    """``HAVING s <= 1`` with ``s`` the alias of ``SUM(c)`` is ``HAVING SUM(c) <= 1``: the group a = 1, whose ``c``
    are all NULL, is not kept (DuckDB's rows; it was kept, its SUM None)."""
    program = compile_sql(NULLABLE + f"SELECT a, SUM(c) AS s FROM R GROUP BY a HAVING {having}")
    rt = new_runtime(program, backend)
    rt.apply_batch([("R", 1, row) for row in
                    [(0, None, 1.0), (0, 2, None), (1, None, None), (2, 3, 2.0), (3, None, -1.0)]])
    shown = {k[0]: v for k, v in rt.view("Q1").items()}
    assert set(shown) == {0, 3}
