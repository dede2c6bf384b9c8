"""Pass 2, normalise: a resolved SQL query → sum-of-products calculus (one :class:`Agg` per aggregate).

* Equi-joined columns become one variable (union-find), so joins are not
  conditions at all: ``R(A, B) * S(B, C)``.
* The selection becomes a sum of products of atomic comparisons by
  inclusion–exclusion: ``[p OR q] = [p] + [q] - [p][q]``; ``>``/``>=`` are
  written as ``<``/``<=`` with the sides swapped.
* The aggregated expression becomes polynomial factors.  A factor whose
  variables all come from one relation occurrence stays whole (``(1 +
  -1*DISC)``) so it is materialised once; one that spans relations is
  expanded into monomials, giving several terms.
* ``CASE`` (in an aggregated expression) is a sum of guarded terms: branch i
  contributes its value times ``[not c1] ... [not c(i-1)] [ci]`` (the first
  branch whose condition holds), the ELSE ``[not c1] ... [not cn]``; the
  guards are selections like WHERE's.  A NULL branch contributes nothing.
* ``COUNT`` sums 1 where its argument is not NULL (:func:`nonnull`); ``AVG``
  is a SUM map divided by such a COUNT map.  Which maps a query's columns,
  HAVING, MIN/MAX and DISTINCT need, and how the view reads them: :mod:`.columns`.
* A function of a column (``EXTRACT(YEAR FROM d)``, ``SUBSTRING(p, 1, 2)``:
  a computed group key or compared value) is a variable of its own, defined
  by a lift ``{K = YEAR(D)}`` in every term (:func:`lift_computed`).
* Output key columns name variables; two may name one (``SELECT *`` over an
  equi-join shows both joined columns), the maps are keyed by each once.

>>> from .frontend import parse_sql
>>> rels, qs = parse_sql('''CREATE STREAM R(a INT, b INT); CREATE STREAM S(b INT, c FLOAT);
...   SELECT r.a, SUM(s.c * (1 - s.c)) FROM R r, S s WHERE r.b = s.b AND (r.a < 3 OR s.c >= 2) GROUP BY r.a''')
>>> nq = normalize(rels, qs[0])
>>> nq.key_names, nq.keys
(('a',), (V(name='A', type='INT'),))
>>> for t in nq.aggregates[0].agg.terms: print(t)
R(A, B) * S(B, C) * {A < 3} * C * (1 + -1 * C)
R(A, B) * S(B, C) * {2 <= C} * C * (1 + -1 * C)
-1 * R(A, B) * S(B, C) * {2 <= C} * {A < 3} * C * (1 + -1 * C)
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, replace

from ..ast import RelationDecl
from ..calculus import (
    Agg,
    PolyVal,
    Atom,
    Cond,
    Fn,
    Lit,
    Poly,
    Term,
    V,
    poly_add,
    poly_const,
    poly_mul,
    poly_scale,
    poly_value,
    poly_var,
    poly_vars,
)
from ..errors import CompileError
from ..functions import result_type
from .arithcmp import is_arith
from .arithkey import ArithKey
from .outerkeys import ConstKey
from .columns import Aggregate, view_columns
from .frontend import SqlQuery
from .nested import has_subquery, having_subqueries, nested_condition, nested_vars
from .nulls import is_case, is_ref, nonnull
from .predicates import FALSE, TRUE, conj, negate
from .libargs import LibCall
from .resolve import Computed
from .setops import combine
from .union import merged


@dataclass(frozen=True)
class NormalQuery:
    """A query in the calculus: its maps' definitions, and its view's columns and condition over them."""

    name: str
    key_names: tuple[str, ...]
    keys: tuple[V, ...]  # the group variables, each once: every map's keys (a multiplicity map: then its value)
    aggregates: tuple[Aggregate, ...]
    columns: tuple[tuple[str, object], ...]  # (name, column expression over aggregates, :mod:`.columns`)
    where: object = None  # the view's condition (HAVING, DISTINCT), or None
    key_vars: tuple[V, ...] = ()  # per output key column, its variable
    extra_keys: tuple[V, ...] = ()  # outer variables a nested condition reads: every outer map's keys after `keys`
    nested: object = None  # the nested subqueries' condition over column expressions (:mod:`.nested`), or None
    outer_count: int = 0  # with `nested`: aggregates [0, outer_count) are the outer query's, the rest inner maps
    tracks: tuple[int, ...] = ()  # with `nested`: the tracking maps (:func:`.nested.nested_condition`)
    counts: tuple[int, ...] = ()  # with `nested`: the subqueries' row-count maps


def variable_names(columns: list[str], taken: set[str] | None = None) -> list[str]:
    """Upper-cased, de-duplicated variable names for columns (M3 style: ``OID``, ``NATION``).

    >>> variable_names(["a", "A", "b"])
    ['A', 'A_2', 'B']
    """
    taken = set(taken or ())
    out = []
    for c in columns:
        base, n, name = c.upper(), 1, c.upper()
        while name in taken:
            n += 1
            name = f"{base}_{n}"
        taken.add(name)
        out.append(name)
    return out


def normalize(relations: list[RelationDecl], q: SqlQuery) -> NormalQuery:
    """The calculus form of a query (pure; see module doc)."""
    if q.union:  # UNION ALL: each branch's maps, added (:mod:`.union`); INTERSECT, EXCEPT: apart (:mod:`.setops`)
        base = normalize(relations, replace(q, union=(), setop=""))
        others = [normalize(relations, b) for b in q.union]
        return combine(q.setop, base, others) if q.setop else merged(base, others)
    rels = {r.name: r for r in relations}
    cols = [(alias, c.name) for alias, rel in q.tables for c in rels[rel].columns]
    ctype = {(alias, c.name): c.type for alias, rel in q.tables for c in rels[rel].columns}
    parent = {c: c for c in cols}

    def find(c):
        while parent[c] != c:
            parent[c] = parent[parent[c]]
            c = parent[c]
        return c

    for a, b in q.joins:
        ra, rb = find(a), find(b)
        if ra != rb:
            parent[max(ra, rb, key=cols.index)] = min(ra, rb, key=cols.index)
    roots = [c for c in cols if find(c) == c]
    names = dict(zip(roots, variable_names([c[1] for c in roots])))
    var = {c: V(names[find(c)], ctype[find(c)]) for c in cols}
    lifts = lift_computed(q, var)  # EXTRACT, SUBSTRING of a column: a variable each, and the lifts defining them
    atoms = tuple(Atom(rel, tuple(var[(alias, c.name)] for c in rels[rel].columns)) for alias, rel in q.tables)

    key_vars = tuple(var[ref] for _, ref in q.group_by)
    keys = tuple(dict.fromkeys(key_vars))
    selection = _predicate(q.predicate, var) if q.predicate is not None else [(1, ())]
    extra = nested_vars(q, var, keys) if q.nested else ()

    def agg(expr, folded: V | None, count: bool) -> Agg:
        terms = []
        value = _value_terms(nonnull(expr) if count else expr, var, atoms)
        for (pc, conds), (vc, vconds, polys) in itertools.product(selection, value):
            if pc * vc:
                both = conds + tuple(c for c in vconds if c not in conds)
                terms.append(Term(pc * vc, atoms, both + tuple(c for c in lifts if c not in both), polys))
        if not terms:  # always 0 (a WHERE that never holds): still a map, of rows that never count
            terms.append(Term(1, atoms, (Cond("=", Lit(0), Lit(1)),) + lifts, ()))
        return Agg(keys + extra + ((folded,) if folded is not None and folded not in extra else ()), tuple(terms))

    aggregates, columns, where = view_columns(q, var, keys, agg, rows=bool(q.nested))
    if q.having is not None and has_subquery(where):  # HAVING compares with scalar subqueries (:mod:`.nested`)
        inner, where = having_subqueries(relations, q, var, len(aggregates), keys, agg(1, None, True), where,
                                         normalize)
        return NormalQuery(q.name, tuple(n for n, _ in q.group_by), keys, aggregates + tuple(inner), columns, where,
                           key_vars)
    if not q.nested:
        return NormalQuery(q.name, tuple(n for n, _ in q.group_by), keys, aggregates, columns, where, key_vars)
    inner, condition, tracks, counts = nested_condition(relations, q, var, len(aggregates), keys,
                                                        agg(1, None, True), normalize)
    return NormalQuery(q.name, tuple(n for n, _ in q.group_by), keys, aggregates + tuple(inner), columns, where,
                       key_vars, extra, condition, len(aggregates), tuple(tracks), tuple(counts))


def _has_case(e) -> bool:
    if is_case(e):
        return True
    return isinstance(e, tuple) and not is_ref(e) and any(_has_case(x) for x in e[1:])


def lift_computed(q: SqlQuery, var: dict) -> tuple[Cond, ...]:
    """Give each function of a column the query computes (:class:`.resolve.Computed`: a GROUP BY key, a side of a
    comparison) a variable of its own in ``var``, and return the lifts ``{K = f(X)}`` that define them.

    A lift is 1 where ``K`` is ``f(X)``, so it may multiply every term: summed over ``K`` it is 1.  Maps are
    then keyed by ``K`` where the query needs it; a trigger computes ``f`` of the event's column (:mod:`.lifts`).

    >>> from .resolve import Computed
    >>> var = {("R", "d"): V("D", "DATE")}
    >>> q = SqlQuery("Q1", (("R", "R"),), (), None, (("y", Computed("YEAR", ("R", "d"))),), ())
    >>> lift_computed(q, var), var[Computed("YEAR", ("R", "d"))]
    ((Cond(op='=', left=V(name='YEAR_D', type='INT'), right=Fn(name='YEAR', args=(V(name='D', type='DATE'),), type='INT')),), V(name='YEAR_D', type='INT'))
    """
    found: list[Computed | ArithKey | ConstKey] = []

    def collect(x):
        if isinstance(x, LibCall):  # VEC_LENGTH(a - b, ...): its arguments' calls first (:mod:`.libargs`)
            collect(x.args)
            if x not in found:
                found.append(x)
        elif isinstance(x, (Computed, ArithKey, ConstKey)):
            if isinstance(x, ArithKey):
                collect(x.tree)  # YEAR(d) * 100: the call's variable first
            if x not in found:
                found.append(x)
        elif isinstance(x, tuple):
            for y in x:
                collect(y)

    collect(tuple(ref for _, ref in q.group_by))
    collect(q.predicate)
    collect(q.nested)
    collect(q.columns)  # a computed value inside an aggregate: SUM(c * EXTRACT(MONTH FROM d))
    collect(q.having)  # ... also when only HAVING reads that aggregate
    taken = {v.name for v in var.values()}
    out = []
    for c in found:
        if isinstance(c, (ArithKey, ConstKey)):
            continue
        if isinstance(c, LibCall):  # {K = VEC_LENGTH(X + -1 * X_2, ...)}: a value of the joined variables
            name = variable_names([c.fn], taken)[0]
            taken.add(name)
            k = var[c] = V(name, result_type(c.fn))
            out.append(Cond("=", k, Fn(c.fn, tuple(poly_value(_poly(a, var)) for a in c.args), k.type)))
            continue
        x = var.get(c.ref)
        if x is None:  # (a column of an enclosing query: a computed correlation, MOD(r.a, 3) in a subquery)
            raise CompileError(f"query {q.name}: unsupported {c.fn} of {'.'.join(c.ref)}, a column of an "
                               "enclosing query (compute it in that query, or correlate by the column itself)")
        name = variable_names([f"{c.fn}_{x.name}"], taken)[0]
        taken.add(name)
        k = var[c] = V(name, result_type(c.fn))
        out.append(Cond("=", k, Fn(c.fn, (x,) + tuple(Lit(a) for a in c.args), k.type)))
    names = {ref: n for n, ref in q.group_by}
    for c in (c for c in found if isinstance(c, ConstKey)):  # a constant key: {K = 0} (:mod:`.outerkeys`)
        k = var[c] = V(variable_names([names.get(c, "const")], taken)[0], c.type)
        taken.add(k.name)
        out.append(Cond("=", k, Lit(c.value)))
    for c in (c for c in found if isinstance(c, ArithKey)):  # A + B: {K = A + B} (:mod:`.arithkey`)
        p = _poly(c.tree, var)
        if len(p) == 1 and p[0][0] == 1 and len(p[0][1]) == 1:  # A * 1: the column's own variable
            var[c] = p[0][1][0]
            continue
        if not poly_vars(p):
            raise CompileError(f"query {q.name}: the key {c} is a constant (select or group by a constant "
                               "elsewhere)")
        name = variable_names([names.get(c, "expr")], taken)[0]
        taken.add(name)
        k = var[c] = V(name, c.type)
        out.append(Cond("=", k, PolyVal(p)))
    return tuple(out)


def _cond(op: str, left, right, var) -> Cond:
    lv, rv = (poly_value(_poly(x[1], var)) if is_arith(x) else var[x] if is_ref(x) or isinstance(x, (Computed, LibCall))
              else Lit(x) for x in (left, right))
    if op in (">", ">="):
        return Cond("<" if op == ">" else "<=", rv, lv)
    return Cond(op, lv, rv)


def _predicate(p, var) -> list[tuple[int, tuple[Cond, ...]]]:
    """Inclusion–exclusion: a predicate as a signed sum of products of atomic comparisons."""
    if p == TRUE:
        return [(1, ())]
    if p == FALSE:
        return []
    op = p[0]
    if op == "and":
        out = []
        for (ca, sa), (cb, sb) in itertools.product(_predicate(p[1], var), _predicate(p[2], var)):
            both = sa + tuple(c for c in sb if c not in sa)
            if not _contradictory(both):
                out.append((ca * cb, both))
        return _merge(out)
    if op == "or":
        a, b = _predicate(p[1], var), _predicate(p[2], var)
        both = _predicate(("and", p[1], p[2]), var)
        return _merge(a + b + [(-c, s) for c, s in both])
    return [(1, (_cond(op, p[1], p[2], var),))]


def _contradictory(conds: tuple[Cond, ...]) -> bool:
    """Whether a product of comparisons is 0 for every value: one variable equal to two constants, or equal to
    and different from one (IN lists under OR multiply into many such products: TPC-H Q19).

    >>> x = V("X", "INT")
    >>> _contradictory((Cond("=", x, Lit(1)), Cond("=", x, Lit(2)))), _contradictory((Cond("=", x, Lit(1)),))
    (True, False)
    """
    equal: dict[V, object] = {}
    for c in conds:
        if c.op == "=" and isinstance(c.left, V) and isinstance(c.right, Lit):
            if equal.setdefault(c.left, c.right.value) != c.right.value:
                return True
    return any(c.op == "<>" and isinstance(c.left, V) and isinstance(c.right, Lit) and c.left in equal
               and equal[c.left] == c.right.value for c in conds)


def _merge(terms):
    acc: dict[tuple[Cond, ...], int] = {}
    for c, s in terms:
        key = tuple(sorted(s, key=str))
        acc[key] = acc.get(key, 0) + c
    return [(c, s) for s, c in acc.items() if c]


def _poly(e, var) -> Poly:
    if is_ref(e) or isinstance(e, (Computed, LibCall)):  # (a computed value is the variable its lift defines)
        return poly_var(var[e])
    if isinstance(e, (int, float)):
        return poly_const(e)
    if e[0] == "neg":
        return poly_scale(_poly(e[1], var), -1)
    a, b = _poly(e[1], var), _poly(e[2], var)
    if e[0] == "+":
        return poly_add(a, b)
    if e[0] == "-":
        return poly_add(a, poly_scale(b, -1))
    return poly_mul(a, b)


def _factors(e) -> list:
    if isinstance(e, tuple) and not is_ref(e) and len(e) == 3 and e[0] == "*":
        return _factors(e[1]) + _factors(e[2])
    return [e]


ValueTerm = tuple[int | float, tuple[Cond, ...], tuple[Poly, ...]]  # coefficient * guards * factors


def _value_terms(expr, var, atoms) -> list[ValueTerm]:
    """The aggregated expression as a sum of (coefficient, guards, polynomial factors)."""
    alternatives: list[list[ValueTerm]] = []
    for f in _factors(expr):
        if _has_case(f):
            alternatives.append(_case_terms(f, var, atoms))
            continue
        p = _poly(f, var)
        vs = set(poly_vars(p))
        if not p:
            return []
        if not vs:
            alternatives.append([(p[0][0], (), ())])
        elif len(p) == 1:  # a monomial: its coefficient, and one factor per variable
            c, mono = p[0]
            alternatives.append([(c, (), tuple(poly_var(v) for v in mono))])
        elif any(vs <= set(a.vars()) for a in atoms):
            alternatives.append([(1, (), (p,))])
        else:  # spans relations: expand into monomials
            alternatives.append([(c, (), tuple(poly_var(v) for v in mono)) for c, mono in p])
    out = []
    for combo in itertools.product(*alternatives):
        coef, conds, polys = 1, (), ()
        for c, cs, ps in combo:
            coef *= c
            conds += tuple(x for x in cs if x not in conds)
            polys += ps
        if coef:
            out.append((coef, conds, polys))
    return out


def _case_terms(e, var, atoms) -> list[ValueTerm]:
    """A factor that contains a CASE: each branch's value under the guard that selects that branch."""
    if e is None:  # NULL: SUM skips it (the front end allows it only where skipping is the meaning)
        return []
    if not _has_case(e):
        return _value_terms(e, var, atoms)
    if is_case(e):
        out, previous = [], []
        for cond, value in e[1] + ((TRUE, e[2]),):
            guard = conj([negate(c) for c in previous] + [cond])
            previous.append(cond)
            for (gc, gconds), (vc, vconds, polys) in itertools.product(_predicate(guard, var),
                                                                      _case_terms(value, var, atoms)):
                out.append((gc * vc, gconds + tuple(c for c in vconds if c not in gconds), polys))
        return out
    op = e[0]
    if op == "neg":
        return [(-c, cs, ps) for c, cs, ps in _case_terms(e[1], var, atoms)]
    if op in ("+", "-"):
        sign = 1 if op == "+" else -1
        return _case_terms(e[1], var, atoms) + [(sign * c, cs, ps) for c, cs, ps in _case_terms(e[2], var, atoms)]
    return _value_terms(e, var, atoms)  # a product: factor by factor
