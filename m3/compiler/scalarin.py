"""``x = (SELECT c FROM ...)`` with ``c`` no aggregate → ``x IN (SELECT c FROM ...)``, on the tree.

Why: SQL lets a scalar subquery return at most one row (more is an error: DuckDB raises "More than one row
returned by a subquery"), and no row makes it NULL, so the comparison is then not true.  Over every input SQL
accepts, the equality and the IN agree: one row ``v`` gives ``x = v`` both ways, no row gives false both ways.
IN of a subquery is existence in the calculus (:mod:`.subqueries`: EXISTS with one more correlation), so
the general rule maintains it, correlated or not, with a GROUP BY of the selected column or without.

Over an input where the subquery returns several rows SQL raises an error and Boreas keeps the rows equal to
any of them: there the two differ, and ``boreas compile`` says so (:data:`EQUAL_ROWS_NOTE`).

Only a WHERE conjunct is rewritten (under AND only, on either side of ``=``): under NOT or OR, or with ``<>``,
an empty subquery's NULL is not the IN's false (``NOT (x = NULL)`` is not true, ``NOT x IN ()`` is).  A
value over aggregates (``x = (SELECT MAX(b) ...)``) is one row always, maintained as a scalar subquery.

>>> import sqlglot
>>> def r(sql): return equal_to_in(sqlglot.parse_one(sql)).sql()
>>> r("SELECT a FROM R WHERE R.b = (SELECT S.b FROM S WHERE S.c = 'x') AND R.a > 1")
"SELECT a FROM R WHERE R.b IN (SELECT S.b FROM S WHERE S.c = 'x') AND R.a > 1"
>>> r("SELECT a FROM R WHERE (SELECT S.b FROM S GROUP BY S.b) = R.b")
'SELECT a FROM R WHERE R.b IN (SELECT S.b FROM S GROUP BY S.b)'
>>> r("SELECT a FROM R WHERE NOT R.b = (SELECT S.b FROM S) OR R.a = (SELECT MAX(S.b) FROM S)")
'SELECT a FROM R WHERE NOT R.b = (SELECT S.b FROM S) OR R.a = (SELECT MAX(S.b) FROM S)'
>>> r("SELECT a FROM R WHERE R.a = (SELECT MAX(S.b) FROM S)")
'SELECT a FROM R WHERE R.a = (SELECT MAX(S.b) FROM S)'
"""

from __future__ import annotations

from sqlglot import exp

from .resolve import unparen

EQUAL_ROWS_NOTE = ("{name}: x = (SELECT c ...) is read as x IN (SELECT c ...): where the subquery returns several "
                   "rows SQL raises an error, the view keeps the rows equal to any of them")
"""The compile note of a view with such an equality (``{name}``: the view's)."""


def _rows_subquery(node: exp.Expression) -> exp.Subquery | None:
    """``node`` if it is a subquery selecting one expression without aggregates (its rows are its values)."""
    sub = node
    while type(sub) is exp.Paren:
        sub = sub.this
    if type(sub) is not exp.Subquery or type(sub.this) is not exp.Select:
        return None
    sel = sub.this
    if len(sel.expressions) != 1 or sel.find(exp.AggFunc) is not None or sel.find(exp.Window) is not None:
        return None
    return sub


def _positive_conjunct(node: exp.Expression) -> bool:
    """Whether ``node`` is a conjunct of a WHERE: only ANDs and parentheses between it and the WHERE."""
    parent = node.parent
    while type(parent) in (exp.And, exp.Paren):
        parent = parent.parent
    return type(parent) is exp.Where


def _rewritable(node: exp.Expression) -> tuple[exp.Expression, exp.Subquery] | None:
    """``(x, subquery)`` for a WHERE conjunct ``x = (SELECT c ...)`` or ``(SELECT c ...) = x``, else None."""
    if type(node) is not exp.EQ or not _positive_conjunct(node):
        return None
    for this, other in ((node.expression, node.this), (node.this, node.expression)):
        sub = _rows_subquery(this)
        if sub is not None and _rows_subquery(other) is None:
            return unparen(other), sub
    return None


def has_equal_to_rows(tree: exp.Expression) -> bool:
    """Whether :func:`equal_to_in` would change ``tree``."""
    return any(_rewritable(n) is not None for n in tree.walk())


def equal_to_in(tree: exp.Expression) -> exp.Expression:
    """``tree`` with each WHERE conjunct ``x = (SELECT c ...)`` (``c`` no aggregate) an IN (module doc), in place."""
    for node in [n for n in tree.walk() if _rewritable(n) is not None]:
        x, sub = _rewritable(node)
        node.replace(exp.In(this=x.copy(), query=exp.Subquery(this=sub.this.copy())))
    return tree
