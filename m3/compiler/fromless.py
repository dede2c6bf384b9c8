"""A query without FROM (``SELECT (SELECT SUM(a) FROM R) AS x, (SELECT COUNT(*) FROM S) + 1 AS y``) as a plan.

Why a plan (:class:`.lifted.Plan`) and not a construct of its own: each scalar subquery is an ordinary
aggregate query without GROUP BY, compiled from the general rules as a *part* (``SELECT <its value> AS v,
COUNT(*) AS n FROM ...``); the view has no keys, and each column is its expression over the parts' values
(placeholders ``#i.0``, filled by :func:`.liftview.lifted_view` with the parts' maps), computed when read.

SQL's aggregate of no rows is NULL (but COUNT's, 0), and NULL makes the whole expression NULL.  Boreas has no
NULLs yet and shows an absent aggregate as 0, so a column reading a subquery with another aggregate than COUNT
is multiplied by ``LEAST(n, 1)`` (1 while that subquery reads rows, else 0) for each such subquery, and a
divisor reading one has ``1 - LEAST(n, 1)`` added (no division by zero where the value is NULL anyway).

A WHERE is a condition on the view's one row (the view is empty while it fails): comparisons of the same
expressions (false where a side is NULL: its subquery reads no rows), and ``EXISTS (sub)``, ``c IN (SELECT x
...)`` (``c`` a constant), negated or not, each a part counting the rows (``WHERE x = c`` added for IN).

Refused by name: a subquery that is not an aggregate without GROUP BY (it has rows, not one value), anything
but arithmetic (``+ - * /``, unary minus) over scalar subqueries and constants, and a query with no subquery.

>>> import sqlglot
>>> from ..printer import format_view_expr
>>> from .examples import PlainErrors
>>> p = plan(sqlglot.parse_one("SELECT (SELECT SUM(a) FROM R) * 2 AS x, (SELECT COUNT(*) FROM S) AS y"), PlainErrors())
>>> [q.sql() for q in p.parts]
['SELECT SUM(a) AS v, COUNT(*) AS n FROM R', 'SELECT COUNT(*) AS v, COUNT(*) AS n FROM S']
>>> [(n, format_view_expr(e)) for n, e in p.columns]
[('x', '#0.0[] * 2 * LEAST(#0.1[], 1)'), ('y', '#1.0[]')]
>>> p = plan(sqlglot.parse_one("SELECT 1 AS one WHERE 5 IN (SELECT a FROM R) AND (SELECT SUM(b) FROM R) > 2"), PlainErrors())
>>> [q.sql() for q in p.parts], format_view_expr(p.where)
(['SELECT COUNT(*) AS v, COUNT(*) AS n FROM R WHERE a = 5', 'SELECT SUM(b) AS v, COUNT(*) AS n FROM R'], '0 < #0.0[] AND 2 < #1.0[] AND 0 < #1.1[]')
>>> plan(sqlglot.parse_one("SELECT (SELECT a FROM R) AS x"), PlainErrors())
Traceback (most recent call last):
...
boreas.m3.errors.CompileError: unsupported scalar subquery (SELECT a FROM R) in a query without FROM (one aggregate without GROUP BY: one value)
"""

from __future__ import annotations

from sqlglot import exp

from ..ast import Cmp, Const, Expr, MapRef
from ..viewnodes import Arith, BoolOp
from .constants import NotConstant, fold, is_constant
from .constrow import constant_comparison, constant_in, fold_call
from .lifted import ARITH, CMPS, Plan, and_all, items_of, sql_conjuncts
from .nodes import sql_of
from .outputs import unique_names
from .resolve import Positions, unparen

_CLAUSES = ("group", "having", "joins", "distinct", "limit", "offset", "with", "with_", "qualify",
            "windows", "order")


def is_fromless(sel: exp.Expression) -> bool:
    """Whether ``sel`` is a SELECT without FROM (that :func:`plan` translates)."""
    return type(sel) is exp.Select and not items_of(sel)


def plan(sel: exp.Select, ctx: Positions) -> Plan:
    """The parts (one per scalar subquery) and the keyless view over them."""
    for key in _CLAUSES:
        if sel.args.get(key):
            raise ctx.error(f"unsupported {key.rstrip('_').upper()} in a query without FROM", sel)
    if not sel.expressions:
        raise ctx.error("a SELECT needs at least one column", sel)
    b = Parts(ctx)
    names, exprs = [], []
    for i, item in enumerate(sel.expressions):
        node = unparen(item.this if type(item) is exp.Alias else item)
        names.append(item.alias if type(item) is exp.Alias else f"col{i + 1}")
        exprs.append(b.column(node))
    where = sel.args.get("where")
    cond = and_all([b.condition(c) for c in sql_conjuncts(where.this)]) if where is not None else None
    # SQL's query without FROM has its one row (where WHERE holds) whatever its subqueries read, so a constant term
    # (SELECT (SELECT COUNT(*) FROM R) + 1) is shown while they read none: the view is ALWAYS (ast.ViewDecl.always)
    return Plan(tuple(b.parts), (), (), tuple(zip(unique_names(names), exprs)), cond, always=bool(b.parts))


class Parts:
    """The parts a query reads, one per scalar subquery, and its columns over them (public: a query with
    scalar subqueries in its SELECT list reads them the same way, :mod:`.selectsub`)."""

    def __init__(self, ctx: Positions) -> None:
        self.ctx = ctx
        self.parts: list[exp.Select] = []
        self.nullable: list[bool] = []  # part i's value is SQL's NULL while it reads no rows

    def column(self, e: exp.Expression) -> Expr:
        value, reads = self.expr(e)
        for i in sorted(reads):
            value = Arith("*", value, _some(i))
        return value

    def expr(self, e: exp.Expression) -> tuple[Expr, set[int]]:
        """A view expression and the nullable parts it reads."""
        e = unparen(e)
        if type(e) is exp.Subquery:
            i = self.part(e)
            return MapRef(f"#{i}.0", ()), ({i} if self.nullable[i] else set())
        if type(e) is exp.Neg:
            x, reads = self.expr(e.this)
            return Arith("-", Const(0), x), reads
        if type(e) in ARITH:
            (a, ra), (d, rd) = self.expr(e.this), self.expr(e.expression)
            if type(e) is exp.Div:
                for i in sorted(rd):  # NULL where the divisor's subquery reads no rows: divide by 1 instead of 0
                    d = Arith("-", Arith("+", d, Const(1)), Arith("LEAST", MapRef(f"#{i}.1", ()), Const(1)))
            return Arith(ARITH[type(e)], a, d), ra | rd
        if (value := fold_call(e)) is not None:  # SUBSTRING('FOO', 1, 2): its value (:mod:`.constrow`)
            return Const(value), set()
        if is_constant(e):
            try:
                return Const(fold(e)), set()
            except NotConstant as bad:
                raise self.ctx.error(f"unsupported {sql_of(e)} in a query without FROM ({bad})", e) from None
        raise self.ctx.error(f"unsupported {sql_of(e)} in a query without FROM (arithmetic over scalar subqueries "
                             "and constants)", e)

    def condition(self, e: exp.Expression) -> Expr | None:
        """A WHERE conjunct as a condition on the view's one row: its comparison (false where a side is SQL's
        NULL), or whether a subquery has rows (``EXISTS``, ``c IN (SELECT ...)``: a part counting them)."""
        e = unparen(e)
        negated = type(e) is exp.Not
        inner = unparen(e.this) if negated else e
        if type(inner) is exp.In and not inner.args.get("query") and is_constant(inner):  # 1 IN (2, 3)
            e = exp.Boolean(this=negated != constant_in(inner, self.ctx))
        elif type(inner) in (exp.Exists, exp.In):
            n = MapRef(f"#{self.counted(inner)}.0", ())
            return Cmp("=", n, Const(0)) if negated else Cmp("<", Const(0), n)
        if type(e) in CMPS:
            constant_comparison(e, self.ctx)  # '1' = 1: refused by name (DuckDB casts the string)
            (a, ra), (d, rd) = self.expr(e.this), self.expr(e.expression)
            flip = type(e) in (exp.GT, exp.GTE)
            op = {">": "<", ">=": "<="}.get(CMPS[type(e)], CMPS[type(e)])
            return and_all([Cmp(op, d, a) if flip else Cmp(op, a, d)] +
                           [Cmp("<", Const(0), MapRef(f"#{i}.1", ())) for i in sorted(ra | rd)])
        if type(e) is exp.Boolean:
            return None if e.this else Cmp("<", Const(1), Const(0))
        if is_constant(e):
            try:
                holds = bool(fold(e))
            except NotConstant as bad:
                raise self.ctx.error(f"unsupported {sql_of(e)} in a query without FROM ({bad})", e) from None
            return None if holds else Cmp("<", Const(1), Const(0))
        raise self.ctx.error(f"unsupported condition {sql_of(e)} in a query without FROM (comparisons of scalar "
                             "subqueries and constants, EXISTS, IN (SELECT ...), AND)", e)

    def counted(self, e: exp.Exists | exp.In) -> int:
        """A part counting the rows of ``EXISTS (sub)``'s subquery, or those of ``x IN (SELECT c ...)``'s
        where ``c = x`` (``x`` a constant)."""
        query = e.args.get("query") if type(e) is exp.In else e.this
        sub = unparen(query.this if type(query) is exp.Subquery else query)
        if type(sub) is not exp.Select or not items_of(sub) or sub.args.get("group") is not None or \
                (type(e) is exp.In and (len(sub.expressions) != 1 or not is_constant(e.this))):
            raise self.ctx.error(f"unsupported {sql_of(e)} in a query without FROM (EXISTS of a SELECT without "
                                 "GROUP BY, or a constant IN (SELECT one column ...))", e)
        part = sub.copy()
        if type(e) is exp.In:
            item = sub.expressions[0]
            value = (item.this if type(item) is exp.Alias else item).copy()
            part = part.where(exp.EQ(this=value, expression=e.this.copy()))
        part.set("expressions", [exp.alias_(exp.Count(this=exp.Star()), "v"),
                                 exp.alias_(exp.Count(this=exp.Star()), "n")])
        self.parts.append(part)
        self.nullable.append(False)
        return len(self.parts) - 1

    def part(self, e: exp.Subquery) -> int:
        sub = unparen(e.this)
        if type(sub) is not exp.Select or any(v for k, v in e.args.items() if k != "this") or \
                len(sub.expressions) != 1 or sub.args.get("group") is not None or \
                unparen(sub.expressions[0]).find(exp.AggFunc) is None or not items_of(sub):
            raise self.ctx.error(f"unsupported scalar subquery {sql_of(e)} in a query without FROM (one aggregate "
                                 "without GROUP BY: one value)", e)
        item = sub.expressions[0]
        value = (item.this if type(item) is exp.Alias else item).copy()
        part = sub.copy()
        part.set("expressions", [exp.alias_(value, "v"), exp.alias_(exp.Count(this=exp.Star()), "n")])
        self.parts.append(part)
        self.nullable.append(any(type(a) is not exp.Count for a in value.find_all(exp.AggFunc)))
        return len(self.parts) - 1


def _some(i: int) -> Expr:
    """1 while part ``i`` reads rows, else 0."""
    return Arith("LEAST", MapRef(f"#{i}.1", ()), Const(1))
