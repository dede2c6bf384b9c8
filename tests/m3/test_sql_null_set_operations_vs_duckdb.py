"""UNION [ALL], INTERSECT and EXCEPT of views of rows over nullable columns agree with DuckDB, NULLs included, under
NULL-heavy random inserts and deletes (issue 33 item 2, docs/m3.md "NULLs").

Each branch is rewritten in its own scope, a nullable item a key with its indicator beside it
(:mod:`.nullsetops`), so the set operation compares NULLs as equal to each other and apart from 0, as SQL's
UNION, INTERSECT and EXCEPT do.  Each shape runs on both backends; after every batch the maps equal their
definitions, deleting every row empties every map, and each output row (NULLs as None) is DuckDB's
(:mod:`null_harness`).
"""

from __future__ import annotations

import pytest
from boreas.m3 import compile_sql
from boreas.m3.errors import CompileError
from m3_harness import new_runtime, shape_params
from null_harness import check_rows_against_duckdb

NULLABLE = """
CREATE STREAM R(a INT, b INT NULL, c FLOAT NULL);
CREATE STREAM S(b INT NULL, d INT, c FLOAT NULL);
"""

SHAPES: dict[str, str] = {
    "union_all_of_nullable": NULLABLE + "SELECT b FROM R WHERE a > 0 UNION ALL SELECT b FROM S",
    "union_of_nullable_pairs": NULLABLE + "SELECT a, b FROM R UNION SELECT d, b FROM S WHERE c IS NULL",
    "intersect_of_nullable": NULLABLE + "SELECT b, c FROM R INTERSECT SELECT b, c FROM S",
    "except_of_nullable": NULLABLE + "SELECT b, a FROM R WHERE NOT (c > 0.5) EXCEPT SELECT b, d FROM S",
}


@pytest.mark.parametrize("shape", shape_params(SHAPES))
def test_view_matches_duckdb(shape):
    check_rows_against_duckdb(SHAPES[shape])


def test_nulls_of_two_branches_are_one_row_on_both_backends():
    """R's NULL and S's NULL are one row of a UNION, apart from 0; INTERSECT keeps a NULL both hold."""
    for sql, after in (("SELECT b FROM R UNION SELECT b FROM S", {(None, 1): 1, (0, 0): 1}),
                       ("SELECT b FROM R INTERSECT SELECT b FROM S", {(None, 1): 1})):
        program = compile_sql(NULLABLE + sql)
        for backend in ("python", "native"):
            rt = new_runtime(program, backend)
            rt.apply_batch([("R", 1, (1, None, None)), ("S", 1, (None, 2, None)), ("R", 1, (1, 0, None))])
            assert rt.view("Q1") == after
            rt.apply_batch([("R", -1, (1, None, None)), ("S", -1, (None, 2, None)), ("R", -1, (1, 0, None))])
            assert rt.view("Q1") == {} and rt.entries() == 0


@pytest.mark.parametrize("sql, why", [
    ("SELECT b FROM R UNION SELECT d FROM S", "branches differ in which items are nullable"),
    # arithmetic keys at different places (their indicators were all placeless: paired with the wrong column)
    ("SELECT b + 1 AS x, a AS z FROM R UNION ALL SELECT d, b + 1 FROM S", "branches differ in which items are nullable"),
    ("SELECT b, COUNT(*) FROM R GROUP BY b UNION SELECT b, 1 FROM S", "not a view of rows"),
    ("SELECT a FROM (SELECT b AS a FROM R UNION ALL SELECT b FROM S) t", "set operations inside"),
])
def test_other_set_operations_stay_refused_by_name(sql, why):
    with pytest.raises(CompileError, match=why):
        compile_sql(NULLABLE + sql)
