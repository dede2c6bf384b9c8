"""``COUNT(DISTINCT)`` of no expression (DBToaster's spelling): the number of distinct empty tuples, 1 or 0.

Why: DBToaster's grammar reads ``COUNT(DISTINCT)`` as a distinct count over an empty list of columns; SQL has no
such spelling (DuckDB refuses it).  Counting the distinct values of zero expressions counts the one empty tuple
wherever the group has a row: 1 for a group that has rows, and (without GROUP BY) 0 over no rows, as
``COUNT(DISTINCT 1)`` gives in DuckDB.  So it is rewritten, on the tree, to ``LEAST(COUNT(*), 1)``, an expression
over an ordinary COUNT (its cost is COUNT's); an unaliased item keeps COUNT's name, ``count``.

>>> import sqlglot
>>> count_distinct_of_nothing(sqlglot.parse_one("SELECT a, COUNT(DISTINCT) FROM R GROUP BY a")).sql()
'SELECT a, LEAST(COUNT(*), 1) AS count FROM R GROUP BY a'
>>> count_distinct_of_nothing(sqlglot.parse_one("SELECT COUNT(DISTINCT b) AS n FROM R")).sql()
'SELECT COUNT(DISTINCT b) AS n FROM R'
"""

from __future__ import annotations

from sqlglot import exp


def count_distinct_of_nothing(tree: exp.Expression) -> exp.Expression:
    """``tree`` (changed in place) with each ``COUNT(DISTINCT)`` of no expression as ``LEAST(COUNT(*), 1)``."""
    for node in [n for n in tree.walk() if _of_nothing(n)]:
        least = exp.Least(this=exp.Count(this=exp.Star()), expressions=[exp.Literal.number(1)])
        item = type(node.parent) is exp.Select and node.arg_key == "expressions"
        node.replace(exp.alias_(least, "count") if item else least)
    return tree


def _of_nothing(node: exp.Expression) -> bool:
    return type(node) is exp.Count and type(node.this) is exp.Distinct and not node.this.expressions
