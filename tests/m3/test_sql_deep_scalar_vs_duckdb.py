"""A column compared with an uncorrelated scalar subquery that has subqueries of its own (issue 33) agrees with DuckDB after every batch of inserts and deletes, on both backends.

The subquery is one value for the whole query, compiled as a query of its own
(a part: its value and its row count, its own subquery one level down as any
nested query) beside the outer view of rows without that comparison; the view
keeps the rows whose column meets the comparison with the value when read
(:mod:`boreas.m3.compiler.deepscalar`).  Shapes: the second highest salary
(``SELECT *``, MAX below MAX, the relation named in lower case), a SUM over an IN subquery, the subquery on the
left of the comparison over a join, and other outer conditions beside it.
Every view equals DuckDB's, every map its definition, and deleting every row
empties every map.
"""

from __future__ import annotations

import re

import pytest
from boreas.m3 import CompileError, compile_to_text
from changes_check import changes_rebuild_view
from m3_harness import Harness, check_against_duckdb, shape_params

SCHEMA = """
CREATE STREAM R(a INT, b INT);
CREATE STREAM S(a INT, c INT);
CREATE STREAM T(d INT, f INT);
"""

SHAPES: dict[str, str] = {
    "second_highest": SCHEMA + """SELECT * FROM r r1 WHERE r1.b = (SELECT MAX(r2.b) FROM r r2
        WHERE r2.b < (SELECT MAX(r3.b) FROM R r3))""",
    "sum_over_in": SCHEMA + """SELECT r.a, r.b FROM R r WHERE r.b < (SELECT SUM(s.c) FROM S s
        WHERE s.a IN (SELECT t.d FROM T t))""",
    "flipped_over_a_join": SCHEMA + """SELECT R.a, S.c FROM R, S WHERE R.a = S.a
        AND (SELECT MAX(t.d) FROM T t WHERE t.d > (SELECT MIN(t2.f) FROM T t2)) >= S.c""",
    "beside_other_conditions": SCHEMA + """SELECT s.a FROM S s WHERE s.c > 0 AND s.a <> (SELECT SUM(r.a) FROM R r
        WHERE EXISTS (SELECT 1 FROM T t WHERE t.d = r.b)) AND s.a < 3""",
}


@pytest.mark.parametrize("shape", shape_params(SHAPES))
def test_view_matches_duckdb(shape):
    check_against_duckdb(SHAPES[shape])


def test_a_compared_column_not_selected_is_refused():
    with pytest.raises(CompileError, match="where the column is not selected"):
        compile_to_text(SCHEMA + """SELECT r1.a FROM R r1 WHERE r1.b = (SELECT MAX(r2.b) FROM R r2
            WHERE r2.b < (SELECT MAX(r3.b) FROM R r3))""")


@pytest.mark.parametrize("value", ["COUNT(*)", "GREATEST(MAX(e2.salary), 0)", "COALESCE(MAX(e2.salary), 0)",
                                   "CASE WHEN MAX(e2.salary) > 1 THEN 1 ELSE 0 END", "SUM(e2.salary) + COUNT(*)"])
def test_a_value_not_null_over_no_rows_is_refused(value):
    """The view's gate ``0 < #1.1[]`` reads no rows as NULL: a COUNT of no rows is 0, which compares true (the
    reviewer's E(id, salary) = (1, 0), (2, 3) with COUNT(*): DuckDB (1, 0), the gate no row)."""
    sql = """CREATE STREAM E(id INT, salary INT);
        SELECT * FROM E e1 WHERE e1.salary = (SELECT {} FROM E e2
        WHERE e2.salary > (SELECT MAX(e3.salary) FROM E e3))""".format(value)
    with pytest.raises(CompileError, match=re.escape(f"unsupported {value} compared with a subquery nested in a "
                                                     "subquery: its value over no rows is not NULL")):
        compile_to_text(sql)


def test_a_sum_under_arithmetic_matches_duckdb_on_rows_without_a_subquery_row():
    """SUM(...) * 2 + 1 is NULL over no rows: still accepted, and no row meets it while the middle has none."""
    sql = """CREATE STREAM E(id INT, salary INT);
        SELECT * FROM E e1 WHERE e1.salary <> (SELECT SUM(e2.salary) * 2 + 1 FROM E e2
        WHERE e2.salary > (SELECT MAX(e3.salary) FROM E e3))"""
    Harness(sql).run([[("ins", "E", (1, 0)), ("ins", "E", (2, 3))], [("ins", "E", (3, 1))]])


@pytest.mark.parametrize("backend", ["python", "auto"])
def test_changes_rebuild_the_view(backend):
    """The rows ``changes()`` reports after each batch, applied in order, rebuild the view (both backends): a
    change of the subquery's relations moves every row."""
    changes_rebuild_view(SHAPES["second_highest"], backend)
