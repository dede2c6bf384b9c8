"""Constant views (issue 33): queries that read no relation agree with DuckDB, on both backends.

A query without FROM whose items are constants (``SELECT 1 AS a, 'x' AS s WHERE 2 > 3``), a FROM-less derived
table of constants (``FROM (SELECT 1 AS k) c``: its columns are those constants, ``m3/compiler/constrow.py``)
and a scalar function of constants (``SUBSTRING('FOO', 1, 2)``) make a view of one fixed row, or none: no map,
no statement; the runtime reads its row where its WHERE holds.  Beside relations, under random insert/delete
workloads (``m3_harness``), every view equals DuckDB's after every batch; a constant derived table joined with a
relation is that relation's query with the constants in place.
"""

from __future__ import annotations

import pytest
from boreas.m3 import CompileError, Runtime, compile_sql, compile_to_text
from boreas.m3.syntax import parse_program
from boreas.m3.printer import format_program
from m3_harness import check_against_duckdb, new_runtime, shape_params

GENERIC = """
CREATE STREAM R(a INT, b INT, c DOUBLE);
CREATE STREAM S(b INT, d INT, e DOUBLE);
"""

# the harness draws events for the relations a program reads: a view over S beside each constant one
BESIDE = ";\nSELECT b, COUNT(*) AS n FROM S GROUP BY b"

SHAPES: dict[str, str] = {
    "constants": GENERIC + "SELECT 1 AS x, 2.5 AS y, 'u' AS z, 7 / 2 AS h" + BESIDE,
    "false_where": GENERIC + "SELECT 1 AS x WHERE (2 > 3)" + BESIDE,
    "true_where_in_list": GENERIC + "SELECT 3 - 1 AS x WHERE 2 IN (1, 2) AND NOT 4 IN (5)" + BESIDE,
    "substring_of_constant": GENERIC + "SELECT SUBSTRING('FOOBAR', 2, 3) AS s, SUBSTRING('AB', 2) AS t" + BESIDE,
    "constant_derived_table": GENERIC + "SELECT k.v + 1 AS w FROM (SELECT 1 AS v) k WHERE v IN (SELECT 1)" + BESIDE,
    "constant_derived_table_false": GENERIC + "SELECT 1 AS w FROM (SELECT 1 AS v) k WHERE k.v = 2" + BESIDE,
    "constant_row_joined": GENERIC + """SELECT R.a, COUNT(*) AS n, SUM(R.c * k.f) AS s
        FROM R, (SELECT 2 AS kb, 0.5 AS f) k WHERE R.b = k.kb GROUP BY R.a""",
    "constant_row_beside_rows": GENERIC + "SELECT R.a, k.t FROM (SELECT 'x' AS t) AS k, R WHERE R.a > 0" + BESIDE,
}


@pytest.mark.parametrize("shape", shape_params(SHAPES))
def test_view_matches_duckdb(shape):
    check_against_duckdb(SHAPES[shape])


def test_a_program_without_relations_reads_its_one_row_on_both_backends():
    program = compile_sql("SELECT 1 AS A, 'x' AS s; SELECT 1 AS B WHERE 2 > 3")
    assert parse_program(format_program(program)) == program
    for backend in ("python", "native"):
        rt = new_runtime(program, backend) if backend == "native" else Runtime(program, backend="python")
        assert rt.view("Q1") == {(): (1, "x")}
        assert rt.view("Q2") == {}


def test_compile_shows_the_constant_cost_class():
    first = compile_to_text("SELECT 1 AS a WHERE 2 > 3").splitlines()[0]
    assert first == "-- view Q1: constant: reads no relation: its one row (or none) is fixed, no map, no statement"


@pytest.mark.parametrize("sql, message", [
    (GENERIC + "SELECT a FROM (SELECT 1 AS a) k, R", "a derived table needs a FROM clause"),
    (GENERIC + "SELECT 1 AS x WHERE 1 IN (2, NULL)", "unsupported NULL in a constant IN list"),
    (GENERIC + "SELECT 1 AS x WHERE '1' IN (1)", "unsupported comparison of a string with a number"),
    (GENERIC + "SELECT 1 AS x WHERE 2 IN (1, 'x')", "unsupported comparison of a string with a number"),
    (GENERIC + "SELECT 1 AS x WHERE '1' = 1", "unsupported comparison of a string with a number"),
    (GENERIC + "SELECT SUBSTRING('FOO', -1, 2) AS s", "in a query without FROM"),
])
def test_what_is_not_one_constant_row_is_refused_by_name(sql, message):
    with pytest.raises(CompileError) as e:
        compile_sql(sql)
    assert message in str(e.value)
