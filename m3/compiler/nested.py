"""Nested subqueries in the calculus: first-order maps for the inner aggregates and a condition over them.

DBToaster (seed 002) maintains a nested aggregate as a map keyed by the
correlation variables, and the outer aggregate keyed additionally by the
variables the nested comparison reads; the query's value is then a sum over
that domain.  Here:

* every outer aggregate is keyed by the group variables *and* the outer
  variables the nested conditions read (:func:`nested_vars`: the correlation
  columns and the columns compared, ``PARTKEY, QUANTITY`` for TPC-H Q17);
* every subquery is normalised as a query of its own grouped by its
  correlation columns, each of which is then renamed to the outer variable it
  equals (its other variables get fresh names), so its maps are keyed by the
  outer variables: ``n1_v_sum[PARTKEY]``, ``n1_n[PARTKEY]``;
* the condition (:func:`nested_condition`) is a predicate of
  :mod:`.predicates` over column expressions (:mod:`.columns`) of the inner
  maps and the outer variables.  ``EXISTS``: the inner count is > 0 (and the
  IN subquery's HAVING holds); ``NOT``: negated (no NULLs).  A comparison with
  a scalar subquery holds only where the subquery has rows, unless it
  aggregates with COUNT alone (SQL: a SUM, AVG, MIN or MAX of no rows is
  NULL and the comparison is not true; a COUNT is 0).

The view (:mod:`.views`) reads each outer aggregate as ``TOTAL(vars :
m[keys, vars] WHERE condition)``, computed when read; a MIN, MAX or DISTINCT
aggregate of the one column the condition reads as a fold over the values
that meet it (``COUNT(B : m[A, B] WHERE ...)``, TPC-H Q16; :func:`nested_vars`).

A subquery with subqueries of its own (TPC-H Q20: ``s_suppkey IN (SELECT
ps_suppkey FROM partsupp WHERE ps_partkey IN (...) AND ps_availqty > (SELECT
0.5 * SUM(l_quantity) ...))``) is normalised the same way, one level down:
its maps are keyed by its correlation columns and the columns its own
conditions read, and its row count is read as a ``TOTAL`` over those inside
the outer condition (``0 < TOTAL(P, A : n1_n[S, P, A] WHERE 0 < n1_n1_n[P]
AND ...)``), still first-order maps.  A change two levels down reaches the
outer rows through one more tracking map per inner subquery: the outer rows
joined with the middle subquery's rows and the inner one's
(:meth:`_Inner.subquery`).

>>> from .frontend import parse_sql
>>> from .normalize import normalize
>>> rels, (q,) = parse_sql('''CREATE STREAM R(a INT, b INT); CREATE STREAM S(a INT, c INT);
...     SELECT SUM(b) AS s FROM R WHERE EXISTS (SELECT * FROM S WHERE S.a = R.a AND c > 1)''')
>>> nq = normalize(rels, q)  # (without GROUP BY: s__null, SUM's COUNT of rows, NULL over none, :mod:`.keyless`)
>>> [(a.name, str(a.agg)) for a in nq.aggregates]
[('s', 'AggSum([A], R(A, B) * B)'), ('s__null', 'AggSum([A], R(A, B))'), ('n1_n', 'AggSum([A], S(A, C_1) * {1 < C_1})')]
>>> nq.extra_keys, nq.nested
((V(name='A', type='INT'),), ('>', ('map', 2), 0))
>>> rels, (q,) = parse_sql('''CREATE STREAM R(a INT, b INT); CREATE STREAM S(d INT);
...     SELECT a, COUNT(DISTINCT b) AS n FROM R WHERE b NOT IN (SELECT d FROM S) GROUP BY a''')
>>> nq = normalize(rels, q)
>>> [(a.name, str(a.agg)) for a in nq.aggregates][::2], nq.columns
([('n_values', 'AggSum([A, B], R(A, B))'), ('n1_n', 'AggSum([B], S(B))')], (('n', ('fold', 'COUNT', 0)),))
>>> nq.nested, [nq.aggregates[i].name for i in nq.tracks]
(('<=', ('map', 2), 0), ['n1_track'])
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..ast import RelationDecl
from ..calculus import Agg, Term, V, substitute
from ..errors import CompileError
from .aggfilter import Filtered
from .columns import Aggregate
from .frontend import SqlQuery
from .predicates import conj, negate
from .subqueries import SubQuery
from .viewexpr import aggregates_of

#: :func:`.normalize.normalize` (``(relations, query) -> normalised query``), passed in by its caller
Normalizer = Callable[[list[RelationDecl], SqlQuery], Any]

_OUTER_KINDS = ("SUM", "COUNT", "AVG")
_FOLDED_KINDS = ("MIN", "MAX", "COUNT DISTINCT", "SUM DISTINCT", "AVG DISTINCT")


def _operand_refs(x) -> list:
    if isinstance(x, tuple) and x and x[0] == "col":
        return [x[1]]
    if isinstance(x, tuple) and x and x[0] == "sub":
        return [outer for _, outer in x[1].correlation] + [outer for _, _, outer in x[1].ranges]
    if isinstance(x, tuple):
        return [r for y in x[1:] for r in _operand_refs(y)]
    return []


def _subs(x) -> list[SubQuery]:
    if isinstance(x, tuple) and x and x[0] == "sub":
        return [x[1]]
    if isinstance(x, tuple):
        return [s for y in x[1:] for s in _subs(y)]
    return []


def has_subquery(x) -> bool:
    """Whether a predicate or expression holds a subquery operand (``("sub", SubQuery)``)."""
    return bool(_subs(x))


def _folded(arg):
    """The column a fold reads: a filtered fold's (``MIN(x) FILTER (WHERE c)``, :mod:`.aggfilter`) is ``x``, its
    condition one on the rows its multiplicity map counts, which the nested condition does not read."""
    return arg.ref if isinstance(arg, Filtered) else arg


def nested_vars(q, var: dict, keys: tuple[V, ...]) -> tuple[V, ...]:
    """The outer variables the nested conditions read that are not group variables (the outer maps' extra keys).

    A MIN, MAX or DISTINCT aggregate of a column ``x`` (a multiplicity map keyed by ``x``) is read as a fold
    over the values of ``x`` that meet the nested condition (:class:`..viewnodes.Fold` with ``WHERE``), so the
    condition may read only ``x`` besides the group columns: a fold counts values, not the rows of other
    columns (TPC-H Q16: ``COUNT(DISTINCT ps_suppkey)`` beside ``ps_suppkey NOT IN (SELECT ...)``)."""
    folded = []
    for name, value in q.columns:
        found = aggregates_of(value) + aggregates_of(q.having)
        bad = [a[1] for a in found if a[1] not in _OUTER_KINDS + _FOLDED_KINDS]
        if bad:
            raise CompileError(f"unsupported {bad[0]} in a query with a nested subquery (only SUM, COUNT, AVG, MIN, "
                               "MAX and DISTINCT aggregates)")
        folded += [(a[1], _folded(a[2])) for a in found if a[1] in _FOLDED_KINDS and var[_folded(a[2])] not in keys]
    out: list[V] = []
    for c in q.nested:
        refs = ([outer for _, outer in c[1].correlation] + [outer for _, _, outer in c[1].ranges]
                if c[0] == "exists" else _operand_refs(c))
        for ref in refs:
            v = var[ref]
            if v not in keys and v not in out:
                out.append(v)
    for kind, ref in folded:
        if set(out) - {var[ref]}:
            raise CompileError(f"unsupported {kind} of {ref[1]} in a query whose nested subquery reads "
                               f"{', '.join(v.name for v in out if v != var[ref])}: a fold over the values that "
                               "meet a nested condition needs the condition to read only the folded column and the "
                               "group columns")
    return tuple(out)


def nested_condition(relations: list[RelationDecl], q, var: dict, base: int, keys: tuple[V, ...],
                     rows: Agg, normalize: Normalizer) -> tuple[list[Aggregate], object, list[int], list[int]]:
    """``(inner aggregates, condition, tracking maps)``: the subqueries' maps (numbered from ``base`` in the
    query's list of aggregates), the conjunction of the nested conditions over them (module doc), and the
    indices of the *tracking* maps: for a subquery whose correlation keys ``K`` do not include every group
    variable ``G``, the count of its rows joined with the outer rows (``rows``, keyed by ``G`` and the outer
    variables), keyed by ``G`` and ``K``.  Its entries change whenever the subquery's maps change at ``K``, at
    exactly the groups that read them, so the view's changed rows are found from the maps' journals.  Last, the
    indices of the subqueries' row-count maps (a subquery one level up tracks them, :meth:`_Inner.subquery`).
    ``normalize``: :func:`.normalize.normalize`, which calls this and which each subquery goes through in turn
    (passed in, so that the two modules do not import each other)."""
    inner = _Inner(relations, q, var, base, keys, rows, normalize)
    parts = []
    for c in q.nested:
        if c[0] == "exists":
            _, guard, _ = inner.subquery(c[1], False)
            parts.append(negate(guard) if c[2] else guard)
        else:
            guards: list = []
            left, right = inner.operand(c[1], guards), inner.operand(c[2], guards)
            parts.append(conj(guards + [(c[0], left, right)]))
    return inner.aggregates, conj(parts), inner.tracks, inner.counts


def having_subqueries(relations: list[RelationDecl], q, var: dict, base: int, keys: tuple[V, ...], rows: Agg,
                      where, normalize: Normalizer) -> list[Aggregate] | object:
    """``(inner aggregates, condition)`` for a view condition (HAVING) whose top-level conjuncts compare
    expressions over the query's aggregates with uncorrelated scalar subqueries (``("sub", SubQuery)``
    operands, TPC-H Q11).

    A subquery's map has no key (one value), which names no row of a grouped
    view; so each is kept multiplied by the group's row count, ``p[G] =
    rows[G] * inner`` (its terms the products of both: first-order maps, but
    an event of the subquery's relations updates every group), and read as
    ``p[G] / rows[G]``: a view row has rows, and a change of the subquery
    changes ``p`` at every group, so ``changes()`` finds the rows it may flip.
    Without GROUP BY the maps are read as they are.

    >>> from .frontend import parse_sql
    >>> from .normalize import normalize
    >>> rels, (q,) = parse_sql('''CREATE STREAM R(a INT, b INT); CREATE STREAM S(c INT);
    ...     SELECT a, SUM(b) AS s FROM R GROUP BY a HAVING SUM(b) > (SELECT SUM(c) FROM S)''')
    >>> nq = normalize(rels, q)
    >>> [(a.name, str(a.agg)) for a in nq.aggregates][2:4]
    [('n1_v', 'AggSum([A], R(A, B) * S(C_1) * C_1)'), ('n1_n', 'AggSum([A], R(A, B) * S(C_1))')]
    >>> nq.where[2]
    ('and', ('>', ('/', ('map', 3), ('map', 4)), 0), ('>', ('map', 0), ('/', ('map', 2), ('map', 4))))
    """
    inner = _Inner(relations, q, var, base, (), rows, normalize)

    def walk(p):
        if isinstance(p, tuple) and p and p[0] == "and":
            return ("and", walk(p[1]), walk(p[2]))
        if isinstance(p, tuple) and len(p) == 3 and _subs(p):
            guards: list = []
            left, right = inner.operand(p[1], guards), inner.operand(p[2], guards)
            return conj(guards + [(p[0], left, right)])
        return p

    condition = walk(where)
    if not keys:
        return inner.aggregates, condition
    count = base + len(inner.aggregates)
    grouped = [Aggregate(a.name, Agg(keys + a.agg.keys, _product(rows.terms, a.agg.terms)), a.folded)
               for a in inner.aggregates] + [Aggregate("rows", rows)]
    mine = range(base, count)

    def per_group(c):
        if not isinstance(c, tuple) or not c:
            return c
        if c[0] == "map" and c[1] in mine:
            return ("/", c, ("map", count))
        if c[0] == "avg" and c[1] in mine:
            return ("/", ("map", c[1]), ("map", c[2]))
        if c[0] in ("map", "fold", "var", "avg"):
            return c
        return (c[0],) + tuple(per_group(x) for x in c[1:])

    return grouped, per_group(condition)


def _product(a: tuple[Term, ...], b: tuple[Term, ...]) -> tuple[Term, ...]:
    """The terms of the product of two sums (their variables apart)."""
    return tuple(Term(x.coef * y.coef, x.atoms + y.atoms, x.conds + tuple(c for c in y.conds if c not in x.conds),
                      x.polys + y.polys) for x in a for y in b)


class _Inner:
    """The subqueries of one query, normalised into maps numbered from ``base`` (see :func:`nested_condition`)."""

    def __init__(self, relations: list[RelationDecl], q, var: dict, base: int, keys: tuple[V, ...], rows: Agg,
                 normalize: Normalizer):
        self.relations, self.q, self.var, self.base, self.keys, self.rows = relations, q, var, base, keys, rows
        self.normalize = normalize
        self.aggregates: list[Aggregate] = []
        self.tracks: list[int] = []
        self.counts: list[int] = []  # each subquery's row-count map (not read as a range)
        self.counter = 0
        self.taken = {v.name for v in var.values()}
        self.names: dict[tuple[V, int], V] = {}

    def fresh_var(self, v: V, k: int) -> V:
        """The inner variable ``v`` of subquery ``k`` under a name no outer variable has (no capture)."""
        if (v, k) not in self.names:
            name = f"{v.name}_{k}"
            while name in self.taken:
                name += "_"
            self.taken.add(name)
            self.names[(v, k)] = V(name, v.type)
        return self.names[(v, k)]

    def subquery(self, sub: SubQuery, scalar: bool):
        """``(value, guard, counts_only)`` of one subquery, its maps added to :attr:`aggregates`."""
        q, var, base, keys, inner = self.q, self.var, self.base, self.keys, self.aggregates
        self.counter += 1
        k = self.counter
        columns = ((("v", sub.value),) if scalar else ()) + (("n", ("agg", "COUNT", 1)),)
        group = tuple((f"c{i}", inner_ref) for i, (inner_ref, _) in enumerate(sub.correlation))
        group += tuple((f"r{i}", inner_ref) for i, (_, inner_ref, _) in enumerate(sub.ranges))
        sq = SqlQuery(f"{q.name}_n{k}", sub.tables, sub.joins, sub.predicate, group, columns, sub.having,
                      nested=sub.nested)
        inq = self.normalize(self.relations, sq)
        deep = inq.nested is not None  # the subquery has subqueries of its own (TPC-H Q20)
        rename: dict[V, V] = {}
        equal = []
        for v_in, (_, outer_ref) in zip(inq.key_vars, sub.correlation):
            target = var[outer_ref]
            if v_in in rename and rename[v_in] != target:
                equal.append(("=", ("var", rename[v_in]), ("var", target)))
            rename.setdefault(v_in, target)
        ranged = inq.key_vars[len(sub.correlation):]
        range_vars = tuple(dict.fromkeys(self.fresh_var(v, k) for v in ranged if v not in rename))
        range_cond = conj([(op, ("var", self.fresh_var(v, k) if v not in rename else rename[v]),
                            ("var", var[outer_ref])) for v, (op, _, outer_ref) in zip(ranged, sub.ranges)])
        offset = base + len(inner)
        for a in inq.aggregates:
            every = {v for t in a.agg.terms for v in t.vars()} | {x for x in a.agg.keys if isinstance(x, V)}
            fresh = {v: rename.get(v, self.fresh_var(v, k)) for v in every}
            agg = substitute(Agg(a.agg.keys, a.agg.terms), fresh)
            folded = fresh.get(a.folded) if a.folded is not None else None
            inner.append(Aggregate(f"n{k}_{a.name}", agg, folded))

        extra = tuple(dict.fromkeys(self.fresh_var(v, k) for v in inq.extra_keys))

        def shift(c):
            if not isinstance(c, tuple) or not c:
                return c
            if c[0] == "map" and deep and c[1] < inq.outer_count:  # summed where its own subqueries' hold
                return ("range", c[1] + offset, extra, shift(inq.nested))
            if c[0] == "map" and sub.ranges:  # summed over the range of the range-correlated columns
                return ("range", c[1] + offset, range_vars, range_cond)
            if c[0] == "map":
                return ("map", c[1] + offset)
            if c[0] == "avg" and sub.ranges:
                return ("/", shift(("map", c[1])), shift(("map", c[2])))
            if c[0] == "avg":
                return ("avg", c[1] + offset, c[2] + offset)
            if c[0] == "fold":
                return ("fold", c[1], c[2] + offset)
            if c[0] == "var":
                return ("var", rename[c[1]] if c[1] in rename else self.fresh_var(c[1], k))
            return (c[0],) + tuple(shift(x) for x in c[1:])

        count = shift(inq.columns[-1][1])
        if count[0] == "map":
            self.counts.append(count[1])
        targets = tuple(dict.fromkeys(rename[v] for v in inq.keys if v in rename))
        tracked_keys = keys + tuple(v for v in targets if v not in keys)
        counted = inner[count[1] - base].agg
        if keys and not set(keys) <= set(targets):
            tracked = Agg(tracked_keys, _product(self.rows.terms, counted.terms))
            self.tracks.append(base + len(inner))
            inner.append(Aggregate(f"n{k}_track", tracked))
        if keys and deep:  # a change two levels down reaches the outer rows through the rows of this subquery
            for j in inq.counts:
                deeper = inner[offset - base + j].agg
                tracked = Agg(tracked_keys, _product(_product(self.rows.terms, counted.terms), deeper.terms))
                self.tracks.append(base + len(inner))
                inner.append(Aggregate(f"n{k}_track{j}", tracked))
        guard = conj([(">", count, 0)] + equal + ([shift(inq.where)] if sub.having is not None else []))
        value = shift(inq.columns[0][1]) if scalar else None
        counts_only = scalar and all(a[1] in ("COUNT", "COUNT DISTINCT") for a in aggregates_of(sub.value))
        return value, guard, counts_only

    def operand(self, x, guards: list):
        """A comparison side: outer columns as variables, each scalar subquery as its value (its guard added)."""
        if isinstance(x, tuple) and x and x[0] == "col":
            return ("var", self.var[x[1]])
        if isinstance(x, tuple) and x and x[0] == "sub":
            value, guard, counts_only = self.subquery(x[1], True)
            guards.append(("true",) if counts_only else guard)
            return value
        if isinstance(x, tuple) and x and x[0] == "neg":
            return ("*", -1, self.operand(x[1], guards))
        if isinstance(x, tuple) and x and x[0] in ("map", "avg", "fold", "var"):  # a column expression (HAVING)
            return x
        if isinstance(x, tuple):
            return (x[0],) + tuple(self.operand(y, guards) for y in x[1:])
        return x
