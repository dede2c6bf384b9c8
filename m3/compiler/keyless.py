"""An aggregate without GROUP BY has exactly one row, also over no rows: its view is ``ALWAYS`` (issue 33, sqlO).

Why a module of its own: SQL's ``SELECT COUNT(*) + 1 FROM R`` is one row, ``1``, while R is empty, and
``SELECT SUM(a), COUNT(*) FROM R`` is ``(NULL, 0)``.  The maps hold no entry then, so the view is declared
``ALWAYS`` (:attr:`boreas.m3.ast.ViewDecl.always`: its one row read while its maps are empty, as a query
without FROM's, :mod:`.fromless`), and each SELECT item over a SUM, AVG, MIN or MAX gets the hidden COUNT of
the rows that aggregate reads (``COUNT(*)``, under the aggregate's FILTER if it has one), the column
:mod:`.nullshown` names ``<item>__null``: where it is 0 the item is NULL (:class:`boreas.m3.nullable.ViewNulls`),
on both backends and every read path, as a SUM over only NULLs already is.  An item whose NULL-skipping
aggregate already has such a count (:mod:`.threevalued`'s, of a nullable argument: at most the rows') keeps it.

The rewrite is one SQL → SQL function before the query is translated; :func:`always` says whether it applied
(the front end sets :attr:`.sqlquery.SqlQuery.always`, the pipeline the view's ``always``).  Left as before (the
row absent while no row is read, docs/m3.md "Rows"): a HAVING (the row is there where it holds), DISTINCT, a
FROM item that is not a relation (a derived table: :mod:`.singleton`, :mod:`.lifted`), an outer join, a subquery in the
SELECT list (:mod:`.selectsub`), an aggregate under anything but arithmetic in its item (``COALESCE(SUM(a),
0)``: one count cannot say what that is), and one item over aggregates filtered differently.

>>> import sqlglot
>>> def show(q):
...     sel = sqlglot.parse_one(q)
...     return always(sel), sel.sql()
>>> show("SELECT COUNT(*) + 1 AS n FROM R")
(True, 'SELECT COUNT(*) + 1 AS n FROM R')
>>> show("SELECT SUM(a) + 1 AS s, COUNT(*) AS n, MAX(b) FILTER(WHERE b > 2) AS m FROM R WHERE a > 0")
(True, 'SELECT SUM(a) + 1 AS s, COUNT(*) AS n, MAX(b) FILTER(WHERE b > 2) AS m, COUNT(*) AS __nonnull_0, COUNT(*) FILTER(WHERE b > 2) AS __nonnull_2 FROM R WHERE a > 0')
>>> show("SELECT COALESCE(SUM(a), 0) AS s FROM R"), show("SELECT a, SUM(b) FROM R GROUP BY a")[0]
((False, 'SELECT COALESCE(SUM(a), 0) AS s FROM R'), False)
"""

from __future__ import annotations

from dataclasses import replace

from sqlglot import exp

from .nullshown import COUNT_PREFIX, counted_item, item_of
from .sqlquery import SqlQuery

#: The aggregates SQL makes NULL over no rows (COUNT is 0).
_NULL_OF_NOTHING = (exp.Sum, exp.Avg, exp.Min, exp.Max)

_NOT_KEYLESS = ("group", "having", "distinct", "qualify", "windows", "with", "with_", "limit", "offset")


def always(sel: exp.Expression) -> bool:
    """Whether ``sel`` is an aggregate without GROUP BY over relations; if so, add each item's hidden count
    (in place) so that its one row shows SQL's NULLs while it reads no rows."""
    if type(sel) is not exp.Select or any(sel.args.get(k) for k in _NOT_KEYLESS):
        return False
    from_ = sel.args.get("from_") or sel.args.get("from")
    joins = sel.args.get("joins") or []
    items = [from_.this] + [j.this for j in joins] if isinstance(from_, exp.From) else []
    if not items or not all(type(t) is exp.Table for t in items) or any(j.side for j in joins):
        return False  # (an outer join's parts, :mod:`.outer`, name their items anew)
    items = [e for e in sel.expressions if counted_item(e) is None]
    own = [n for e in items for n in e.walk() if isinstance(n, exp.AggFunc)]
    if not own or any(isinstance(n, (exp.Subquery, exp.Select, exp.Window)) for e in items for n in e.walk()):
        return False
    counted = {counted_item(e) for e in sel.expressions} - {None}
    where: dict[int, set[str]] = {}  # item -> the FILTER conditions of its SUM/AVG/MIN/MAX ("" none)
    filters: dict[int, exp.Expression | None] = {}
    for agg in (n for n in own if isinstance(n, _NULL_OF_NOTHING)):
        outer = agg.parent if type(agg.parent) is exp.Filter else agg
        at = item_of(outer, sel)
        if at is None:  # under a function or CASE: NULL of no rows not carried
            return False
        cond = outer.expression if type(outer) is exp.Filter else None
        where.setdefault(at, set()).add("" if cond is None else cond.sql())
        filters[at] = cond
    if any(len(w) > 1 for w in where.values()):
        return False
    for at in sorted(where):
        if at in counted:
            continue
        count: exp.Expression = exp.Count(this=exp.Star())
        if filters[at] is not None:
            count = exp.Filter(this=count, expression=filters[at].copy())
        sel.append("expressions", exp.alias_(count, f"{COUNT_PREFIX}{at}"))
    return True


def one_row_view(q: SqlQuery, rewritten: bool) -> SqlQuery:
    """``q`` marked ``always`` where :func:`always` rewrote its SELECT and it stayed one query of maps without keys
    (not a view over parts, a UNION, INTERSECT or EXCEPT: those keep their own rows)."""
    if rewritten and not q.group_by and q.lifted is None and not q.union and not q.setop:
        return replace(q, always=True)
    return q
