"""A subquery's condition on outer columns alone (issue 33), moved beside its EXISTS or IN, agrees with DuckDB.

``EXISTS (SELECT * FROM S WHERE r.a = 3)``: the conjunct reads no column of the subquery, so it decides whether
the subquery reads any row; standing as a conjunct of the outer WHERE it means the same
(``m3/compiler/outercond.py``).  Random insert/delete workloads (``m3_harness``), both backends; the negated
form (an OR once moved) stays refused by name.
"""

from __future__ import annotations

import pytest
from boreas.m3 import CompileError, compile_sql
import m3_harness
from m3_harness import Harness, check_against_duckdb, shape_params

GENERIC = """
CREATE STREAM R(a INT, b INT, c DOUBLE);
CREATE STREAM S(b INT, d INT, e DOUBLE);
"""

SHAPES: dict[str, str] = {
    "exists_outer_constant": GENERIC + """SELECT r1.a / 2.0 AS h, COUNT(*) AS n FROM R AS r1
        WHERE EXISTS (SELECT * FROM S AS s WHERE r1.a = 3) GROUP BY r1.a / 2.0""",
    "exists_outer_and_correlated": GENERIC + """SELECT r1.a, SUM(r1.c) AS s FROM R r1
        WHERE EXISTS (SELECT * FROM S s WHERE s.b = r1.b AND r1.a > 1 AND s.d < 3) GROUP BY r1.a""",
    "in_outer_condition": GENERIC + """SELECT r1.a, r1.b FROM R r1
        WHERE r1.b IN (SELECT s.b FROM S s WHERE r1.a < 2 AND s.d > 0)""",
    "outer_columns_compared": GENERIC + """SELECT COUNT(*) AS n FROM R r1
        WHERE EXISTS (SELECT * FROM S s WHERE r1.a = r1.b)""",
}

# a subquery of aggregates without GROUP BY has one row whatever its WHERE: the condition stays inside
EXISTS_OF_AN_AGGREGATE = GENERIC + """SELECT r1.a, COUNT(*) AS n FROM R r1
    WHERE EXISTS (SELECT COUNT(*) FROM S s WHERE r1.a = 3) GROUP BY r1.a"""


@pytest.mark.parametrize("shape", shape_params(SHAPES))
def test_view_matches_duckdb(shape):
    check_against_duckdb(SHAPES[shape])


def test_not_exists_of_an_outer_condition_stays_refused_by_name():
    with pytest.raises(CompileError) as e:
        compile_sql(GENERIC + "SELECT r1.a FROM R r1 WHERE NOT EXISTS (SELECT * FROM S s WHERE r1.a = 3)")
    assert "unsupported correlated condition r1.a = 3 in a subquery" in str(e.value)





@pytest.mark.parametrize("backend", ["python", "native"])
def test_exists_of_an_aggregate_is_not_decided_by_its_outer_condition(backend):
    """The review's rows: COUNT(*) without GROUP BY is one row (0 or not), so the EXISTS holds for every R row
    (DuckDB: both R rows counted, before and after S's row).  The condition stays in the subquery, where the
    general rules refuse it by name (today); a view compiled for it must equal DuckDB's."""
    m3_harness.BACKEND = backend
    try:
        harness = Harness(EXISTS_OF_AN_AGGREGATE)
    except CompileError as e:
        assert "unsupported correlated condition r1.a = 3 in a subquery" in str(e)
        return
    harness.run([[("ins", "R", (1, 1, 1.0)), ("ins", "R", (3, 1, 1.0))], [("ins", "S", (1, 1, 1.0))]])


def test_in_of_an_aggregate_keeps_its_outer_condition_and_is_refused_by_name():
    """``IN (SELECT COUNT(*) ... WHERE r1.a = 1)``: where the condition is false the subquery is one row, 0,
    not none; moved out, a row with ``b = 0`` would be dropped.  Left inside, the general rules refuse it."""
    with pytest.raises(CompileError) as e:
        compile_sql(GENERIC + """SELECT r1.a, r1.b FROM R r1
            WHERE r1.b IN (SELECT COUNT(*) FROM S s WHERE r1.a = 1 AND s.d > 0)""")
    assert "unsupported correlated condition r1.a = 1 in a subquery" in str(e.value)
