"""One SELECT over a grouped derived table, read by value: its columns, row values, conditions, aggregates.

Why apart from :mod:`.liftquery` (which translates the outer query's
clauses into a view): a :class:`Scope` is what an expression of such a query
means where it is read — a column of the derived table (a group variable,
or its aggregate's map at the group), of a joined relation (a variable of
part ``o``), a constant, arithmetic; a condition (NOT pushed down to the
comparisons, so a comparison with the aggregate of no groups is false under
NOT too); an aggregate over the *source* (the entries of part ``o`` or of
the derived table's groups).  :func:`scalar` is the uncorrelated ``(SELECT
AGG(x) FROM <grouped derived table> [WHERE ...])`` read the same way over
its own scope (Q15's ``MAX(total_revenue)``).

>>> _not_null(Over("MAX", Var("X"), ("K",), MapRef("r", (Var("K"),))))
[Cmp(op='<', left=Const(value=0), right=Over(kind='COUNT', expr=Const(value=1), vars=('K',), ref=MapRef(name='r', args=(Var(name='K'),)), cond=None))]
"""

from __future__ import annotations

from sqlglot import exp

from ..ast import Cmp, Const, Expr, MapRef, Var, walk
from ..over import Over
from ..viewnodes import Arith, BoolOp
from .casecmp import expand, expandable
from .constants import NotConstant, fold, is_constant
from .lifted import AGGS, ARITH, CMPS, Builder, Lookup, Table, and_all, is_grouped, items_of, sql_conjuncts
from .nodes import sql_of
from .resolve import unparen

_NEGATED = {exp.EQ: exp.NEQ, exp.NEQ: exp.EQ, exp.LT: exp.GTE, exp.GTE: exp.LT, exp.LTE: exp.GT, exp.GT: exp.LTE}


class Scope:
    """One SELECT over a grouped derived table: its columns, its source and the condition of its aggregates."""

    def __init__(self, b: Builder, sel: exp.Select, t: Table, others: dict[str, str]):
        self.b, self.sel, self.t, self.others = b, sel, t, others
        self.ovars: dict[tuple[str, str], str] = {}  # (alias, column) of part o -> its variable
        self.gvars: list[str] = []  # the derived table's group variables
        self.cond: list[Expr] = []
        self.source: MapRef | None = None
        self.weight: Expr | None = None
        self.present: dict[str, Cmp] = {}  # a scalar subquery part's value -> "it read rows" (else SQL's NULL)
        self.lookups: dict[str, Lookup] = {}  # grouped derived tables beside ``t``, read at its variables

    # -- columns ---------------------------------------------------------------
    def resolve(self, c: exp.Column) -> tuple:
        """``("g", i)``, ``("a", j)`` (a derived table column), ``("l", alias, "g" | "a", i)`` (a lookup's,
        :mod:`.liftlookup`) or ``("o", alias, column)``."""
        ctx, table, name = self.b.ctx, c.table.lower(), c.name.lower()
        if not isinstance(c.this, exp.Identifier) or any(v for k, v in c.args.items() if k not in ("this", "table")):
            raise ctx.error(f"unsupported column {sql_of(c)}", c)
        holders = [a for a, u in self.lookups.items() if table == a or not table and name in u.table.columns]
        if holders:
            found = self.lookups[holders[0]].table.columns.get(name)
            if found is None:
                raise ctx.error(f"unknown column {sql_of(c)} (the derived table has "
                                f"{', '.join(self.lookups[holders[0]].table.columns)})", c)
            if not table and (len(holders) > 1 or name in self.t.columns or
                              any(self.has_column(r, name) for r in self.others.values())):
                raise ctx.error(f"ambiguous column {sql_of(c)}: of several FROM items (qualify it)", c)
            return ("l", holders[0]) + found
        if table and table == self.t.alias or not table and name in self.t.columns:
            found = self.t.columns.get(name)
            hits = [a for a, r in self.others.items() if not table and self.has_column(r, name)]
            if found is None:
                raise ctx.error(f"unknown column {sql_of(c)} (the derived table has {', '.join(self.t.columns)})", c)
            if hits:
                raise ctx.error(f"ambiguous column {sql_of(c)}: of the derived table and of {hits[0]} (qualify it)", c)
            return found
        hits = [a for a, r in self.others.items() if (not table or a == table) and self.has_column(r, name)]
        if len(hits) != 1:
            raise ctx.error(f"{'ambiguous' if hits else 'unknown'} column {sql_of(c)}", c)
        col = next(x.name for x in self.b.relations[self.others[hits[0]]].columns if x.name.lower() == name)
        return ("o", hits[0], col)

    def has_column(self, relation: str, name: str) -> bool:
        """Whether FROM item ``relation`` has column ``name`` (lower case); public because GROUP BY and HAVING
        aliases are checked against the FROM items' columns too (liftquery.py)."""
        return any(x.name.lower() == name for x in self.b.relations[relation].columns)

    def o_var(self, alias: str, column: str) -> str:
        if (alias, column) not in self.ovars:
            self.ovars[(alias, column)] = self.b.var(column)
        return self.ovars[(alias, column)]

    # -- expressions -------------------------------------------------------------
    def row(self, e: exp.Expression) -> Expr:
        """A value of one source entry (no aggregate)."""
        e = unparen(e)
        ctx = self.b.ctx
        if type(e) is exp.Column:
            r = self.resolve(e)
            if r[0] == "o":
                return Var(self.o_var(r[1], r[2]))
            if r[0] == "g":
                return Var(self.gvars[r[1]])
            if r[0] == "l":
                u = self.lookups[r[1]]
                if r[2] == "g":
                    return u.args[r[3]]
                return MapRef(f"#{u.table.aggs}.{r[3]}", tuple(u.args))
            return MapRef(f"#{self.t.aggs}.{r[1]}", tuple(Var(g) for g in self.gvars))
        if type(e) is exp.Subquery:
            return scalar(self.b, e) if _over_grouped(e) else self.plain_scalar(e)
        if type(e) is exp.Neg:
            return Arith("*", Const(-1), self.row(e.this))
        if type(e) in ARITH and not any(v for k, v in e.args.items() if k not in ("this", "expression")):
            return Arith(ARITH[type(e)], self.row(e.this), self.row(e.expression))
        if is_constant(e):
            try:
                return Const(fold(e))
            except NotConstant as why:
                raise ctx.error(f"unsupported constant {sql_of(e)}: {why}", e) from None
        if isinstance(e, exp.AggFunc):
            raise ctx.error(f"unsupported aggregate {sql_of(e)} here (an aggregate of the derived table's rows "
                            "stands in SELECT or HAVING)", e)
        raise ctx.error(f"unsupported {type(e).__name__.upper()} ({sql_of(e)}) in a query over a grouped derived "
                        "table read by value", e)

    def plain_scalar(self, e: exp.Subquery) -> Expr:
        """``(SELECT AGG(x) FROM <relations> WHERE <inner> [AND inner.c = outer.k ...])``: a part of its own, grouped
        by its correlation columns (none: one value), read at the outer columns' variables (the nested-aggregate
        normal form: the inner aggregate keyed by what it is correlated on)."""
        ctx, sub = self.b.ctx, unparen(e.this)
        if type(sub) is not exp.Select or len(sub.expressions) != 1 or not items_of(sub) or \
                any(is_grouped(i) for i in items_of(sub)) or any(v not in (None, False, [], "") for k, v in
                                                                 sub.args.items() if k not in _PLAIN) or \
                unparen(sub.expressions[0]).find(exp.AggFunc) is None:
            raise ctx.error(f"unsupported subquery {sql_of(e)} in a query over a grouped derived table (one "
                            "aggregate without GROUP BY over relations, or over a grouped derived table)", e)
        inner = _inner_names(sub, self.b.relations)
        keys: list[tuple[exp.Expression, Expr]] = []
        local: list[exp.Expression] = []
        for c in sql_conjuncts(sub.args["where"].this) if sub.args.get("where") is not None else []:
            outer = [x for x in c.find_all(exp.Column) if not _is_inner(x, inner)]
            if not outer:
                local.append(c)
                continue
            sides = [unparen(c.this), unparen(c.expression)] if type(c) is exp.EQ else []
            pair = [x for x in sides if type(x) is exp.Column]
            if len(pair) != 2 or len(outer) != 1 or outer[0] not in pair:
                raise ctx.error(f"unsupported correlated condition {sql_of(c)} in a subquery over a grouped derived "
                                "table's query (inner.col = outer.col only)", c)
            mine = pair[1] if pair[0] is outer[0] else pair[0]
            var = self.row(outer[0])
            if not isinstance(var, Var):
                raise ctx.error(f"unsupported correlation with {sql_of(outer[0])} (a group column or a joined "
                                "relation's column)", c)
            keys.append((mine, var))
        item = sub.expressions[0]
        value = (item.this if type(item) is exp.Alias else item).copy()
        part = self.b.select([exp.alias_(k.copy(), f"c{i}") for i, (k, _) in enumerate(keys)] +
                             [exp.alias_(value, "v"), exp.alias_(exp.Count(this=exp.Star()), "n")],
                             items_of(sub), local, [k for k, _ in keys] or None)
        self.b.parts.append(part)
        i = len(self.b.parts) - 1
        args = tuple(v for _, v in keys)
        if any(type(a) is not exp.Count for a in value.find_all(exp.AggFunc)):  # NULL over no rows: compares false
            self.present[f"#{i}.0"] = Cmp("<", Const(0), MapRef(f"#{i}.1", args))
        return MapRef(f"#{i}.0", args)

    def condition(self, e: exp.Expression, side, negated: bool = False) -> Expr:
        """A condition whose operands are translated by ``side`` (:meth:`row` or :meth:`view`).

        NOT is pushed down to the comparisons (``negated``), which SQL's three-valued logic allows, so that a
        comparison with an aggregate of no groups (NULL) is false under NOT too (:func:`_not_null`)."""
        e = unparen(e)
        if type(e) in (exp.And, exp.Or):
            op = "AND" if (type(e) is exp.And) != negated else "OR"
            return BoolOp(op, (self.condition(e.this, side, negated), self.condition(e.expression, side, negated)))
        if type(e) is exp.Not:
            return self.condition(e.this, side, not negated)
        if type(e) is exp.Between and not e.args.get("symmetric"):
            x = e.this
            return self.condition(exp.And(this=exp.GTE(this=x.copy(), expression=e.args["low"].copy()),
                                          expression=exp.LTE(this=x.copy(), expression=e.args["high"].copy())),
                                  side, negated)
        if expandable(e, values=True):  # a CASE compared: the OR of its branches (:mod:`.casecmp`)
            return self.condition(expand(e, lambda _: False, values=True), side, negated)
        if type(e) in CMPS:
            left, right = side(e.this), side(e.expression)
            kind = _NEGATED[type(e)] if negated else type(e)
            if kind in (exp.GT, exp.GTE):
                c = Cmp("<" if kind is exp.GT else "<=", right, left)
            else:
                c = Cmp(CMPS[kind], left, right)
            present = [self.present[n.name] for x in (left, right) for n in walk(x)
                       if isinstance(n, MapRef) and n.name in self.present]
            return and_all(_not_null(left) + _not_null(right) + list(dict.fromkeys(present)) + [c])
        raise self.b.ctx.error(f"unsupported condition {sql_of(e)} in a query over a grouped derived table", e)

    def aggregate(self, e: exp.Expression, keys: set[str]) -> Expr:
        ctx = self.b.ctx
        kind = AGGS[type(e)]
        arg = e.this
        if isinstance(arg, exp.Distinct) or any(v for k, v in e.args.items() if k not in ("this", "big_int")):
            raise ctx.error(f"unsupported {sql_of(e)} over a grouped derived table (no DISTINCT)", e)
        vars_ = tuple(a.name for a in self.source.args if a.name not in keys)
        cond = and_all(list(self.cond))

        def over(k: str, value: Expr, where: Expr | None = cond) -> Over:
            return Over(k, value, vars_, self.source, where)

        count = over("COUNT", Const(1)) if self.weight is None else over("SUM", self.weight)
        if kind == "COUNT":
            if arg is None or type(unparen(arg)) in (exp.Star, exp.Column) or is_constant(arg) and \
                    type(unparen(arg)) is not exp.Null:
                return count  # a column here is never NULL: a nullable one arrives as the CASE below (.nullaggs)
            when = _counted_where(arg)
            if when is None:
                raise ctx.error(f"unsupported {sql_of(e)} over a grouped derived table (COUNT of *, a column, a "
                                "constant or CASE WHEN <condition> THEN <constant> END)", e)
            where = and_all(list(self.cond) + [self.condition(when, self.row)])
            return over("COUNT", Const(1), where) if self.weight is None else over("SUM", self.weight, where)
        value = self.row(arg)
        total = over("SUM", value if self.weight is None else Arith("*", self.weight, value))
        if kind == "SUM":
            return total
        if kind == "AVG":
            return Arith("/", total, count)
        return over(kind, value)


def _counted_where(arg: exp.Expression) -> exp.Expression | None:
    """The condition of ``CASE WHEN <condition> THEN <non-NULL constant> [ELSE NULL] END``: where COUNT of it
    counts (a nullable column's COUNT arrives in this form, :mod:`.nullaggs`); None for any other argument.

    >>> _counted_where(exp.maybe_parse("CASE WHEN t.k > 1 THEN 1 END")).sql()
    't.k > 1'
    >>> _counted_where(exp.maybe_parse("CASE WHEN t.k > 1 THEN t.k END")) is None
    True
    """
    arg = unparen(arg)
    if type(arg) is not exp.Case or arg.this is not None or len(arg.args.get("ifs") or []) != 1:
        return None
    default = arg.args.get("default")
    then = arg.args["ifs"][0].args.get("true")
    if default is not None and type(unparen(default)) is not exp.Null or then is None or not is_constant(then) or \
            type(unparen(then)) is exp.Null:
        return None
    return arg.args["ifs"][0].this


_PLAIN = ("expressions", "from", "from_", "joins", "where")


def _over_grouped(e: exp.Subquery) -> bool:
    sub = unparen(e.this)
    return type(sub) is exp.Select and any(is_grouped(i) for i in items_of(sub))


def _inner_names(sub: exp.Select, relations) -> tuple[set[str], set[str]]:
    """A subquery's FROM aliases and the column names its relations hold (lower case)."""
    aliases, names = set(), set()
    for i in items_of(sub):
        aliases.add(i.alias_or_name.lower())
        rel = next((r for n, r in relations.items() if type(i) is exp.Table and n.lower() == i.name.lower()), None)
        if rel is not None:
            names |= {c.name.lower() for c in rel.columns}
        elif type(i) is exp.Subquery and type(i.this) is exp.Select:
            names |= {x.alias_or_name.lower() for x in i.this.expressions}
    return aliases, names


def _is_inner(c: exp.Column, inner: tuple[set[str], set[str]]) -> bool:
    return c.table.lower() in inner[0] if c.table else c.name.lower() in inner[1]


def _not_null(e: Expr) -> list[Expr]:
    """Conditions that ``e`` is not NULL: SQL's SUM, MIN, MAX (and AVG, and arithmetic over them) of no groups
    is NULL, so a comparison with it is false; COUNT of no groups is 0 (the runtime's value of each over none)."""
    overs = [n for n in walk(e) if isinstance(n, Over)]
    inner = {id(x) for o in overs for part in o.children() for x in walk(part) if x is not o}
    found = dict.fromkeys((o.vars, o.ref, o.cond) for o in overs if id(o) not in inner and o.kind != "COUNT")
    return [Cmp("<", Const(0), Over("COUNT", Const(1), *k)) for k in found]


def scalar(b: Builder, e: exp.Subquery) -> Over:
    """``(SELECT AGG(x) FROM <grouped derived table> [WHERE ...])`` as an aggregate over its groups."""
    ctx, sub = b.ctx, e.this
    items = items_of(sub) if type(sub) is exp.Select else []
    if len(items) != 1 or not is_grouped(items[0]) or len(sub.expressions) != 1 or any(
            v not in (None, False, [], "") for k, v in sub.args.items() if k not in ("expressions", "from", "from_",
                                                                                    "where")):
        raise ctx.error(f"unsupported subquery {sql_of(e)} in a query over a grouped derived table (only "
                        "(SELECT MIN|MAX|SUM|COUNT|AVG(column) FROM <grouped derived table> [WHERE ...]))", e)
    s = Scope(b, sub, b.table(items[0]), {})
    s.gvars = [b.var(f"g{i}") for i in range(s.t.groups)]
    s.source = MapRef(f"#{s.t.rows}.0", tuple(Var(g) for g in s.gvars))
    if sub.args.get("where") is not None:
        s.cond.append(s.condition(sub.args["where"].this, s.row))
    agg = unparen(sub.expressions[0].this if type(sub.expressions[0]) is exp.Alias else sub.expressions[0])
    if type(agg) not in AGGS:
        raise ctx.error(f"unsupported subquery {sql_of(e)}: its value is one aggregate of the derived table", e)
    return s.aggregate(agg, set())
