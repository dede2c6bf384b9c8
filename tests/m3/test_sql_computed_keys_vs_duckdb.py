"""A join on a computed key (``MOD(r.a, 3) = s.b``, Nexmark q13's ``MOD(B.auction, 10000) = S.key``) reads the other
side's map at the key computed from the event, on both backends (m3/runtime/keybind.py), and agrees with DuckDB.

The compiler writes such a join as a loop over the other side's map with the equality as its guard; both code
generators read the statement with the loop variable bound to the computed value (one slice, not a scan).  The
shapes cover MOD, other functions (a string function, ``YEAR`` of a DATE), a lookup table, a grouped join and a
join whose other trigger cannot bind (the function of a loop variable stays a guard); the rest are the rewrite's
own cases.
"""

from __future__ import annotations

import pytest
from boreas.m3 import compile_sql
from boreas.m3.ast import Call, IfThen, MapRef, walk
from boreas.m3.runtime.keybind import bind_keys
from boreas.m3.runtime.maps import index_specs
from boreas.m3.syntax import parse_program
from m3_harness import check_against_duckdb, shape_params

GENERIC = """
CREATE STREAM R(a INT, b INT);
CREATE STREAM S(b INT, c INT);
"""
STRINGS = """
CREATE STREAM T(s VARCHAR, x INT);
CREATE STREAM U(k VARCHAR, y INT);
"""
DATES = """
CREATE STREAM D(d DATE, x INT);
CREATE STREAM Y(yr INT, y INT);
"""
LOOKUP = """
CREATE TABLE side(k INT, v INT);
CREATE STREAM R(a INT, b INT);
"""

SHAPES: dict[str, str] = {
    "mod_key_join": GENERIC + "SELECT r.a, r.b, s.c FROM R r, S s WHERE MOD(r.a, 3) = s.b",
    "mod_key_grouped": GENERIC + "SELECT s.c, SUM(r.b) AS t, COUNT(*) AS n FROM R r JOIN S s ON MOD(r.a, 4) = s.b "
                                 "GROUP BY s.c",
    "mod_key_and_a_column": GENERIC + "SELECT r.a, s.c FROM R r, S s WHERE MOD(r.a, 2) = s.b AND r.b < s.c",
    "string_function_key": STRINGS + "SELECT t.x, u.y FROM T t, U u WHERE SUBSTRING(t.s, 1, 1) = u.k",
    "year_key": DATES + "SELECT d.x, z.y FROM D d, Y z WHERE YEAR(d.d) = z.yr",
    "lookup_table_mod_key": LOOKUP + "SELECT r.a, r.b, s.v FROM R r JOIN side s ON MOD(r.a, 5) = s.k",
}


@pytest.mark.parametrize("shape", shape_params(SHAPES))
def test_view_matches_duckdb(shape):
    check_against_duckdb(SHAPES[shape])


def _bound_refs(program, relation: str) -> list[MapRef]:
    """The maps the +relation trigger reads, as both generators read it."""
    t = next(t for t in program.triggers if t.relation == relation and t.sign > 0)
    return [n for s in bind_keys(program, t).statements for n in walk(s.expr) if isinstance(n, MapRef)]


def test_the_event_side_reads_the_other_map_at_the_computed_key():
    p = compile_sql(SHAPES["mod_key_join"])
    refs = _bound_refs(p, "R")
    assert refs and all(any(isinstance(a, Call) and a.fn == "MOD" for a in r.args) for r in refs)
    slices = index_specs(p)
    assert any(slices.get(r.name) for r in refs)  # read by an index on the computed key's position
    # the other side: MOD of R's loop variable is no value of S's event, so it stays a guard over the loop
    assert not any(isinstance(a, Call) for r in _bound_refs(p, "S") for a in r.args)


PROGRAM = """CREATE STREAM B(A INT, P INT, F DOUBLE); CREATE TABLE S(K INT, V INT, X DOUBLE);
DECLARE MAP Q[A: INT, V: INT] : INT; DECLARE MAP m1[K: INT, V: INT] : INT; DECLARE MAP mf[X: FLOAT, V: INT] : INT;
DECLARE MAP QK[K: INT] : INT;
ON +B(A, P, F) DO { STMT }"""


@pytest.mark.parametrize("stmt, want", [
    ("Q[A, V] += IF MOD(A, 7) = K THEN m1[K, V] ELSE 0", "Q[A, V] += m1[MOD(A, 7), V]"),
    ("Q[A, V] += IF K = A THEN (IF P < V THEN m1[K, V] ELSE 0) ELSE 0",
     "Q[A, V] += IF P < V THEN m1[A, V] ELSE 0"),
    ("QK[K] += IF MOD(A, 7) = K THEN m1[K, V] ELSE 0", "QK[MOD(A, 7)] += m1[MOD(A, 7), V]"),
    ("Q[A, V] += IF F = X THEN mf[X, V] ELSE 0", None),  # FLOAT: equal within epsilon, not a key
    ("Q[A, V] += IF MOD(K, 7) = A THEN m1[K, V] ELSE 0", None),  # a function of the loop variable
    ("QK[K] += IF K = 3 THEN m1[K, V] ELSE 0", None),  # a constant target key
    ("Q[A, V] += IF 3 = K THEN m1[K, V] ELSE 0", "Q[A, V] += m1[3, V]"),
])
def test_which_guards_bind(stmt, want):
    from boreas.m3.printer import format_statement

    p = parse_program(PROGRAM.replace("STMT", stmt))
    got = bind_keys(p, p.triggers[0])
    if want is None:
        assert got is p.triggers[0]
    else:
        assert format_statement(got.statements[0]) == want
        assert not any(isinstance(n, IfThen) and "K" in str(n.cond) for n in walk(got.statements[0].expr))
