"""A WHERE whose conjunct ``int_col = 2.5`` never holds (issue 33's zeus shapes): the view is always empty.

An INT column never equals a constant with a fractional part, so the whole WHERE is false whatever its other
conjuncts say, and a construct in them refused elsewhere (a division by a column in a comparison) does not
matter (``m3/compiler/neverequal.py``).  Random insert/delete workloads (``m3_harness``), both backends: DuckDB
returns no row either (its ``x / 0`` is inf or NaN, no error); a whole equality (``b = 2.0``) is compiled as
before.
"""

from __future__ import annotations

import pytest
from boreas.m3 import CompileError, compile_sql
import m3_harness
from m3_harness import Harness, check_against_duckdb, shape_params

GENERIC = """
CREATE STREAM R(a INT, b INT, c DOUBLE);
CREATE STREAM S(b INT, d INT, e DOUBLE);
"""

SHAPES: dict[str, str] = {
    "rows_with_a_division": GENERIC + """SELECT * FROM R AS z
        WHERE (z.a / z.b > 1 OR z.a < 2) AND z.b = z.a AND z.b = 2.5""",
    "grouped_over_a_join": GENERIC + """SELECT R.a, SUM(S.e) AS s FROM R, S
        WHERE R.b = S.b AND S.d = 0.5 GROUP BY R.a""",
    "whole_constant_kept": GENERIC + "SELECT a, COUNT(*) AS n FROM R WHERE b = 2.0 GROUP BY a",
}


@pytest.mark.parametrize("shape", shape_params(SHAPES))
def test_view_matches_duckdb(shape):
    check_against_duckdb(SHAPES[shape])


def test_a_float_column_or_a_division_alone_is_not_decided():
    compile_sql(GENERIC + "SELECT a FROM R WHERE c = 2.5")
    with pytest.raises(CompileError) as e:
        compile_sql(GENERIC + "SELECT a FROM R WHERE a / b > 1 AND b = 2")
    assert "unsupported division by b in a comparison" in str(e.value)


@pytest.mark.parametrize("backend", ["python", "native"])
def test_a_with_naming_a_stream_is_not_read_as_the_stream(backend):
    """The CTE ``S``'s ``b`` is R's DOUBLE ``c``, not the stream S's INT ``b``: 2.5 equals it (review's row)."""
    m3_harness.BACKEND = backend
    Harness(GENERIC + "WITH S AS (SELECT a, c AS b FROM R) SELECT a FROM S WHERE b = 2.5").run(
        [[("ins", "R", (1, 2, 2.5))], [("ins", "R", (2, 2, 2.0))]])


def test_an_unknown_column_beside_a_never_equal_is_refused_by_name():
    with pytest.raises(CompileError) as e:
        compile_sql(GENERIC + "SELECT a FROM R WHERE zz = 1 AND b = 2.5")
    assert "unknown column zz" in str(e.value)
