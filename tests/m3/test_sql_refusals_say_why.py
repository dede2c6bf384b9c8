"""Constructs the SQL front end does not support yet are refused saying what and where (issues 33 and 34).

Nexmark's queries (bench/nexmark_queries.py) met two misleading refusals: a window table function
(``TABLE(TUMBLE(...))``) was an SQL syntax error, "Expecting )", and ``CASE``, ``SPLIT_INDEX`` or ``DATE_FORMAT``
in a query without aggregates was "unsupported ... over aggregates" although the query has none.
"""

from __future__ import annotations

import pytest
from boreas.m3 import CompileError, compile_sql

GENERIC = "CREATE STREAM R(a INT, b INT, s VARCHAR, t DOUBLE);\n"


def _refusal(sql: str) -> str:
    with pytest.raises(CompileError) as info:
        compile_sql(GENERIC + sql)
    return str(info.value)


@pytest.mark.parametrize("call", [
    "TABLE(TUMBLE(TABLE R, DESCRIPTOR(t), INTERVAL '10' SECOND))",
    "TABLE(HOP(TABLE R, DESCRIPTOR(t), INTERVAL '2' SECOND, INTERVAL '10' SECOND))",
    "TABLE(SESSION(TABLE R PARTITION BY a, DESCRIPTOR(t), INTERVAL '10' SECOND))",
])
def test_tumble_hop_and_session_compile(call):
    program = compile_sql(GENERIC + f"SELECT a, COUNT(*) AS n\nFROM {call}\nGROUP BY a, window_start, window_end")
    assert [c.name for c in program.relations[0].columns][-2:] == ["window_start", "window_end"]


@pytest.mark.parametrize("call, line_col", [
    ("TABLE(CUMULATE(TABLE R, DESCRIPTOR(t), INTERVAL '2' SECOND, INTERVAL '10' SECOND))", "line 3, col 12"),
])
def test_a_window_table_function_boreas_does_not_run_is_refused_by_name_at_its_line(call, line_col):
    message = _refusal(f"SELECT a, COUNT(*) AS n\nFROM {call}\nGROUP BY a, window_start, window_end")
    assert "windows are not supported: " in message and call.split("(")[1] in message
    assert "syntax error" not in message
    assert line_col in message


def test_a_window_functions_name_inside_a_string_is_no_window():
    program = compile_sql(GENERIC + "SELECT a, s FROM R WHERE s = 'tumble(x)'")
    assert len(program.views) == 1  # compiled: a refusal would have raised


@pytest.mark.parametrize("item, name", [
    ("REVERSE(s)", "REVERSE"),  # (CASE of one column, SPLIT_INDEX, DATE_FORMAT run since branch nexexpr)
    ("INITCAP(s)", "INITCAP"),
])
def test_an_expression_in_a_view_without_aggregates_is_refused_as_such(item, name):
    message = _refusal(f"SELECT a, {item} AS x FROM R")
    assert f"unsupported expression {name} ({item}) in a view without aggregates" in message
    assert "over aggregates" not in message


@pytest.mark.parametrize("grouped", [False, True])
def test_a_case_over_several_columns_outside_an_aggregate_is_refused_by_name(grouped):
    item = "CASE WHEN a > 1 THEN s ELSE 'y' END"
    message = _refusal(f"SELECT a, SUM(b) AS x, {item} AS d FROM R GROUP BY a, s" if grouped else
                       f"SELECT a, {item} AS x FROM R")
    assert "unsupported CASE over several columns (a, s) outside an aggregate" in message


def test_over_aggregates_is_said_where_the_view_has_aggregates():
    message = _refusal("SELECT a, SUM(b) AS x, REVERSE(s) AS d FROM R GROUP BY a, s")
    assert "unsupported expression REVERSE (REVERSE(s)) over aggregates" in message


def test_a_function_of_an_enclosing_querys_column_in_a_subquery_is_refused_by_name():
    """``MOD(r.a, 3)`` inside a subquery reads the outer row: once a bare KeyError, now the construct named."""
    message = _refusal("CREATE STREAM S(b INT, c INT);\nSELECT r.a, r.b FROM R r\n"
                       "WHERE r.b > (SELECT SUM(s.c) FROM S s WHERE s.b = MOD(r.a, 3))")
    assert "MOD of r.a" in message and "enclosing query" in message
