"""A query that reads only the group columns of a grouped derived table over another one: a DISTINCT of them.

Why: ``SELECT t.c FROM (SELECT r.c, COUNT(*) FROM (SELECT a, COUNT(*) AS c FROM R GROUP BY a) r GROUP BY
r.c) t`` (the distinct per-key counts: DBToaster's ``r_unique_counts_by_a`` shape) reads a grouped derived
table ``t`` whose own FROM is a grouped derived table read by value.  The view over a grouped derived table
(:mod:`.lifted`) compiles ``t``'s groups as parts, each an ordinary query, and ``t``'s groups are here
themselves a query over ``r``'s values, which no part is.  But a query that reads nothing of ``t`` except
its group columns, all of them, sees each group of ``t`` exactly once, so its rows are the distinct values of
those columns: ``SELECT DISTINCT r.c FROM (SELECT a, COUNT(*) AS c FROM R GROUP BY a) r`` (``t``'s WHERE and
the query's, on the group columns, ANDed), a query over one grouped derived table read by value, which
:mod:`.lifted` compiles (a lifted key ``C = rows[A]``).  In the calculus: ``t``'s aggregates are AggSums no
one reads, dropped; its groups are the domain ``Exists(AggSum([C], ...))``, which the DISTINCT is.

Only where ``t``'s FROM reads a grouped derived table (elsewhere the query compiles as it did), ``t`` has no
HAVING, DISTINCT, ORDER BY or LIMIT and groups by columns, the query is a plain SELECT of ``t``'s group columns
(each of them at least once) with no aggregate, subquery or other FROM item, and its WHERE reads ``t``'s group
columns only; anything else is left as it was (and refused there, naming the construct).

>>> import sqlglot
>>> sel = sqlglot.parse_one('''SELECT t.c FROM (SELECT r.c, COUNT(*) FROM
...     (SELECT a, COUNT(*) AS c FROM R GROUP BY a) r GROUP BY r.c) t WHERE t.c > 1''')
>>> print(groups_only(sel).sql())
SELECT DISTINCT r.c AS c FROM (SELECT a, COUNT(*) AS c FROM R GROUP BY a) AS r WHERE r.c > 1
>>> groups_only(sqlglot.parse_one("SELECT t.a FROM (SELECT a, b, COUNT(*) AS n FROM R GROUP BY a, b) t")).sql()
'SELECT t.a FROM (SELECT a, b, COUNT(*) AS n FROM R GROUP BY a, b) AS t'
"""

from __future__ import annotations

from sqlglot import exp

from .lifted import is_grouped, items_of
from .nodes import present
from .resolve import unparen

_OUTER = frozenset({"expressions", "from", "from_", "where", "distinct"})
_BODY = frozenset({"expressions", "from", "from_", "joins", "where", "group"})


def _group_columns(body: exp.Select) -> dict[str, exp.Column] | None:
    """The derived table's output names (lower case) that are group columns → the grouped column; None where
    it groups by something else."""
    groups = [unparen(g) for g in body.args["group"].expressions]
    if not all(type(g) is exp.Column and isinstance(g.this, exp.Identifier) for g in groups):
        return None
    out: dict[str, exp.Column] = {}
    for e in body.expressions:
        inner = unparen(e.this if type(e) is exp.Alias else e)
        if type(inner) is exp.Column and any(inner == g or not g.table and g.name.lower() == inner.name.lower()
                                             for g in groups):  # GROUP BY c for a selected r.c
            out[e.alias_or_name.lower()] = inner
    return out if len({g.name.lower() for g in out.values()}) == len({g.name.lower() for g in groups}) == \
        len(groups) else None


def _outside(sel: exp.Select, item: exp.Expression):
    """The nodes of ``sel`` outside its FROM item ``item`` (``sel`` itself not included)."""
    stack = [x for x in sel.iter_expressions()]
    while stack:
        node = stack.pop()
        if node is item:
            continue
        yield node
        stack.extend(node.iter_expressions())


def groups_only(sel: exp.Expression) -> exp.Expression:
    """``sel`` as the DISTINCT of its grouped derived table's group columns where the module doc says so, else
    ``sel`` unchanged."""
    if type(sel) is not exp.Select or any(present(v) for k, v in sel.args.items() if k not in _OUTER):
        return sel
    items = items_of(sel)
    if len(items) != 1 or not is_grouped(items[0]):
        return sel
    item = items[0]
    outside = list(_outside(sel, item))
    if any(isinstance(n, (exp.AggFunc, exp.Subquery, exp.Star, exp.Select)) for n in outside):
        return sel
    body = item.this
    alias = item.args.get("alias")
    if any(present(v) for k, v in body.args.items() if k not in _BODY) or \
            alias is not None and present(alias.args.get("columns")) or \
            not any(is_grouped(i) for i in items_of(body)):
        return sel
    own = _group_columns(body)
    if own is None:
        return sel
    name = item.alias_or_name.lower() if alias is not None else ""
    reads = [n for n in outside if type(n) is exp.Column]
    if not reads or any(c.name.lower() not in own or c.table and c.table.lower() != name or
                        not isinstance(c.this, exp.Identifier) for c in reads):
        return sel
    picked, out = set(), []
    for e in sel.expressions:
        x = unparen(e.this if type(e) is exp.Alias else e)
        if type(x) is not exp.Column:
            return sel
        picked.add(own[x.name.lower()].name.lower())
        out.append(exp.Alias(this=own[x.name.lower()].copy(), alias=exp.to_identifier(e.alias_or_name)))
    if picked != {g.name.lower() for g in own.values()}:
        return sel  # a group column not selected: the rows repeat per group, which a DISTINCT would merge
    new = exp.Select(expressions=out, distinct=exp.Distinct())
    key = "from_" if "from_" in body.args else "from"
    new.set(key, (body.args.get("from_") or body.args.get("from")).copy())
    if body.args.get("joins"):
        new.set("joins", [j.copy() for j in body.args["joins"]])
    conds = [body.args["where"].this.copy()] if body.args.get("where") is not None else []
    if sel.args.get("where") is not None:
        outer = sel.args["where"].this.copy()
        for c in list(outer.find_all(exp.Column)):
            c.replace(own[c.name.lower()].copy())
        conds.append(outer)
    if conds:
        new.set("where", exp.Where(this=exp.and_(*conds) if len(conds) > 1 else conds[0]))
    return new
