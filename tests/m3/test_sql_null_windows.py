"""TUMBLE and HOP grouped views reading a nullable column (issue 33, docs/m3.md "NULLs"): the window table
function is read before parsing (:mod:`boreas.m3.compiler.windowfn`), so the query is an ordinary grouped query
over the relation's ``window_start``/``window_end`` columns and the NULL rules apply unchanged: a NULL key is its
own group (shown None, its indicator an internal key), a SUM over only NULLs is None.  The rows are given with
their window columns, as the ``m3`` box assigns them; both backends; deleting every row empties every map."""

from __future__ import annotations

import pytest
from boreas.m3 import compile_sql
from m3_harness import new_runtime

STREAM = "CREATE STREAM B(a INT, c INT NULL, ts INT, WATERMARK FOR ts AS ts - INTERVAL '5' SECOND);\n"
TUMBLED = STREAM + """SELECT c, window_start, COUNT(*) AS n, SUM(c) AS s FROM TABLE(TUMBLE(TABLE B, DESCRIPTOR(ts),
    INTERVAL '10' SECOND)) w GROUP BY c, window_start, window_end;"""
HOPPED = STREAM + """SELECT a, window_start, SUM(c) AS s, COUNT(c) AS k FROM TABLE(HOP(TABLE B, DESCRIPTOR(ts),
    INTERVAL '5' SECOND, INTERVAL '10' SECOND)) w WHERE c IS NULL OR c > 1 GROUP BY a, window_start, window_end;"""


@pytest.mark.parametrize("backend", ["python", "native"])
def test_windowed_groups_over_a_nullable_column_follow_sql(backend):
    tumbled, hopped = new_runtime(compile_sql(TUMBLED), backend), new_runtime(compile_sql(HOPPED), backend)
    rows = [(1, None, 100, 0, 10000), (2, 3, 200, 0, 10000), (2, None, 200, 10000, 20000), (2, 1, 300, 0, 10000)]
    for rt in (tumbled, hopped):
        rt.apply_batch([("B", 1, r) for r in rows])
    # (c, window_start, window_end, c__null): a NULL c is its own group, apart from c = 0
    assert dict(tumbled.view("Q1")) == {(None, 0, 10000, 1): (1, None), (3, 0, 10000, 0): (1, 3),
                                   (1, 0, 10000, 0): (1, 1), (None, 10000, 20000, 1): (1, None)}
    # WHERE c IS NULL OR c > 1 keeps the NULL rows; SUM over only NULLs is None, COUNT(c) 0
    assert dict(hopped.view("Q1")) == {(1, 0, 10000): (None, 0), (2, 0, 10000): (3, 1), (2, 10000, 20000): (None, 0)}
    for rt in (tumbled, hopped):
        rt.apply_batch([("B", -1, r) for r in rows])
        assert dict(rt.view("Q1")) == {} and rt.entries() == 0
