"""Loop variables a trigger statement's equality guard binds: the map read at the computed key, not looped over.

Why: a statement ``Q[A, V] += IF MOD(A, 10000) = K THEN m1[K, V]`` (Nexmark
q13's lookup join ``ON MOD(B.auction, 10000) = S.key``, as the compiler
writes it) has the loop variables ``K`` and ``V``: both backends loop over
every entry of ``m1`` per event and test the guard there.  The guard says
``K`` is one value, computed from the event, so the statement equals
``Q[A, V] += m1[MOD(A, 10000), V]``: one slice of ``m1`` at the computed key
(the index it needs follows, as every index does, from the statement:
:func:`.maps.index_specs`).  Both code generators (:mod:`.codegen`,
:mod:`.native.ctrigger`) and the index specs read a trigger through
:func:`bind_keys`, so they agree on the form they run.

A guard ``K = E`` (either side) binds ``K`` when ``K`` is a loop variable
read as a key of some map in the statement, ``E`` is a value of the event
(one of its variables, a constant, or a function of its variables and
constants, any function), both of one type other than FLOAT (FLOAT equality
is compared within the runtime's epsilon, a key is not), and the guard is a
conjunct of the whole statement (on the chain of ``IF``s and products around
its maps).  Then ``K`` is replaced by ``E`` everywhere in the statement, its
target included, and the guard, now always true, is dropped.

>>> from ..syntax import parse_program
>>> p = parse_program('''CREATE TABLE S(K INT, V INT); CREATE STREAM B(A INT, P INT);
... DECLARE MAP Q[A: INT, V: INT] : INT; DECLARE MAP m1[K: INT, V: INT] : INT;
... ON +B(A, P) DO { Q[A, V] += IF MOD(A, 10000) = K THEN P * m1[K, V] ELSE 0 }''')
>>> from ..printer import format_statement
>>> print(format_statement(bind_keys(p, p.triggers[0]).statements[0]))
Q[A, V] += P * m1[MOD(A, 10000), V]
"""

from __future__ import annotations

from dataclasses import replace

from ..ast import Call, Cmp, Const, Expr, IfThen, MapRef, Prod, Program, RelAtom, Statement, Sum, Trigger, Var, walk
from ..functions import result_type


def bind_keys(program: Program, trigger: Trigger) -> Trigger:
    """``trigger`` with each statement's loop variables bound by an equality guard read at their value."""
    types = dict(zip(trigger.vars, (c.type for c in program.relation(trigger.relation).columns)))
    statements = tuple(_bind(program, s, types) for s in trigger.statements)
    return trigger if statements == trigger.statements else replace(trigger, statements=statements)


def _bind(program: Program, s: Statement, event: dict[str, str]) -> Statement:
    conds, core = _conjuncts(s.expr)
    key_types = _loop_key_types(program, s, event)
    for node in [*walk(s.target), *walk(s.expr)]:  # a function's argument stays a variable: not bound there
        if isinstance(node, (Call, RelAtom)):
            for a in node.args:
                key_types.pop(a.name, None) if isinstance(a, Var) else None
    subst: dict[str, Expr] = {}
    kept = []
    for c in conds:
        bound = _binding(c, event, key_types, subst, _mentioned(s.target))
        if bound is None:
            kept.append(c)
        else:
            subst[bound[0]] = bound[1]
    if not subst:
        return s
    expr = _substitute(core, subst)
    for c in reversed(kept):
        expr = IfThen(_substitute(c, subst), expr)
    return replace(s, target=_substitute(s.target, subst), expr=expr)


def _conjuncts(e: Expr) -> tuple[list[Cmp], Expr]:
    """The guards that multiply the whole of ``e`` (its ``IF`` chain, through products) and what is left."""
    if isinstance(e, IfThen):
        conds, core = _conjuncts(e.then)
        return [e.cond, *conds], core
    if isinstance(e, Prod):
        conds, cores = [], []
        for f in e.factors:
            c, core = _conjuncts(f)
            conds += c
            cores.append(core)
        return conds, Prod(tuple(cores))
    return [], e


def _loop_key_types(program: Program, s: Statement, event: dict[str, str]) -> dict[str, str]:
    """Each loop variable read as a map's key in the statement's expression, with that key's type."""
    out: dict[str, str] = {}
    for node in walk(s.expr):
        if isinstance(node, MapRef):
            for a, k in zip(node.args, program.map(node.name).keys):
                if isinstance(a, Var) and a.name not in event:
                    out.setdefault(a.name, k.type)
    return out


def _mentioned(target: MapRef) -> set[str]:
    return {a.name for a in target.args if isinstance(a, Var)}


def _binding(c: Cmp, event: dict[str, str], loops: dict[str, str], done: dict, target: set[str]):
    """``(K, E)`` when guard ``c`` binds loop variable ``K`` to the event's value ``E`` (module docstring)."""
    if not isinstance(c, Cmp) or c.op != "=":
        return None
    for var, value in ((c.left, c.right), (c.right, c.left)):
        if not isinstance(var, Var) or var.name not in loops or var.name in done:
            continue
        kind = _event_value_type(value, event)
        if kind is None or kind != loops[var.name] or kind == "FLOAT":
            continue
        if isinstance(value, Const) and var.name in target:  # a target's key is a variable or a computed value
            continue
        return var.name, value
    return None


def _event_value_type(e: Expr, event: dict[str, str]) -> str | None:
    """The type of ``e`` when it is a value of the event alone (a variable, a constant, a function of them)."""
    if isinstance(e, Var):
        return event.get(e.name)
    if isinstance(e, Const):
        return {bool: None, int: "INT", str: "STRING"}.get(type(e.value))
    if isinstance(e, Call) and isinstance(e.args[0], Var) and e.args[0].name in event \
            and all(isinstance(a, Const) or a.name in event for a in e.args):
        return result_type(e.fn)
    return None


def _substitute(e, subst: dict[str, Expr]):
    """``e`` with each variable of ``subst`` replaced by its value."""
    if isinstance(e, Var):
        return subst.get(e.name, e)
    if isinstance(e, (Const, Call)):
        return e
    if isinstance(e, MapRef):
        return replace(e, args=tuple(_substitute(a, subst) for a in e.args))
    if isinstance(e, Cmp):
        return replace(e, left=_substitute(e.left, subst), right=_substitute(e.right, subst))
    if isinstance(e, IfThen):
        return replace(e, cond=_substitute(e.cond, subst), then=_substitute(e.then, subst))
    if isinstance(e, Prod):
        return replace(e, factors=tuple(_substitute(f, subst) for f in e.factors))
    if isinstance(e, Sum):
        return replace(e, terms=tuple(_substitute(t, subst) for t in e.terms))
    return e
