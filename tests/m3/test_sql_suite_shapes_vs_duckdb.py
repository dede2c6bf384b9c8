"""Shapes DBToaster's query suite writes (issue 33) agree with DuckDB after every batch of inserts and deletes.

Block comments before a statement, or standing alone between statements, are no statement
(``m3/compiler/positions.py``).  Random workloads over small domains (``m3_harness``), both backends:
every view equals DuckDB's after every batch, every map its definition, deleting every row empties every map.
"""

from __future__ import annotations

import pytest
from boreas.m3 import compile_sql
from m3_harness import check_against_duckdb, shape_params

GENERIC = """
CREATE STREAM R(a INT, b INT, c DOUBLE);
CREATE STREAM S(b INT, d INT, e DOUBLE);
"""

SHAPES: dict[str, str] = {
    "comment_before_declaration": """/* a note before the first statement */
        CREATE STREAM R(a INT, b INT, c DOUBLE);
        /* one between */ CREATE STREAM S(b INT, d INT, e DOUBLE);
        SELECT R.a, SUM(S.e) AS s FROM R, S WHERE R.b = S.b GROUP BY R.a;
        /* a query commented out, alone after the last statement: SELECT 1 */""",
}


@pytest.mark.parametrize("shape", shape_params(SHAPES))
def test_view_matches_duckdb(shape):
    check_against_duckdb(SHAPES[shape])


def test_a_comment_before_create_stream_declares_a_stream():
    program = compile_sql("/* streams; */ CREATE STREAM R(a INT); /* the view */ SELECT SUM(a) AS s FROM R; /* SELECT 1; */")
    assert [(r.name, r.kind) for r in program.relations] == [("R", "STREAM")]
    assert [v.name for v in program.views] == ["Q1"]
