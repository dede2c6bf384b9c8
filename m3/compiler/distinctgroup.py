"""``SELECT DISTINCT`` in a derived table is a GROUP BY of its columns without aggregates.

Why: ``(SELECT DISTINCT d.k FROM D d WHERE ...) t`` holds each value of
``d.k`` once, which is exactly ``(SELECT d.k FROM D d WHERE ... GROUP BY
d.k) t``: a grouped derived table, read by the rules for those
(:mod:`.regroup` where the outer query aggregates its rows, else by value,
:mod:`.lifted`: joined with relations on its group columns, its groups'
row count read as ``0 < rows[K]``).  So the rule is a translation, not a
construct of its own.  Only a derived table (a FROM item, any depth) of
selected expressions over joins and WHERE is rewritten; ``DISTINCT ON``, a
derived table with aggregates, GROUP BY, HAVING or LIMIT is left as written
for the front end to refuse by name.

>>> import sqlglot
>>> distinct_groups(sqlglot.parse_one('''SELECT * FROM (SELECT DISTINCT d.k, d.j + 1 AS m FROM D d WHERE d.n = 'x') t
...     JOIN E e ON t.k = e.k''')).sql()
"SELECT * FROM (SELECT d.k, d.j + 1 AS m FROM D AS d WHERE d.n = 'x' GROUP BY d.k, d.j + 1) AS t JOIN E AS e ON t.k = e.k"
"""

from __future__ import annotations

from sqlglot import exp

from .nodes import unread_args
from .resolve import unparen

_BODY = frozenset({"expressions", "from", "from_", "joins", "where", "distinct"})


def distinct_groups(sel: exp.Expression) -> exp.Expression:
    """``sel`` (a copy when anything changes) with each DISTINCT derived table written as its GROUP BY."""
    if not any(_distinct_body(s) for s in sel.find_all(exp.Subquery)) or next(unread_args(sel), None):
        return sel  # nothing to rewrite, or a field no pass reads: left for the front end to refuse whole
    sel = sel.copy()
    for item in [s for s in sel.find_all(exp.Subquery) if _distinct_body(s)]:
        body = item.this
        body.set("distinct", None)
        body.set("group", exp.Group(expressions=[unparen(e.this if type(e) is exp.Alias else e).copy()
                                                 for e in body.expressions]))
    return sel


def _distinct_body(item: exp.Subquery) -> bool:
    """Whether ``item`` is a derived table ``(SELECT DISTINCT <expressions> FROM ... [WHERE ...])``."""
    body = item.this
    if not isinstance(item.parent, (exp.From, exp.Join)) or type(body) is not exp.Select:
        return False
    d = body.args.get("distinct")
    if type(d) is not exp.Distinct or d.args.get("on") is not None or d.expressions:
        return False
    if any(v not in (None, False, [], "") for k, v in body.args.items() if k not in _BODY) or \
            type(body.args.get("from_") or body.args.get("from")) is not exp.From:
        return False
    return bool(body.expressions) and not any(
        isinstance(x, (exp.AggFunc, exp.Star, exp.Select, exp.Subquery, exp.Window)) or
        type(x) is exp.Column and isinstance(x.this, exp.Star) for e in body.expressions for x in e.walk())
