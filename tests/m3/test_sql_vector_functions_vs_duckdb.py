"""DBToaster's vector functions of several numbers (issue 33: ``VEC_LENGTH``, ``VEC_DOT``, ``VECTOR_ANGLE``,
``DIHEDRAL_ANGLE``; ``boreas.m3.library``), their arguments arithmetic over two relations' columns, agree with
DuckDB on both backends under random inserts and deletes: inside SUM and AVG, compared in WHERE, selected in a
view without aggregates (mddb's query1 and query2 shapes), grouped by.

DuckDB has no such functions: :func:`duckdb_sql` writes each as DuckDB's arithmetic, ``sqrt``, ``acos`` and
``atan2`` in the library's order of operations.  Domains keep the values finite where the library would fail the
batch (module doc there): ``VECTOR_ANGLE`` reads vectors ``(x, y, 1)`` and ``(1, y', 0)`` (never a zero vector,
never parallel); ``DIHEDRAL_ANGLE`` (of both signs) is compared or selected, not summed (a sum of terms of both
signs leaves a rounding residue the harness cannot tell from a wrong map entry).
"""

from __future__ import annotations

import pytest
import sqlglot
from boreas.m3 import CompileError, Runtime, compile_sql
from hypothesis import strategies as st
from m3_harness import check_against_duckdb, shape_params
from sqlglot import exp

SCHEMA = """
CREATE STREAM P(t INT, id INT, x DOUBLE, y DOUBLE, z DOUBLE);
CREATE STREAM M(id INT, kind INT);
"""

SHAPES: dict[str, str] = {
    # mddb query1's shape: the distance of two atoms of one time step, averaged per time step
    "avg_of_a_length_across_a_self_join": SCHEMA + "SELECT p.t, AVG(VEC_LENGTH(p.x - p2.x, p.y - p2.y, p.z - p2.z)) "
                                                   "AS rdf FROM P p, M m, P p2 WHERE p.t = p2.t AND p.id = m.id "
                                                   "AND m.kind = 1 GROUP BY p.t",
    "sum_of_a_dot_over_two_relations": SCHEMA + "SELECT m.kind, SUM(VEC_DOT(p.x, p.y, p.z, m.kind, 2, m.id * 0.5)) "
                                                "AS d, COUNT(*) AS n FROM P p, M m WHERE p.id = m.id GROUP BY m.kind",
    "sum_of_an_angle": SCHEMA + "SELECT p.t, SUM(VECTOR_ANGLE(p.x, p.y, 1, 1, p2.y - p2.x, 0)) AS a FROM P p, "
                                "P p2 WHERE p.t = p2.t AND p.id < p2.id GROUP BY p.t",
    "length_compared_in_where": SCHEMA + "SELECT p.t, COUNT(*) AS n FROM P p, P p2 WHERE p.t = p2.t AND "
                                         "VEC_LENGTH(p.x - p2.x, p.y - p2.y, 0) < 1.5 GROUP BY p.t",
    "length_of_one_relation_in_an_expression": SCHEMA + "SELECT p.id, SUM(2 * VEC_LENGTH(p.x, p.y, p.z) + p.x) AS s "
                                                        "FROM P p GROUP BY p.id",
    # mddb query2's shape: a dihedral angle of four atoms selected in a view without aggregates
    # (every argument selected too: two argument tuples whose angles are equal in exact arithmetic may differ in
    # their last bits, here or in DuckDB, and be one row on one side and two on the other)
    "rows_of_a_dihedral_angle": SCHEMA + "SELECT p.t, p.x AS px, p.y AS py, p.z AS pz, p2.x AS qx, p2.y AS qy, "
                                         "p2.z AS qz, m.kind AS k, m.id AS i, DIHEDRAL_ANGLE(p.x, p.y, p.z, p2.x, p2.y, p2.z, p.x + 1, p.y, "
                                         "p2.z, m.kind, m.id, 1) AS phi FROM P p, P p2, M m WHERE p.t = p2.t AND "
                                         "p.id = m.id AND p2.id <> p.id",
    "dihedral_angle_compared": SCHEMA + "SELECT m.kind, COUNT(*) AS n FROM P p, M m WHERE p.id = m.id AND "
                                        "DIHEDRAL_ANGLE(0, 0, 0, 1, 0, 0, 1, 1, 0, p.x, p.y, m.kind) > 0 "
                                        "GROUP BY m.kind",
}

_C = ("x", "y", "z")


def _args(call: exp.Anonymous) -> list[str]:
    return [f"({a.sql(dialect='duckdb')})" for a in call.expressions]


def _len(v: list[str]) -> str:
    return f"sqrt({v[0]} * {v[0]} + {v[1]} * {v[1]} + {v[2]} * {v[2]})"


def _dot(a: list[str], b: list[str]) -> str:
    return f"({a[0]} * {b[0]} + {a[1]} * {b[1]} + {a[2]} * {b[2]})"


def _cross(a: list[str], b: list[str]) -> list[str]:
    return [f"({a[1]} * {b[2]} - {a[2]} * {b[1]})", f"({a[2]} * {b[0]} - {a[0]} * {b[2]})",
            f"({a[0]} * {b[1]} - {a[1]} * {b[0]})"]


def _duck(call: exp.Expression) -> exp.Expression:
    """A vector function as DuckDB's arithmetic (the library's definitions, module doc)."""
    if not (isinstance(call, exp.Anonymous) and call.name.upper() in ("VEC_LENGTH", "VEC_DOT", "VECTOR_ANGLE",
                                                                       "DIHEDRAL_ANGLE")):
        return call
    a, name = _args(call), call.name.upper()
    if name == "VEC_LENGTH":
        text = _len(a)
    elif name == "VEC_DOT":
        text = _dot(a[:3], a[3:])
    elif name == "VECTOR_ANGLE":
        text = f"acos({_dot(a[:3], a[3:])} / ({_len(a[:3])} * {_len(a[3:])}))"
    else:
        v = [[f"({a[3 * i + 3 + j]} - {a[3 * i + j]})" for j in range(3)] for i in range(3)]
        n1, n2 = _cross(v[0], v[1]), _cross(v[1], v[2])
        text = f"atan2({_len(v[1])} * {_dot(v[0], n2)}, {_dot(n1, n2)})"
    return sqlglot.parse_one(text, read="duckdb")


def duckdb_sql(select: str) -> str:
    """A SELECT as DuckDB computes the same values."""
    return sqlglot.parse_one(select).transform(_duck).sql(dialect="duckdb")


def _value(column: str, t: str):
    if column in _C:
        return st.integers(-4, 4).map(lambda i: i / 2)
    return st.integers(0, 3)


@pytest.mark.parametrize("shape", shape_params(SHAPES, fast=2))
def test_view_matches_duckdb(shape):
    check_against_duckdb(SHAPES[shape], value=_value, to_duckdb=duckdb_sql)


def test_the_printed_program_reads_back():
    """``boreas compile`` prints a call of arithmetic (``VEC_LENGTH(X + -1 * X_2, ...)``); the parser reads it."""
    from boreas.m3.printer import format_program
    from boreas.m3.syntax import parse_program

    for sql in SHAPES.values():
        program = compile_sql(sql)
        assert parse_program(format_program(program)) == program


def test_boreas_compile_shows_the_cost_class():
    """Across a join the call is computed per entry of the map over the other side, keyed by the columns it reads
    (the general rule: one loop per event); ``boreas compile`` says so.  Of one relation's columns it is a value
    of the event's row: first-order."""
    from boreas.m3.compiler.pipeline import compile_to_text

    across = compile_to_text(SHAPES["sum_of_an_angle"]).splitlines()[0]
    assert across.startswith("-- view Q1: domain-bound: a library function of several relations' columns")
    assert "VECTOR_ANGLE(" in across
    alone = compile_to_text(SHAPES["length_of_one_relation_in_an_expression"]).splitlines()[0]
    assert alone.startswith("-- view Q1: first-order")


@pytest.mark.parametrize("backend", ["python", "native"])
def test_a_zero_vector_fails_the_batch(backend):
    """``VECTOR_ANGLE`` of a zero vector is ``acos(NaN)`` (DuckDB: NaN): an error of the event, nothing of the
    batch applied, on both backends (native hands the batch to Python, which raises)."""
    rt = Runtime(compile_sql(SCHEMA + "SELECT p.t, SUM(VECTOR_ANGLE(p.x, p.y, p.z, p2.x, p2.y, p2.z)) AS a "
                                      "FROM P p, P p2 WHERE p.t = p2.t AND p.id < p2.id GROUP BY p.t"),
                 backend=backend)
    rt.apply_batch([("P", 1, (1, 1, 1.0, 0.0, 0.0)), ("P", 1, (1, 2, 0.0, 1.0, 0.0))])
    before = rt.view("Q1")
    assert before == {(1,): pytest.approx(1.5707963267948966)}
    with pytest.raises(ValueError, match="VECTOR_ANGLE"):
        rt.apply_batch([("P", 1, (2, 1, 1.0, 0.0, 0.0)), ("P", 1, (1, 3, 0.0, 0.0, 0.0))])
    assert rt.view("Q1") == before


@pytest.mark.parametrize("sql, message", [
    ("SELECT SUM(VEC_DOT(p.x, p.y, p.z)) AS s FROM P p", "VEC_DOT takes 6 numbers, not 3"),
    ("CREATE STREAM S(s VARCHAR);\nSELECT SUM(VEC_LENGTH(p.x, s.s, 1)) AS v FROM P p, S s",
     "VEC_LENGTH of a STRING (it takes numbers)"),
    ("SELECT SUM(VEC_LENGTH(p.x, p.y / p.z, 1)) AS v FROM P p", "division by p.z"),
    ("CREATE STREAM N(w DOUBLE NULL);\nSELECT SUM(VEC_LENGTH(p.x, n.w, 1)) AS v FROM P p, N n",
     "unsupported nullable column in VEC_LENGTH"),
])
def test_refused_with_the_reason(sql, message):
    with pytest.raises(CompileError) as info:
        compile_sql(SCHEMA + sql)
    assert message in str(info.value)


@pytest.mark.parametrize("backend", ["python", "native"])
def test_a_pair_the_where_drops_computes_no_value(backend):
    """A zero vector alone at its time step: the self-pair that ``p.id < p2.id`` drops computes no angle, neither
    in a trigger nor where the maps are computed from rows (a restart, the harness' check of the maps:
    ``runtime.initial``), so the batch applies and the maps equal their definitions."""
    from boreas.m3.runtime.initial import evaluate_definition

    program = compile_sql(SCHEMA + "SELECT p.t, SUM(VECTOR_ANGLE(p.x, p.y, p.z, p2.x, p2.y, p2.z)) AS a FROM P p, "
                                   "P p2 WHERE p.t = p2.t AND p.id < p2.id GROUP BY p.t")
    rows = [(1, 1, 1.0, 0.0, 0.0), (1, 2, 0.0, 1.0, 0.0), (2, 1, 0.0, 0.0, 0.0)]
    rt = Runtime(program, backend=backend)
    rt.apply_batch([("P", 1, row) for row in rows])
    assert rt.view("Q1") == {(1,): pytest.approx(1.5707963267948966)}
    for m in program.maps:
        assert evaluate_definition(program, m, {"P": rows, "M": []}) == pytest.approx(dict(rt.store.items(m.name)))
