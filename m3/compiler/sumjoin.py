"""A correlated scalar SUM subquery that is a factor of the one outer SUM: the sum over the join.

Why this is the calculus's own rule: in DBToaster's calculus a nested
aggregate multiplied into an outer one is ``AggSum([], R(r1) * AggSum([],
R(r2) * {r1.A = r2.A} * e))``, and a sum of sums with no group variable
between them is one sum over the product: ``AggSum([], R(r1) * R(r2) *
{r1.A = r2.A} * e)``.  So ``SELECT SUM(x * (SELECT SUM(e) FROM S s WHERE
c)) FROM R r WHERE w`` is ``SELECT SUM(x * e) FROM R r, S s WHERE w AND c``,
an ordinary join query that the general rules maintain first-order (one map
per aggregate, its deltas), however the subquery is correlated (any
condition on outer and inner columns: it is a join condition).

Exactness (SQL's NULL): the outer query has no GROUP BY, so it has one row
either way; an outer row whose subquery has no rows adds SQL's NULL, which
SUM skips, and the join has no row for it; when no outer row has a matching
inner row both are NULL.  Hence the rule holds only for that shape:

* the outer SELECT list is that one ``SUM``, no GROUP BY, HAVING, DISTINCT,
  window or LIMIT; the subquery is a factor of its argument (under ``*``,
  unary minus and parentheses), the only subquery in the SELECT list;
* the subquery selects ``SUM(e)`` (not DISTINCT), from relations named by
  aliases the outer FROM does not use, every column it reads qualified (so
  no name binds differently once its FROM is the outer one's), and has no
  GROUP BY, HAVING, DISTINCT, ORDER BY or LIMIT.

A ``COUNT`` subquery is not rewritten: over an outer relation without rows
SQL's SUM of it is NULL, the join's COUNT is 0.  Anything else is left as
written (and refused where it stands, by name).

>>> import sqlglot
>>> sel = sqlglot.parse_one("SELECT SUM((SELECT SUM(1) FROM R r2 WHERE r1.A = r2.A)) FROM R r1 WHERE r1.B > 0")
>>> joined(sel).sql()
'SELECT SUM(1) FROM R AS r1, R AS r2 WHERE r1.B > 0 AND r1.A = r2.A'
>>> joined(sqlglot.parse_one("SELECT SUM(r1.B * (SELECT SUM(r2.B) FROM R r2 WHERE r2.A < r1.A)) AS s FROM R r1")).sql()
'SELECT SUM(r1.B * r2.B) AS s FROM R AS r1, R AS r2 WHERE r2.A < r1.A'
>>> joined(sqlglot.parse_one("SELECT SUM((SELECT COUNT(*) FROM R r2 WHERE r1.A = r2.A)) FROM R r1")) is None
True
"""

from __future__ import annotations

from sqlglot import exp

_CLAUSES = ("group", "having", "distinct", "order", "limit", "offset", "qualify", "windows", "with", "with_")


def joined(sel: exp.Expression) -> exp.Select | None:
    """``sel`` with its SUM-of-a-SUM-subquery read as the sum over the join (module doc), or None when the
    rule does not apply."""
    if type(sel) is not exp.Select or any(sel.args.get(k) for k in _CLAUSES) or len(sel.expressions) != 1:
        return None
    item = sel.expressions[0]
    agg = item.this if type(item) is exp.Alias else item
    if type(agg) is not exp.Sum:
        return None
    subs = list(agg.find_all(exp.Subquery))
    if len(subs) != 1 or not _is_factor(subs[0], agg) or any(isinstance(n, exp.Window) for n in sel.walk()):
        return None
    inner = subs[0].this
    if type(inner) is not exp.Select or any(inner.args.get(k) for k in _CLAUSES) or len(inner.expressions) != 1:
        return None
    value = inner.expressions[0].this if type(inner.expressions[0]) is exp.Alias else inner.expressions[0]
    if type(value) is not exp.Sum or type(value.this) is exp.Distinct or subs[0].args.get("alias"):
        return None
    if not _plain_from(inner) or not _plain_from(sel, joins_ok=True):
        return None
    outer_names = {t.alias_or_name.lower() for t in _tables(sel)}
    inner_names = {t.alias_or_name.lower() for t in _tables(inner)}
    if outer_names & inner_names or any(not c.table for c in inner.find_all(exp.Column)):
        return None
    out = sel.copy()
    sub = next(out.expressions[0].find_all(exp.Subquery))
    inner = sub.this
    sub.replace(value.this.copy())
    for t in _tables(inner):
        out.append("joins", exp.Join(this=t.copy()))
    where = inner.args.get("where")
    if isinstance(where, exp.Where):
        out.where(where.this.copy(), copy=False)
    return out


def _is_factor(sub: exp.Subquery, agg: exp.Sum) -> bool:
    """Whether the subquery multiplies the SUM's whole argument (only ``*``, unary minus, parentheses above it)."""
    node: exp.Expression = sub
    while node.parent is not agg:
        parent = node.parent
        if not isinstance(parent, (exp.Mul, exp.Neg, exp.Paren)):
            return False
        node = parent
    return True


def _tables(sel: exp.Select) -> list[exp.Table]:
    from_ = sel.args.get("from_") or sel.args.get("from")
    items = ([from_.this] if isinstance(from_, exp.From) else []) + [j.this for j in sel.args.get("joins") or []]
    return [t for t in items if type(t) is exp.Table]


def _plain_from(sel: exp.Select, joins_ok: bool = False) -> bool:
    """Whether the FROM is relations only (comma joins; ``joins_ok``: also JOIN ... ON, kept as written)."""
    from_ = sel.args.get("from_") or sel.args.get("from")
    if not isinstance(from_, exp.From) or type(from_.this) is not exp.Table:
        return False
    for j in sel.args.get("joins") or []:
        if type(j.this) is not exp.Table:
            return False
        if not joins_ok and (j.args.get("on") is not None or j.args.get("kind") or j.args.get("side")
                             or j.args.get("using")):
            return False
        if j.args.get("side") or j.args.get("method") or j.args.get("using"):  # outer, NATURAL: not an inner join
            return False
    return True
