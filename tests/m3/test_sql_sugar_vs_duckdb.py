"""``JOIN ... USING``, ``NATURAL JOIN``, ``DATE_PART`` and ORDER BY a column not selected (issue 33) agree with DuckDB.

The joins are rewritten into the inner equi-joins the compiler maintains
(:mod:`boreas.m3.compiler.sugar`): an unqualified joined column reads the
left relation's and ``*`` lists it once, as DuckDB does, so a view's columns
and rows are DuckDB's under random inserts and deletes on both backends.
``DATE_PART('year', d)`` is ``EXTRACT(YEAR FROM d)``: a computed key.  ``GREATEST``/``LEAST``
(DBToaster's ``LISTMAX``/``LISTMIN``) inside an aggregate are a CASE of comparisons.
"""

from __future__ import annotations

import pytest
from boreas.m3 import CompileError, compile_sql
from boreas.m3.compiler.pipeline import compile_to_text, compile_with_notes
from m3_harness import check_against_duckdb, shape_params, value_strategy
from null_harness import check_rows_against_duckdb

GENERIC = """
CREATE STREAM R(a INT, b INT, d DATE);
CREATE STREAM S(b INT, c INT);
CREATE STREAM T(c INT, e INT);
"""

SHAPES: dict[str, str] = {
    "using_grouped_by_the_joined_column": GENERIC + "SELECT b, SUM(a * c) AS s FROM R JOIN S USING (b) GROUP BY b",
    "using_rows_star": GENERIC + "SELECT * FROM R JOIN S USING (b) WHERE b < 3",
    "natural_star": GENERIC + "SELECT * FROM S NATURAL JOIN T",
    "natural_three_way": GENERIC + "SELECT a, COUNT(*) AS n, SUM(e) AS s FROM R NATURAL JOIN S NATURAL JOIN T GROUP BY a",
    "using_then_on": GENERIC + """SELECT r.a, SUM(t.e) AS s FROM R r JOIN S USING (b) JOIN T t ON S.c = t.c
        GROUP BY r.a""",
    "date_part_group": GENERIC + """SELECT DATE_PART('year', d) AS y, SUM(a) AS s FROM R
        GROUP BY DATE_PART('year', d)""",
    "date_part_rows_and_where": GENERIC + "SELECT DATE_PART('month', d) AS m, a FROM R WHERE DATE_PART('year', d) >= 1995",
    "greatest_in_a_sum": GENERIC + "SELECT a, SUM(GREATEST(b, 2)) AS g, SUM(LEAST(a, b, 1)) AS l FROM R GROUP BY a",
    "greatest_across_a_join": GENERIC + "SELECT SUM(GREATEST(R.a, S.c)) AS g FROM R JOIN S USING (b)",
    "order_by_a_column_not_selected": GENERIC + "SELECT a, SUM(b) AS s FROM R GROUP BY a ORDER BY a, s DESC",
}


@pytest.mark.parametrize("shape", shape_params(SHAPES))
def test_view_matches_duckdb(shape):
    check_against_duckdb(SHAPES[shape])


def test_star_over_using_lists_the_joined_column_once_in_duckdbs_order():
    program = compile_sql(GENERIC + "CREATE VIEW v AS SELECT * FROM R NATURAL JOIN S")
    assert list(program.views[0].keys) == ["a", "b", "d", "c"]


def test_listmax_and_listmin_are_greatest_and_least():
    listed = compile_sql(GENERIC + "SELECT a, SUM(LISTMAX(b, 2)) AS g, SUM(LISTMIN(a, b, 1)) AS l FROM R GROUP BY a")
    assert listed == compile_sql(SHAPES["greatest_in_a_sum"])


def test_order_by_a_column_not_selected_is_accepted_with_a_note_naming_it():
    _, notes = compile_with_notes(GENERIC + "SELECT a FROM R ORDER BY b DESC")
    assert notes == ("Q1: ORDER BY ignored: a view is a set of rows (sort them when reading the view; b not "
                     "selected: select it to sort by it)",)


def test_order_by_a_name_of_no_output_or_column_is_accepted_with_a_note_naming_it():
    _, notes = compile_with_notes(GENERIC + "SELECT a, COUNT(*) AS n FROM R GROUP BY a ORDER BY zz, n")
    assert notes == ("Q1: ORDER BY ignored: a view is a set of rows (sort them when reading the view; zz names no "
                     "output or column: nothing to sort by)",)


def test_compile_shows_the_cost_class_of_each_new_construct():
    text = compile_to_text(GENERIC + """SELECT b, SUM(c) AS s FROM R JOIN S USING (b) GROUP BY b;
        SELECT COUNT(*) AS n FROM S NATURAL JOIN T; SELECT DATE_PART('year', d) AS y, COUNT(*) AS n FROM R GROUP BY y""")
    assert [line.split(":")[0:2] for line in text.splitlines()[:3]] == \
        [["-- view Q1", " first-order"], ["-- view Q2", " first-order"], ["-- view Q3", " first-order"]]


@pytest.mark.parametrize("sql, message", [
    ("SELECT * FROM R JOIN S USING (c)", "JOIN ... USING (c): no relation to the left of S has a column c"),
    ("SELECT * FROM R JOIN S USING (a)", "JOIN ... USING (a): S has no column a"),
    ("SELECT * FROM R FULL JOIN S USING (b)", "unsupported FULL JOIN ... USING (b) (inner, LEFT and RIGHT joins"),
    ("SELECT * FROM R, S NATURAL JOIN T", "unsupported NATURAL JOIN after a comma join"),
    ("SELECT * FROM R r1 JOIN R r2 ON r1.a = r2.a JOIN S USING (b)", "b is a column of both r1 and r2"),
    ("SELECT * FROM (SELECT b FROM R) x JOIN S USING (b)", "unsupported NATURAL JOIN or JOIN ... USING with a derived"),
    ("SELECT DATE_PART(a, d) AS y, COUNT(*) AS n FROM R GROUP BY y", "write DATE_PART('part', column)"),
    ("SELECT DATE_PART('epoch', d) AS y, COUNT(*) AS n FROM R GROUP BY y", "unsupported EXTRACT(EPOCH FROM a column)"),
    ("SELECT LISTMAX(a, b) AS g FROM R", "unsupported expression GREATEST(a, b) in a query without aggregates"),
])
def test_refused_with_the_construct_named(sql, message):
    with pytest.raises(CompileError, match=None) as e:
        compile_sql(GENERIC + sql)
    assert message in str(e.value)


def test_compile_shows_greatest_across_relations_as_domain_bound_and_within_one_as_first_order():
    across = compile_to_text(SHAPES["greatest_across_a_join"]).splitlines()[0]
    within = compile_to_text(SHAPES["greatest_in_a_sum"]).splitlines()[0]
    assert across.startswith("-- view Q1: domain-bound: a comparison between columns")
    assert within.startswith("-- view Q1: first-order")


def test_a_left_join_using_a_column_with_a_padded_date_matches_duckdb():
    """``S LEFT JOIN R USING (b)`` pads R's DATE column ``d`` (refused before branch sqlL: a padded DATE key is now
    its type's zero with an indicator, its NULL shown None)."""
    check_rows_against_duckdb(GENERIC + "SELECT * FROM S LEFT JOIN R USING (b)", examples=5,
                              value=lambda column, t: value_strategy(t))  # (no column here is nullable)

