"""Computed group keys (issue 14): GROUP BY ``EXTRACT(... FROM d)`` or ``SUBSTRING(s, i, n)`` agrees with DuckDB.

A function of a column is lifted into a variable (``{K = YEAR(D)}`` in the
maps' definitions, DBToaster's ``(K ^= f(D))``): maps are keyed by the
computed value and a trigger computes it from the event's row
(``Q[YEAR(D)] += ...``), so deltas stay first-order.  The shapes group by
it, select it under an alias or by position, compare it with constants in
WHERE (``IN``, ``>=``), read it through a derived table (TPC-H Q7-Q9's
shape) and in a subquery (Q22's), on either side of a join and of a
self-join, with HAVING and MAX, in views of rows, inside aggregates
(``SUM(b * MONTH(d))``: the sum multiplies by the lifted variable, which a
trigger computes from the row, or a map sums per row), and under MIN, MAX and
DISTINCT (a multiplicity map keyed by the value), in HAVING (a computed
group key, or inside an aggregate only HAVING reads), and compared with a
column, another computed value or arithmetic (a loop guard across
relations); every shape runs on
both backends (the C backend computes date parts from the day number and
takes a SUBSTRING's interned id from a column computed with the batch), and
deleting every row empties every map.
"""

from __future__ import annotations

import pytest
from boreas.m3 import CompileError, Runtime, compile_sql
from boreas.m3.printer import format_program
from boreas.m3.syntax import parse_program
from m3_harness import check_against_duckdb, shape_params

GENERIC = """
CREATE STREAM R(a INT, b INT, d DATE, g VARCHAR);
CREATE STREAM S(b INT, c INT, e DATE, h VARCHAR);
"""

SHAPES: dict[str, str] = {
    "year": GENERIC + "SELECT EXTRACT(YEAR FROM d) AS y, SUM(a) AS s FROM R GROUP BY EXTRACT(YEAR FROM d)",
    "year_by_alias_with_a_column": GENERIC + """SELECT a, EXTRACT(year FROM d) AS y, COUNT(*) AS n
        FROM R GROUP BY a, y""",
    "month_by_position_over_a_join": GENERIC + """SELECT r.a, EXTRACT(MONTH FROM s.e) AS m, SUM(r.b * s.c) AS t
        FROM R r, S s WHERE r.b = s.b GROUP BY 1, 2""",
    "quarter_and_day_of_both_sides": GENERIC + """SELECT QUARTER(r.d) AS q, DAY(s.e) AS dd, COUNT(*) AS n
        FROM R r JOIN S s ON r.b = s.b GROUP BY q, dd""",
    "substring": GENERIC + "SELECT SUBSTRING(g, 1, 2) AS p, COUNT(*) AS n, SUM(b) AS s FROM R GROUP BY p",
    "substring_in_where": GENERIC + """SELECT a, SUM(b) AS s FROM R
        WHERE SUBSTRING(g, 1, 1) IN ('A', 'B') AND EXTRACT(YEAR FROM d) >= 1995 GROUP BY a""",
    "substring_to_the_end_joined": GENERIC + """SELECT SUBSTRING(s.h, 2) AS tail, SUM(r.a) AS s
        FROM R r, S s WHERE r.b = s.b AND r.g <> 'R' GROUP BY SUBSTRING(s.h, 2)""",
    "derived_table": GENERIC + """SELECT y, SUM(v) AS s
        FROM (SELECT EXTRACT(YEAR FROM s.e) AS y, r.a * s.c AS v FROM R r, S s WHERE r.b = s.b) AS t GROUP BY y""",
    "having_and_max": GENERIC + """SELECT EXTRACT(YEAR FROM d) AS y, MAX(a) AS m, COUNT(*) AS n FROM R
        GROUP BY y HAVING COUNT(*) > 1""",
    "self_join": GENERIC + """SELECT EXTRACT(YEAR FROM r1.d) AS y, COUNT(*) AS n FROM R r1, R r2
        WHERE r1.a = r2.b GROUP BY y""",
    "rows_view": GENERIC + "SELECT EXTRACT(YEAR FROM d) AS y, a FROM R WHERE a < 3",
    "distinct": GENERIC + "SELECT DISTINCT SUBSTRING(g, 1, 1) AS p, a FROM R",
    "not_exists_subquery": GENERIC + """SELECT SUBSTRING(g, 1, 1) AS p, COUNT(*) AS n, SUM(a) AS s FROM R
        WHERE NOT EXISTS (SELECT * FROM S WHERE S.b = R.b) GROUP BY p""",
    "three_keys": GENERIC + """SELECT EXTRACT(YEAR FROM d) AS y, SUBSTRING(g, 1, 1) AS p, MONTH(d) AS m,
        COUNT(*) AS n FROM R GROUP BY y, p, m""",
    "union_all_branches": GENERIC + """SELECT y, SUM(v) AS s FROM (SELECT EXTRACT(YEAR FROM d) AS y, a AS v FROM R
        UNION ALL SELECT EXTRACT(YEAR FROM e), c FROM S) AS u GROUP BY y""",
    "exists_with_a_year_inside": GENERIC + """SELECT a, COUNT(*) AS n FROM R
        WHERE EXISTS (SELECT * FROM S WHERE S.b = R.b AND YEAR(S.e) = 1995) GROUP BY a""",
    "scalar_subquery_with_substring": GENERIC + """SELECT SUBSTRING(g, 1, 1) AS p, COUNT(*) AS n FROM R
        WHERE SUBSTRING(g, 1, 1) IN ('A', 'B')
          AND a > (SELECT AVG(c) FROM S WHERE SUBSTRING(h, 1, 1) IN ('A', 'B')) GROUP BY p""",
    "week_and_day_of_week": GENERIC + """SELECT EXTRACT(DOW FROM d) AS w, EXTRACT(WEEK FROM d) AS wk, COUNT(*) AS n
        FROM R GROUP BY w, wk""",
    "day_of_year_and_iso_day_functions": GENERIC + """SELECT DAYOFYEAR(s.e) AS y, ISODOW(s.e) AS i, SUM(r.a) AS s
        FROM R r, S s WHERE r.b = s.b GROUP BY y, i""",
    # a computed value inside an aggregate: the lift defines a variable the sum multiplies by
    "inside_aggregates": GENERIC + """SELECT a, SUM(EXTRACT(YEAR FROM d)) AS y, SUM(b * MONTH(d)) AS bm,
        AVG(DAY(d)) AS ad FROM R GROUP BY a""",
    "inside_an_aggregate_across_a_join": GENERIC + """SELECT r.a, SUM(r.b * EXTRACT(MONTH FROM s.e)) AS t
        FROM R r, S s WHERE r.b = s.b GROUP BY r.a""",
    "inside_case_beside_a_computed_key": GENERIC + """SELECT EXTRACT(YEAR FROM d) AS y,
        SUM(CASE WHEN b > 0 THEN QUARTER(d) ELSE 0 END) AS q, COUNT(*) AS n FROM R GROUP BY y""",
    # MIN, MAX and DISTINCT of a computed value: the multiplicity map is keyed by it
    "min_max_distinct_of_computed": GENERIC + """SELECT a, MAX(EXTRACT(YEAR FROM d)) AS y, MIN(MONTH(d)) AS m,
        COUNT(DISTINCT SUBSTRING(g, 1, 1)) AS p, SUM(DISTINCT DAY(d)) AS sd FROM R GROUP BY a""",
    "max_of_computed_across_a_join": GENERIC + """SELECT r.a, MAX(YEAR(s.e)) AS y, COUNT(*) AS n
        FROM R r, S s WHERE r.b = s.b GROUP BY r.a""",
    # a computed value in HAVING (a group key, or inside an aggregate HAVING alone reads) or against a column
    "computed_key_in_having": GENERIC + """SELECT EXTRACT(YEAR FROM d) AS y, COUNT(*) AS n FROM R
        GROUP BY y HAVING EXTRACT(YEAR FROM d) > 1994 AND COUNT(*) >= 1""",
    "computed_key_against_aggregates": GENERIC + """SELECT YEAR(d) AS y, a, SUM(b) AS s, SUM(b) / YEAR(d) AS per
        FROM R GROUP BY y, a HAVING SUM(b) > YEAR(d) - 1995 OR a = YEAR(d) - 1994""",
    "substring_key_in_having": GENERIC + """SELECT SUBSTRING(g, 1, 1) AS p, COUNT(*) AS n FROM R
        GROUP BY p HAVING SUBSTRING(g, 1, 1) <> 'A'""",
    "computed_aggregates_in_having_only": GENERIC + """SELECT a, COUNT(*) AS n FROM R GROUP BY a
        HAVING SUM(EXTRACT(MONTH FROM d)) > 3 AND MAX(DAY(d)) >= 14""",
    "computed_against_a_column": GENERIC + "SELECT a, COUNT(*) AS n FROM R WHERE EXTRACT(MONTH FROM d) > a GROUP BY a",
    "computed_against_computed_across": GENERIC + """SELECT r.a, COUNT(*) AS n FROM R r, S s
        WHERE EXTRACT(YEAR FROM r.d) = EXTRACT(YEAR FROM s.e) GROUP BY r.a""",
    "computed_against_arithmetic_across": GENERIC + """SELECT s.c, SUM(r.a) AS t FROM R r, S s
        WHERE MONTH(s.e) <= r.b + s.c AND r.g = s.h GROUP BY s.c""",
}


@pytest.mark.parametrize("shape", shape_params(SHAPES))
def test_view_matches_duckdb(shape):
    check_against_duckdb(SHAPES[shape])


def test_triggers_compute_the_key_from_the_row_and_maps_are_keyed_by_it():
    """The lift is in the definitions, the call in the triggers; the text parses back to the same program."""
    program = compile_sql(SHAPES["derived_table"])
    text = format_program(program)
    assert "{Y = YEAR(E)}" in text.replace("YEAR_E", "Y") and "[YEAR(E)] +=" in text
    assert parse_program(text) == program
    keys = {m.name: [k.type for k in m.keys] for m in program.maps}
    assert keys["Q1_s"] == ["INT"] and not any("DATE" in ts for ts in keys.values())


@pytest.mark.parametrize("sql, message", [
    ("SELECT EXTRACT(EPOCH FROM d) AS w, COUNT(*) AS n FROM R GROUP BY w", "unsupported EXTRACT(EPOCH FROM a column)"),
    ("SELECT SUBSTRING(g, a, 2) AS p, COUNT(*) AS n FROM R GROUP BY p", "its start and length are constants"),
    ("SELECT SUBSTRING(g, -1, 2) AS p, COUNT(*) AS n FROM R GROUP BY p", "SUBSTRING starts at a position >= 1"),
    ("SELECT EXTRACT(YEAR FROM g) AS y, COUNT(*) AS n FROM R GROUP BY y", "YEAR of a STRING"),
    ("SELECT SUM(SUBSTRING(g, 1, 2)) AS s FROM R", "cannot aggregate SUBSTRING"),
    ("SELECT a, COUNT(*) AS n FROM R GROUP BY ABS(a)", "unsupported GROUP BY expression"),
    ("SELECT d, COUNT(*) AS n FROM R GROUP BY d HAVING YEAR(d) > 1994",
     "value YEAR(d) in HAVING is neither grouped nor inside an aggregate (a function of a column read outside "
     "aggregates must be a group key"),
    ("SELECT a, YEAR(d) + COUNT(*) AS x FROM R GROUP BY a", "value YEAR(d) in YEAR(d) + COUNT(*) is neither grouped"),
    ("WITH t AS (SELECT YEAR(d) AS y, SUM(b) AS s FROM R GROUP BY y) SELECT y, SUM(s) AS s FROM t GROUP BY y",
     "unsupported column YEAR(d) AS y of a grouped derived table"),
    ("SELECT COUNT(*) AS n FROM R, S WHERE EXTRACT(YEAR FROM d) = SUBSTRING(h, 1, 2)",
     "cannot compare INT value EXTRACT(YEAR FROM d) with STRING value SUBSTRING(h, 1, 2)"),
])
def test_refused_with_the_reason(sql, message):
    with pytest.raises(CompileError) as err:
        compile_sql(GENERIC + sql)
    assert message in str(err.value)


def test_checker_refuses_a_call_of_a_loop_variable_or_of_the_wrong_type():
    from boreas.m3.check import check_errors

    bad = parse_program("""CREATE STREAM R(a INT, d DATE, g STRING);
        DECLARE MAP m[K: INT] : INT := R(A, D, G) * {K = YEAR(G)};
        DECLARE MAP n[K: INT] : INT;
        ON +R(A, D, G) DO { n[YEAR(K)] += m[K]; }""")
    messages = [m for m, _ in check_errors(bad)]
    assert "definition of map m: YEAR of a STRING (it takes a DATE)" in messages
    assert any("must be an event variable" in m for m in messages)


def test_state_moves_between_backends():
    """A runtime's state (maps keyed by computed values) restores on the other backend and continues."""
    import datetime

    program = compile_sql(SHAPES["substring"])
    python = Runtime(program, backend="python")
    rows = [(1, 2, datetime.date(1995, 1, 1), "BUILDING"), (2, 3, datetime.date(1996, 1, 1), "BU"),
            (3, 1, datetime.date(1996, 1, 1), "ASIA")]
    python.apply_batch([("R", 1, r) for r in rows])
    native = Runtime(program, backend="auto")
    if native.backend != "native":
        pytest.skip(f"no native backend: {native.backend_reason}")
    native.restore(python.state())
    for rt in (python, native):
        rt.apply_batch([("R", -1, rows[0]), ("R", 1, (4, 4, datetime.date(1994, 1, 1), "BUS"))])
    assert native.view("Q1") == python.view("Q1")
    assert python.view("Q1") == {("AS",): (1, 1), ("BU",): (2, 7)}


def test_native_date_parts_are_pythons():
    """C's date_part (civil-from-days over the day number) gives Python's year, quarter, month, day, day of
    the week (DOW, ISODOW), day of the year and ISO week, also across the years' edges."""
    import datetime

    from hypothesis import given, settings
    from hypothesis import strategies as st

    sql = "CREATE STREAM R(d DATE);\n" + ";\n".join(
        f"SELECT EXTRACT({f} FROM d) AS k, COUNT(*) AS n FROM R GROUP BY k"
        for f in ("YEAR", "QUARTER", "MONTH", "DAY", "DOW", "ISODOW", "DOY", "WEEK")) + ";"
    program = compile_sql(sql)
    native = Runtime(program, backend="auto")
    if native.backend != "native":
        pytest.skip(f"no native backend: {native.backend_reason}")
    python = Runtime(program, backend="python")
    edges = [datetime.date(1, 1, 1), datetime.date(9999, 12, 31), datetime.date(2000, 2, 29),
             datetime.date(1900, 3, 1), datetime.date(1970, 1, 1), datetime.date(1600, 12, 31),
             datetime.date(2021, 1, 3), datetime.date(2008, 12, 29), datetime.date(2005, 1, 1),
             datetime.date(2004, 12, 31), datetime.date(2020, 12, 31)]  # ISO weeks 53 and 1 across years

    @settings(max_examples=40, deadline=None)
    @given(st.lists(st.dates(), min_size=1, max_size=30))
    def check(dates):
        events = [("R", 1, (d,)) for d in dates + edges]
        for rt in (native, python):
            rt.apply_batch(events)
        for view in program.views:
            assert native.view(view.name) == python.view(view.name)
        for rt in (native, python):
            rt.apply_batch([("R", -1, row) for _, _, row in events])
            assert rt.entries() == 0

    check()


def test_a_partitioned_box_refuses_computed_keys():
    from boreas.m3.cumulus.plan import PlanError, refuse_computed_views

    with pytest.raises(PlanError, match=r"computes a key from the event's row \(YEAR\(D\)"):
        refuse_computed_views(compile_sql(SHAPES["year"]), "b")
