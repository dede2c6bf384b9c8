"""Arithmetic over nullable columns as a view's key agrees with DuckDB, NULL group included, under NULL-heavy random
inserts and deletes (issue 33 item 2, docs/m3.md "NULLs").

``GROUP BY b + a`` is NULL where ``b`` is, and SQL puts every such row in one group whatever ``a`` is: the key is
the expression zeroed where NULL with its indicator beside it, an internal key (:mod:`.nullexprkeys`).  Each
shape runs on both backends; after every batch the maps equal their definitions, deleting every row empties
every map, and each output row (NULL keys as None) is DuckDB's (:mod:`null_harness`).
"""

from __future__ import annotations

import pytest
from boreas.m3 import compile_sql
from boreas.m3.errors import CompileError
from m3_harness import new_runtime, shape_params
from null_harness import check_rows_against_duckdb

NULLABLE = """
CREATE STREAM R(a INT, b INT NULL, c FLOAT NULL);
CREATE STREAM S(b INT NULL, d INT);
"""

SHAPES: dict[str, str] = {
    "group_by_sum_of_nullable_and_not": NULLABLE + "SELECT b + a AS x, COUNT(*) AS n, SUM(c) AS s FROM R GROUP BY b + a",
    "group_by_product_of_two_nullable": NULLABLE + "SELECT b * c AS p, COUNT(*) AS n FROM R GROUP BY b * c",
    "group_by_expression_not_selected": NULLABLE + "SELECT COUNT(*) AS n, SUM(a) AS s FROM R GROUP BY b - a",
    "group_by_position_and_alias": NULLABLE + """SELECT b * 2 AS y, -c AS z, COUNT(*) AS n FROM R
        GROUP BY 1, z""",
    "view_of_rows_of_expressions": NULLABLE + "SELECT a - c AS x, b + 1 AS y FROM R WHERE a > 0 OR b IS NULL",
    "renamed_view": NULLABLE + "CREATE VIEW V(k, total) AS SELECT a * b AS x, SUM(c) FROM R GROUP BY a * b;",
    "union_of_expressions": NULLABLE + "SELECT b + 1 AS x FROM R UNION SELECT b - d FROM S",
    "grouped_join_by_expression": NULLABLE + """SELECT r.b + s.d AS k, COUNT(*) AS n FROM R r, S s
        WHERE r.a = s.d GROUP BY r.b + s.d""",
    # a column and an expression of it both keys: two indicators (one was shared, the expression's NULL shown 0)
    "column_and_expression_of_it": NULLABLE + "SELECT b, b + a AS x, COUNT(*) AS n FROM R GROUP BY b, b + a",
    "column_and_expression_by_position": NULLABLE + "SELECT b AS y, b * 2 AS x, COUNT(*) AS n FROM R GROUP BY 1, 2",
    "expression_then_its_column": NULLABLE + "SELECT b + a AS x, COUNT(*) AS n FROM R GROUP BY b + a, b",
    "rows_of_a_column_and_expression_of_it": NULLABLE + "SELECT a, b, b - 1 AS x FROM R",
}


@pytest.mark.parametrize("shape", shape_params(SHAPES))
def test_view_matches_duckdb(shape):
    check_rows_against_duckdb(SHAPES[shape])


def test_rows_null_anywhere_in_the_expression_make_one_group_on_both_backends():
    """(a=1, b=NULL) and (a=2, b=NULL) are one NULL group of b + a, apart from b + a = 0's; the indicator is an
    internal key; deleting every row empties every map."""
    program = compile_sql(NULLABLE + "SELECT b + a AS x, COUNT(*) AS n FROM R GROUP BY b + a")
    view = program.view("Q1")
    assert view.keys == ("x", "x__null") and view.internal == ("x__null",)
    for backend in ("python", "native"):
        rt = new_runtime(program, backend)
        rt.apply_batch([("R", 1, (1, None, None)), ("R", 1, (2, None, 0.5)), ("R", 1, (1, -1, None))])
        assert rt.view("Q1") == {(None, 1): 2, (0, 0): 1}
        rt.apply_batch([("R", -1, (1, None, None)), ("R", -1, (2, None, 0.5)), ("R", -1, (1, -1, None))])
        assert rt.view("Q1") == {} and rt.entries() == 0


@pytest.mark.parametrize("sql, why", [
    ("SELECT b / 2 AS h, COUNT(*) FROM R GROUP BY b / 2", "read outside an aggregate"),
    ("SELECT COALESCE(b, 0) + 1 AS h, COUNT(*) FROM R GROUP BY COALESCE(b, 0) + 1", "read outside an aggregate"),
    ("SELECT b + 1 AS h, COUNT(*) FROM R GROUP BY a", "read outside an aggregate"),
    ("SELECT t.x, COUNT(*) FROM (SELECT b + 1 AS x FROM R) t GROUP BY t.x", "read outside an aggregate"),
])
def test_other_expression_keys_stay_refused_by_name(sql, why):
    with pytest.raises(CompileError, match=why):
        compile_sql(NULLABLE + sql)
