"""Check an M3 program: names, arities, and the rules of restricted M3 (seed 001, section 2.1).

In a statement ``m[x, z] += t`` of a trigger ``ON +R(x, y)``, *event
variables* are the trigger's parameters; every other variable is a *loop
variable*, ranging over the non-zero entries of the one map it parametrises.
Restricted M3 (what the compiler emits and the runtime executes) requires:

1. every loop variable appears on both sides (one that appears only on the
   right would be a sum: maintain a map with one fewer key instead);
2. every loop variable is a parameter of exactly one right-hand-side map
   (two would be a join, which restricted M3 computes with event variables);
3. terms have no conditions over loop variables (``IF`` compares event
   variables and constants: a guard on the event) — except *loop guards*, a
   Boreas extension for comparisons between columns (``R.a < S.b``): a
   condition over a loop variable makes the statement test each entry of the
   map it loops over, and a loop variable that a loop guard reads may be
   absent from the left side (the matching entries are summed).

Trigger terms are monomials (products); sums and relation atoms appear only
in map definitions.

>>> from .syntax import parse_program
>>> p = parse_program('''CREATE STREAM R(A INT, B INT);
... DECLARE MAP n[A: INT, B: INT] : INT := R(A, B);
... DECLARE MAP m[B: INT] : INT;
... ON +R(A, B) DO { m[B] += n[A, C] }''')
>>> for msg, pos in check_errors(p): print(pos, msg)
4:18 loop variable C appears only on the right-hand side of the statement on m; restricted M3 requires it on both sides (maintain a map with one fewer key instead)
>>> classify(p.triggers[0], p.triggers[0].statements[0])
(['B', 'A'], ['C'])
"""

from __future__ import annotations

import weakref

from .ast import (
    Call,
    TYPES,
    LIKE_OPS,
    Cmp,
    Const,
    Expr,
    IfThen,
    MapDecl,
    MapRef,
    Prod,
    Program,
    RelAtom,
    Statement,
    Sum,
    Trigger,
    Var,
    ViewDecl,
    variables,
    lift,
    walk,
)
from .viewnodes import EXTREMES, FOLDS, Arith, BoolOp, Fold, Total
from .checkover import check_lifts, check_over
from .over import Over
from .errors import CheckError, Pos
from .checkcall import check_call_node as _check_call
from .checkcall import is_vector as _vector

Problems = list[tuple[str, Pos | None]]


def classify(trigger: Trigger, stmt: Statement) -> tuple[list[str], list[str]]:
    """The statement's event variables and loop variables, each in order of appearance."""
    names = variables(stmt.target) + [v for v in variables(stmt.expr) if v not in variables(stmt.target)]
    return [n for n in names if n in trigger.vars], [n for n in names if n not in trigger.vars]


def check_program(program: Program) -> Program:
    """Raise :class:`CheckError` listing every problem; return the program when there is none.  One that passed
    is not checked again while it lives (immutable; by identity): a runtime per restore, move and segment."""
    if _PASSED.get(id(program)) is program:
        return program
    problems = check_errors(program)
    if problems:
        raise CheckError(problems)
    _PASSED[id(program)] = program
    return program


_PASSED: weakref.WeakValueDictionary[int, Program] = weakref.WeakValueDictionary()  # (its check was half a runtime)


def check_errors(program: Program) -> Problems:
    """Every problem in ``program`` as ``(message, position)``, in source order."""
    out: Problems = []
    _unique(out, "relation", program.relations)
    _unique(out, "map", program.maps)
    _unique(out, "view", program.views)
    rels = {r.name: r for r in program.relations}
    maps = {m.name: m for m in program.maps}
    for r in program.relations:
        _unique(out, f"column of {r.name}", r.columns)
        for c in r.columns:
            if c.type not in TYPES:
                out.append((f"column {r.name}.{c.name} has unknown type {c.type}", c.pos))
    for m in program.maps:
        _check_map(out, m, rels)
    for v in program.views:
        _check_view(out, v, maps)
    seen: set[tuple[str, int]] = set()
    for t in program.triggers:
        key = (t.relation, t.sign)
        if key in seen:
            out.append((f"second trigger for {'+' if t.sign > 0 else '-'}{t.relation}", t.pos))
        seen.add(key)
        _check_trigger(out, t, rels, maps)
    return out


def _check_view(out: Problems, v: ViewDecl, maps) -> None:
    """A view reads existing maps with matching keys; a general view's expressions read its key variables."""
    if len(set(v.keys)) != len(v.keys):
        out.append((f"view {v.name} repeats a key column", v.pos))
    if not v.columns:
        out.append((f"view {v.name} has no column", v.pos))
    for k in v.internal:
        if k not in v.keys:
            out.append((f"view {v.name} marks {k} INTERNAL but has no key column {k}", v.pos))
    for c in v.columns:
        if (c.numerator is None) == (c.expr is None) or (c.denominator is not None and c.numerator is None):
            out.append((f"view {v.name} column {c.name} needs a map (or two, m / n) or an expression", c.pos))
        for name in (c.numerator, c.denominator):
            if name is None:
                continue
            if v.key_vars:
                out.append((f"view {v.name} names its key variables: write column {c.name} as {name}[...]", c.pos))
            elif name not in maps:
                out.append((f"view {v.name} column {c.name} names unknown map {name}", c.pos))
            elif len(maps[name].keys) != len(v.keys):
                out.append((f"view {v.name} has {len(v.keys)} key columns but map {name} has {len(maps[name].keys)} keys", c.pos))
    if not v.general:
        return
    if v.key_vars and len(v.key_vars) != len(v.keys):
        out.append((f"view {v.name} names {len(v.key_vars)} variables for {len(v.keys)} key columns", v.pos))
    row = list(dict.fromkeys(v.key_vars))
    types: dict[str, str] = {}
    for c in v.columns:
        if c.expr is not None:
            _check_view_expr(out, v, c.expr, row, maps, types, condition=False)
    if v.where is not None:
        _check_view_expr(out, v, v.where, row, maps, types, condition=True)
    if not v.maps and v.keys:  # without keys and maps: a constant view, one row where its WHERE holds
        out.append((f"view {v.name} reads no map (its rows are where its maps have entries)", v.pos))
    lifted = check_lifts(out, v, set(types))
    for x in row:
        if x not in types and x not in lifted:
            out.append((f"key variable {x} of view {v.name} is not a key of any map the view reads (nor bound by "
                        "an equality in an aggregate's condition: X = e)", v.pos))


def _check_view_expr(out: Problems, v: ViewDecl, e: Expr, row: list[str], maps, types: dict[str, str],
                     condition: bool, fold: str | None = None) -> None:
    where = f"view {v.name}"
    if condition and isinstance(e, BoolOp):
        if e.op not in ("AND", "OR", "NOT") or (len(e.args) != 1) != (e.op != "NOT") or (e.op != "NOT" and len(e.args) < 2):
            out.append((f"{where}: malformed {e.op}", e.pos))
        for a in e.args:
            _check_view_expr(out, v, a, row, maps, types, True)
    elif condition and isinstance(e, Cmp):
        if e.op in LIKE_OPS:
            out.append((f"{where}: {e.op} is a trigger and definition condition, not a view condition", e.pos or v.pos))
        for side in (e.left, e.right):
            _check_view_expr(out, v, side, row, maps, types, False)
    elif condition:
        out.append((f"{where}: its WHERE is a condition (comparisons, AND, OR, NOT)", e.pos or v.pos))
    elif isinstance(e, Arith):
        if e.op not in ("+", "-", "*", "/") + EXTREMES:
            out.append((f"{where}: unknown operator {e.op}", e.pos))
        for side in (e.left, e.right):
            _check_view_expr(out, v, side, row, maps, types, False)
    elif isinstance(e, Fold):
        if e.kind not in FOLDS:
            out.append((f"{where}: unknown fold {e.kind} (one of {', '.join(FOLDS)})", e.pos))
        if e.var in row:
            out.append((f"{where}: {e.kind} folds {e.var}, a key variable of the view", e.pos))
        _check_view_ref(out, v, e.ref, row + [e.var], maps, types)
        _check_conditional(out, v, e, row, [e.var], maps, types)
    elif isinstance(e, Total):
        if len(set(e.vars)) != len(e.vars) or set(e.vars) & set(row):
            out.append((f"{where}: TOTAL sums over ({', '.join(e.vars)}): each once, none a key variable of the view",
                        e.pos or v.pos))
        _check_view_ref(out, v, e.ref, row + list(e.vars), maps, types)
        _check_conditional(out, v, e, row, list(e.vars), maps, types)
    elif isinstance(e, Over):
        check_over(out, v, e, row, maps, types, _check_arity, _check_nested)
    elif isinstance(e, MapRef):
        _check_view_ref(out, v, e, row, maps, types)
    elif isinstance(e, Var):
        if e.name not in row:
            out.append((f"{where}: variable {e.name} is not a key variable of the view", e.pos or v.pos))
    elif not isinstance(e, Const):
        out.append((f"{where}: a view column is arithmetic over map entries, folds, key variables and constants", e.pos or v.pos))


def _check_conditional(out: Problems, v: ViewDecl, e: Fold | Total, row: list[str], over: list[str], maps,
                       types: dict[str, str]) -> None:
    """A TOTAL's or a fold's condition and tracking maps; ``over``: the variables it sums or folds over."""
    what = "TOTAL" if isinstance(e, Total) else e.kind
    if e.cond is not None:
        _check_nested(out, v, e.cond, row + over, maps, types)
    for t in e.track:
        names = [a.name for a in t.args if isinstance(a, Var)]
        if len(names) != len(t.args) or len(set(names)) != len(names) or not set(row) <= set(names) \
                or not set(names) <= set(row) | set(over):
            out.append((f"view {v.name}: {what} tracks {t.name} at ({', '.join(names)}): it must be read at the "
                        "view's key variables and some of the summed ones, each once", t.pos or v.pos))
        _check_arity(out, t, maps, "map")


def _check_nested(out: Problems, v: ViewDecl, e: Expr, scope: list[str], maps, types: dict[str, str]) -> None:
    """A TOTAL's condition: comparisons of arithmetic over the variables in scope, constants, and maps read at
    some of those variables (a nested subquery's maps, keyed by its correlation columns), or folds of them."""
    folded = [id(n.ref) for n in walk(e) if isinstance(n, Fold)]
    scope = scope + [x for n in walk(e) if isinstance(n, (Total, Over)) for x in n.vars]  # a range summed inside
    for node in walk(e):
        if isinstance(node, MapRef) and id(node) in folded:
            continue
        if isinstance(node, (MapRef, Fold)):
            ref = node.ref if isinstance(node, Fold) else node
            _check_arity(out, ref, maps, "map")
            names = [a.name for a in ref.args if isinstance(a, Var)]
            extra = [node.var] if isinstance(node, Fold) else []
            if len(set(names)) != len(names) or not set(names) <= set(scope) | set(extra):
                out.append((f"view {v.name}: a TOTAL's condition reads {ref.name} at ({', '.join(names)}), not at "
                            f"distinct variables among ({', '.join(scope)})", ref.pos or v.pos))
        elif isinstance(node, Var) and node.name not in scope:
            if not any(isinstance(f, Fold) and f.var == node.name for f in walk(e)):
                out.append((f"view {v.name}: variable {node.name} of a TOTAL's condition is not in scope", node.pos or v.pos))
        elif isinstance(node, (RelAtom, IfThen, Prod, Sum)):
            out.append((f"view {v.name}: a TOTAL's condition holds {type(node).__name__}", v.pos))


def _check_view_ref(out: Problems, v: ViewDecl, ref: MapRef, want: list[str], maps, types: dict[str, str]) -> None:
    _check_arity(out, ref, maps, "map")
    names = [a.name if isinstance(a, Var) else None for a in ref.args]
    if sorted(n or "" for n in names) != sorted(want):
        message = (f"view {v.name} reads {ref.name} at ({', '.join(map(str, names))}); a view reads a map at "
                   f"its key variables ({', '.join(want)}), each once")
        out.append((message, ref.pos or v.pos))
        return
    decl = maps.get(ref.name)
    if decl is None or len(decl.keys) != len(names):
        return
    for n, k in zip(names, decl.keys):
        if types.setdefault(n, k.type) != k.type:
            out.append((f"view {v.name}: variable {n} is {types[n]} in one map and {k.type} in {ref.name}", ref.pos or v.pos))


def _unique(out: Problems, what: str, items) -> None:
    seen: set[str] = set()
    for item in items:
        if item.name in seen:
            out.append((f"duplicate {what} {item.name}", item.pos))
        seen.add(item.name)


def _check_map(out: Problems, m: MapDecl, rels) -> None:
    _unique(out, f"key of map {m.name}", m.keys)
    for k in m.keys:
        if k.type not in TYPES:
            out.append((f"key {k.name} of map {m.name} has unknown type {k.type}", k.pos))
    if m.value_type not in ("INT", "FLOAT"):
        out.append((f"map {m.name} has value type {m.value_type}; map values are INT or FLOAT", m.pos))
    if m.definition is None:
        return
    for node in walk(m.definition):
        if isinstance(node, (Arith, Fold, BoolOp, Total, Over)):
            out.append((f"definition of map {m.name} holds a view expression", node.pos or m.pos))
        elif isinstance(node, MapRef):
            out.append((f"definition of map {m.name} refers to map {node.name}; definitions range over relations only", node.pos))
        elif isinstance(node, RelAtom):
            _check_arity(out, node, rels, "relation")
    types = {a.name: c.type for node in walk(m.definition) if isinstance(node, RelAtom) and node.name in rels
             for a, c in zip(node.args, rels[node.name].columns) if isinstance(a, Var)}
    for node in walk(m.definition):
        if isinstance(node, Cmp):
            _check_like(out, node, types, f"definition of map {m.name}")
        if isinstance(node, Cmp) and any(isinstance(x, Call) for x in walk(node)) and lift(node) is None:
            out.append((f"definition of map {m.name}: a function call stands only in a lift {{K = f(X)}}", node.pos or m.pos))
        if isinstance(node, Call):
            _check_call(out, node, types, f"definition of map {m.name}")
    keys = [k.name for k in m.keys]
    for term in _terms(m.definition):
        bound = {a.name for node in walk(term) if isinstance(node, RelAtom) for a in node.args if isinstance(a, Var)}
        lifts = [x for node in walk(term) if (x := lift(node)) is not None]
        for _ in lifts:  # a lifted variable is bound where its call's variables are
            bound |= {k for k, call in lifts if set(variables(call)) <= bound}
        for name in variables(term):
            if name not in bound:
                what = "key" if name in keys else "variable"
                out.append((f"{what} {name} of map {m.name} is not bound by a relation in every term of its definition", term.pos or m.pos))
        for k in keys:
            if k not in bound and k not in variables(term):
                out.append((f"key {k} of map {m.name} does not appear in every term of its definition", term.pos or m.pos))


def _check_like(out: Problems, c: Cmp, types: dict[str, str], where: str) -> None:
    """``X LIKE 'p'`` matches a STRING (a variable of a STRING column, or a string) against a string constant."""
    if c.op not in LIKE_OPS:
        return
    left = c.left.value if isinstance(c.left, Const) else types.get(c.left.name) if isinstance(c.left, Var) else None
    if not (isinstance(c.right, Const) and isinstance(c.right.value, str)):
        out.append((f"{where}: the pattern of {c.op} must be a string constant", c.pos))
    if not (isinstance(left, str) and (left == "STRING" or isinstance(c.left, Const))):
        out.append((f"{where}: {c.op} matches a STRING variable or a string", c.pos))


def _terms(e: Expr) -> list[Expr]:
    """The top-level terms of a definition (sums distributed over products one level)."""
    if isinstance(e, Sum):
        return [t for term in e.terms for t in _terms(term)]
    return [e]


def _check_arity(out: Problems, ref, decls, what) -> None:
    decl = decls.get(ref.name)
    if decl is None:
        out.append((f"unknown {what} {ref.name}", ref.pos))
        return
    n = len(decl.columns) if what == "relation" else len(decl.keys)
    if len(ref.args) != n:
        out.append((f"{what} {ref.name} takes {n} arguments, not {len(ref.args)}", ref.pos))


def _check_trigger(out: Problems, t: Trigger, rels, maps) -> None:
    if t.relation not in rels:
        out.append((f"trigger on unknown relation {t.relation}", t.pos))
    elif len(t.vars) != len(rels[t.relation].columns):
        out.append((f"trigger on {t.relation} binds {len(t.vars)} event variables but the relation has {len(rels[t.relation].columns)} columns", t.pos))
    if len(set(t.vars)) != len(t.vars):
        out.append((f"trigger on {t.relation} repeats an event variable", t.pos))
    types = dict(zip(t.vars, (c.type for c in rels[t.relation].columns))) if t.relation in rels else {}
    for s in t.statements:
        _check_statement(out, t, s, maps)
        for node in [*walk(s.expr), *walk(s.target)]:
            if isinstance(node, Cmp):
                _check_like(out, node, types, f"trigger on {t.relation}")
            if isinstance(node, Call):
                _check_call(out, node, types, f"trigger on {t.relation}")
                if not set(variables(node)) <= set(t.vars) and not _vector(node):  # (of loop variables: per entry)
                    out.append((f"trigger on {t.relation}: {node.fn}(...) is computed from the event's row: its "
                                "variable must be an event variable", node.pos or s.pos))


def _check_statement(out: Problems, t: Trigger, s: Statement, maps) -> None:
    _check_arity(out, s.target, maps, "map")
    rhs_maps: list[MapRef] = []
    sides = {id(n) for c in walk(s.expr) if isinstance(c, Cmp) or _vector(c) for n in walk(c)}  # arithmetic may
    # stand there, and as a vector function's argument
    for node in walk(s.expr):
        if isinstance(node, Sum) and id(node) not in sides:
            out.append(("a trigger term is a product (monomial); sums belong in map definitions", node.pos or s.pos))
        elif isinstance(node, RelAtom):
            out.append((f"relation atom {node.name}(...) in a trigger; statements read maps, not relations", node.pos))
        elif isinstance(node, (Arith, Fold, BoolOp, Total, Over)):
            out.append(("view expressions (/, -, folds, AND/OR/NOT) belong in views, not triggers", node.pos or s.pos))
        elif isinstance(node, MapRef):
            _check_arity(out, node, maps, "map")
            rhs_maps.append(node)
            if node.name == s.target.name:
                out.append((f"statement on {node.name} reads the map it updates", node.pos))
            for a in node.args:
                if not isinstance(a, (Var, Const, Call)):
                    out.append((f"argument of {node.name} must be a variable, constant or function call", node.pos))
    _, loop = classify(t, s)
    lhs = set(variables(s.target))
    guarded = {v for node in walk(s.expr) if isinstance(node, Cmp) or _vector(node) for v in variables(node)}
    for v in loop:
        where = [r for r in rhs_maps if any(isinstance(a, Var) and a.name == v for a in r.args)]
        if not where:
            where_is = "on the left of" if v in lhs else "of"
            out.append((f"variable {v} {where_is} the statement on {s.target.name} is neither an event variable nor bound by a right-hand-side map", s.pos))
        elif v not in lhs and v not in guarded:
            out.append((f"loop variable {v} appears only on the right-hand side of the statement on {s.target.name}; restricted M3 requires it on both sides (maintain a map with one fewer key instead)", s.pos))
        if len(where) > 1:
            out.append((f"loop variable {v} parametrises {len(where)} maps ({', '.join(r.name for r in where)}) in the statement on {s.target.name}; restricted M3 allows exactly one (a join must go through event variables)", s.pos))
    for node in walk(s.expr):
        cond = node.cond if isinstance(node, IfThen) else node if isinstance(node, Cmp) else None
        if cond is None:
            continue
        for side in (cond.left, cond.right):
            if any(isinstance(n, (MapRef, IfThen)) for n in walk(side)):
                out.append(("a condition compares variables, constants and arithmetic over them only",
                            cond.pos or s.pos))
                break
