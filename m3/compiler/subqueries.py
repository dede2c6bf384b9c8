"""Nested subqueries in WHERE: the front end's part (names resolved; the calculus is :mod:`.nested`).

A WHERE conjunct that holds a subquery is one of

* ``EXISTS (SELECT ...)`` / ``NOT EXISTS (...)``,
* ``col IN (SELECT c FROM ... [GROUP BY c [HAVING ...]])`` / ``NOT IN`` — the
  same as EXISTS with one more correlation, ``c = col``,
* a comparison whose sides are arithmetic over outer columns, constants and
  scalar subqueries (``SELECT`` of one expression over aggregates, no GROUP BY):
  ``l_quantity < 0.2 * (SELECT AVG(l_quantity) FROM lineitem WHERE l_partkey = p_partkey)``.

A subquery may read the outer query's columns only in comparisons with its
own: equalities (``inner.col = outer.col``, its *correlation*) and, for
SUM, COUNT, AVG and EXISTS, other comparisons (``b2.price > b1.price``, its
*range correlation*: VWAP).  Its aggregates are then maintained as maps
keyed by the correlation columns (and the range-correlated ones), which is
what keeps the nested query first-order (DBToaster's nested-aggregate maps,
seed 002).  An EXISTS or IN subquery without HAVING may hold such
conditions of its own (:attr:`SubQuery.nested`, TPC-H Q20), one level deep,
whose subqueries read only its columns.  Any other use of an outer column
inside a subquery, a subquery inside a scalar subquery or deeper, in OR,
under NOT (other than NOT EXISTS / NOT IN), in SELECT, FROM or HAVING, is
refused with the construct named.

Inner relation occurrences get aliases of their own (``lineitem@1``), so the
same relation may appear inside and outside (TPC-H Q17) without a clash; a
column name resolves against the subquery's FROM first, then the outer one.

>>> import sqlglot
>>> from .examples import PlainErrors, resolver_over, stream
>>> rels = {"R": stream("R", a="INT", b="INT")}
>>> outer = resolver_over(*rels.values())
>>> tables = lambda sel: [(t.alias_or_name, t.name) for t in sel.find_all(sqlglot.exp.Table)]
>>> w = sqlglot.parse_one("SELECT 1 FROM R WHERE b < (SELECT AVG(s.b) FROM R s WHERE s.a = R.a)").args["where"].this
>>> cmp = nested_conjunct(w, outer, rels, PlainErrors(), tables, [0])
>>> cmp[0], cmp[1]
('<', ('col', ('R', 'b')))
>>> sub = cmp[2][1]
>>> sub.tables, sub.correlation, sub.value
((('s@1', 'R'),), ((('s@1', 'a'), ('R', 'a')),), ('agg', 'AVG', ('s@1', 'b')))
>>> nested_conjunct(sqlglot.parse_one("SELECT 1 FROM R WHERE a IN (SELECT b FROM R s WHERE s.b < R.b)").args["where"].this,
...                 outer, rels, PlainErrors(), tables, [0])[1].ranges
(('<', ('s@1', 'b'), ('R', 'b')),)
>>> nested_conjunct(sqlglot.parse_one("SELECT 1 FROM R WHERE a IN (SELECT b FROM R s WHERE R.b < 2)").args["where"].this,
...                 outer, rels, PlainErrors(), tables, [0])
Traceback (most recent call last):
...
boreas.m3.errors.CompileError: unsupported correlated condition R.b < 2 in a subquery (a subquery may compare outer columns only with its own columns: inner.col = outer.col, or <, <=, <>, >, >= under SUM, COUNT, AVG or EXISTS)
>>> w = sqlglot.parse_one('''SELECT 1 FROM R WHERE a IN (SELECT b FROM R s WHERE s.a NOT IN (SELECT t.b FROM R t)
...                          AND s.b > (SELECT SUM(u.a) FROM R u WHERE u.b = s.a))''').args["where"].this
>>> own = lambda sel: [(t.alias_or_name, t.name) for t in [sel.find(sqlglot.exp.From).this]]  # FROM one table
>>> [(c[0], c[1].correlation if c[0] == "exists" else c[2][1].correlation)
...  for c in nested_conjunct(w, outer, rels, PlainErrors(), own, [0])[1].nested]
[('exists', ((('t@2', 'b'), ('s@1', 'a')),)), ('>', ((('u@3', 'b'), ('s@1', 'a')),))]
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from sqlglot import exp

from ..ast import RelationDecl
from .arithcmp import is_arith
from .nodes import ancestors, sql_of, unknown_nodes, unread_args
from .resolve import ColRef, Computed, Positions, Resolver, unparen
from .clauses import conjuncts as split_and
from .subqueryrefs import (all_refs, all_refs_outer, column_refs, one_per_outer, predicate_refs,
                           subqueries_of)
from .viewexpr import aggregates_of, columns_of, has_aggregate, having, view_expr

_CMP = {exp.EQ: "=", exp.NEQ: "<>", exp.LT: "<", exp.LTE: "<=", exp.GT: ">", exp.GTE: ">="}
_ARITH = {exp.Add: "+", exp.Sub: "-", exp.Mul: "*", exp.Div: "/"}
_FLIP = {"=": "=", "<>": "<>", "<": ">", "<=": ">=", ">": "<", ">=": "<="}
SUBQUERY_NODES = (exp.Subquery, exp.Exists, exp.Select, exp.SetOperation)


@dataclass(frozen=True)
class SubQuery:
    """One subquery, names resolved: its own FROM/WHERE, its correlation with the outer query, its value.

    ``value``: a view expression over aggregates (a scalar subquery), or None
    (EXISTS, IN: only whether rows exist per correlation key matters);
    ``having``: an IN subquery's HAVING over aggregates (its GROUP BY is the
    selected column, which is a correlation column).
    """

    tables: tuple[tuple[str, str], ...]
    joins: tuple[tuple[ColRef, ColRef], ...]
    predicate: object
    correlation: tuple[tuple[ColRef, ColRef], ...]  # (inner column, outer column)
    value: object = None
    having: object = None
    ranges: tuple[tuple[str, ColRef, ColRef], ...] = ()  # (op, inner column, outer column): inner op outer
    nested: tuple = ()  # its own WHERE conjuncts holding subqueries (one level down, correlated with its columns)


def contains_subquery(e: exp.Expression) -> bool:
    """Whether an expression holds a subquery anywhere (``IN (SELECT ...)`` included)."""
    return any(isinstance(n, SUBQUERY_NODES) for n in e.walk())


class ScopedResolver(Resolver):
    """A subquery's resolver: its FROM first (internal aliases, written by their SQL alias), then the outer."""

    def __init__(self, tables: list[tuple[str, str]], display: dict[str, str], relations: dict[str, RelationDecl],
                 ctx: Positions, outer: Resolver):
        super().__init__(tables, relations, ctx)
        self.display, self.outer = display, outer

    def _hits(self, col: exp.Column) -> list[ColRef]:
        name, qual = col.name.lower(), col.table.lower()
        hits = [(a, c.name) for a, r in self.tables if (not qual or self.display[a].lower() == qual)
                for c in self.relations[r].columns if c.name.lower() == name]
        return hits or self.outer._hits(col)

    def is_inner(self, ref: ColRef | Computed) -> bool:
        return (ref.ref if isinstance(ref, Computed) else ref)[0] in self.display

    def col_type(self, ref: ColRef | Computed) -> str:
        return super().col_type(ref) if self.is_inner(ref) else self.outer.col_type(ref)

    def star(self, node: exp.Expression) -> list[ColRef]:
        raise self.ctx.error(f"unsupported {sql_of(node)} in a subquery's SELECT (select a column or an aggregate)",
                             node)


TablesOf = Callable[[exp.Select], list[tuple[str, str]]]


def nested_conjunct(e: exp.Expression, res: Resolver, relations: dict[str, RelationDecl], ctx: Positions,
                    tables_of: TablesOf, counter: list[int]):
    """A WHERE conjunct holding a subquery → ``("exists", SubQuery, negated)`` or ``(op, left, right)`` whose
    sides are operands: ``("col", ref)``, a constant, ``("sub", SubQuery)``, ``(op, a, b)``, ``("neg", a)``.
    EXISTS of an aggregate without GROUP BY is ``("=", 1, 1)`` (``1 = 0`` under NOT): it has one row whatever it
    reads (SQL's COUNT of none is 0, its SUM NULL), so it is TRUE, not a count above 0."""
    e = unparen(e)
    _refuse_unread_around(e, ctx)
    negated = False
    if type(e) is exp.Not:
        negated, e = True, unparen(e.this)
        if type(e) not in (exp.Exists, exp.In):
            raise ctx.error(f"unsupported NOT over a subquery condition ({sql_of(e)}): only NOT EXISTS and NOT IN", e)
    if type(e) is exp.Exists:
        sel = _select(e.this, ctx)
        sub = _subquery(sel, res, relations, ctx, tables_of, counter, "exists")
        if _one_row(sel):  # an aggregate without GROUP BY has its one row over no rows: EXISTS is TRUE
            return ("=", 1, 0 if negated else 1)
        return ("exists", sub, negated)
    if type(e) is exp.In:
        query = e.args.get("query")
        if query is None or e.expressions or e.args.get("field") is not None:
            raise ctx.error(f"unsupported IN over a list holding a subquery ({sql_of(e)})", e)
        col = unparen(e.this)
        if type(col) is not exp.Column:
            raise ctx.error(f"unsupported IN (SELECT ...) of {sql_of(col)} (only of a column)", e)
        sub = _subquery(_select(query, ctx), res, relations, ctx, tables_of, counter, "in", res.column(col))
        return ("exists", sub, negated)
    op = _CMP.get(type(e))
    if op is None:
        what = "OR" if type(e) is exp.Or else type(e).__name__.upper()
        raise ctx.error(f"unsupported subquery inside {what} ({sql_of(e)}): a subquery condition must be a "
                        "conjunct of WHERE (EXISTS, IN, or a comparison)", e)
    left = _operand(e.this, res, relations, ctx, tables_of, counter)
    right = _operand(e.expression, res, relations, ctx, tables_of, counter)
    return (op, left, right)


def having_conjunct(e: exp.Expression, res: Resolver, relations: dict[str, RelationDecl], ctx: Positions,
                    tables_of: TablesOf, counter: list[int], aliases: dict | None = None):
    """A HAVING conjunct comparing an expression over aggregates with uncorrelated scalar subqueries (TPC-H Q11)
    → ``(op, left, right)``: a side without a subquery is a view expression (:func:`.viewexpr.view_expr`), a side
    with one an operand as :func:`nested_conjunct` makes it (its subqueries read no outer column)."""
    e = unparen(e)
    _refuse_unread_around(e, ctx)
    op = _CMP.get(type(e))
    if op is None:
        raise ctx.error(f"unsupported subquery in HAVING inside {type(e).__name__.upper()} ({sql_of(e)}): a HAVING "
                        "subquery must be in a comparison that is a conjunct of HAVING", e)
    sides = []
    for side in (e.this, e.expression):
        if not contains_subquery(side):
            sides.append(view_expr(res, side, aliases))
            continue
        x = _operand(side, res, relations, ctx, tables_of, counter)
        if all_refs_outer(x) or any(s.correlation or s.ranges for s in subqueries_of(x)):
            raise ctx.error(f"unsupported correlated subquery or column beside a subquery in HAVING ({sql_of(side)}): "
                            "only uncorrelated scalar subqueries and constants", side)
        sides.append(x)
    return (op, sides[0], sides[1])


def _one_row(sel: exp.Select) -> bool:
    """Whether a SELECT has exactly one row whatever it reads: it aggregates (an aggregate in its SELECT list, not
    inside a subquery of it) without GROUP BY, HAVING, LIMIT or OFFSET."""
    if any(sel.args.get(k) for k in ("group", "having", "limit", "offset", "qualify")):
        return False
    return any(isinstance(n, exp.AggFunc) and n.find_ancestor(exp.Select) is sel
               for e in sel.expressions for n in e.walk())


def _refuse_unread_around(e: exp.Expression, ctx: Positions) -> None:
    """An unread field of a node around the subqueries of a conjunct (each subquery checks its own)."""
    inner = tuple(n for n in e.walk() if isinstance(n, SUBQUERY_NODES) and not any(
        isinstance(a, SUBQUERY_NODES) for a in ancestors(n, e)))
    for node, arg in unread_args(e, inner):
        raise ctx.error(f"unsupported {arg.upper()} of {type(node).__name__.upper()} ({sql_of(node)})", node)


def _select(e: exp.Expression, ctx: Positions) -> exp.Select:
    e = unparen(e)
    if type(e) is exp.Subquery:
        if any(v for k, v in e.args.items() if k != "this"):
            raise ctx.error(f"unsupported subquery modifiers ({sql_of(e)})", e)
        e = unparen(e.this)
    if type(e) is not exp.Select:
        raise ctx.error(f"unsupported subquery {type(e).__name__.upper()} ({sql_of(e)}): only a SELECT", e)
    return e


def _operand(e: exp.Expression, res: Resolver, relations, ctx: Positions, tables_of: TablesOf, counter: list[int]):
    e = unparen(e)
    if type(e) is exp.Subquery:
        return ("sub", _subquery(_select(e, ctx), res, relations, ctx, tables_of, counter, "scalar"))
    if type(e) is exp.Column:
        return ("col", res.column(e))
    if type(e) is exp.Neg:
        return ("neg", _operand(e.this, res, relations, ctx, tables_of, counter))
    op = _ARITH.get(type(e))
    if op is not None:
        return (op, _operand(e.this, res, relations, ctx, tables_of, counter),
                _operand(e.expression, res, relations, ctx, tables_of, counter))
    if contains_subquery(e):
        raise ctx.error(f"unsupported {type(e).__name__.upper()} around a subquery ({sql_of(e)})", e)
    return res.constant(e)


def _subquery(sel: exp.Select, outer: Resolver, relations: dict[str, RelationDecl], ctx: Positions,
              tables_of: TablesOf, counter: list[int], kind: str, in_column: ColRef | None = None) -> SubQuery:
    where = sel.args.get("where")
    conjuncts = split_and(where.this) if isinstance(where, exp.Where) and isinstance(where.this, exp.Expression) \
        else []
    deeper = [c for c in conjuncts if isinstance(c, exp.Expression) and contains_subquery(c)]
    inside = {id(n) for c in deeper for n in c.walk()} if kind != "scalar" else set()
    for node in sel.walk():  # a subquery of a WHERE conjunct of an EXISTS or IN subquery is read below
        if node is not sel and isinstance(node, SUBQUERY_NODES) and id(node) not in inside:
            raise ctx.error("unsupported subquery nested in a subquery", node)
    for key in ("limit", "offset", "with", "with_", "qualify", "windows", "order"):
        if sel.args.get(key):
            raise ctx.error(f"unsupported {key.rstrip('_').upper()} in a subquery", sel)
    for node, arg in unread_args(sel, tuple(deeper)):  # each deeper conjunct is checked where it is read
        raise ctx.error(f"unsupported {arg.upper()} in a subquery ({sql_of(node)})", node)
    for node in unknown_nodes(sel, tuple(deeper)):
        raise ctx.error(f"unsupported {type(node).__name__.upper()} ({sql_of(node)})", node)
    counter[0] += 1
    written = tables_of(sel)
    tables = [(f"{alias}@{counter[0]}", rel) for alias, rel in written]
    display = {internal: alias for (internal, _), (alias, _) in zip(tables, written)}
    res = ScopedResolver(tables, display, relations, ctx, outer)
    joins, correlation, preds, ranges = [], [], [], []
    conjuncts = [c for c in (split_and(where.this) if where is not None else []) if all(c is not d for d in deeper)]
    for j in sel.args.get("joins") or []:
        if j.args.get("on") is not None:
            conjuncts += split_and(j.args["on"])
    for c in conjuncts:
        if type(c) is exp.EQ and type(unparen(c.this)) is exp.Column and type(unparen(c.expression)) is exp.Column:
            a, b = res.column(unparen(c.this)), res.column(unparen(c.expression))
            if res.is_inner(a) and res.is_inner(b):
                joins.append((a, b))
            elif res.is_inner(a) or res.is_inner(b):
                correlation.append((a, b) if res.is_inner(a) else (b, a))
            else:
                raise ctx.error(f"unsupported condition {sql_of(c)} on outer columns only inside a subquery "
                                "(move it to the outer WHERE)", c)
            continue
        p = res.predicate(c)
        refs = predicate_refs(p)
        if p[0] in _FLIP and len(refs) == 2 and len(p) == 3 and res.is_inner(refs[0]) != res.is_inner(refs[1]) \
                and not any(is_arith(x) for x in p[1:]):
            ranges.append((p[0], p[1], p[2]) if res.is_inner(p[1]) else (_FLIP[p[0]], p[2], p[1]))
            continue
        if any(not res.is_inner(r) for r in refs):
            raise ctx.error(f"unsupported correlated condition {sql_of(c)} in a subquery (a subquery may compare "
                            "outer columns only with its own columns: inner.col = outer.col, or <, <=, <>, >, >= "
                            "under SUM, COUNT, AVG or EXISTS)", c)
        preds.append(p)
    items = sel.expressions
    group = sel.args.get("group")
    having_node = sel.args.get("having")
    value = hav = None
    if kind == "in":
        item = unparen(items[0].this if type(items[0]) is exp.Alias else items[0]) if len(items) == 1 else None
        if type(item) is not exp.Column:
            raise ctx.error(f"IN (SELECT ...) must select one column ({sql_of(sel)})", sel)
        col = res.column(item)
        if not res.is_inner(col):
            raise ctx.error(f"IN (SELECT {sql_of(item)} ...) selects an outer column", item)
        if group is not None:
            cols = [res.column(unparen(g)) if type(unparen(g)) is exp.Column else None for g in group.expressions]
            if cols != [col]:
                raise ctx.error(f"unsupported GROUP BY in an IN subquery other than the selected column "
                                f"({sql_of(group)})", group)
        if having_node is not None:
            if group is None:
                raise ctx.error("HAVING without GROUP BY in an IN subquery", having_node)
            hav = having(res, having_node.this)
            if columns_of(hav):
                raise ctx.error(f"unsupported group column in an IN subquery's HAVING ({sql_of(having_node)})",
                                having_node)
        assert in_column is not None
        correlation.append((col, in_column))
    else:
        if group is not None or having_node is not None:
            raise ctx.error(f"unsupported GROUP BY/HAVING in {'an EXISTS' if kind == 'exists' else 'a scalar'} "
                            "subquery", group or having_node)
        if kind == "scalar":
            if len(items) != 1:
                raise ctx.error(f"a scalar subquery selects one value, not {len(items)}", sel)
            node = unparen(items[0].this if type(items[0]) is exp.Alias else items[0])
            value = view_expr(res, node)
            if not has_aggregate(value) or columns_of(value):
                raise ctx.error(f"unsupported scalar subquery value {sql_of(node)} (an expression over aggregates "
                                "without GROUP BY: one value per correlation key)", node)
            if any(a[1] in ("MIN", "MAX") and not res.is_inner(a[2]) for a in aggregates_of(value)):
                raise ctx.error(f"an aggregate of an outer column in a subquery ({sql_of(node)})", node)
        if sel.args.get("distinct") is not None and kind == "scalar":
            raise ctx.error("unsupported SELECT DISTINCT in a scalar subquery", sel)
    outer_refs = [r for r in all_refs((value, hav)) if not res.is_inner(r)]
    if outer_refs:
        raise ctx.error(f"unsupported outer column {outer_refs[0][1]} inside a subquery's aggregate", sel)
    from .predicates import conj

    if ranges and (kind == "in" and hav is not None or any(a[1] not in ("SUM", "COUNT", "AVG")
                                                         for a in aggregates_of(value))):
        raise ctx.error(f"unsupported subquery correlated by a comparison ({sql_of(sel)}) with other than SUM, "
                        "COUNT or AVG (a range of the correlated column is summed)", sel)
    nested = tuple(nested_conjunct(c, res, relations, ctx, tables_of, counter) for c in deeper)
    for c in nested:  # a subquery two levels down reads the columns of the one around it only
        inner_subs = [c[1]] if c[0] == "exists" else subqueries_of(c[1]) + subqueries_of(c[2])
        reads = [o for s in inner_subs for _, o in s.correlation] + [o for s in inner_subs for _, _, o in s.ranges]
        reads += [] if c[0] == "exists" else column_refs(c[1]) + column_refs(c[2])
        outer_reads = [r for r in reads if not res.is_inner(r)]
        if outer_reads or any(s.ranges or s.nested for s in inner_subs) or hav is not None or value is not None \
                or ranges:
            raise ctx.error("unsupported subquery nested in a subquery: only in an EXISTS or IN subquery without "
                            "HAVING, correlated with that subquery's own columns by equalities, one level deep", sel)
    correlation = one_per_outer(correlation, joins)
    return SubQuery(tuple(tables), tuple(joins), conj(preds) if preds else None, tuple(correlation), value, hav,
                    tuple(ranges), nested)
