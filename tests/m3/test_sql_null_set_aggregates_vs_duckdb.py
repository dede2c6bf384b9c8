"""Set operations of aggregated queries over nullable columns agree with DuckDB, NULLs included, under NULL-heavy
random inserts and deletes (issue 33, docs/m3.md's row "a set operation statement of aggregated queries"; "NULLs").

Each branch is rewritten as a query of its own (:mod:`.threevalued`: aggregates skip NULLs, a nullable key has
its indicator key), then is a part (:mod:`.setagg`, :mod:`.setbranch`): a NULL key is a row of its own, a value
NULL where its non-NULL count is 0, and two branches hold the same row where their keys and values are equal or
both NULL, as SQL's set operations compare.  Each shape runs on both backends; after every batch the maps equal
their definitions, deleting every row empties every map, and each output row (NULLs as None) is DuckDB's
(:mod:`null_harness`).
"""

from __future__ import annotations

import pytest
from boreas.m3 import compile_sql
from boreas.m3.errors import CompileError
from m3_harness import shape_params
from null_harness import check_rows_against_duckdb

NULLABLE = """
CREATE STREAM R(a INT, b INT NULL, c FLOAT NULL);
CREATE STREAM S(b INT NULL, d INT, c FLOAT NULL);
"""

SHAPES: dict[str, str] = {
    "union_all_over_a_nullable_key": NULLABLE + """SELECT b, SUM(c) AS s, COUNT(c) AS n FROM R GROUP BY b
        UNION ALL SELECT b, MAX(c), COUNT(*) FROM S WHERE d > 0 GROUP BY b""",
    "union_of_nullable_sums_with_having": NULLABLE + """SELECT a, SUM(b) AS s FROM R GROUP BY a
        HAVING SUM(b) > 0 OR COUNT(*) > 1 UNION SELECT d, MIN(b) FROM S GROUP BY d""",
    "intersect_over_a_nullable_key": NULLABLE + """SELECT b, COUNT(*) AS n FROM R GROUP BY b
        INTERSECT SELECT b, COUNT(*) FROM S GROUP BY b""",
    "except_of_nullable_sums": NULLABLE + """SELECT a, SUM(b) AS s FROM R GROUP BY a
        EXCEPT SELECT d, SUM(b) FROM S GROUP BY d""",
    "intersect_over_an_arithmetic_nullable_key": NULLABLE + """SELECT b + a AS k, COUNT(*) AS n FROM R
        GROUP BY b + a INTERSECT SELECT b + d, COUNT(*) FROM S GROUP BY b + d""",
    "union_all_over_an_arithmetic_nullable_key": NULLABLE + """SELECT b + a AS k, COUNT(*) AS n FROM R
        GROUP BY b + a UNION ALL SELECT b + d, COUNT(*) FROM S GROUP BY b + d""",
    "keyless_intersect_of_nullable_sums": NULLABLE + """SELECT SUM(b) AS s, MAX(b) AS m FROM R
        INTERSECT SELECT SUM(b), MAX(d) FROM S""",  # (a FLOAT's MAX(c) is refused: compared exactly)
}


@pytest.mark.parametrize("shape", shape_params(SHAPES))
def test_view_matches_duckdb(shape):
    check_rows_against_duckdb(SHAPES[shape])


def test_branches_nullable_at_other_keys_are_refused_by_name():
    with pytest.raises(CompileError, match="whose branches differ in which keys are nullable"):
        compile_sql(NULLABLE + "SELECT b, COUNT(*) AS n FROM R GROUP BY b "
                    "INTERSECT SELECT d, COUNT(*) FROM S GROUP BY d")
