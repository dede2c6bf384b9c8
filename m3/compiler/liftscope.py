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
from .constants import NotConstant, fold, is_constant
from .lifted import AGGS, ARITH, CMPS, Builder, Table, and_all, is_grouped, items_of
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

    # -- columns ---------------------------------------------------------------
    def resolve(self, c: exp.Column) -> tuple:
        """``("g", i)``, ``("a", j)`` (a derived table column) or ``("o", alias, column)``."""
        ctx, table, name = self.b.ctx, c.table.lower(), c.name.lower()
        if not isinstance(c.this, exp.Identifier) or any(v for k, v in c.args.items() if k not in ("this", "table")):
            raise ctx.error(f"unsupported column {sql_of(c)}", c)
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
            return MapRef(f"#{self.t.aggs}.{r[1]}", tuple(Var(g) for g in self.gvars))
        if type(e) is exp.Subquery:
            return scalar(self.b, e)
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
        if type(e) in CMPS:
            left, right = side(e.this), side(e.expression)
            kind = _NEGATED[type(e)] if negated else type(e)
            if kind in (exp.GT, exp.GTE):
                c = Cmp("<" if kind is exp.GT else "<=", right, left)
            else:
                c = Cmp(CMPS[kind], left, right)
            return and_all(_not_null(left) + _not_null(right) + [c])
        raise self.b.ctx.error(f"unsupported condition {sql_of(e)} in a query over a grouped derived table", e)

    def aggregate(self, e: exp.Expression, keys: set[str]) -> Expr:
        ctx = self.b.ctx
        kind = AGGS[type(e)]
        arg = e.this
        if isinstance(arg, exp.Distinct) or any(v for k, v in e.args.items() if k not in ("this", "big_int")):
            raise ctx.error(f"unsupported {sql_of(e)} over a grouped derived table (no DISTINCT)", e)
        vars_ = tuple(a.name for a in self.source.args if a.name not in keys)
        cond = and_all(list(self.cond))

        def over(k: str, value: Expr) -> Over:
            return Over(k, value, vars_, self.source, cond)

        count = over("COUNT", Const(1)) if self.weight is None else over("SUM", self.weight)
        if kind == "COUNT":
            return count
        value = self.row(arg)
        total = over("SUM", value if self.weight is None else Arith("*", self.weight, value))
        if kind == "SUM":
            return total
        if kind == "AVG":
            return Arith("/", total, count)
        return over(kind, value)


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
