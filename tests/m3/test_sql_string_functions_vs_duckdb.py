"""The string and event-time functions Nexmark reads (issue 34 item 2) agree with DuckDB on both backends:
``SPLIT_INDEX``, ``REGEXP_EXTRACT``, ``LOWER``, ``UPPER``, ``CHAR_LENGTH`` of a STRING column and ``HOUR``,
``DATE_FORMAT`` of event time (DOUBLE milliseconds since the epoch, UTC), and a CASE outside an aggregate over one
column (Nexmark q14's ``CASE WHEN HOUR(dateTime) >= 8 ...``: a function of that column), in SELECT, WHERE, GROUP
BY and across a join, under random inserts and deletes.

DuckDB has other names for Flink's functions: the SELECTs are translated as the Nexmark bench translates them
(``bench/nexmark_boreas.duckdb_sql``: ``SPLIT_INDEX`` 0-based as ``split_part`` 1-based, ``DATE_FORMAT``'s
Java letters as ``strftime``'s, ``HOUR`` of ``epoch_ms``).  The domains are small and cross the edges that
matter: hour and day boundaries (and a millisecond before the epoch), strings with an empty piece, no piece at
the index, a regular expression's match, no match and an empty group.
"""

from __future__ import annotations

import pytest
from boreas.m3 import CompileError, compile_sql
from hypothesis import strategies as st
from m3_harness import check_against_duckdb, shape_params, value_strategy
from support.bench import bench_importable

GENERIC = """
CREATE STREAM R(a INT, u VARCHAR, t DOUBLE);
CREATE STREAM S(b INT, c INT);
"""
_CHANNEL = "REGEXP_EXTRACT(u, '(&|^)channel_id=([^&]*)', 2)"

SHAPES: dict[str, str] = {
    "rows_split_index": GENERIC + "SELECT a, SPLIT_INDEX(u, '/', 1) AS d1, SPLIT_INDEX(u, '/', 3) AS d3 FROM R",
    "where_lower": GENERIC + "SELECT a, u FROM R WHERE LOWER(u) = 'apple' OR UPPER(u) = 'A/B/C'",
    "rows_upper_and_char_length": GENERIC + "SELECT UPPER(u) AS x, CHAR_LENGTH(u) AS n, a FROM R",
    "group_by_regexp_extract": GENERIC + f"SELECT {_CHANNEL} AS ch, COUNT(*) AS n, SUM(a) AS s FROM R "
                                         f"GROUP BY {_CHANNEL}",
    "rows_hour_where_hour": GENERIC + "SELECT HOUR(t) AS h, a FROM R WHERE HOUR(t) >= 8 AND HOUR(t) < 23",
    "group_by_date_format": GENERIC + "SELECT DATE_FORMAT(t, 'yyyy-MM-dd') AS d, COUNT(*) AS n, SUM(a) AS s "
                                      "FROM R GROUP BY DATE_FORMAT(t, 'yyyy-MM-dd')",
    "group_by_two_formats": GENERIC + "SELECT DATE_FORMAT(t, 'HH:mm') AS hm, u, SUM(a) AS s FROM R "
                                      "GROUP BY DATE_FORMAT(t, 'HH:mm'), u",
    "hour_across_a_join": GENERIC + "SELECT r.u, s.c FROM R r, S s WHERE r.a = s.b AND HOUR(r.t) < 12",
    "sum_by_split_index_across_a_join": GENERIC + "SELECT SPLIT_INDEX(r.u, '/', 0) AS k, SUM(s.c) AS t "
                                                  "FROM R r JOIN S s ON r.a = s.b GROUP BY SPLIT_INDEX(r.u, '/', 0)",
    # a CASE outside an aggregate whose conditions and values read one column: a function of it (compiler/casewhen)
    "rows_case_of_hour": GENERIC + "SELECT a, CASE WHEN HOUR(t) >= 8 AND HOUR(t) <= 18 THEN 'day' WHEN HOUR(t) <= 6 "
                                   "OR HOUR(t) >= 20 THEN 'night' ELSE 'other' END AS k FROM R",
    "group_by_case_of_a_string": GENERIC + "SELECT CASE WHEN LOWER(u) = 'apple' THEN 'fruit' WHEN u LIKE '%/%' THEN "
                                           "SPLIT_INDEX(u, '/', 0) ELSE u END AS k, COUNT(*) AS n, SUM(a) AS s FROM R "
                                           "GROUP BY CASE WHEN LOWER(u) = 'apple' THEN 'fruit' WHEN u LIKE '%/%' "
                                           "THEN SPLIT_INDEX(u, '/', 0) ELSE u END",
    "where_simple_case": GENERIC + "SELECT a, u FROM R WHERE CASE a WHEN 1 THEN 'one' WHEN 2 THEN 'two' ELSE 'many' "
                                   "END = 'two' OR CASE WHEN a = 0 THEN 1 ELSE 0 END = 1",
    "group_by_case_int": GENERIC + "SELECT CASE WHEN a < 2 THEN 0 ELSE 1 END AS k, SUM(a) AS s, COUNT(*) AS n FROM R "
                                   "GROUP BY CASE WHEN a < 2 THEN 0 ELSE 1 END",
    "case_across_a_join": GENERIC + "SELECT r.u, CASE WHEN s.c > 1 THEN 'big' ELSE 'small' END AS size FROM R r, S s "
                                    "WHERE r.a = s.b",
    "case_float": GENERIC + "SELECT CASE WHEN t < 0 THEN 0.5 ELSE t END AS v, a FROM R",
}

_HOUR = 3_600_000
_TIMES = [0.0, -1.0, 8 * _HOUR - 1, 8 * _HOUR, 12 * _HOUR + 60_000, 23 * _HOUR, 24 * _HOUR - 1, 24 * _HOUR,
          1_700_000_000_123.0]
_STRINGS = ["a/b/c", "A/B/C", "/p//q/r", "x", "", "Apple", "APPLE", "channel_id=3&u=1", "u=1&channel_id=",
            "u=2&channel_id=é"]


def _value(column: str, t: str):
    if column == "t":
        return st.sampled_from(_TIMES)
    if column == "u":
        return st.sampled_from(_STRINGS)
    return value_strategy(t)


@pytest.fixture(scope="module")
def to_duckdb():
    mp = pytest.MonkeyPatch()
    body = bench_importable(mp, ("nexmark_boreas", "nexmark_queries"))
    next(body)
    import nexmark_boreas

    yield nexmark_boreas.duckdb_sql
    next(body, None)
    mp.undo()


@pytest.mark.parametrize("shape", shape_params(SHAPES, fast=1))  # the fast tier is full: one quick shape
def test_view_matches_duckdb(shape, to_duckdb):
    check_against_duckdb(SHAPES[shape], value=_value, to_duckdb=to_duckdb)


@pytest.mark.parametrize("sql, message", [
    ("SELECT SPLIT_INDEX(u, 1, '/') AS x FROM R", "SPLIT_INDEX takes the constants (string, integer)"),
    ("SELECT DATE_FORMAT(t, 'yyyy-ww') AS x FROM R", "DATE_FORMAT pattern 'yyyy-ww': letters other than"),
    ("SELECT HOUR(u) AS x FROM R", "HOUR of a STRING (it takes a INT or FLOAT)"),
    ("SELECT REGEXP_EXTRACT(u, '(a', 1) AS x FROM R", "REGEXP_EXTRACT pattern '(a': missing )"),
    ("SELECT REGEXP_EXTRACT(u, '(a)', 2) AS x FROM R", "REGEXP_EXTRACT group 2 of a pattern with 1 group(s)"),
    ("SELECT LOWER(a) AS x FROM R", "LOWER of a INT (it takes a STRING)"),
    ("SELECT SPLIT_INDEX(u, '/', a) AS x FROM R", "a function of a column and constants"),
    ("SELECT CASE WHEN a < 1 THEN u ELSE 'x' END AS k FROM R", "unsupported CASE over several columns (a, u)"),
    ("SELECT CASE WHEN a < 1 THEN 'y' END AS k FROM R", "unsupported CASE without ELSE outside an aggregate"),
    ("SELECT CASE WHEN a < 1 THEN 'y' ELSE 2 END AS k FROM R", "CASE values of types STRING, INT"),
])
def test_refused_with_the_reason(sql, message):
    with pytest.raises(CompileError) as info:
        compile_sql(GENERIC + sql)
    assert message in str(info.value)


def test_the_printed_program_reads_back():
    """``boreas compile`` prints a call's string constants; the M3 parser reads every shape's program back."""
    from boreas.m3.printer import format_program
    from boreas.m3.syntax import parse_program

    for sql in SHAPES.values():
        program = compile_sql(sql)
        assert parse_program(format_program(program)) == program
