"""Queries over a grouped derived table that are not aggregates of its rows: its aggregates read as lifted values.

Why: ``SELECT c_count, COUNT(*) FROM (SELECT c_custkey, COUNT(o_orderkey) AS
c_count ... GROUP BY c_custkey) t GROUP BY c_count`` (TPC-H Q13) groups the
inner groups by an inner aggregate's *value*, and Q15 compares each inner
SUM with their MAX; no map of the rows holds either (:mod:`.regroup` rewrites
the queries that are aggregates of the rows).  DBToaster lifts the inner
value into a variable (``custdist[C] = Sum_K rows[K] * (C ^= cnt[K])``); here
the inner table's maps are maintained as ordinary queries (*parts*) and the
view reads them through :class:`~..over.Over` when it is read:

* part ``t`` (per grouped derived table): ``SELECT g, ..., COUNT(*) FROM
  <its FROM> WHERE <its WHERE> GROUP BY g, ...``, its groups; part ``a``: the
  same with its aggregates (with a ``LEFT JOIN`` whose right side only
  ``COUNT(col)`` reads, ``t`` reads the left side alone and ``a`` the inner
  join: a group without match counts 0, TPC-H Q13);
* part ``o``, when the derived table is joined with relations on all of its
  group columns: the other relations' rows, ``SELECT <the columns the query
  reads> FROM <them> WHERE <their conditions>`` (a count per distinct row).

The outer query is then an aggregate over the entries of ``o`` (weighted by
their count; where ``t`` has the joined group) or of ``t`` (each group once):
``SUM(e FOR K : t[K] WHERE cond)``; an outer group key that is an inner
aggregate is a lifted variable ``C`` bound by ``C = cnt[K]`` in ``cond``; a
scalar subquery over a grouped derived table is such an aggregate over its
own parts.  Here the view is written with placeholders (``#i.j[...]``: column
``j`` of part ``i`` at those variables); :mod:`.liftview` puts the parts'
view expressions in their place once the parts are compiled.

>>> from ..printer import format_view_expr
>>> import sqlglot
>>> from .examples import PlainErrors, stream
>>> rels = {"R": stream("R", a="INT", b="INT")}
>>> sel = sqlglot.parse_one("SELECT n, COUNT(*) AS k FROM (SELECT a, COUNT(*) AS n FROM R GROUP BY a) t GROUP BY n")
>>> from .liftquery import plan
>>> p = plan("Q1", sel, rels, PlainErrors())
>>> [q.sql() for q in p.parts]
['SELECT a AS g0, COUNT(*) AS rows FROM R GROUP BY a', 'SELECT a AS g0, COUNT(*) AS n FROM R GROUP BY a']
>>> p.keys, p.key_vars, format_view_expr(p.columns[0][1])
(('n',), ('N',), 'COUNT(1 FOR A : #0.0[A] WHERE N = #1.0[A])')
"""

from __future__ import annotations

from dataclasses import dataclass, field

from sqlglot import exp

from ..ast import Cmp, Const, Expr, MapRef, RelationDecl, Var, walk
from ..nullable import ROWS
from ..viewnodes import BoolOp
from .derived import inline_ctes
from .nodes import sql_of
from .resolve import Positions, unparen

AGGS = {exp.Sum: "SUM", exp.Count: "COUNT", exp.Min: "MIN", exp.Max: "MAX", exp.Avg: "AVG"}
CMPS = {exp.EQ: "=", exp.NEQ: "<>", exp.LT: "<", exp.LTE: "<=", exp.GT: ">", exp.GTE: ">="}
ARITH = {exp.Add: "+", exp.Sub: "-", exp.Mul: "*", exp.Div: "/"}


@dataclass(frozen=True)
class Plan:
    """The parts to compile as ordinary queries, and the view over their columns (placeholders ``#i.j``)."""

    parts: tuple[exp.Select, ...]
    keys: tuple[str, ...]
    key_vars: tuple[str, ...]
    columns: tuple[tuple[str, Expr], ...]
    where: Expr | None
    notes: tuple[str, ...] = ()  # what was accepted without effect (ORDER BY)
    always: bool = False  # a view without keys with its one row while its parts read no rows (SQL's FROM-less)
    internal: tuple[str, ...] = ()  # keys no output row holds (a UNION ALL's branch key: :mod:`.setagg`)
    fixed: tuple[tuple, ...] = ()  # with ``always``: the keys whose rows are always there (:mod:`.setagg`)


def nestable(plan: Plan) -> bool:
    """Whether a plan may stand as a part of another (its columns put in the other's placeholders by
    :mod:`.liftview`): no key of it is a lifted value (``K = e`` binding it, a domain the outer view would have
    to iterate, DBToaster's domain maintenance: not built) and no part of it is a plan itself (one level).
    A TPC-style grouped derived table whose aggregate reads an uncorrelated scalar subquery is one
    (:mod:`.selectsub`'s plan keyed by its group columns)."""
    keys = set(plan.key_vars)
    return not any(isinstance(n, Cmp) and n.op == "=" and (isinstance(n.left, Var) and n.left.name in keys or
                                                          isinstance(n.right, Var) and n.right.name in keys)
                   for _, e in plan.columns for n in walk(e)) and \
        not any(getattr(p, "lifted", None) is not None for p in plan.parts)


def items_of(sel: exp.Select) -> list[exp.Expression]:
    """The FROM items of a SELECT, in order."""
    from_ = sel.args.get("from_") or sel.args.get("from")
    return ([from_.this] if isinstance(from_, exp.From) else []) + \
        [j.this for j in sel.args.get("joins") or [] if isinstance(j, exp.Join)]


def _of_one_column(g: exp.Expression) -> bool:
    """A scalar function of one column (``SUBSTRING(c, 1, 2)``: :mod:`.groupcalls`); the part's front end
    refuses one it does not compute."""
    return isinstance(g, exp.Func) and g.find(exp.AggFunc, exp.Select) is None and \
        len({c.sql().lower() for c in g.find_all(exp.Column)}) == 1


def is_grouped(item: exp.Expression) -> bool:
    """Whether a FROM item is a derived table with GROUP BY."""
    return type(item) is exp.Subquery and type(item.this) is exp.Select and item.this.args.get("group") is not None


def sql_conjuncts(e: exp.Expression | None) -> list[exp.Expression]:
    e = unparen(e) if e is not None else None
    if e is None:
        return []
    return sql_conjuncts(e.this) + sql_conjuncts(e.expression) if type(e) is exp.And else [e]


def and_all(parts: list[Expr]) -> Expr | None:
    flat = [x for p in parts if p is not None for x in (p.args if isinstance(p, BoolOp) and p.op == "AND" else (p,))]
    return None if not flat else flat[0] if len(flat) == 1 else BoolOp("AND", tuple(flat))


@dataclass
class Table:
    """A grouped derived table: its parts' indexes, its columns (name -> ("g", i) or ("a", j)), group vars."""

    alias: str
    rows: int
    aggs: int
    columns: dict[str, tuple[str, int]]
    groups: int


@dataclass
class Lookup:
    """A grouped derived table beside the one read by value (:mod:`.liftlookup`): its parts, and the variable
    each of its group columns is bound to (None until an equality binds it)."""

    table: Table
    args: list[Var | None] = field(default_factory=list)

    def bound(self) -> bool:
        return all(a is not None for a in self.args)

    def exists(self) -> Expr:
        """``0 < rows[args]``: the join meets a group of this table."""
        return Cmp("<", Const(0), MapRef(f"#{self.table.rows}.0", tuple(self.args)))


@dataclass
class Builder:
    name: str
    relations: dict[str, RelationDecl]
    ctx: Positions
    key: str  # "from_" or "from", as this sqlglot spells it
    parts: list[exp.Select] = field(default_factory=list)
    used: set[str] = field(default_factory=set)

    def var(self, hint: str) -> str:
        """A new variable named after a column (``c_count`` -> ``C_COUNT``, then ``C_COUNT_2``)."""
        base = "".join(ch for ch in hint.upper() if ch.isalnum() or ch == "_").lstrip("_0123456789") or "V"
        name, n = base, 1
        while name in self.used:
            n += 1
            name = f"{base}_{n}"
        self.used.add(name)
        return name

    def select(self, items: list[exp.Expression], from_items: list, where: list, group: list | None) -> exp.Select:
        s = exp.Select(expressions=items)
        s.set(self.key, exp.From(this=from_items[0].copy()))
        if len(from_items) > 1:
            s.set("joins", [j.copy() if type(j) is exp.Join else exp.Join(this=j.copy()) for j in from_items[1:]])
        if where:
            s.set("where", exp.Where(this=exp.and_(*[w.copy() for w in where])))
        if group is not None:
            s.set("group", exp.Group(expressions=[g.copy() for g in group]))
        return s

    def table(self, item: exp.Subquery) -> Table:
        """Parts ``t`` and ``a`` of a grouped derived table (module doc)."""
        body, ctx = item.this, self.ctx
        for arg, value in body.args.items():
            if arg not in ("expressions", "from", "from_", "joins", "where", "group") and value not in (None, False, [], ""):
                raise ctx.error(f"unsupported {arg.rstrip('_').upper()} in a grouped derived table read by value "
                                f"({sql_of(body)})", body)
        alias = item.args.get("alias")
        if alias is not None and alias.args.get("columns"):
            raise ctx.error(f"unsupported derived table alias {sql_of(alias)} (a name only)", item)
        if type(body.args.get("from_") or body.args.get("from")) is not exp.From:
            raise ctx.error(f"a grouped derived table needs a FROM clause ({sql_of(body)})", body)
        groups = [unparen(g) for g in body.args["group"].expressions]
        if not all(type(g) is exp.Column or _of_one_column(g) for g in groups):
            raise ctx.error(f"unsupported GROUP BY of a derived table ({sql_of(body.args['group'])}): columns or "
                            "functions of one column only", body)
        columns: dict[str, tuple[str, int]] = {}
        aggs: list[exp.Expression] = []
        for e in body.expressions:
            inner = unparen(e.this if type(e) is exp.Alias else e)
            name = e.alias_or_name.lower()
            if name == ROWS:  # its group's COUNT(*) (:mod:`.nullderived`): part ``t`` counts the rows
                continue
            at = next((i for i, g in enumerate(groups) if inner == g), None)
            if at is not None:
                columns[name] = ("g", at)
            elif type(inner) in AGGS and not isinstance(inner.this, exp.Distinct):
                columns[name] = ("a", len(aggs))
                aggs.append(exp.Alias(this=inner.copy(), alias=exp.to_identifier(f"{name}")))
            else:
                raise ctx.error(f"unsupported column {sql_of(e)} of a grouped derived table (a group column or "
                                "SUM, COUNT, MIN, MAX, AVG of the rows)", e)
        joins = list(body.args.get("joins") or [])
        left = [i for i in items_of(body)]
        outer = [j for j in joins if j.args.get("side")]
        where = sql_conjuncts(body.args["where"].this) if body.args.get("where") is not None else []
        keyed = [exp.Alias(this=g.copy(), alias=exp.to_identifier(f"g{i}")) for i, g in enumerate(groups)]
        if outer:
            right = self._left_join(body, outer, aggs, groups, where)
            rows_from = [left[0]] + [j for j in joins if j is not outer[0]]
            inner = [left[0]] + [j if j is not outer[0] else exp.Join(this=right.copy(), on=j.args["on"].copy())
                                 for j in joins]
        else:
            rows_from = inner = [left[0]] + joins
        rows = exp.Alias(this=exp.Count(this=exp.Star()), alias=exp.to_identifier("rows"))
        self.parts.append(self.select(keyed + [rows], rows_from, where, groups))
        t = Table(item.alias_or_name.lower() if alias is not None else "", len(self.parts) - 1, -1, columns,
                   len(groups))
        if aggs:
            self.parts.append(self.select([k.copy() for k in keyed] + aggs, inner, where, groups))
            t.aggs = len(self.parts) - 1
        return t

    def _left_join(self, body, outer, aggs, groups, where) -> exp.Table:
        """The right side of the one LEFT JOIN a derived table may hold: only COUNT(its column) reads it."""
        ctx, j = self.ctx, outer[0]
        right = j.this
        if len(outer) > 1 or j is not body.args["joins"][-1] or str(j.args.get("side")).upper() != "LEFT" \
                or type(right) is not exp.Table or j.args.get("using") or j.args.get("on") is None:
            raise ctx.error(f"unsupported {sql_of(j)} in a grouped derived table (one LEFT JOIN of a relation ON a "
                            "condition, last)", j)
        rel = next((r for n, r in self.relations.items() if n.lower() == right.name.lower()), None)
        if rel is None:
            raise ctx.error(f"unknown relation {right.name}", right)
        mine = {c.name.lower() for c in rel.columns}
        alias = right.alias_or_name.lower()

        def of_right(c: exp.Column) -> bool:
            return c.table.lower() == alias if c.table else c.name.lower() in mine

        for a in aggs:
            agg = a.this
            arg = agg.this
            if type(agg) is not exp.Count or type(unparen(arg)) is not exp.Column or not of_right(unparen(arg)):
                raise ctx.error(f"unsupported {sql_of(agg)} over a LEFT JOIN in a grouped derived table (only "
                                "COUNT of a column of its right side: a group without match counts 0)", agg)
        if any(of_right(c) for e in where + groups for c in e.find_all(exp.Column)):
            raise ctx.error(f"unsupported WHERE or GROUP BY on the right side of {sql_of(j)} in a grouped derived "
                            "table (put the condition in ON)", j)
        return right


def reads_grouped(sel: exp.Select, ctx: Positions) -> exp.Select | None:
    """``sel`` (CTEs inlined: a copy) when a FROM item of it is a grouped derived table, else None."""
    if (sel.args.get("with_") or sel.args.get("with")) is not None:
        sel = sel.copy()
        inline_ctes(sel, ctx)
    return sel if any(is_grouped(i) for i in items_of(sel)) else None
