"""Views computed from their maps when read (issue 14, items 3 and 4) agree with DuckDB after every batch of inserts and deletes.

Arithmetic over aggregates, HAVING, MIN/MAX, COUNT/SUM/AVG(DISTINCT),
SELECT DISTINCT, GROUP BY without aggregates, and views without aggregates
(``SELECT a, b``, ``SELECT *``: a count per distinct row), alone and
combined, over joins.  Each shape is compiled once; hypothesis draws
insert/delete workloads over small domains (``m3_harness``), so groups
collide, minima are deleted while other rows hold the group, groups empty
and come back.  After every batch each view must equal DuckDB's answer to
the same SELECT over the live rows — exactly its rows where the view has a
condition, a fold, or is a view of rows (``m3_harness.exact_rows``) — every
map its definition, and deleting every row at the end must empty every map.
"""

from __future__ import annotations

import pytest
from boreas.m3 import CompileError, Runtime, compile_sql
from m3_harness import (
    Harness,
    check_against_duckdb,
    exact_rows,
    shape_params,
    shared_harness,
)

GENERIC = """
CREATE STREAM R(a INT, b INT, c DOUBLE);
CREATE STREAM S(b INT, d INT, e DOUBLE);
CREATE TABLE T(d INT, f INT, g VARCHAR);
"""

ORDERS = """
CREATE STREAM orders(o_orderkey INT, o_custkey INT, o_orderdate DATE, o_shippriority INT);
CREATE STREAM customer(c_custkey INT, c_mktsegment VARCHAR);
"""

SHAPES: dict[str, str] = {
    # 1. arithmetic over aggregates
    "ratio_and_scaled": GENERIC + """SELECT a, SUM(c) / COUNT(*) AS r, SUM(c) * 2 AS s2, SUM(b) - SUM(c) AS d,
                                            -SUM(b) + 0.5 * COUNT(*) AS x FROM R GROUP BY a""",
    "arith_over_join": GENERIC + """SELECT r.a, SUM(s.e) / COUNT(*) + 1 AS x, AVG(r.c) * SUM(s.d) AS y
                                    FROM R r, S s WHERE r.b = s.b GROUP BY r.a""",
    "group_column_in_arith": GENERIC + "SELECT a, b, SUM(c) * a - a AS sa, COUNT(*) + b AS nb FROM R GROUP BY a, b",
    "arith_without_keys": GENERIC + "SELECT SUM(c) * 2 - COUNT(*) AS x, AVG(b) + 1 AS y, SUM(b) / SUM(c) AS q FROM R",
    "tpch_q14_shape": GENERIC + """SELECT 100.00 * SUM(CASE WHEN t.g LIKE 'B%' THEN s.e * (1 - 0.25) ELSE 0 END)
                                          / SUM(s.e * (1 - 0.25)) AS promo
                                   FROM S s, T t WHERE s.d = t.d""",
    "shared_map_other_key_order": GENERIC + """SELECT a, b, SUM(c) AS s FROM R GROUP BY a, b;
                                               SELECT b, a, SUM(c) AS s, COUNT(*) AS n FROM R GROUP BY b, a""",
    # 2. HAVING
    "having_count": GENERIC + "SELECT a, SUM(c) AS s FROM R GROUP BY a HAVING COUNT(*) > 1",
    "having_zero_sum": GENERIC + "SELECT a, SUM(b) AS s FROM R GROUP BY a HAVING SUM(c) = 0",
    "having_le_keeps_zero_groups": GENERIC + "SELECT a, SUM(c) AS s FROM R GROUP BY a HAVING SUM(c) <= 0",
    "having_not_or_between": GENERIC + """SELECT a, b, SUM(c) AS s FROM R GROUP BY a, b
                                          HAVING NOT (SUM(c) > 1 OR COUNT(*) BETWEEN 2 AND 3) OR a = 0""",
    "having_over_join": GENERIC + """SELECT r.a, SUM(s.e) AS t FROM R r JOIN S s ON r.b = s.b GROUP BY r.a
                                     HAVING SUM(s.e) > AVG(r.c) AND COUNT(*) IN (1, 2, 3)""",
    "having_product_against_sums": GENERIC + """SELECT a, SUM(b * c) AS p FROM R GROUP BY a
                                                HAVING SUM(b * c) > SUM(c) + 1 OR SUM(b) > SUM(c) * 2""",
    "having_without_keys": GENERIC + "SELECT COUNT(*) AS n, SUM(c) AS s FROM R HAVING SUM(c) >= 0",
    "having_on_aliases": GENERIC + """SELECT a, SUM(c) AS total, COUNT(*) AS n FROM R GROUP BY a
                                      HAVING total > 0 OR n >= 2""",
    "having_on_string_group": GENERIC + "SELECT g, SUM(f) AS s FROM T GROUP BY g HAVING g <> 'A' AND SUM(f) > 1",
    # 3. MIN, MAX, DISTINCT
    "min_max": GENERIC + "SELECT a, MIN(c) AS lo, MAX(b) AS hi, COUNT(*) AS n FROM R GROUP BY a",
    "min_max_over_join": GENERIC + """SELECT r.a, MIN(s.e) AS lo, MAX(s.d) AS hi FROM R r, S s
                                      WHERE r.b = s.b AND s.e > -1 GROUP BY r.a""",
    "min_max_dates_strings": ORDERS + """SELECT o_shippriority, MIN(o_orderdate) AS first, MAX(o_orderdate) AS last
                                         FROM orders GROUP BY o_shippriority;
                                         SELECT c_custkey, MIN(c_mktsegment) AS seg FROM customer GROUP BY c_custkey""",
    "min_max_without_keys": GENERIC + "SELECT MAX(c) AS m, MIN(b) AS l FROM R",
    "spread_having": GENERIC + """SELECT a, MAX(b) - MIN(b) AS spread FROM R GROUP BY a
                                  HAVING MAX(b) > MIN(b) + 1""",
    "distinct_aggregates": GENERIC + """SELECT a, COUNT(DISTINCT b) AS nb, SUM(DISTINCT b) AS sb, AVG(DISTINCT c) AS ac,
                                               COUNT(*) AS n FROM R GROUP BY a""",
    "fold_of_group_column": GENERIC + """SELECT a, MIN(a) AS m, COUNT(DISTINCT a) AS n, SUM(c) AS s
                                         FROM R GROUP BY a""",
    "select_distinct": GENERIC + "SELECT DISTINCT a, b FROM R WHERE c <> 0",
    "distinct_over_join": GENERIC + "SELECT DISTINCT r.a, s.d FROM R r, S s WHERE r.b = s.b",
    "group_without_aggregates": GENERIC + """SELECT b FROM S GROUP BY b HAVING COUNT(*) >= 2;
                                             SELECT a, b FROM R GROUP BY a, b""",
    "distinct_of_groups": GENERIC + "SELECT DISTINCT a, SUM(c) AS s FROM R GROUP BY a",
    # 4. views without aggregates
    "rows": GENERIC + "SELECT a, b FROM R WHERE c > 0",
    "rows_over_join": GENERIC + "SELECT r.a, s.d FROM R r, S s WHERE r.b = s.b AND s.e >= 0",
    "star": GENERIC + "SELECT * FROM R",
    "star_over_join": GENERIC + "SELECT * FROM R r, S s WHERE r.b = s.b",
    "alias_star": GENERIC + "SELECT s.*, r.a FROM R r JOIN S s ON r.b = s.b WHERE s.d IN (1, 2)",
    "rows_self_join": GENERIC + "SELECT r1.a, r2.a AS a2 FROM R r1, R r2 WHERE r1.b = r2.b",
    "rows_strings": GENERIC + "SELECT g, f FROM T WHERE g LIKE 'B%' OR f = 1",
    "rows_repeated_column": GENERIC + "SELECT a, a, b FROM R",
}

def harness(name: str) -> Harness:
    return shared_harness(SHAPES[name])


@pytest.mark.parametrize("shape", shape_params(SHAPES))
def test_view_matches_duckdb(shape):
    check_against_duckdb(SHAPES[shape])


def test_the_shapes_exercise_what_they_name():
    """Views that need a condition or a fold have one (so the harness compares their rows exactly)."""
    for name in ("having_count", "having_zero_sum", "min_max", "select_distinct", "distinct_aggregates"):
        assert exact_rows(harness(name).program.views[0]), name
    assert [c.name for c in harness("star_over_join").program.views[0].columns] == ["count"]
    assert harness("star_over_join").program.views[0].keys == ("a", "b", "c", "b_1", "d", "e")


def test_a_group_leaves_and_comes_back_with_having():
    rt = Runtime(GENERIC + "SELECT a, SUM(c) AS s FROM R GROUP BY a HAVING COUNT(*) > 1")
    rt.apply_batch([("R", 1, (1, 0, 1.0))])
    assert rt.view("Q1") == {} and rt.changes() == {}
    rt.apply_batch([("R", 1, (1, 0, 2.0))])
    assert rt.changes() == {"Q1": [((1,), 3.0)]}
    rt.apply_batch([("R", -1, (1, 0, 1.0))])
    assert rt.view("Q1") == {} and rt.changes() == {"Q1": [((1,), 0)]}
    rt.apply_batch([("R", 1, (1, 0, 1.0)), ("R", 1, (1, 0, 5.0))])
    assert rt.view("Q1") == {(1,): 8.0} and rt.changes() == {"Q1": [((1,), 8.0)]}


def test_min_under_deletes_takes_the_next_value():
    rt = Runtime(GENERIC + "SELECT a, MIN(b) AS lo, MAX(b) AS hi FROM R GROUP BY a")
    rt.apply_batch([("R", 1, (1, b, 0.0)) for b in (3, 1, 2, 1)])
    assert rt.view("Q1") == {(1,): (1, 3)}
    rt.apply_batch([("R", -1, (1, 1, 0.0))])
    assert rt.view("Q1") == {(1,): (1, 3)} and rt.changes() == {}  # another row still has 1
    rt.apply_batch([("R", -1, (1, 1, 0.0)), ("R", -1, (1, 3, 0.0))])
    assert rt.view("Q1") == {(1,): (2, 2)} and rt.changes() == {"Q1": [((1,), (2, 2))]}


def test_a_view_of_rows_counts_duplicates_and_reads_by_pattern():
    rt = Runtime(GENERIC + "SELECT r.a, s.* FROM R r, S s WHERE r.b = s.b")
    rt.apply_batch([("R", 1, (1, 2, 0.5)), ("R", 1, (1, 2, 0.75)), ("S", 1, (2, 7, 1.0)), ("S", 1, (3, 7, 1.0))])
    assert rt.view("Q1") == {(1, 2, 7, 1.0): 2}
    assert rt.views["Q1"].keys == (("a", "INT"), ("b", "INT"), ("d", "INT"), ("e", "FLOAT"))
    assert rt.view("Q1", None, 2) == {(1, 2, 7, 1.0): 2} and rt.view("Q1", 2) == {}
    rt.apply_batch([("R", -1, (1, 2, 0.5)), ("R", -1, (1, 2, 0.75))])
    assert rt.changes() == {"Q1": [((1, 2, 7, 1.0), 0)]} and rt.view("Q1") == {}
    assert rt.entries() == 2  # S's rows, in the map an insert into R reads


def test_view_rows_and_changes_agree_after_state_transfer():
    sql = GENERIC + "SELECT a, MAX(c) AS m, SUM(b) / COUNT(*) AS r FROM R GROUP BY a HAVING COUNT(*) >= 1"
    rt = Runtime(sql)
    rt.apply_batch([("R", 1, (1, 2, 0.5)), ("R", 1, (2, 2, 1.5))])
    copy = Runtime.from_state(rt.state())
    assert copy.view("Q1") == rt.view("Q1") == {(1,): (0.5, 2.0), (2,): (1.5, 2.0)}


@pytest.mark.parametrize("sql, fragment", [
    ("SELECT a, MAX(c * 2) AS m FROM R GROUP BY a", "unsupported MAX(c * 2): only of a column"),
    ("SELECT a, SUM(c) FROM R GROUP BY a HAVING c > 1", "column R.c in HAVING is neither grouped"),
    ("SELECT a, b > 1 AS x FROM R", "unsupported expression GT (b > 1) in a view without aggregates"),
    ("SELECT DISTINCT SUM(c) AS s FROM R GROUP BY a", "unsupported SELECT DISTINCT over groups"),
    ("SELECT d, MIN(g) - 1 AS x FROM T GROUP BY d", "unsupported arithmetic on a STRING"),
])
def test_what_views_refuse(sql, fragment):
    with pytest.raises(CompileError, match=fragment.replace("(", r"\(").replace(")", r"\)").replace("*", r"\*")):
        compile_sql(GENERIC + sql)
