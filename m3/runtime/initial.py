"""Initial map values: evaluate a map's defining query over existing relation contents.

A definition is a sum of products of relation atoms, comparisons and
arithmetic.  Each term is evaluated as a join: atoms in order, each probed
through a hash table on the variables already bound, comparisons applied
as soon as their variables are bound; the product is summed per key.

>>> from ..syntax import parse_program
>>> p = parse_program('''CREATE TABLE R(A INT, B INT); CREATE TABLE S(B INT, C INT);
... DECLARE MAP m[A: INT] : INT := R(A, B) * S(B, C) * C * {C < 10};''')
>>> evaluate_definition(p, p.maps[0], {"R": [(1, 2), (1, 3)], "S": [(2, 5), (2, 20), (3, 1)]})
{(1,): 6}
>>> p = parse_program('''CREATE TABLE R(A INT, D DATE);
... DECLARE MAP m[Y: INT] : INT := R(A, D) * A * {Y = YEAR(D)};''')
>>> import datetime
>>> evaluate_definition(p, p.maps[0], {"R": [(1, datetime.date(1995, 1, 2)), (2, datetime.date(1995, 5, 1))]})
{(1995,): 3}
"""

from __future__ import annotations

from collections.abc import Callable
from operator import itemgetter

import pyarrow as pa

from ..ast import (
    Call,
    Cmp,
    Const,
    Expr,
    IfThen,
    MapDecl,
    Prod,
    Program,
    RelAtom,
    Sum,
    Var,
    lift,
    variables,
    walk,
)
from ..errors import RuntimeStateError
from ..functions import apply
from ..like import COMPARE
from ..nullable import expand_row
from .definition_columns import evaluate_columns, table_rows

_OPS = COMPARE


def _terms(e: Expr) -> list[list[Expr]]:
    """Distribute the top-level sums: a list of products (factor lists)."""
    if isinstance(e, Sum):
        return [f for t in e.terms for f in _terms(t)]
    if isinstance(e, Prod):
        out = [[]]
        for f in e.factors:
            if isinstance(f, Sum) and any(isinstance(n, RelAtom) for n in walk(f)):
                out = [a + b for a in out for b in _terms(f)]
            else:
                out = [a + [f] for a in out]
        return out
    return [[e]]


def _compiled(e: Expr) -> Callable[[dict], object]:
    """``e`` as a function of an env (variable -> value), its tree walked once, not once per row: a definition's
    comparisons and factors run over every partial row of a join (a window join's stages, per window).  An
    expression it cannot evaluate gives a function raising TypeError when called (a term no row reaches
    raises nothing).

    >>> from ..ast import Cmp, Const, Prod, Var
    >>> f = _compiled(Prod((Var("A"), Cmp("<", Const(1), Var("A")))))
    >>> f({"A": 3}), f({"A": 1})
    (3, 0)
    """
    if isinstance(e, Const):
        value = e.value
        return lambda env: value
    if isinstance(e, Var):
        return itemgetter(e.name)
    if isinstance(e, Prod):
        factors = [_compiled(f) for f in e.factors]

        def product(env: dict):
            r = 1
            for f in factors:
                r *= f(env)
            return r
        return product
    if isinstance(e, Sum):
        terms = [_compiled(t) for t in e.terms]
        return lambda env: sum(t(env) for t in terms)
    if isinstance(e, Cmp) and e.op in _OPS:
        op, left, right = _OPS[e.op], _compiled(e.left), _compiled(e.right)  # LIKE too: :mod:`..like`
        return lambda env: 1 if op(left(env), right(env)) else 0
    if isinstance(e, IfThen):
        cond, then = _compiled(e.cond), _compiled(e.then)
        return lambda env: then(env) if cond(env) else 0
    if isinstance(e, Call):
        fn, args = e.fn, [_compiled(a) for a in e.args]
        return lambda env: apply(fn, tuple(a(env) for a in args))

    def unknown(env: dict):
        if isinstance(e, Cmp):
            _OPS[e.op]  # noqa: B018 - an unknown comparison raises its KeyError when evaluated, as before
        raise TypeError(f"cannot evaluate {e!r}")
    return unknown


def _probe_key(positions: tuple[int, ...]):
    """A row's values at ``positions`` as a tuple (one ``itemgetter``: a relation's every row is cut so).

    >>> _probe_key(())((1, 2)), _probe_key((1,))((1, 2)), _probe_key((1, 0))((1, 2))
    ((), (2,), (2, 1))
    """
    if len(positions) > 1:
        return itemgetter(*positions)
    if positions:
        only = positions[0]
        return lambda row: (row[only],)
    return lambda row: ()


def _join_cost(atom: RelAtom, bound: set[str], tables: dict[str, list]) -> tuple[bool, int]:
    """Which relation to join next: one an already bound variable or a constant probes before one that
    multiplies every partial row by its rows, then the smallest (a window's one MAX row before its bids)."""
    probed = any(isinstance(a, Const) or a.name in bound for a in atom.args)
    return not probed, len(tables.get(atom.name, ()))


def _binder(atom: RelAtom, bound: set[str]) -> tuple[tuple[str, ...], Callable, tuple[tuple[int, int], ...]]:
    """How a row of ``atom``'s relation extends a partial row whose variables are ``bound``: the new variables'
    names, a function giving their values from the row, and the pairs of positions that must be equal (a new
    variable named twice, ``R(A, A)``).  A bound variable or a constant needs nothing: the probe matched it.

    >>> names, values, same = _binder(RelAtom("R", (Var("A"), Var("B"), Var("B"))), {"A"})
    >>> names, values((1, 2, 2)), same
    (('B',), (2,), ((1, 2),))
    """
    first: dict[str, int] = {}
    same = []
    for i, a in enumerate(atom.args):
        if isinstance(a, Var) and a.name not in bound:
            if a.name in first:
                same.append((first[a.name], i))
            else:
                first[a.name] = i
    return tuple(first), _probe_key(tuple(first.values())), tuple(same)


def _key_of(keys: list[str]) -> Callable[[dict], tuple]:
    """An env's values of ``keys`` as a tuple (the map key)."""
    if len(keys) > 1:
        return itemgetter(*keys)
    if keys:
        only = keys[0]
        return lambda env: (env[only],)
    return lambda env: ()


def _add(out: dict, key_of: Callable[[dict], tuple], factors: list[Callable[[dict], object]], env: dict) -> None:
    """Add the product of ``factors`` over ``env`` to ``out`` at ``env``'s key (nothing when it is 0)."""
    v = 1
    for f in factors:
        v *= f(env)
        if not v:
            return
    k = key_of(env)
    out[k] = out.get(k, 0) + v


def _all_of(checks: list[Callable[[dict], object]]) -> Callable[[dict], bool] | None:
    """One function true where every check is (None: no check)."""
    if len(checks) <= 1:
        return checks[0] if checks else None
    return lambda env: all(check(env) for check in checks)


def evaluate_definition(program: Program, m: MapDecl, tables: dict[str, list], epsilon: float = 0.0) -> dict[tuple, object]:
    """``{key: value}`` of the map's definition over ``tables`` (relation → rows); zeros omitted.

    Each factor is compiled once (:func:`_compiled`) and each atom's new variables read from a row by one
    ``itemgetter`` (:func:`_binder`) into a scratch env, copied only when the comparisons bound by then keep
    it: a partial row costs its comparisons, not a walk of the expression trees nor a dict when it fails
    (a window join's stages evaluate this per closed window: m3/winstages.py; q5's ``num >= maxn``).  A
    definition Arrow joins and sums exactly is evaluated over columns instead (:mod:`.definition_columns`)."""
    terms = _terms(m.definition)
    columns = evaluate_columns(m, terms, tables, epsilon)
    if columns is not None:
        return columns
    tables = {name: table_rows(rows) for name, rows in tables.items()}  # (columns declined: made rows)
    out: dict[tuple, object] = {}
    key_of = _key_of([k.name for k in m.keys])
    for factors in terms:
        atoms = [f for f in factors if isinstance(f, RelAtom)]
        others = [f for f in factors if not isinstance(f, RelAtom)]
        envs: list[dict] = [{}]
        bound: set[str] = set()
        pending = list(others)
        summed = bool(atoms)  # (a term without atoms is one env's value, summed after)
        while atoms:
            atom = min(atoms, key=lambda a: _join_cost(a, bound, tables))
            atoms.remove(atom)
            rows = tables.get(atom.name, [])
            probe = [(i, a) for i, a in enumerate(atom.args) if isinstance(a, Const) or a.name in bound]
            wants = [tuple(a.value if isinstance(a, Const) else env[a.name] for _, a in probe) for env in envs]
            wanted = set(wants)  # the relation's rows are kept only where a partial row probes them
            table: dict[tuple, list] = {(): rows} if not probe else {}  # (nothing probes: every row matches)
            probed = _probe_key(tuple(i for i, _ in probe))
            for row in rows if probe else ():
                if (at := probed(row)) in wanted:
                    table.setdefault(at, []).append(row)
            for nan in [k for k in table if any(v != v for v in k)]:  # a NaN key joins nothing, as before:
                del table[nan]  # a dict probe would match the very same NaN object (``is`` before ``==``)
            names, values, same = _binder(atom, bound)
            bound |= {a.name for a in atom.args if isinstance(a, Var)}
            before, lifts = set(bound), []
            for f in list(pending):  # a lift {K = YEAR(D)} binds K once D is bound (:mod:`..functions`)
                if (x := lift(f)) is not None and x[0] not in bound and set(variables(x[1])) <= bound:
                    pending.remove(f)
                    bound.add(x[0])
                    lifts.append((x[0], _compiled(x[1])))
            ready = [f for f in pending if isinstance(f, Cmp) and set(variables(f)) <= bound]
            pending = [f for f in pending if f not in ready]
            early = [f for f in ready if set(variables(f)) <= before]  # tested before the lifts are computed
            keep_early = _all_of([_compiled(f) for f in early])
            keep = _all_of([_compiled(f) for f in ready if f not in early])
            last = not atoms  # the last atom's rows are summed into ``out`` as they come: no env kept
            rest = [_compiled(f) for f in pending]
            new_envs = []
            for env, want in zip(envs, wants):
                scratch = env.copy()  # a matching row's variables written over the last one's, copied if kept
                for row in table.get(want, ()):
                    if same and any(row[i] != row[j] for i, j in same):
                        continue
                    scratch.update(zip(names, values(row)))
                    if keep_early is not None and not keep_early(scratch):  # (a pair the WHERE drops computes no
                        continue  # VECTOR_ANGLE: of a zero vector it is no finite number, ..library)
                    for lifted, value in lifts:
                        scratch[lifted] = value(scratch)
                    if keep is not None and not keep(scratch):
                        continue
                    if last:
                        _add(out, key_of, rest, scratch)
                    else:
                        new_envs.append(scratch.copy())
            envs = new_envs
        if not summed:
            rest = [_compiled(f) for f in pending]
            for env in envs:
                _add(out, key_of, rest, env)
    return {k: v for k, v in out.items() if abs(v) > epsilon}


def relation_rows(rows, nullable) -> list | pa.Table:
    """A relation's rows as ``Runtime.load`` hands them on: NULLs split into value and indicator
    (``nullable``: its nullable columns, docs/m3.md "NULLs"); a table of columns kept as it is where nothing
    is to split (:func:`evaluate_definition` joins it as columns)."""
    if isinstance(rows, pa.Table) and not nullable:
        return rows
    rows = table_rows(rows)
    return [expand_row(x, nullable) for x in rows] if nullable else rows


def initial_values(program: Program, tables: dict[str, list], wanted: set[str] | None,
                   epsilon: float = 0.0) -> dict[str, dict[tuple, object]]:
    """Every map's (of ``wanted``'s, when given) defining query evaluated over ``tables``: ``Runtime.load``."""
    values = {}
    for m in program.maps:
        if wanted is not None and m.name not in wanted:
            continue
        if m.definition is None:
            raise RuntimeStateError(f"map {m.name} has no defining query")
        values[m.name] = evaluate_definition(program, m, tables, epsilon)
    return values
