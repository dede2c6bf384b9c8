"""``NOT EXISTS`` a row above (below) a value, over a table the outer query reads too (issue 33, TPC-H Q15 as DBToaster writes it), agrees with DuckDB after every batch of inserts and deletes, on both backends.

The condition is read as a comparison with the MAX (MIN) of that table's
values (:mod:`boreas.m3.compiler.notexists`): exact since the outer row reads
a row of the same grouped derived table, which is then not empty.  Shapes:
Q15's (SUMs compared, the two derived tables selecting different names), a
COUNT compared with ``>=`` written flipped (``e <= x.v``), a MIN with
arithmetic on the outer side, and the derived table joined with a relation.  Every view equals DuckDB's, every map
its definition, and deleting every row empties every map.
"""

from __future__ import annotations

import pytest
from boreas.m3 import CompileError, compile_to_text
from changes_check import changes_rebuild_view
from m3_harness import check_against_duckdb, shape_params

SCHEMA = """
CREATE STREAM R(a INT, b INT);
CREATE STREAM S(a INT, c INT);
"""

SHAPES: dict[str, str] = {
    "q15_shape": SCHEMA + """SELECT S.a, S.c, t1.total FROM S, (SELECT R.a AS k, SUM(R.b) AS total FROM R WHERE R.b > 0 GROUP BY R.a) t1
        WHERE S.a = t1.k AND NOT EXISTS (SELECT 1 FROM (SELECT R.a, SUM(R.b) AS total FROM R WHERE R.b > 0 GROUP BY R.a) t2 WHERE t2.total > t1.total)""",
    "at_least_flipped": SCHEMA + """SELECT t1.k FROM (SELECT S.a AS k, COUNT(*) AS n, MAX(S.c) AS hi FROM S GROUP BY S.a) t1
        WHERE NOT EXISTS (SELECT * FROM (SELECT S.a AS k, COUNT(*) AS n, MAX(S.c) AS hi FROM S GROUP BY S.a) x WHERE t1.n <= x.n)""",
    "min_with_arithmetic": SCHEMA + """SELECT SUM(t1.hi) AS s FROM (SELECT S.a AS k, COUNT(*) AS n, MAX(S.c) AS hi FROM S GROUP BY S.a) t1
        WHERE NOT EXISTS (SELECT 1 FROM (SELECT S.a AS k, COUNT(*) AS n, MAX(S.c) AS hi FROM S GROUP BY S.a) x WHERE x.hi <= t1.hi - 1)""",
    "joined_with_a_relation": SCHEMA + """SELECT R.b, t1.k FROM R, (SELECT R.a AS k, SUM(R.b) AS total FROM R WHERE R.b > 0 GROUP BY R.a) t1 WHERE R.a = t1.k
        AND NOT EXISTS (SELECT 1 FROM (SELECT R.a, SUM(R.b) AS total FROM R WHERE R.b > 0 GROUP BY R.a) x WHERE x.total < t1.total)""",
}


@pytest.mark.parametrize("shape", shape_params(SHAPES))
def test_view_matches_duckdb(shape):
    check_against_duckdb(SHAPES[shape])


@pytest.mark.parametrize("sql", [
    # a condition of its own makes the subquery's groups a subset, which may be empty while the outer has rows
    SCHEMA + """SELECT t1.k FROM (SELECT R.a AS k, SUM(R.b) AS total FROM R WHERE R.b > 0 GROUP BY R.a) t1
        WHERE NOT EXISTS (SELECT 1 FROM (SELECT R.a, SUM(R.b) AS total FROM R WHERE R.b > 0 GROUP BY R.a) t2 WHERE t2.total > t1.total AND t2.a = 1)""",
    # another derived table: it may be empty while the outer one has rows
    SCHEMA + """SELECT t1.k FROM (SELECT R.a AS k, SUM(R.b) AS total FROM R WHERE R.b > 0 GROUP BY R.a) t1 WHERE NOT EXISTS (SELECT 1 FROM (SELECT S.a AS k, COUNT(*) AS n, MAX(S.c) AS hi FROM S GROUP BY S.a) t2 WHERE t2.n > t1.total)""",
])
def test_other_shapes_stay_refused(sql):
    with pytest.raises(CompileError, match="correlated|subquery|EXISTS"):
        compile_to_text(sql)


@pytest.mark.parametrize("backend", ["python", "auto"])
def test_changes_rebuild_the_view(backend):
    """The rows ``changes()`` reports after each batch, applied in order, rebuild the view (both backends)."""
    changes_rebuild_view(SHAPES["q15_shape"], backend)
