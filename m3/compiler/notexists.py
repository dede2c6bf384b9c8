"""``NOT EXISTS`` a row above (below) a value, over a table the outer query reads too: a comparison with its MAX (MIN).

Why: ``NOT EXISTS (SELECT 1 FROM X x WHERE x.v > e)`` (TPC-H Q15 as DBToaster
writes it: no supplier's revenue above this one's) holds exactly when no
``x.v`` exceeds ``e``: when ``e >= MAX(x.v)``, or when ``X`` has no rows (SQL's
MAX of none is NULL, and the comparison is not true).  A range-correlated
existence is a nested aggregate over a range, which the calculus keeps as the
extreme of the values (a multiplicity map folded when read, DBToaster's
domain maintenance); the comparison with an uncorrelated scalar subquery over
``X`` is then an ordinary nested query (over a grouped derived table: its
values lifted, :mod:`.lifted`).

It is exact only where ``X`` cannot be empty while the outer query has a row:
so the rule applies when ``X`` is a derived table and an item of the outer
FROM is ``X`` itself (the same text but its SELECT list), which every outer
row reads a row of.  Over a relation the existence stays a range-correlated
subquery (:mod:`.subqueries`), already first-order.  The subquery's WHERE must be that one comparison (no other
condition: it would make a subset of ``X``), of a qualified column of ``X``
with an expression over outer columns (no subquery):

==========================  ==============================
``NOT EXISTS ... x.v > e``   ``e >= (SELECT MAX(x.v) ...)``
``NOT EXISTS ... x.v >= e``  ``e > (SELECT MAX(x.v) ...)``
``NOT EXISTS ... x.v < e``   ``e <= (SELECT MIN(x.v) ...)``
``NOT EXISTS ... x.v <= e``  ``e < (SELECT MIN(x.v) ...)``
==========================  ==============================

Anything else is left as written (and refused where it stands, by name).

>>> import sqlglot
>>> sel = sqlglot.parse_one('''SELECT r1.k FROM (SELECT a AS k, SUM(b) AS t FROM R GROUP BY a) r1
...     WHERE NOT EXISTS (SELECT 1 FROM (SELECT a AS k, SUM(b) AS t FROM R GROUP BY a) r2 WHERE r2.t > r1.t)''')
>>> print(as_extremes(sel).sql())
SELECT r1.k FROM (SELECT a AS k, SUM(b) AS t FROM R GROUP BY a) AS r1 WHERE r1.t >= (SELECT MAX(r2.t) FROM (SELECT a AS k, SUM(b) AS t FROM R GROUP BY a) AS r2)
>>> sel = sqlglot.parse_one('''SELECT r1.k FROM (SELECT a AS k, SUM(b) AS t FROM R GROUP BY a) r1
...     WHERE NOT EXISTS (SELECT 1 FROM (SELECT a, SUM(b) AS t FROM R WHERE b > 1 GROUP BY a) r2 WHERE r2.t > r1.t)''')
>>> as_extremes(sel) is sel  # r2 may be empty while r1 has rows: NOT EXISTS is true, the MAX comparison not
True
"""

from __future__ import annotations

from sqlglot import exp

from .clauses import conjuncts

_FLIP = {exp.GT: exp.LT, exp.GTE: exp.LTE, exp.LT: exp.GT, exp.LTE: exp.GTE}
#: the comparison ``x.v OP e`` → (the extreme, the comparison ``e OP' extreme`` that no such row exists)
_RULE = {exp.GT: (exp.Max, exp.GTE), exp.GTE: (exp.Max, exp.GT), exp.LT: (exp.Min, exp.LTE), exp.LTE: (exp.Min, exp.LT)}
_CLAUSES = ("group", "having", "distinct", "order", "limit", "offset", "joins", "with", "with_", "qualify")


def as_extremes(sel: exp.Expression) -> exp.Expression:
    """``sel`` with every such ``NOT EXISTS`` conjunct of its WHERE read as a comparison with the extreme (module
    doc); ``sel`` itself when there is none."""
    if type(sel) is not exp.Select or not isinstance(sel.args.get("where"), exp.Where):
        return sel
    parts = conjuncts(sel.args["where"].this)
    rewritten = [_extreme(c, sel) for c in parts]
    if all(r is None for r in rewritten):
        return sel
    out = sel.copy()
    out.set("where", exp.Where(this=exp.and_(*[(r if r is not None else c).copy()
                                                for c, r in zip(parts, rewritten)])))
    return out


def _extreme(c: exp.Expression, sel: exp.Select) -> exp.Expression | None:
    while type(c) is exp.Paren:
        c = c.this
    if type(c) is not exp.Not:
        return None
    e = c.this
    while type(e) is exp.Paren:
        e = e.this
    if type(e) is not exp.Exists:
        return None
    inner = e.this
    while type(inner) is exp.Subquery:
        inner = inner.this
    if type(inner) is not exp.Select or any(inner.args.get(k) for k in _CLAUSES):
        return None
    from_ = inner.args.get("from_") or inner.args.get("from")
    where = inner.args.get("where")
    if not isinstance(from_, exp.From) or not isinstance(where, exp.Where):
        return None
    item = from_.this
    if type(item) is not exp.Subquery or not _outer_reads(item, sel):  # over a relation: a range (:mod:`.nested`)
        return None
    alias = item.alias_or_name.lower()
    cmp = where.this
    while type(cmp) is exp.Paren:
        cmp = cmp.this
    if type(cmp) not in _RULE:
        return None
    col, other, kind = cmp.this, cmp.expression, type(cmp)
    if not _mine(col, alias):
        col, other, kind = cmp.expression, cmp.this, _FLIP[type(cmp)]
    if not _mine(col, alias) or any(c.table.lower() == alias or not c.table for c in other.find_all(exp.Column)) \
            or any(isinstance(n, (exp.Select, exp.Subquery)) for n in other.walk()):
        return None
    extreme, compare = _RULE[kind]
    value = exp.Select(expressions=[extreme(this=col.copy())]).from_(item.copy(), copy=False)
    return compare(this=other.copy(), expression=exp.Subquery(this=value))


def _mine(col: exp.Expression, alias: str) -> bool:
    return type(col) is exp.Column and col.table.lower() == alias


def _outer_reads(item: exp.Expression, sel: exp.Select) -> bool:
    """Whether an item of ``sel``'s FROM is the same derived table as ``item`` (aliases and SELECT list aside)."""
    from_ = sel.args.get("from_") or sel.args.get("from")
    if any(j.args.get("side") for j in sel.args.get("joins") or []):
        return False  # an outer join may pad the item's rows: the outer row need not read one of its rows
    items = ([from_.this] if isinstance(from_, exp.From) else []) + [j.this for j in sel.args.get("joins") or []]
    for other in items:
        if type(other) is not type(item):
            continue
        if _rows_of(other.this) == _rows_of(item.this):
            return True
    return False


def _rows_of(body: exp.Expression) -> str:
    """A derived table's text but its SELECT list: two with the same have rows (groups) at once, whatever they
    select (``SELECT a AS k, SUM(b) ...`` and ``SELECT a, SUM(b) ...``)."""
    if type(body) is not exp.Select:
        return body.sql().lower()
    body = body.copy()
    body.set("expressions", [exp.Literal.number(1)])
    return body.sql().lower()

