"""GROUP BY columns the SELECT does not name (issue 33 item 5): internal keys, never output, against DuckDB.

``SELECT SUM(a) AS s FROM R GROUP BY b`` returns one row per group holding
``s`` only, so two groups may give equal rows.  The view keeps ``b`` as an
internal key (its maps are keyed by it, the query API reads it by name) and
its output rows leave it out: the harness compares the view's rows, internal
keys dropped, with DuckDB's rows as bags (``m3_harness.compare_rows``), on
both backends, under random inserts and deletes over small domains, and
deleting every row empties every map.  The shapes cover a plain map, a view
computed when read (AVG, MIN, HAVING), a join, a computed key, a subquery, a
view that selects no value, and a name clash with a selected alias.
"""

from __future__ import annotations

import pytest
from boreas.m3 import CompileError, compile_sql
from boreas.m3.printer import format_program
from boreas.m3.syntax import parse_program
from m3_harness import check_against_duckdb, shape_params

GENERIC = """
CREATE STREAM R(a INT, b INT, c DOUBLE, d DATE);
CREATE STREAM S(b INT, e INT);
"""

SHAPES: dict[str, str] = {
    "sum_by_one_unselected": GENERIC + "SELECT SUM(a) AS s FROM R GROUP BY b",
    "count_by_two_one_selected": GENERIC + "SELECT b, COUNT(*) AS n FROM R GROUP BY b, a",
    "avg_and_min_by_unselected": GENERIC + "SELECT AVG(c) AS av, MIN(a) AS lo FROM R GROUP BY b",
    "having_by_unselected": GENERIC + "SELECT SUM(c) AS s FROM R GROUP BY b, a HAVING COUNT(*) > 1",
    "join_grouped_by_the_other_side": GENERIC + """SELECT r.a, SUM(r.c * s.e) AS t FROM R r JOIN S s
        ON r.b = s.b GROUP BY r.a, s.e""",
    "computed_key_unselected": GENERIC + "SELECT COUNT(*) AS n FROM R GROUP BY EXTRACT(YEAR FROM d)",
    "exists_subquery": GENERIC + """SELECT SUM(a) AS s FROM R WHERE EXISTS (SELECT * FROM S WHERE S.b = R.b)
        GROUP BY d""",
    "keys_only_one_row_per_group": GENERIC + "SELECT b FROM R GROUP BY b, a",
    "alias_named_like_the_group_column": GENERIC + "SELECT COUNT(*) AS b FROM R GROUP BY b",
}


@pytest.mark.parametrize("shape", shape_params(SHAPES))
def test_view_matches_duckdb(shape):
    check_against_duckdb(SHAPES[shape])


def test_the_unselected_group_columns_are_internal_keys():
    program = compile_sql(GENERIC + "SELECT SUM(a) AS s FROM R GROUP BY b, d; SELECT b, COUNT(*) AS b_1 "
                                    "FROM R GROUP BY b, a; SELECT COUNT(*) AS b FROM R GROUP BY b")
    first, second, third = program.views
    assert (first.keys, first.internal, [c.name for c in first.columns]) == (("b", "d"), ("b", "d"), ["s"])
    assert (second.keys, second.internal) == (("b", "a"), ("a",))
    assert (third.keys, third.internal, [c.name for c in third.columns]) == (("b_1",), ("b_1",), ["b"])
    assert [first.keys[i] for i in first.output_keys] == [] and second.output_keys == (0,)


def test_internal_keys_read_back_from_the_printed_program():
    """``boreas compile`` marks them ``INTERNAL``; the M3 parser reads the same program back."""
    program = compile_sql(SHAPES["having_by_unselected"] + ";" + SHAPES["sum_by_one_unselected"].split(";")[-1])
    text = format_program(program)
    assert "DECLARE VIEW Q1[b := B INTERNAL, a := A INTERNAL](" in text
    assert "DECLARE VIEW Q2[b INTERNAL](s := Q2_s);" in text
    assert parse_program(text) == program


def test_a_view_marking_an_unknown_key_internal_is_refused():
    """(The M3 text marks keys it declares; a program built by hand is checked.)"""
    from dataclasses import replace

    from boreas.m3.check import check_program
    from boreas.m3.errors import M3Error

    program = compile_sql(SHAPES["sum_by_one_unselected"])
    bad = replace(program, views=(replace(program.views[0], internal=("x",)),))
    with pytest.raises(M3Error, match="view Q1 marks x INTERNAL but has no key column x"):
        check_program(bad)


@pytest.mark.parametrize("sql", [
    "SELECT SUM(a) AS s FROM R GROUP BY b INTERSECT SELECT SUM(a) AS s FROM R GROUP BY a",
    "SELECT b FROM R GROUP BY b, a UNION SELECT b FROM S",
    "SELECT b FROM R EXCEPT SELECT b FROM R GROUP BY b, a",
])
def test_a_set_operation_over_groups_told_apart_by_unselected_columns_is_refused(sql):
    """A set operation compares output rows: its branches are views of rows (groups told apart by columns no
    row holds could not take part)."""
    with pytest.raises(CompileError, match="of aggregated queries|of an aggregated query"):
        compile_sql(GENERIC + sql)


def test_cumulus_places_a_view_by_its_internal_key():
    """An internal key partitions a box as a selected one does (``key="b"``: each group's maps on one member)."""
    from boreas.m3.cumulus.placement import place

    program = compile_sql(GENERIC + "SELECT SUM(r.a * s.e) AS t FROM R r JOIN S s ON r.b = s.b GROUP BY r.b")
    placed = place(program, key="b")
    assert placed.columns and all(column == 0 for column in placed.columns.values())
    assert all("key='b'" in placed.reason(m) for m in placed.columns)
