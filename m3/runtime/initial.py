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

from operator import itemgetter

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


def _value(e: Expr, env: dict):
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
        return 1 if _OPS[e.op](_value(e.left, env), _value(e.right, env)) else 0  # LIKE too: :mod:`..like`
    if isinstance(e, IfThen):
        return _value(e.then, env) if _value(e.cond, env) else 0
    if isinstance(e, Call):
        return apply(e.fn, tuple(_value(a, env) for a in e.args))
    raise TypeError(f"cannot evaluate {e!r}")


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


def evaluate_definition(program: Program, m: MapDecl, tables: dict[str, list], epsilon: float = 0.0) -> dict[tuple, object]:
    """``{key: value}`` of the map's definition over ``tables`` (relation → rows); zeros omitted."""
    out: dict[tuple, object] = {}
    keys = [k.name for k in m.keys]
    for factors in _terms(m.definition):
        atoms = [f for f in factors if isinstance(f, RelAtom)]
        others = [f for f in factors if not isinstance(f, RelAtom)]
        envs: list[dict] = [{}]
        bound: set[str] = set()
        pending = list(others)
        while atoms:
            atom = min(atoms, key=lambda a: _join_cost(a, bound, tables))
            atoms.remove(atom)
            rows = tables.get(atom.name, [])
            probe = [(i, a) for i, a in enumerate(atom.args) if isinstance(a, Const) or a.name in bound]
            wants = [tuple(a.value if isinstance(a, Const) else env[a.name] for _, a in probe) for env in envs]
            wanted = set(wants)  # the relation's rows are kept only where a partial row probes them
            table: dict[tuple, list] = {}
            probed = _probe_key(tuple(i for i, _ in probe))
            for row in rows:
                if (at := probed(row)) in wanted:
                    table.setdefault(at, []).append(row)
            new_envs = []
            for env, want in zip(envs, wants):
                for row in table.get(want, ()):
                    e2 = dict(env)
                    ok = True
                    for i, a in enumerate(atom.args):
                        if isinstance(a, Var):
                            if a.name in e2 and e2[a.name] != row[i]:
                                ok = False
                                break
                            e2[a.name] = row[i]
                    if ok:
                        new_envs.append(e2)
            bound |= {a.name for a in atom.args if isinstance(a, Var)}
            for f in list(pending):  # a lift {K = YEAR(D)} binds K once D is bound (:mod:`..functions`)
                if (x := lift(f)) is not None and x[0] not in bound and set(variables(x[1])) <= bound:
                    pending.remove(f)
                    bound.add(x[0])
                    for env in new_envs:
                        env[x[0]] = _value(x[1], env)
            ready = [f for f in pending if isinstance(f, Cmp) and set(variables(f)) <= bound]
            pending = [f for f in pending if f not in ready]
            envs = [env for env in new_envs if all(_value(f, env) for f in ready)]
        for env in envs:
            v = 1
            for f in pending:
                v *= _value(f, env)
                if not v:
                    break
            if v:
                k = tuple(env[n] for n in keys)
                out[k] = out.get(k, 0) + v
    return {k: v for k, v in out.items() if abs(v) > epsilon}


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
