"""A subquery over a grouped derived table whose value is an aggregate of the rows: rewritten into one query.

Why: the rule of :mod:`.regroup` (an aggregate of a grouped derived table
that is an aggregate of its rows is that aggregate; a query that reads only
the inner groups is the inner query with its WHERE as a HAVING) holds for
any SELECT, not only the outermost one.  Inside an ``IN``, ``EXISTS`` or
scalar subquery the derived table would otherwise have to be flattened,
which a grouped one cannot be, so TPC-H Q18 written with its HAVING as a
derived table's WHERE (``o.orderkey IN (SELECT t.k FROM (SELECT k, SUM(q)
AS s FROM L GROUP BY k) t WHERE s > 100)``) is exactly Q18 (``IN (SELECT k
FROM L GROUP BY k HAVING SUM(q) > 100)``), compiled by the nested-aggregate
rules (:mod:`.nested`): the subquery's aggregates keyed by its group, the
condition a predicate over them.

Each nested SELECT (innermost first) that reads a grouped derived table is
replaced by :func:`.regroup.regroup`'s rewrite where that applies; where it
does not (a correlated column the rewrite cannot place, an aggregate of the
inner aggregates), the subquery is left as written, for the front end to
compile or refuse by name.

>>> import sqlglot
>>> from .examples import PlainErrors
>>> sel = sqlglot.parse_one('''SELECT a FROM R WHERE a IN
...     (SELECT t.k FROM (SELECT b AS k, SUM(c) AS s FROM S GROUP BY b) t WHERE s > 10)''')
>>> regroup_subqueries(sel, PlainErrors()).sql()
'SELECT a FROM R WHERE a IN (SELECT b AS k FROM S GROUP BY b HAVING SUM(c) > 10)'
"""

from __future__ import annotations

from sqlglot import exp

from ..errors import CompileError
from .nodes import unread_args
from .regroup import regroup
from .resolve import Positions


def regroup_subqueries(sel: exp.Select, ctx: Positions) -> exp.Select:
    """``sel``, with every nested SELECT over a grouped derived table rewritten where :func:`.regroup.regroup`
    applies (a copy when one is; else ``sel`` itself)."""
    nested = [s for s in _nested_selects(sel) if _reads_grouped(s)]
    if not nested or next(unread_args(sel), None):
        return sel  # nothing to rewrite, or a field no pass reads: left for the front end to refuse whole
    sel = sel.copy()
    for s in reversed([s for s in _nested_selects(sel) if _reads_grouped(s)]):  # innermost first
        try:
            out = regroup(s, ctx)
        except CompileError:
            continue  # left as written: the front end compiles it or names what it refuses
        if out is not s:
            s.replace(out)
    return sel


def _nested_selects(sel: exp.Select) -> list[exp.Select]:
    """The SELECTs inside ``sel`` that are subqueries of a condition or a value (not FROM items, not ``sel``)."""
    out = []
    for s in sel.find_all(exp.Select):
        if s is sel:
            continue
        holder = s.parent
        if type(holder) is exp.Subquery and isinstance(holder.parent, (exp.From, exp.Join)):
            continue  # a derived table: :mod:`.derived` and :mod:`.lifted` read those
        if isinstance(holder, (exp.Subquery, exp.Exists, exp.In)):
            out.append(s)
    return out


def _reads_grouped(s: exp.Select) -> bool:
    from_ = s.args.get("from_") or s.args.get("from")
    items = ([from_.this] if isinstance(from_, exp.From) else []) + \
        [j.this for j in s.args.get("joins") or [] if isinstance(j, exp.Join)]
    return any(type(i) is exp.Subquery and type(i.this) is exp.Select and i.this.args.get("group") is not None
               for i in items)
