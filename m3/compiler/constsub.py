"""Subqueries of one constant (``(SELECT 3)``, ``IN (SELECT 1)``, ``EXISTS (SELECT 3)``) replaced by it, on the tree.

Why: a SELECT without FROM, WHERE or any other clause, of one constant, is one row holding that value; its
value needs no map.  Replacing it keeps the later passes unaware of it (the SQL front end translates):

* a scalar ``(SELECT c)`` → ``(c)``;
* ``x IN (SELECT c)`` → ``x IN (c)``;
* ``EXISTS (SELECT c)`` → ``1 = 1`` (one row exists; ``NOT EXISTS`` is then false).

Anything else without FROM inside a query (a WHERE, several values, a column) is left for the general rules to
refuse or translate.

>>> import sqlglot
>>> def r(sql): return inline_constants(sqlglot.parse_one(sql)).sql()
>>> r("SELECT a FROM R WHERE a = (SELECT 3) AND b IN (SELECT 1) AND EXISTS (SELECT 2)")
'SELECT a FROM R WHERE a = (3) AND b IN (1) AND 1 = 1'
>>> r("SELECT t.x FROM (SELECT 1) AS t, (SELECT 2) WHERE (SELECT 2) > 1")
'SELECT t.x FROM (SELECT 1) AS t, (SELECT 2) WHERE (2) > 1'
>>> r("SELECT a FROM R WHERE a IN (SELECT b FROM S)")
'SELECT a FROM R WHERE a IN (SELECT b FROM S)'
"""

from __future__ import annotations

from sqlglot import exp

from .constants import is_constant
from .resolve import unparen


def constant_of(node: exp.Expression) -> exp.Expression | None:
    """The one constant a ``(SELECT c)`` subquery (or its SELECT) holds, else None."""
    sel = unparen(node)
    if type(sel) is exp.Subquery and not any(v for k, v in sel.args.items() if k != "this"):
        sel = unparen(sel.this)
    if type(sel) is not exp.Select or sel.parent is None or len(sel.expressions) != 1 or \
            any(v not in (None, False, [], "") for k, v in sel.args.items() if k != "expressions"):
        return None
    item = sel.expressions[0]
    value = unparen(item.this if type(item) is exp.Alias else item)
    return value if is_constant(value) and value.find(exp.Select) is None else None


def has_constant_subquery(tree: exp.Expression) -> bool:
    """Whether :func:`inline_constants` would change ``tree``."""
    return any(type(n) is exp.Select and n is not tree and constant_of(n) is not None for n in tree.walk())


def inline_constants(tree: exp.Expression) -> exp.Expression:
    """``tree`` with its one-constant subqueries replaced (module doc), in place."""
    for sel in [n for n in tree.walk() if type(n) is exp.Select and n is not tree]:
        value = constant_of(sel)
        if value is None:
            continue
        top = sel.parent if type(sel.parent) is exp.Subquery else sel
        holder = top.parent
        if type(holder) is exp.In and holder.args.get("query") is top:
            holder.set("query", None)
            holder.set("expressions", [value.copy()])
        elif type(holder) is exp.Exists:
            holder.replace(exp.EQ(this=exp.Literal.number(1), expression=exp.Literal.number(1)))
        elif type(top) is exp.Subquery and not isinstance(holder, (exp.From, exp.Join)):  # a value, not a FROM item
            top.replace(exp.Paren(this=value.copy()))
    return tree
