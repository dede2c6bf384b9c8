"""Pass 5, materialise: decide which parts of a delta become maps, and write the M3 statements.

A delta term splits into

* a *scalar* part — the coefficient, comparisons and polynomial factors over
  event variables only (they become the statement's constant, guard ``IF``
  and variable factors), and
* *components* — its remaining relation atoms grouped by the non-event
  variables they share, with the comparisons and factors over those
  variables.  Each component becomes one map, keyed by its event variables
  and the loop variables the target needs (the statement's left side).
  Everything else in a component is summed out inside the map.

So every loop variable parametrises exactly one map and appears on both
sides: the output is restricted M3 — except where a comparison between
columns (``R.a < S.b``) compares an event variable with a loop variable: that
comparison stays in the statement as a *loop guard*, and the variable it
reads becomes a key of its map, so the statement loops over the map's
entries (at the event's slice) and tests each: a cost that grows with the
entries of that map, not with the database.  (A comparison among loop
variables stays inside the map whose atoms bind them.)  Maps are identified by a canonical form
of their definition (variable names and key order do not matter), so equal
subqueries — across terms, triggers and queries — share one map.  Terms
whose scalar parts agree and whose maps differ in one component only (as
OR's and IN lists' inclusion–exclusion produces) are factored: that
component becomes one map whose definition is their sum (:func:`factored`).

>>> from ..calculus import Agg, Atom, Term, V, poly_var
>>> from .delta import DeltaTerm
>>> C, N, O, D, P = (V(n, "INT") for n in ("CID", "NATION", "OID", "DISCOUNT", "PART"))
>>> X = V("PRICE", "INT")
>>> q = MapDef("q", (N,), Agg((N,), ()), "", (0,))
>>> d = DeltaTerm((N,), Term(1, (Atom("CUSTOMERS", (C, N)), Atom("ORDERS", (C, O, D))), (), (poly_var(D), poly_var(X))))
>>> stmts, new = materialize(q, (d,), (O, X, P), {}, 1)
>>> from ..printer import format_statement
>>> print(format_statement(stmts[0]))
q[NATION] += PRICE * m1[OID, NATION]
>>> print(new[0].definition)
AggSum([OID, NATION], CUSTOMERS(CID, NATION) * ORDERS(CID, OID, DISCOUNT) * DISCOUNT)
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, replace

from .. import ast
from ..calculus import (
    Agg,
    Atom,
    Cond,
    Fn,
    Lit,
    Poly,
    PolyVal,
    Term,
    V,
    Value,
    lift_in,
    poly_const,
    poly_mul,
    poly_vars,
    value_to_ast,
)
from ..errors import CompileError
from .delta import DeltaTerm


@dataclass(frozen=True)
class MapDef:
    """A map the program maintains: its keys (declared order) and defining query."""

    name: str
    keys: tuple[V, ...]
    definition: Agg
    canonical: str
    canon_order: tuple[int, ...]  # canonical key position i -> index into keys

    @property
    def value_type(self) -> str:
        for t in self.definition.terms:
            if isinstance(t.coef, float) or any(v.type == "FLOAT" for p in t.polys for v in poly_vars(p)):
                return "FLOAT"
            if any(isinstance(c, float) for p in t.polys for c, _ in p):
                return "FLOAT"
        return "INT"


def make_mapdef(name: str, agg: Agg) -> MapDef:
    canon, order = canonical(agg)
    return MapDef(name, tuple(agg.keys), agg, canon, order)


def canonical(agg: Agg) -> tuple[str, tuple[int, ...]]:
    """A string equal for definitions equal up to renaming and key order, and the key order it fixes.

    >>> from ..calculus import poly_var
    >>> a, b = V("A", "INT"), V("B", "INT")
    >>> s1, o1 = canonical(Agg((a, b), (Term(1, (Atom("R", (a, b)),), (), (poly_var(b),)),)))
    >>> s2, o2 = canonical(Agg((b, a), (Term(1, (Atom("R", (a, b)),), (), (poly_var(b),)),)))
    >>> s1 == s2, o1, o2
    (True, (0, 1), (1, 0))
    """
    n = len(agg.keys)
    best: tuple[str, tuple[int, ...]] | None = None
    for perm in _key_orders(agg):
        keymap = {agg.keys[p]: f"k{i}" for i, p in enumerate(perm)}
        s = f"[{n}]" + " + ".join(sorted(_canon_term(t, keymap) for t in agg.terms))
        if best is None or s < best[0]:
            best = (s, tuple(perm))
    assert best is not None
    return best


def _key_orders(agg: Agg, most: int = 120) -> list[tuple[int, ...]]:
    """The key orders :func:`canonical` tries: the keys sorted by a signature no renaming or reordering changes
    (the definition's canonical terms with that key marked, the others anonymous), permuting only keys whose
    signatures tie (at most ``most`` orders).  Trying every order of 5 keys meant 120 passes over a definition's
    terms: TPC-DS Q46's pairs maps spent most of their compile time there.

    >>> from ..calculus import poly_var
    >>> a, b, c = V("A", "INT"), V("B", "INT"), V("C", "INT")
    >>> _key_orders(Agg((a, b, c), (Term(1, (Atom("R", (a, b)), Atom("S", (b, c))), (), (poly_var(c),)),)))
    [(0, 1, 2)]
    >>> _key_orders(Agg((a, b, c), (Term(1, (Atom("R", (a, b, c)), Atom("R", (b, a, c)))),)))  # symmetric in A, B
    [(0, 1, 2), (1, 0, 2)]
    """
    n = len(agg.keys)
    if n <= 2:  # as few passes as the signatures would take
        return list(itertools.permutations(range(n)))
    anonymous = {k: "k?" for k in agg.keys}
    signature = [" + ".join(sorted(_canon_term(t, {**anonymous, agg.keys[p]: "k!"}) for t in agg.terms))
                 for p in range(n)]
    ties: dict[str, list[int]] = {}
    for p in sorted(range(n), key=lambda p: signature[p]):
        ties.setdefault(signature[p], []).append(p)
    orders = itertools.product(*(itertools.permutations(group) for group in ties.values()))
    return [tuple(p for group in choice for p in group) for choice in itertools.islice(orders, most)]


def _canon_term(t: Term, keymap: dict) -> str:
    by_rel: dict[str, list[Atom]] = {}
    for a in t.atoms:
        by_rel.setdefault(a.rel, []).append(a)
    groups = [by_rel[r] for r in sorted(by_rel)]
    orders = list(itertools.product(*(itertools.permutations(g) for g in groups)))
    best = None
    for choice in orders[:120]:
        names = dict(keymap)

        def name(x, names=names):
            if isinstance(x, Lit):
                return f"{type(x.value).__name__}:{x.value!r}"
            if isinstance(x, Fn):
                return f"{x.name}({','.join(name(a) for a in x.args)})"
            if isinstance(x, PolyVal):  # a comparison's arithmetic side (:mod:`.arithcmp`)
                return "(" + "+".join(sorted(f"{c!r}*{'*'.join(sorted(name(v) for v in vs))}" for c, vs in x.poly)) + ")"
            if x not in names:
                names[x] = f"v{len(names) - len(keymap)}"
            return names[x]

        atoms = ";".join(f"{a.rel}({','.join(name(x) for x in a.args)})" for g in choice for a in g)
        conds = sorted(f"{name(c.left)}{c.op}{name(c.right)}" for c in t.conds)
        polys = sorted("+".join(sorted(f"{c!r}*{'*'.join(sorted(name(v) for v in vs))}" for c, vs in p)) for p in t.polys)
        s = f"{t.coef!r}|{atoms}|{'&'.join(conds)}|{'|'.join(polys)}"
        if best is None or s < best:
            best = s
    return best or ""


@dataclass(frozen=True)
class _Split:
    keys: tuple[Value, ...]
    coef: int | float
    guards: tuple[Cond, ...]
    scalars: tuple[Poly, ...]
    comps: tuple[tuple[tuple[V, ...], Term], ...]  # (map keys, body with coefficient 1)


def _poly_vars(p: Poly) -> list[V]:
    """The variables of a polynomial, through a call a bound lift left in it (``c * MONTH(D)``, :mod:`.lifts`)."""
    return [x for v in poly_vars(p) for x in (v.vars() if isinstance(v, Fn) else (v,))]


def _mixed_call(p: Poly, event: set[V]) -> bool:
    """Whether a factor holds a call of event and loop variables (a vector function's lift the event bound,
    :mod:`.lifts`): the statement computes it per entry of the maps keyed by its loop variables."""
    return any(isinstance(v, Fn) and set(v.vars()) & event and set(v.vars()) - event for v in poly_vars(p))


def _key_vars(k: Value) -> tuple[V, ...]:
    """The variables of a target key: itself, or those of arithmetic or a call a bound lift left there (``A + C``,
    ``VEC_LENGTH(A + -1 * C, ...)``)."""
    return k.vars() if isinstance(k, (PolyVal, Fn)) else (k,) if isinstance(k, V) else ()


def split_term(d: DeltaTerm, event: set[V]) -> _Split:
    """Separate a delta term into its scalar part and its connected components."""
    t = d.term
    lhs_loop = {v for k in d.keys for v in _key_vars(k) if v not in event}  # (A + C: C, :mod:`.lifts`)
    parent = list(range(len(t.atoms)))

    def find(i):
        while parent[i] != i:
            i = parent[i]
        return i

    lift_args = {k: free for c in t.conds if (k := lift_in(c, t.atoms)) is not None  # (a lift the event binds is a guard)
                 and (free := [v for v in c.right.vars() if v not in event])}

    def binders(v):  # a lifted variable is bound where its call's variables are (:mod:`.lifts`)
        return lift_args.get(v, [v])

    atom_vars = [set(a.vars()) for a in t.atoms]

    def atoms_with(vs):
        return [i for i, a in enumerate(atom_vars) if any(b in a for v in vs if v not in event for b in binders(v))]

    for i, j in itertools.combinations(range(len(t.atoms)), 2):
        if atom_vars[i] & atom_vars[j] - event:
            parent[find(i)] = find(j)
    guards, attached = [], []
    exposed: set[V] = set()  # variables a loop guard reads: keys of their maps, so the statement loops over them
    for item in list(t.conds) + list(t.polys):
        vs = item.vars() if isinstance(item, Cond) else _poly_vars(item)
        free = [v for v in vs if v not in event]
        if not free:
            guards.append(item)
            continue
        if len(free) < len(vs) and (isinstance(item, Cond) or _mixed_call(item, event)):  # compares the event with
            # a loop variable (a loop guard), or a call of both (VEC_LENGTH(X + -1 * X_2, ...)) computed per entry
            guards.append(item)
            exposed.update(free)
            continue
        where = atoms_with(free)
        if not where or any(not any(b in atom_vars[i] for i in where for b in binders(v)) for v in free):
            raise CompileError(f"internal: variable {free[0]} is not bound by a relation")
        for i in where[1:]:
            parent[find(i)] = find(where[0])
        attached.append((find(where[0]), item))
    comps = []
    for root in sorted({find(i) for i in range(len(t.atoms))}):
        atoms = tuple(a for i, a in enumerate(t.atoms) if find(i) == root)
        items = [it for r, it in attached if find(r) == root]
        body = Term(1, atoms, tuple(i for i in items if isinstance(i, Cond)), tuple(i for i in items if not isinstance(i, Cond)))
        keys = tuple(v for v in body.vars() if v in event or v in lhs_loop or v in exposed)
        comps.append((keys, body))
    bound = {v for keys, _ in comps for v in keys}
    for v in (lhs_loop | exposed) - bound:
        raise CompileError(f"internal: key variable {v} is not bound by a relation")
    return _Split(
        d.keys, t.coef,
        tuple(g for g in guards if isinstance(g, Cond)),
        tuple(g for g in guards if not isinstance(g, Cond)),
        tuple(comps),
    )


def materialize(target: MapDef, terms: tuple[DeltaTerm, ...], event: tuple[V, ...],
                known: dict[str, MapDef], next_id: int) -> tuple[tuple[ast.Statement, ...], tuple[MapDef, ...]]:
    """Statements updating ``target`` for these delta terms, and the maps they need that ``known`` lacks.

    ``known`` maps canonical strings to maps; new maps are named ``m<next_id>``, ``m<next_id+1>``, ...
    """
    ev = set(event)
    new: dict[str, MapDef] = {}
    stmts: list[ast.Statement] = []
    canons: dict[Agg, tuple[str, tuple[int, ...]]] = {}  # a summed map recurs in many statements: canonical once
    for first, products in factored([split_term(d, ev) for d in terms]):
        plan = [(coef, [Agg(k, ts) for k, ts in comps]) for coef, comps in products]
        for coef, bodies in plan:
            refs = []
            for body in bodies:
                canon, order = canons[body] if body in canons else canons.setdefault(body, canonical(body))
                md = known.get(canon) or new.get(canon)
                if md is None:  # declare event-variable keys first: slices are then key prefixes
                    lhs = [k for k in s_keys(first) if isinstance(k, V)]
                    keys = tuple(sorted(body.keys, key=lambda k: (k not in ev, event.index(k) if k in ev else lhs.index(k) if k in lhs else 0)))
                    md = MapDef(f"m{next_id + len(new)}", keys, Agg(keys, body.terms), canon,
                                tuple(keys.index(body.keys[i]) for i in order))
                    new[canon] = md
                args: list[Value] = [None] * len(order)  # type: ignore[list-item]
                for i, p in enumerate(order):
                    args[md.canon_order[i]] = body.keys[p]
                refs.append(ast.MapRef(md.name, tuple(_val(a) for a in args)))
            stmts += _statements(target, first, coef, refs)
    return tuple(stmts), tuple(new.values())


Component = tuple[tuple[V, ...], tuple[Term, ...]]  # a map to be: its keys and the terms it sums


def factored(splits: list[_Split]) -> list[tuple[_Split, list[tuple[int | float, tuple[Component, ...]]]]]:
    """The delta terms as few products of maps as distributivity allows, per class of terms whose statements
    agree but for their maps (same target keys, guards, scalar factors and components' atoms and keys).

    Inclusion–exclusion of ORs and IN lists multiplies terms: TPC-DS Q53a's WHERE is 12 month constants times 96
    item conditions, 1152 terms, each a product of an item map, a date map and a store map.  Summing the terms
    that differ in one component only, ``Σ_k c_k·A_k·R = (Σ_k c_k·A_k)·R``, repeatedly over each component, gives
    one product of three maps (one summing 96 item terms, one 12 date terms): a handful of maps and statements
    instead of a thousand.  A class of one term keeps its coefficient outside its maps (so they stay shared).

    >>> from ..calculus import Agg, Atom, Term, V
    >>> x, y, e = V("X", "INT"), V("Y", "INT"), V("E", "INT")
    >>> r, s = Atom("R", (e, x)), Atom("S", (e, y))
    >>> ds = [DeltaTerm((), Term(1, (r, s), (Cond("=", x, Lit(i)), Cond("=", y, Lit(j))))) for i in (1, 2) for j in (3, 4, 5)]
    >>> [(c, [len(ts) for _, ts in comps]) for _, ps in factored([split_term(d, {e}) for d in ds]) for c, comps in ps]
    [(1, [2, 3])]
    """
    classes: dict[tuple, list[_Split]] = {}
    for s in splits:
        shape = tuple(sorted((_atoms_str(b), frozenset(k)) for k, b in s.comps)) if s.comps else (id(s),)
        classes.setdefault((s.keys, tuple(sorted(s.guards, key=str)), tuple(sorted(s.scalars, key=str)), shape),
                           []).append(s)
    out = []
    for members in classes.values():
        if len(members) == 1:  # (its maps in their order)
            out.append((members[0], [(members[0].coef, tuple((k, (b,)) for k, b in members[0].comps))]))
            continue
        products = [(m.coef, tuple((k, (b,)) for k, b in sorted(m.comps, key=lambda c: _atoms_str(c[1]))))
                    for m in members]
        out.append((members[0], _distribute(products)))
    return out


def _atoms_str(body: Term) -> str:
    return " ".join(map(str, body.atoms))


def _distribute(products: list) -> list:
    """Sum the products that agree on every component but one into that component, until none do."""
    width = len(products[0][1])
    changed = True
    while changed and len(products) > 1:
        changed = False
        for j in range(width):
            rests: dict[tuple, list] = {}
            for coef, comps in products:
                rest = tuple((frozenset(k), ts) for k, ts in comps[:j] + comps[j + 1:])
                rests.setdefault(rest, []).append((coef, comps))
            if len(rests) == len(products):
                continue
            changed, products = True, []
            for group in rests.values():
                if len(group) == 1:
                    products.append(group[0])
                    continue
                summed = _summed([replace(t, coef=t.coef * c) for c, comps in group for t in comps[j][1]])
                if summed:
                    comps = group[0][1]
                    products.append((1, comps[:j] + ((comps[j][0], summed),) + comps[j + 1:]))
            if not products:
                return []
    return products


def _summed(terms: list[Term]) -> tuple[Term, ...]:
    """Equal terms (but for their coefficients) added, zeros dropped."""
    acc: dict[Term, int | float] = {}
    for t in terms:
        body = replace(t, coef=1)
        acc[body] = acc.get(body, 0) + t.coef
    return tuple(replace(t, coef=c) for t, c in acc.items() if c)


def s_keys(s: _Split) -> tuple[Value, ...]:
    return s.keys


def _val(x: Value) -> ast.Expr:
    return value_to_ast(x)


def _statements(target: MapDef, s: _Split, coef, refs: list[ast.MapRef]) -> list[ast.Statement]:
    scalar: Poly = poly_const(coef)
    for p in s.scalars:
        scalar = poly_mul(scalar, p)
    out = []
    lhs = ast.MapRef(target.name, tuple(_val(k) for k in s.keys))
    for c, vs in scalar:
        if isinstance(c, float) and c.is_integer() and not any(isinstance(x, float) for x in (coef,)):
            c = int(c)
        factors: list[ast.Expr] = ([] if c == 1 else [ast.Const(c)]) + [_val(v) for v in vs] + list(refs)
        expr: ast.Expr = ast.Const(1) if not factors else factors[0] if len(factors) == 1 else ast.Prod(tuple(factors))
        for g in reversed(s.guards):
            expr = ast.IfThen(ast.Cmp(g.op, _val(g.left), _val(g.right)), expr)
        out.append(ast.Statement(lhs, expr))
    return out
