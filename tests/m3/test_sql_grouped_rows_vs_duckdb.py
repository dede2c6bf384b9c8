"""A grouped derived table's rows read without its group columns, and unaliased columns over one, against DuckDB.

``SELECT s FROM (SELECT a, SUM(b) AS s FROM R GROUP BY a) t`` returns one
row per group holding its ``s``: a multiset of values, not the groups.  The
view is a view of rows keyed by ``s`` whose ``count`` says how many groups
have it (it used to be keyed by the unselected ``a``).  An unaliased column
over a grouped derived table (``SELECT MAX(x.n) FROM (...) x``) is named as
any query's unaliased aggregate is (``max_1``; it used to have an empty
name); DuckDB calls it ``max(x.n)``, which is not an M3 name, so its values
are compared by position.
"""

from __future__ import annotations

import duckdb
import pytest
from boreas.m3 import Runtime, compile_sql
from hypothesis import HealthCheck, given, settings
from m3_harness import DUCK_TYPES, check_against_duckdb, scaled, workloads

R = "CREATE STREAM R(a INT, b INT, c DOUBLE);\n"

ROWS = {
    "values_of_groups": R + "SELECT s FROM (SELECT a, SUM(b) AS s FROM R GROUP BY a) t",
    "values_of_groups_where": R + "SELECT s FROM (SELECT a, SUM(b) AS s FROM R GROUP BY a) t WHERE s > 2",
    "two_values_of_a_cte": R + """WITH t AS (SELECT a, b, COUNT(*) AS n, MAX(c) AS m FROM R GROUP BY a, b)
        SELECT n, m FROM t""",
    "one_of_two_group_columns": R + "SELECT a, s FROM (SELECT a, b, SUM(c) AS s FROM R GROUP BY a, b) t",
}


@pytest.mark.parametrize("shape", sorted(ROWS))
def test_rows_of_a_grouped_derived_table_are_its_values(shape):
    view = compile_sql(ROWS[shape]).views[0]
    assert [c.name for c in view.columns] == ["count"]  # a multiset: how many groups have each value
    check_against_duckdb(ROWS[shape], examples=20)


def test_the_group_columns_selected_keep_one_row_per_group():
    """Selecting every group column still reads the groups as rows (a HAVING over them, first-order)."""
    view = compile_sql(R + "SELECT a, s FROM (SELECT a, SUM(b) AS s FROM R GROUP BY a) t WHERE s > 0").views[0]
    assert list(view.keys) == ["a"] and [c.name for c in view.columns] == ["s"]


UNALIASED = R + "SELECT MAX(x.n), MIN(x.n) + 1 FROM (SELECT a, COUNT(*) AS n FROM R GROUP BY a) x"


def test_unaliased_columns_over_a_grouped_derived_table_are_named_and_match_duckdb():
    program = compile_sql(UNALIASED)
    assert [c.name for c in program.views[0].columns] == ["max_1", "expr_2"]
    relations = Runtime(program, backend="python").relations

    @settings(max_examples=scaled(20), deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(workloads(relations, max_batches=4, max_ops=10))
    def check(batches):
        rt = Runtime(program, backend="python")
        con = duckdb.connect()
        con.execute("CREATE TABLE R (_id BIGINT, " + ", ".join(f"{c} {DUCK_TYPES[t]}" for c, t in relations["R"]) + ")")
        live, next_id = [], 0
        for ops in batches:
            events = []
            for op in ops:
                if op[0] == "ins":
                    next_id += 1
                    live.append((next_id, op[2]))
                    con.execute("INSERT INTO R VALUES (?, ?, ?, ?)", [next_id, *op[2]])
                    events.append(("R", 1, op[2]))
                elif live:
                    rid, row = live.pop(op[2] % len(live))
                    con.execute("DELETE FROM R WHERE _id = ?", [rid])
                    events.append(("R", -1, row))
            rt.apply_batch(events)
            cur = con.execute(UNALIASED.split(";", 1)[1])
            assert [d[0] for d in cur.description] == ["max(x.n)", "(min(x.n) + 1)"]
            (want,) = cur.fetchall()
            got = rt.view("Q1")
            if want[0] is None:  # no groups: SQL's one row of NULLs, M3's no row
                assert got == {}
            else:
                assert got == {(): want}

    check()
