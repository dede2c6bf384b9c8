"""A UNION ALL of aggregated queries agrees with DuckDB under random inserts and deletes (issue 33, docs/m3.md
"UNION ALL of aggregated queries"): each branch a part grouped by its keys and a constant branch key
(``m3/compiler/setagg.py``), so a key in two branches is two rows, as SQL's.  Both backends; deleting every row
empties every map.  What is not built is refused by name."""

from __future__ import annotations

import pytest
from boreas.m3 import CompileError, compile_sql
from m3_harness import check_against_duckdb, shape_params

GENERIC = """
CREATE STREAM R(a INT, b INT);
CREATE STREAM S(b INT, c INT);
"""

SHAPES: dict[str, str] = {
    "sum_and_count_branches": GENERIC + """SELECT a, SUM(b) AS s FROM R GROUP BY a
        UNION ALL SELECT c, COUNT(*) FROM S WHERE b > 0 GROUP BY c""",
    "three_branches_extremes_and_a_join": GENERIC + """SELECT r.a AS k, MAX(s.c) AS m, COUNT(*) AS n
        FROM R r, S s WHERE r.b = s.b GROUP BY r.a
        UNION ALL SELECT b, MIN(a), SUM(a) - 1 FROM R GROUP BY b
        UNION ALL SELECT b, MAX(c), COUNT(*) FROM S GROUP BY b""",
}


@pytest.mark.parametrize("shape", shape_params(SHAPES))
def test_view_matches_duckdb(shape):
    check_against_duckdb(SHAPES[shape], examples=8)


@pytest.mark.parametrize("query, says", [
    ("SELECT SUM(b) AS s FROM R UNION ALL SELECT COUNT(*) FROM S", "grouped by exactly its selected columns"),
    ("SELECT a, SUM(b) AS s FROM R GROUP BY a, b UNION ALL SELECT c, COUNT(*) FROM S GROUP BY c",
     "grouped by exactly its selected columns"),
    ("SELECT a, SUM(b) AS s FROM R GROUP BY a HAVING SUM(b) > 1 UNION ALL SELECT c, COUNT(*) FROM S GROUP BY c",
     "unsupported HAVING in a UNION ALL branch"),
    ("SELECT a, COUNT(*) AS n FROM R GROUP BY a UNION ALL SELECT c, COUNT(*) FROM S GROUP BY c LIMIT 1",
     "unsupported LIMIT of UNION ALL"),  # (the union's own LIMIT: it was built and ignored)
    ("SELECT a, COUNT(*) AS n FROM R GROUP BY a UNION ALL SELECT c, COUNT(*) FROM S GROUP BY c OFFSET 1",
     "unsupported OFFSET of UNION ALL"),
])
def test_what_is_not_built_is_refused_by_name(query, says):
    with pytest.raises(CompileError, match=says):
        compile_sql(GENERIC + query)
