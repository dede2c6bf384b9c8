"""Aggregates over a grouped derived table, where they are aggregates of its rows: rewritten into one query.

Why: ``SELECT g, SUM(s) FROM (SELECT g, h, SUM(x) AS s FROM R GROUP BY g, h) t
GROUP BY g`` sums per ``g`` the per-``(g, h)`` sums, which is ``SUM(x)`` per
``g``: an aggregate of aggregates that is exactly an aggregate of the rows is
compiled as that (first-order, or domain-bound as the aggregate it becomes),
with no map of the inner groups at all.  The exact cases, for an inner query
grouped by columns ``G`` (no HAVING, no DISTINCT) read alone in the outer FROM,
the outer grouped by some of ``G`` and filtering (WHERE) on ``G`` only:

* ``SUM(s)`` of an inner ``SUM(e)`` is ``SUM(e)``; of an inner ``COUNT(...)``
  that ``COUNT``;
* ``MIN(m)`` of an inner ``MIN(c)`` is ``MIN(c)``, ``MAX`` of ``MAX`` likewise;
* ``MIN``, ``MAX``, ``COUNT(DISTINCT ...)`` of an inner group column are
  those of the column (the inner groups hold exactly its values);
* ``COUNT(*)`` (the number of inner groups in an outer group) is
  ``COUNT(DISTINCT h)`` when exactly one inner group column ``h`` is not an
  outer group column; ``AVG(s)`` of an inner SUM or COUNT is the sum above
  divided by that count;
* arithmetic over these, in SELECT and HAVING.

Anything else over an aggregate column (``MAX`` of a ``SUM``: TPC-H Q15;
grouping by an aggregate: Q13) is not an aggregate of the rows and is
refused by name here, as is a grouped derived table joined with other FROM
items; the front end then compiles it by value (:mod:`.lifted`).

>>> import sqlglot
>>> from .examples import PlainErrors
>>> sel = sqlglot.parse_one('''SELECT g, SUM(s) AS total, COUNT(*) AS groups, MAX(m) AS top
...     FROM (SELECT a AS g, b AS h, SUM(c) AS s, MAX(c) AS m FROM R WHERE c > 0 GROUP BY a, b) t WHERE g <> 2 GROUP BY g''')
>>> regroup(sel, PlainErrors()).sql()
'SELECT a AS g, SUM(c) AS total, COUNT(DISTINCT b) AS groups, MAX(c) AS top FROM R WHERE c > 0 AND a <> 2 GROUP BY a'
>>> regroup(sqlglot.parse_one("SELECT MAX(s) FROM (SELECT a, SUM(c) AS s FROM R GROUP BY a) t"), PlainErrors())
Traceback (most recent call last):
...
boreas.m3.errors.CompileError: unsupported MAX of the derived table's SUM column s (MAX(s)): not an aggregate of the rows (only SUM of SUM or COUNT, MIN of MIN, MAX of MAX, and MIN, MAX, COUNT(DISTINCT) of its group columns)
"""

from __future__ import annotations

from sqlglot import exp

from ..nullable import ROWS
from .derived import inline_ctes
from .nodes import describe, sql_of, unread_args
from .resolve import Positions, unparen

_BODY_ARGS = frozenset({"expressions", "from", "from_", "joins", "where", "group"})
_OUTER_ARGS = frozenset({"expressions", "from", "from_", "where", "group", "having", "order"})
_KINDS = {exp.Sum: "SUM", exp.Count: "COUNT", exp.Min: "MIN", exp.Max: "MAX", exp.Avg: "AVG"}


def regroup(sel: exp.Select, ctx: Positions) -> exp.Select:
    """``sel`` rewritten when it aggregates over a grouped derived table (module doc); else ``sel`` itself."""
    if (sel.args.get("with_") or sel.args.get("with")) is not None:
        _refuse_unread(sel, ctx)  # inlining drops the CTEs' reads
        sel = sel.copy()
        inline_ctes(sel, ctx)
    from_ = sel.args.get("from_") or sel.args.get("from")
    items = ([from_.this] if isinstance(from_, exp.From) else []) + \
        [j.this for j in sel.args.get("joins") or [] if isinstance(j, exp.Join)]
    grouped = [i for i in items if type(i) is exp.Subquery and type(i.this) is exp.Select
               and i.this.args.get("group") is not None]
    if not grouped:
        return sel
    item = grouped[0]
    if len(items) > 1:
        raise ctx.error(f"unsupported grouped derived table joined with other FROM items ({sql_of(item)}): an "
                        "aggregate of aggregates is supported over it alone (TPC-H Q15 joins one)", item)
    _refuse_unread(sel, ctx)  # the rewrite drops nodes (the derived table, the outer column names)
    body = item.this
    for node, allowed in ((sel, _OUTER_ARGS), (body, _BODY_ARGS)):
        for arg, value in node.args.items():
            if arg not in allowed and value not in (None, False, [], ""):
                where = "a grouped derived table" if node is body else "a query over a grouped derived table"
                raise ctx.error(f"unsupported {arg.rstrip('_').upper()} in {where} ({sql_of(node)})", node)
    for node in (sel, body):
        for key, cls in (("where", exp.Where), ("having", exp.Having), ("group", exp.Group), ("order", exp.Order)):
            if node.args.get(key) is not None and type(node.args[key]) is not cls:
                raise ctx.error(f"malformed {key.upper()} clause ({sql_of(node)})", node)
        joins = node.args.get("joins") or []
        if not isinstance(joins, list) or not all(type(j) is exp.Join for j in joins) or \
                not isinstance(node.expressions, list) or not node.expressions:
            raise ctx.error(f"malformed SELECT ({sql_of(node)})", node)
    for arg, value in item.args.items():
        if arg not in ("this", "alias") and value not in (None, False, [], ""):
            raise ctx.error(f"unsupported {arg.rstrip('_').upper()} of a derived table ({sql_of(item)})", item)
    alias = item.args.get("alias")
    if alias is not None and (type(alias) is not exp.TableAlias or alias.args.get("columns")):
        raise ctx.error(f"unsupported derived table alias {sql_of(alias)} (a name only)", item)
    groups = [unparen(g) for g in body.args["group"].expressions]
    if not all(type(g) is exp.Column for g in groups):
        raise ctx.error(f"unsupported GROUP BY of a derived table ({sql_of(body.args['group'])}): columns only", body)
    cols: dict[str, exp.Expression] = {}  # inner output name -> its expression (a group column or an aggregate)
    for e in body.expressions:
        inner = e.this if type(e) is exp.Alias else e
        name = e.alias_or_name.lower()
        if type(inner) is exp.Column and any(inner == g for g in groups):
            cols[name] = inner
        elif type(inner) in _KINDS and not isinstance(inner.this, exp.Distinct):
            cols[name] = inner
        else:
            raise ctx.error(f"unsupported column {sql_of(e)} of a grouped derived table (a group column or SUM, "
                            "COUNT, MIN, MAX of the rows)", e)
    d_alias = item.alias_or_name.lower() if alias is not None else ""
    r = _Rewrite(cols, d_alias, groups, ctx)
    plain = sel.args.get("group") is None and sel.args.get("having") is None and \
        not any(type(a) in _KINDS for e in sel.expressions for a in e.walk())
    if any(type(e) is exp.Star or type(e) is exp.Column and isinstance(e.this, exp.Star) for e in sel.expressions):
        raise ctx.error(f"unsupported * over a grouped derived table ({sql_of(sel)}): name its columns", sel)
    group = sel.args.get("group")
    if group is not None:  # first: grouping by an aggregate is the reason to name (TPC-H Q13)
        r.outer_groups = [r.group_column(g) for g in group.expressions]
    out = exp.Select(expressions=[r.item(e, plain) for e in sel.expressions])
    out.set("from_" if "from_" in sel.args else "from", body.args.get("from_") or body.args.get("from"))
    if body.args.get("joins"):
        out.set("joins", body.args["joins"])
    if body.args.get("where") is not None:
        out.set("where", body.args["where"])
    outer_where = sel.args.get("where")
    if plain:  # the inner groups are the rows: a condition on them is a HAVING
        shown = [cols.get(x.name.lower()) for e in sel.expressions
                 for x in (unparen(e.this if type(e) is exp.Alias else e),) if type(x) is exp.Column]
        if not all(any(g == c for c in shown) for g in groups):
            raise ctx.error(f"unsupported rows of a grouped derived table without all of its group columns "
                            f"({sql_of(sel)}): SQL's rows are its values, one per group, not groups (read by value)",
                            sel)
        out.set("group", body.args["group"])
        out.expressions.extend(e.copy() for e in body.expressions if e.alias_or_name == ROWS)  # (:mod:`.nullderived`)
        if outer_where is not None:  # on group columns only: a WHERE of the rows (as SQL may push it); else HAVING
            parts = _conjuncts(outer_where.this)
            on_groups = [c for c in parts if r.on_groups(c)]
            rest = [c for c in parts if not any(c is g for g in on_groups)]
            if on_groups:
                rows = r.rows(exp.and_(*on_groups))
                old = out.args.get("where")
                out.set("where", exp.Where(this=rows if old is None else exp.and_(old.this, rows)))
            if rest:
                out.set("having", exp.Having(this=r.expr(exp.and_(*rest), True)))
        if sel.args.get("order") is not None:
            out.set("order", sel.args["order"])
        return out
    if outer_where is not None:
        rows = r.rows(outer_where.this)
        old = out.args.get("where")
        out.set("where", exp.Where(this=rows if old is None else exp.and_(old.this, rows)))
    if group is not None:
        out.set("group", exp.Group(expressions=[g.copy() for g in r.outer_groups]))
    if sel.args.get("having") is not None:
        out.set("having", exp.Having(this=r.expr(sel.args["having"].this)))
    if sel.args.get("order") is not None:
        out.set("order", sel.args["order"])
    r.finish()
    return out


def _refuse_unread(sel: exp.Select, ctx: Positions) -> None:
    for node, arg in unread_args(sel):
        raise ctx.error(f"unsupported {describe(node, arg)} ({sql_of(node)})", node)


class _Rewrite:
    """The outer query's expressions over the inner columns, as expressions over the inner rows."""

    def __init__(self, cols: dict[str, exp.Expression], d_alias: str, groups: list[exp.Column], ctx: Positions):
        self.cols, self.d_alias, self.groups, self.ctx = cols, d_alias, groups, ctx
        self.outer_groups: list[exp.Expression] = []
        self.counts: list[exp.Expression] = []  # COUNT(*) placeholders, resolved once the outer groups are known

    def _inner(self, c: exp.Column) -> exp.Expression:
        if c.table and c.table.lower() != self.d_alias:
            raise self.ctx.error(f"unknown table {c.table} in {sql_of(c)}", c)
        found = self.cols.get(c.name.lower())
        if found is None:
            raise self.ctx.error(f"unknown column {sql_of(c)} (the derived table has {', '.join(self.cols)})", c)
        return found

    def group_column(self, g: exp.Expression) -> exp.Expression:
        g = unparen(g)
        inner = self._inner(g) if type(g) is exp.Column else None
        if type(inner) is not exp.Column:
            raise self.ctx.error(f"unsupported GROUP BY {sql_of(g)} over a grouped derived table (its group columns "
                                 "only; grouping by an aggregate: TPC-H Q13)", g)
        return inner.copy()

    def on_groups(self, e: exp.Expression) -> bool:
        """Whether ``e`` reads columns and only the derived table's group columns (no subquery)."""
        cols = [c for c in e.walk() if type(c) is exp.Column]
        return bool(cols) and not any(isinstance(x, (exp.Select, exp.Subquery)) for x in e.walk()) and all(
            (not c.table or c.table.lower() == self.d_alias) and type(self.cols.get(c.name.lower())) is exp.Column
            for c in cols)

    def rows(self, e: exp.Expression) -> exp.Expression:
        """A WHERE over the inner group columns, as a filter of the inner rows."""
        e = e.copy()
        for c in [c for c in e.walk() if type(c) is exp.Column]:
            inner = self._inner(c)
            if type(inner) is not exp.Column:
                raise self.ctx.error(f"unsupported condition on the aggregate {sql_of(c)} of a derived table "
                                     f"({sql_of(e)}): write it as HAVING in the derived table", c)
            c.replace(inner.copy())
        return e

    def item(self, e: exp.Expression, plain: bool = False) -> exp.Expression:
        value = e.this if type(e) is exp.Alias else e
        out = self.expr(value, plain)
        name = e.alias_or_name
        return exp.Alias(this=out, alias=exp.to_identifier(name)) if name and not (
            type(out) is exp.Column and out.name == name) else out

    def expr(self, e: exp.Expression, plain: bool = False) -> exp.Expression:
        """``plain``: the outer query does not aggregate (its rows are the inner groups), so an inner aggregate
        column stands for that aggregate."""
        e = e.copy()
        aggs = [a for a in e.walk() if type(a) in _KINDS]
        cols = [c for c in e.walk() if type(c) is exp.Column and not any(a is c or c.find_ancestor(type(a)) is a
                                                                          for a in aggs)]
        replaced = []
        for agg in aggs:
            if any(agg.find_ancestor(type(r)) is r for r in replaced):
                continue
            new = self.aggregate(agg)
            replaced.append(agg)
            if agg is e:
                return new
            agg.replace(new)
        for c in cols:
            inner = self._inner(c)
            if type(inner) is not exp.Column and not plain:
                raise self.ctx.error(f"unsupported aggregate column {sql_of(c)} of a derived table outside an "
                                     "aggregate", c)
            if c is e:
                return inner.copy()
            c.replace(inner.copy())
        return e

    def aggregate(self, agg: exp.Expression) -> exp.Expression:
        kind = _KINDS[type(agg)]
        arg = agg.this
        if kind == "COUNT" and (arg is None or type(arg) is exp.Star):
            placeholder = exp.Count(this=exp.Star())
            self.counts.append(placeholder)
            return placeholder
        distinct = type(arg) is exp.Distinct
        target = unparen(arg.expressions[0]) if distinct and len(arg.expressions) == 1 else unparen(arg)
        if type(target) is not exp.Column:
            raise self.ctx.error(f"unsupported {sql_of(agg)} over a grouped derived table (of one of its columns)", agg)
        inner = self._inner(target)
        if type(inner) is exp.Column:  # a group column: its values are the inner groups'
            if kind in ("MIN", "MAX") or kind == "COUNT" and distinct:
                return type(agg)(this=exp.Distinct(expressions=[inner.copy()]) if distinct else inner.copy())
        else:
            inner_kind = _KINDS[type(inner)]
            if not distinct and (kind == "SUM" and inner_kind in ("SUM", "COUNT") or kind == inner_kind in ("MIN", "MAX")):
                return inner.copy()
            if not distinct and kind == "AVG" and inner_kind in ("SUM", "COUNT"):
                count = exp.Count(this=exp.Star())
                self.counts.append(count)
                return exp.Div(this=inner.copy(), expression=count)
        what = "group column" if type(inner) is exp.Column else f"{_KINDS[type(inner)]} column"
        raise self.ctx.error(f"unsupported {kind}{' DISTINCT' if distinct else ''} of the derived table's {what} "
                             f"{target.name} ({sql_of(agg)}): not an aggregate of the rows (only SUM of SUM or COUNT, "
                             "MIN of MIN, MAX of MAX, and MIN, MAX, COUNT(DISTINCT) of its group columns)", agg)

    def finish(self) -> None:
        """COUNT(*) of inner groups: COUNT(DISTINCT h), h the one inner group column not grouped outside."""
        if not self.counts:
            return
        rest = [g for g in self.groups if not any(g == o for o in self.outer_groups)]
        if len(rest) != 1:
            raise self.ctx.error(f"unsupported COUNT(*) of the groups of a derived table grouped by {len(rest)} more "
                                 "columns than the outer query (only of one: it is COUNT(DISTINCT column))",
                                 self.counts[0])
        for c in self.counts:
            c.replace(exp.Count(this=exp.Distinct(expressions=[rest[0].copy()])))


def _conjuncts(e: exp.Expression) -> list[exp.Expression]:
    e = unparen(e)
    return _conjuncts(e.this) + _conjuncts(e.expression) if type(e) is exp.And else [e]
