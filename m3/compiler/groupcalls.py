"""A function of one group column of a grouped derived table, read by value, becomes a group column of it.

Why: ``SELECT SUBSTRING(t.city, 1, 30), t.amt FROM (SELECT city, ..., SUM(x) AS amt ... GROUP BY ..., city) t``
(TPC-DS Q79's shape) reads a function of the derived table's group column ``city``.  The view over a grouped
derived table (:mod:`.lifted`) reads the derived table's groups through its maps' keys; a function of a key is
no map's key.  But ``SUBSTRING(city, 1, 30)`` is determined by ``city``, so adding it to the derived table's
GROUP BY splits no group: the derived table with the extra group column ``SUBSTRING(city, 1, 30) AS _g1`` has
the same groups, and the outer query reads ``t._g1``, an ordinary group column (the part queries key their maps
by it: a computed key, lifted by the calculus as ``{K = SUBSTRING(CITY, 1, 30)}``, :mod:`.lifts`).  This is
DBToaster's Lift of a function of a variable into a variable of its own, done at the derived table's groups.

Only a function of exactly one column, that column a group column of the derived table (its own name, or
qualified by the derived table's alias), is moved; the part's front end refuses a function it does not compute
(:meth:`.resolve.Resolver.computed`).  Each moved item keeps the output name the query gave it.

>>> import sqlglot
>>> sel = sqlglot.parse_one('''SELECT SUBSTRING(t.c, 1, 2), n FROM
...     (SELECT R.a, R.c, COUNT(*) AS n FROM R GROUP BY R.a, R.c) t''')
>>> print(push_calls(sel, ["expr_1", "n"]).sql())
SELECT t._g1 AS expr_1, n FROM (SELECT R.a, R.c, COUNT(*) AS n, SUBSTRING(R.c, 1, 2) AS _g1 FROM R GROUP BY R.a, R.c, SUBSTRING(R.c, 1, 2)) AS t
"""

from __future__ import annotations

from sqlglot import exp

from ..ast import RelationDecl
from .lifted import is_grouped, items_of
from .resolve import unparen


def _group_columns(body: exp.Select) -> dict[str, exp.Expression]:
    """The derived table's output names (lower case) that are its group columns → the grouped expression."""
    groups = [unparen(g) for g in body.args["group"].expressions]
    out: dict[str, exp.Expression] = {}
    for e in body.expressions:
        inner = unparen(e.this if type(e) is exp.Alias else e)
        if type(inner) is exp.Column and any(inner == g for g in groups):
            out[e.alias_or_name.lower()] = inner
    return out


def _movable(x: exp.Expression) -> bool:
    """A scalar function (not an aggregate, no subquery) of exactly one column."""
    if not isinstance(x, exp.Func) or isinstance(x, exp.AggFunc) or x.find(exp.Select, exp.AggFunc) is not None:
        return False
    return len({c.sql().lower() for c in x.find_all(exp.Column)}) == 1


def push_calls(sel: exp.Select, names: list[str], relations: dict[str, RelationDecl] | None = None) -> exp.Select:
    """``sel`` with each SELECT item that is a function of one group column of its one grouped derived table
    read from that table as a new group column of it (module doc), named ``names[i]``; in place.  An unqualified
    column is the derived table's only where no other FROM item (a relation of ``relations``) has that name."""
    grouped = [i for i in items_of(sel) if is_grouped(i)]
    if len(grouped) != 1 or len(names) != len(sel.expressions):
        return sel
    item = grouped[0]
    body, alias = item.this, item.alias_or_name.lower()
    if item.args.get("alias") is not None and item.args["alias"].args.get("columns"):
        return sel
    own = _group_columns(body)
    others: set[str] = set()  # the column names of the other FROM items (None: some item is not a relation)
    for i in items_of(sel):
        rel = next((r for n, r in (relations or {}).items() if type(i) is exp.Table and n.lower() == i.name.lower()),
                   None)
        if i is not item:
            others |= {c.name.lower() for c in rel.columns} if rel is not None else {"*"}
    taken = {e.alias_or_name.lower() for e in body.expressions}
    n = 0
    for k, e in enumerate(list(sel.expressions)):
        x = unparen(e.this if type(e) is exp.Alias else e)
        if not _movable(x):
            continue
        col = next(x.find_all(exp.Column))
        table = col.table.lower()
        if col.name.lower() not in own or (table and table != alias) or (not table and (col.name.lower() in others or "*" in others)):
            continue  # not the derived table's group column, or maybe another FROM item's (left to the view)
        inner = x.copy()
        for c in list(inner.find_all(exp.Column)):
            c.replace(own[col.name.lower()].copy())
        n += 1
        while f"_g{n}" in taken:
            n += 1
        body.append("expressions", exp.Alias(this=inner, alias=exp.to_identifier(f"_g{n}")))
        body.args["group"].append("expressions", inner.copy())
        read = exp.column(f"_g{n}", table=item.alias_or_name) if item.args.get("alias") is not None \
            else exp.column(f"_g{n}")
        sel.expressions[k].replace(exp.Alias(this=read, alias=exp.to_identifier(names[k])))
    return sel
