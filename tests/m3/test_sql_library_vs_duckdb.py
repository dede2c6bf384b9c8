"""DBToaster's standard function library (issue 33: casts, math, ``CREATE FUNCTION ... AS EXTERNAL``) agrees with
DuckDB on both backends, under random inserts and deletes.

The casts have DBToaster's semantics (``boreas.m3.library``); the SELECTs are translated to DuckDB's spelling of
the same values (:func:`duckdb_sql`): ``CAST_INT`` of a DOUBLE truncates (``CAST(TRUNC(f) AS BIGINT)``), of a
string is ``atoi`` (the strings drawn are integers, as DuckDB's ``CAST(s AS BIGINT)`` reads them), ``CAST_FLOAT``,
``CAST_DATE``, ``CAST_STRING`` are DuckDB's ``CAST``s; a function declared ``AS EXTERNAL 'cos'`` is ``cos``.  The
math functions keep their names.  Domains: every string column holds what its cast reads (integers, decimal
numbers, ``YYYY-MM-DD`` dates), ``p`` is positive (``SQRT``, ``LN``), floats are multiples of 0.25, so a
``CAST_STRING`` of one is the same text in both.  A sum of the math functions' (irrational) values has the sign
of its terms: a sum of terms of both signs that cancel in exact arithmetic leaves a rounding residue that depends
on the order of the additions (1e-16 where the maps, dropping values below their epsilon, hold nothing), which
the harness' comparison of a map's keys with its definition's cannot tell from a wrong entry.
"""

from __future__ import annotations

import datetime
import re

import pytest
from boreas.m3 import CompileError, Runtime, compile_sql
from hypothesis import strategies as st
from m3_harness import check_against_duckdb, shape_params, value_strategy

GENERIC = """
CREATE STREAM R(i INT, f DOUBLE, p DOUBLE, n VARCHAR, x VARCHAR, t VARCHAR, d DATE);
CREATE STREAM S(b INT, c DOUBLE);
"""
_TYPES = {"i": "INT", "f": "FLOAT", "p": "FLOAT", "n": "STRING", "x": "STRING", "t": "STRING", "d": "DATE",
          "b": "INT", "c": "FLOAT"}

SHAPES: dict[str, str] = {
    # DBToaster's type_mappings shape: each cast of a column of each type, as a view of rows
    "rows_of_casts": GENERIC + "SELECT CAST_INT(f) AS a, CAST_DATE(t) AS b, CAST_FLOAT(x) AS c, CAST_STRING(d) AS e, "
                               "CAST_INT(i) AS g, CAST_INT(n) AS h FROM R",
    "constant_casts": GENERIC + "SELECT CAST_INT(23.5) AS a, CAST_DATE('1998-12-19') AS b, CAST_FLOAT('19.2') AS c, "
                                "CAST_INT(-2.5) AS e, CAST_STRING(0.1) AS g;\nSELECT b, COUNT(*) AS cnt FROM S GROUP BY b",
    "casts_in_aggregates": GENERIC + "SELECT CAST_STRING(i) AS k, SUM(CAST_INT(f)) AS s, SUM(CAST_FLOAT(x)) AS c, "
                                     "SUM(CAST_INT(n) * f) AS m, COUNT(*) AS cnt FROM R GROUP BY CAST_STRING(i)",
    "where_casts": GENERIC + "SELECT i, f FROM R WHERE CAST_INT(n) > 2 AND CAST_DATE(t) < DATE '1995-01-01'",
    "group_by_cast_string_of_a_float": GENERIC + "SELECT CAST_STRING(f) AS k, COUNT(*) AS cnt, SUM(i) AS s FROM R "
                                                 "GROUP BY CAST_STRING(f)",
    "group_by_cast_date": GENERIC + "SELECT CAST_DATE(t) AS k, SUM(f) AS s FROM R GROUP BY CAST_DATE(t)",
    # DBToaster's function/cos shape: math of a column in a view of rows
    "rows_of_math": GENERIC + "SELECT r.f * COS(r.p) AS x, r.f * SIN(r.p) AS y FROM R r",
    "math_in_aggregates": GENERIC + "SELECT i, SUM(POW(f, 2)) AS q, SUM(SQRT(p) * DEGREES(p)) AS w, "
                                    "AVG(RADIANS(p) + EXP(f)) AS a, SUM(LN(p) - POWER(p, 0.5)) AS l FROM R GROUP BY i",
    "math_across_a_join": GENERIC + "SELECT s.b, SUM(r.p * COS(s.c)) AS x, SUM(ATAN(r.p) * SIN(s.c)) AS y FROM R r, "
                                    "S s WHERE r.i = s.b GROUP BY s.b",
    "math_compared": GENERIC + "SELECT i, COUNT(*) AS cnt FROM R WHERE SIN(f) > 0.5 OR SQRT(p) <= 1 GROUP BY i",
    "external_cos_and_atoi": GENERIC + "CREATE FUNCTION my_cos (x double) RETURNS double AS EXTERNAL 'cos';\n"
                                       "CREATE FUNCTION to_int (s string) RETURNS int AS EXTERNAL 'ATOI';\n"
                                       "SELECT to_int(n) AS k, SUM(p * my_cos(p)) AS s FROM R GROUP BY to_int(n)",
}

_STRINGS = {"n": ["12", "-3", " 7", "0", "42"], "x": ["2.5", "-0.25", "1e3", "7", "0.5"],
            "t": ["1994-01-01", "1995-03-15", "1993-12-31", "2000-02-29"]}


def _value(column: str, t: str):
    if column in _STRINGS:
        return st.sampled_from(_STRINGS[column])
    if column == "p":
        return st.integers(1, 12).map(lambda i: i / 4)
    if column == "c":  # COS, SIN of it positive or 0
        return st.integers(0, 6).map(lambda i: i / 4)
    return value_strategy(t)


_CAST = re.compile(r"(CAST_INT|CAST_FLOAT|CAST_DATE|CAST_STRING)\(([^()]*)\)")
_DUCK = {"CAST_FLOAT": "DOUBLE", "CAST_DATE": "DATE", "CAST_STRING": "VARCHAR"}


def _arg_type(arg: str) -> str:
    if arg.startswith("'"):
        return "STRING"
    if re.fullmatch(r"-?\d+", arg):
        return "INT"
    if re.fullmatch(r"-?[\d.]+", arg):
        return "FLOAT"
    return _TYPES[arg.split(".")[-1]]


def _cast(m: re.Match) -> str:
    fn, arg = m.group(1), m.group(2).strip()
    if fn != "CAST_INT":
        return f"CAST({arg} AS {_DUCK[fn]})"
    t = _arg_type(arg)
    return arg if t == "INT" else f"CAST(TRUNC({arg}) AS BIGINT)" if t == "FLOAT" else f"CAST({arg} AS BIGINT)"


def duckdb_sql(select: str) -> str:
    """A SELECT as DuckDB computes the same values (module doc)."""
    select = select.replace("to_int(", "CAST_INT(").replace("my_cos(", "COS(")
    return _CAST.sub(_cast, select)


@pytest.mark.parametrize("shape", shape_params(SHAPES, fast=2))
def test_view_matches_duckdb(shape):
    check_against_duckdb(SHAPES[shape], value=_value, to_duckdb=duckdb_sql)


def test_duckdb_spelling():
    assert duckdb_sql("SELECT CAST_INT(r.f), CAST_INT(n), CAST_INT(i), CAST_DATE('1998-12-19') FROM R r") == \
        "SELECT CAST(TRUNC(r.f) AS BIGINT), CAST(n AS BIGINT), i, CAST('1998-12-19' AS DATE) FROM R r"


@pytest.mark.parametrize("sql, message", [
    ("CREATE FUNCTION f (x double) RETURNS double AS EXTERNAL 'my_udf';\nSELECT SUM(f(p)) AS s FROM R",
     "unsupported CREATE FUNCTION f AS EXTERNAL 'my_udf': Boreas calls no external function"),
    ("CREATE FUNCTION f (x double, y double) RETURNS double AS EXTERNAL 'cos';\nSELECT SUM(f(p, p)) AS s FROM R",
     "CREATE FUNCTION f declares 2 argument(s); cos takes 1"),
    ("SELECT CAST_DATE(f) AS k FROM R", "CAST_DATE of a FLOAT (it takes a DATE)"),
    ("SELECT SUM(COS(n)) AS s FROM R", "COS of a STRING (it takes a INT or FLOAT)"),
    ("SELECT SUM(POW(f, p)) AS s FROM R", "a function of a column and constants"),
    ("SELECT SUM(VEC_DOT(f, p, i)) AS s FROM R", "VEC_DOT takes 6 numbers, not 3"),
    ("SELECT CAST_DATE('19981219') AS k FROM R", "not a date YYYY-MM-DD"),
])
def test_refused_with_the_reason(sql, message):
    with pytest.raises(CompileError) as info:
        compile_sql(GENERIC + sql)
    assert message in str(info.value)


@pytest.mark.parametrize("backend", ["python", "native"])
@pytest.mark.parametrize("sql, row", [
    ("SELECT i, SUM(SQRT(f)) AS s FROM R GROUP BY i", (1, -1.0, 1.0, "1", "1", "1994-01-01", datetime.date(1994, 1, 1))),
    ("SELECT CAST_DATE(t) AS k, COUNT(*) AS cnt FROM R GROUP BY CAST_DATE(t)",
     (1, 1.0, 1.0, "1", "1", "1994-1-1", datetime.date(1994, 1, 1))),
])
def test_a_value_the_library_cannot_give_fails_the_batch(backend, sql, row):
    """SQRT of a negative, a string that is no date: an error of the event (no NaN key, no NULL), nothing
    applied, on both backends (native hands the batch to Python, which raises)."""
    rt = Runtime(compile_sql(GENERIC + sql), backend=backend)
    ok = (1, 1.0, 1.0, "1", "1", "1994-01-01", datetime.date(1994, 1, 1))
    rt.apply_batch([("R", 1, ok)])
    before = rt.view("Q1")
    with pytest.raises(ValueError):
        rt.apply_batch([("R", 1, ok), ("R", 1, row)])
    assert rt.view("Q1") == before


def test_the_printed_program_reads_back():
    """``boreas compile`` prints the library's calls (POW's float exponent too); the M3 parser reads them back."""
    from boreas.m3.printer import format_program
    from boreas.m3.syntax import parse_program

    for sql in SHAPES.values():
        program = compile_sql(sql)
        assert parse_program(format_program(program)) == program
