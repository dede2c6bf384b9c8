"""A grouped derived table that rolls up another of the same FROM is a nested aggregate of its rows' keys.

Why: in ``FROM (SELECT a, b, SUM(x) AS v FROM <body> GROUP BY a, b) p, (SELECT a, SUM(x) AS w FROM <body>
GROUP BY a) n WHERE p.a = n.a`` both derived tables group the same rows (the same FROM and WHERE), ``n`` by a
subset of ``p``'s group columns, and every one of ``n``'s group columns is equated with ``p``'s.  Each row of
``p`` stands for a non-empty group of those rows, so exactly one row of ``n`` matches it: the join neither
drops nor repeats a row of ``p``, and ``n.w`` is the nested aggregate ``(SELECT SUM(x) FROM <body> WHERE
<its WHERE> AND a = p.a)`` (DBToaster's nested-aggregate normal form: an aggregate correlated on the outer
row's keys, maintained as a map keyed by them; :mod:`.subqueries`).  So ``n`` leaves FROM, its group columns
read ``p``'s, its aggregates become those correlated subqueries, and the query has one grouped derived table
fewer (TPC-H Q11's national total beside its per-part values).

Rewritten only when that reasoning holds: no HAVING, DISTINCT, LIMIT or ORDER BY in either derived table,
group columns that are columns, comma or inner joins without ON in the outer FROM, ``n`` read only as
``n.column`` (no ``*``, no unqualified name it selects), and no alias of ``n``'s FROM equal to ``p``'s (the
correlation would be captured).  Anything else is left as written, for the general rules to translate or
refuse by name.

>>> import sqlglot
>>> q = sqlglot.parse_one('''SELECT p.a, SUM(p.v) AS s FROM
...     (SELECT r.a, r.b, SUM(r.x) AS v FROM R r WHERE r.x > 0 GROUP BY r.a, r.b) p,
...     (SELECT r.a, SUM(r.x) AS w FROM R r WHERE r.x > 0 GROUP BY r.a) n
...     WHERE p.a = n.a AND p.v > 0.5 * n.w GROUP BY p.a''')
>>> print(rollups(q).sql(pretty=False))  # doctest: +NORMALIZE_WHITESPACE
SELECT p.a, SUM(p.v) AS s FROM (SELECT r.a, r.b, SUM(r.x) AS v FROM R AS r WHERE r.x > 0 GROUP BY r.a, r.b) AS p
  WHERE p.v > 0.5 * (SELECT SUM(r.x) FROM R AS r WHERE r.x > 0 AND r.a = p.a) GROUP BY p.a
>>> other = q.sql().replace("WHERE r.x > 0 GROUP BY r.a)", "GROUP BY r.a)")  # n groups other rows: kept
>>> rollups(sqlglot.parse_one(other)).sql() == sqlglot.parse_one(other).sql()
True
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlglot import exp

from .resolve import unparen

_UNREAD = ("having", "distinct", "limit", "order", "offset", "qualify", "windows", "with")


@dataclass(frozen=True)
class _Grouped:
    """A FROM item ``(SELECT ... GROUP BY ...) alias``: its group columns and selected items by output name."""

    item: exp.Subquery
    alias: str
    body: str  # its FROM, joins and WHERE as SQL: two derived tables group the same rows when these are equal
    groups: tuple[str, ...]  # the group columns as SQL
    outputs: dict[str, exp.Expression]  # output name (lower case) -> the selected expression

    def name_of(self, group: str) -> str | None:
        """The output name under which this table selects group column ``group``, if it does."""
        return next((n for n, e in self.outputs.items() if e.sql() == group), None)


def _from(sel: exp.Select) -> exp.From | None:
    """``sel``'s FROM clause (sqlglot names the argument ``from_`` or ``from`` by version)."""
    return sel.args.get("from_") or sel.args.get("from")


def _grouped(item: exp.Expression) -> _Grouped | None:
    if type(item) is not exp.Subquery or type(item.this) is not exp.Select or not item.alias:
        return None
    body = item.this
    group = body.args.get("group")
    if group is None or any(body.args.get(k) for k in _UNREAD) or not _from(body):
        return None
    cols = [unparen(g) for g in group.expressions]
    if any(type(c) is not exp.Column for c in cols):
        return None
    outputs = {}
    for e in body.expressions:
        if isinstance(e, exp.Star) or not e.alias_or_name:
            return None
        outputs[e.alias_or_name.lower()] = unparen(e.this if type(e) is exp.Alias else e)
    where = body.args.get("where")
    try:  # (a tree sqlglot cannot print is no rollup: the front end refuses what is wrong with it, by name)
        text = " ".join(x.sql() for x in [_from(body), *(body.args.get("joins") or []), *([where] if where else [])])
        keys = tuple(c.sql() for c in cols)
    except (ValueError, TypeError, AttributeError, KeyError):
        return None
    return _Grouped(item, item.alias.lower(), text, keys, outputs)


def _conjuncts(where: exp.Expression | None) -> list[exp.Expression]:
    if where is None:
        return []
    top = unparen(where.this)
    return list(top.flatten()) if type(top) is exp.And else [top]


def _equates(c: exp.Expression, left: tuple[str, str], right: tuple[str, str]) -> bool:
    """Whether conjunct ``c`` is ``left = right`` (either way round), each ``(alias, column)`` in lower case."""
    c = unparen(c)
    if type(c) is not exp.EQ or type(c.this) is not exp.Column or type(c.expression) is not exp.Column:
        return False
    sides = {(c.this.table.lower(), c.this.name.lower()), (c.expression.table.lower(), c.expression.name.lower())}
    return sides == {left, right}


def _plain_joins(sel: exp.Select) -> bool:
    return all(not j.args.get("on") and not j.args.get("using") and not j.args.get("side") and
               str(j.args.get("kind") or "").upper() in ("", "CROSS", "INNER") for j in sel.args.get("joins") or [])


def _rollup_of(sel: exp.Select, n: _Grouped, p: _Grouped) -> list[exp.Expression] | None:
    """The conjuncts of ``sel``'s WHERE equating each group column of ``n`` with ``p``'s, if ``n`` rolls ``p`` up."""
    if n.body != p.body or not set(n.groups) <= set(p.groups) or n is p:
        return None
    if p.alias in {t.alias_or_name.lower() for t in n.item.this.find_all(exp.Table)}:
        return None
    links = []
    for g in n.groups:
        nn, pn = n.name_of(g), p.name_of(g)
        if nn is None or pn is None:
            return None
        link = next((c for c in _conjuncts(sel.args.get("where")) if _equates(c, (n.alias, nn), (p.alias, pn))), None)
        if link is None:
            return None
        links.append(link)
    return links


def _reads_only_qualified(sel: exp.Select, n: _Grouped) -> bool:
    """Whether ``sel`` reads ``n`` only as ``n.column`` of a column it selects (outside ``n`` itself)."""
    for col in sel.find_all(exp.Column):
        if col.find_ancestor(exp.Subquery) is n.item:
            continue
        if isinstance(col.this, exp.Star):
            return False
        table = col.table.lower()
        if (table == n.alias and col.name.lower() not in n.outputs) or (not table and col.name.lower() in n.outputs):
            return False
    shadows = [t for t in sel.find_all(exp.Table, exp.Subquery) if t is not n.item and t.alias_or_name.lower() == n.alias]
    return not shadows and not any(isinstance(e, exp.Star) for e in sel.expressions)


def _nested(n: _Grouped, p: _Grouped, value: exp.Expression) -> exp.Expression:
    """``n``'s selected ``value`` as a subquery over ``n``'s rows correlated on ``p``'s group columns."""
    body = n.item.this
    conds = [exp.EQ(this=exp.maybe_parse(g), expression=exp.column(p.name_of(g), p.item.alias)) for g in n.groups]
    where = body.args.get("where")
    sub = exp.select(value.copy()).from_(_from(body).this.copy())
    sub.set("joins", [j.copy() for j in body.args.get("joins") or []] or None)
    sub.set("where", exp.Where(this=exp.and_(*([where.this.copy()] if where else []), *conds)))
    return exp.Subquery(this=sub)


def _drop(sel: exp.Select, item: exp.Subquery) -> None:
    """Remove FROM item ``item`` from ``sel`` (the first join takes its place when it is the FROM's)."""
    joins = list(sel.args.get("joins") or [])
    if _from(sel).this is item:
        first = joins.pop(0)
        _from(sel).set("this", first.this)
    else:
        joins = [j for j in joins if j.this is not item]
    sel.set("joins", joins or None)


def _rollup_once(sel: exp.Select) -> bool:
    """Rewrite one rolled-up derived table of ``sel`` (module doc), in place; whether one was."""
    if not _from(sel) or not _plain_joins(sel):
        return False
    items = [_from(sel).this, *(j.this for j in sel.args.get("joins") or [])]
    grouped = [g for g in (_grouped(i) for i in items) if g is not None]
    for n in grouped:
        for p in grouped:
            links = _rollup_of(sel, n, p) if p is not n else None
            if links is None or not _reads_only_qualified(sel, n):
                continue
            for link in links:
                link.replace(exp.true())
            for col in [c for c in sel.find_all(exp.Column) if c.table.lower() == n.alias]:
                if col.find_ancestor(exp.Subquery) is n.item:
                    continue
                value = n.outputs[col.name.lower()]
                group = value.sql() if type(value) is exp.Column else None
                col.replace(exp.column(p.name_of(group), p.item.alias) if group in n.groups else _nested(n, p, value))
            _drop(sel, n.item)
            kept = [c for c in _conjuncts(sel.args.get("where")) if type(c) is not exp.Boolean]
            sel.set("where", exp.Where(this=exp.and_(*kept)) if kept else None)
            return True
    return False


def rollups(sel: exp.Expression) -> exp.Expression:
    """``sel`` (a copy when anything changes) with each grouped derived table that rolls up another of its FROM
    read as nested aggregates (module doc), in every SELECT of it, innermost first."""
    if sum(1 for s in sel.find_all(exp.Subquery) if _grouped(s) is not None) < 2:
        return sel
    sel = sel.copy()
    for s in reversed([x for x in sel.walk() if type(x) is exp.Select]):
        while _rollup_once(s):
            pass
    return sel
