"""Initial map values (m3/runtime/initial.py, what a window join's stages evaluate per closed window) against a
row-at-a-time reference: every combination of the relations' rows tried in nested loops, the definition's
factors evaluated over each, over random rows (repeated variables, constants, comparisons, lifts, sums)."""

from __future__ import annotations

import itertools

import pytest

from hypothesis import given, settings
from hypothesis import strategies as st

from boreas.m3.ast import Cmp, Const, IfThen, Prod, RelAtom, Sum, Var, lift, variables
from boreas.m3.like import COMPARE
from boreas.m3.runtime.initial import evaluate_definition
from boreas.m3.syntax import parse_program

DEFINITIONS = [
    "R(A, B) * S(B, C) * C * {C < 10}",
    "R(A, B) * S(B, C) * {A <= C} * (A + C)",
    "R(A, A) * S(A, C)",  # a variable named twice in one atom
    "R(A, B) * S(2, C) * B",  # a constant probing a relation
    "R(A, B) * S(B, C) * S(C, D) * {D <> A}",
    "R(A, B) * (S(B, C) * C + S(C, B) * 2)",  # a sum over atoms
    "R(A, B) * {K = (A + B)} * {K < 6}",  # a lift binding a key, then compared
    "R(A, B) * S(B, C) * {C = 3}",
]

RELATIONS = "CREATE TABLE R(A INT, B INT); CREATE TABLE S(B INT, C INT);"


def _value(e, env):
    """The reference: a factor's value, its tree walked per row."""
    if isinstance(e, Const):
        return e.value
    if isinstance(e, Var):
        return env[e.name]
    if isinstance(e, Prod):
        r = 1
        for f in e.factors:
            r *= _value(f, env)
        return r
    if isinstance(e, Sum):
        return sum(_value(t, env) for t in e.terms)
    if isinstance(e, Cmp):
        return 1 if COMPARE[e.op](_value(e.left, env), _value(e.right, env)) else 0
    if isinstance(e, IfThen):
        return _value(e.then, env) if _value(e.cond, env) else 0
    raise TypeError(e)


def _reference(definition, keys, tables) -> dict:
    """Every term's atoms over every combination of their rows, in nested loops."""
    from boreas.m3.runtime.initial import _terms  # the same distribution of sums: not what is checked here

    out: dict = {}
    for factors in _terms(definition):
        atoms = [f for f in factors if isinstance(f, RelAtom)]
        others = [f for f in factors if not isinstance(f, RelAtom)]
        for rows in itertools.product(*(tables[a.name] for a in atoms)):
            env, ok = {}, True
            for atom, row in zip(atoms, rows):
                for a, x in zip(atom.args, row):
                    if isinstance(a, Const):
                        ok = ok and a.value == x
                    elif a.name in env:
                        ok = ok and env[a.name] == x
                    else:
                        env[a.name] = x
            if not ok:
                continue
            v = 1
            for f in others:
                if (x := lift(f)) is not None and x[0] not in env and set(variables(x[1])) <= set(env):
                    env[x[0]] = _value(x[1], env)
                else:
                    v *= _value(f, env)
            if v:
                k = tuple(env[n] for n in keys)
                out[k] = out.get(k, 0) + v
    return {k: v for k, v in out.items() if v}


small = st.lists(st.tuples(st.integers(0, 4), st.integers(0, 4)), max_size=8)


@pytest.mark.parametrize("text", DEFINITIONS)
@settings(max_examples=12, deadline=None)
@given(r=small, s=small)
def test_definition_equals_nested_loops(text, r, s):
    keys = "K: INT" if "K =" in text else "A: INT"
    program = parse_program(f"{RELATIONS} DECLARE MAP m[{keys}] : INT := {text};")
    m = program.maps[0]
    tables = {"R": r, "S": s}
    assert evaluate_definition(program, m, tables) == _reference(m.definition, [k.name for k in m.keys], tables)


def test_a_nan_key_joins_nothing_even_the_same_nan_object():
    """A NaN never equals itself, so it joins no row -- also the very same NaN object on both sides, which a dict
    probe alone would match (``is`` before ``==``); a review found the probe joined it."""
    program = parse_program("CREATE TABLE R(A INT, B DOUBLE); CREATE TABLE S(B DOUBLE, C INT);"
                            " DECLARE MAP m[A: INT] : INT := R(A, B) * S(B, C);")
    nan = float("nan")
    tables = {"R": [(1, nan), (2, 1.0)], "S": [(nan, 5), (float("nan"), 6), (1.0, 7)]}
    assert evaluate_definition(program, program.maps[0], tables) == {(2,): 1}
