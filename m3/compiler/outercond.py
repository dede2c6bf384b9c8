"""A subquery's condition on outer columns alone (``EXISTS (SELECT * FROM R r2 WHERE r1.a = 3)``) moved outside it.

Why: a conjunct of a subquery's WHERE that reads no column of the subquery (only the outer query's, and
constants) is the same for every row the subquery reads: it decides whether the subquery reads rows at all.  For
``EXISTS (SELECT ... WHERE p AND q)`` and ``x IN (SELECT c ... WHERE p AND q)`` standing as conjuncts of a WHERE,
``p`` can stand beside them instead: ``p AND EXISTS (SELECT ... WHERE q)`` (where ``p`` is false or NULL the
subquery reads no row, so EXISTS and IN are false, and the outer row is dropped either way).  The subquery left
is one the general rules know (uncorrelated, or correlated by its other conjuncts); nothing else changes.

Only for a subquery without aggregates, GROUP BY, HAVING, LIMIT or OFFSET (``EXISTS (SELECT COUNT(*) FROM S
WHERE r1.a = 3)`` is always true: a COUNT of no rows is one row), only for EXISTS and IN that are conjuncts of a
WHERE, not negated (``NOT EXISTS (... WHERE p)`` is ``NOT p OR
NOT EXISTS (...)``, an OR), and only for conjuncts whose columns are all qualified by an alias of an enclosing
query's FROM that the subquery does not declare again.

>>> import sqlglot
>>> def r(sql): return outer_conditions_out(sqlglot.parse_one(sql)).sql()
>>> r("SELECT r1.a FROM R AS r1 WHERE EXISTS (SELECT * FROM R AS r2 WHERE r1.a = 3 AND r2.b = r1.b)")
'SELECT r1.a FROM R AS r1 WHERE EXISTS(SELECT * FROM R AS r2 WHERE r2.b = r1.b) AND r1.a = 3'
>>> r("SELECT a FROM R AS r1 WHERE r1.b IN (SELECT s.b FROM S AS s WHERE r1.a > 2)")
'SELECT a FROM R AS r1 WHERE r1.b IN (SELECT s.b FROM S AS s) AND r1.a > 2'
>>> r("SELECT a FROM R AS r1 WHERE NOT EXISTS (SELECT * FROM S WHERE r1.a = 3)")  # an OR: left as it is
'SELECT a FROM R AS r1 WHERE NOT EXISTS(SELECT * FROM S WHERE r1.a = 3)'
>>> r("SELECT a FROM R AS r1 WHERE EXISTS (SELECT COUNT(*) FROM S WHERE r1.a = 3)")  # one row: left as it is
'SELECT a FROM R AS r1 WHERE EXISTS(SELECT COUNT(*) FROM S WHERE r1.a = 3)'
"""

from __future__ import annotations

from sqlglot import exp

from .clauses import conjuncts
from .resolve import unparen


def outer_conditions_out(tree: exp.Expression) -> exp.Expression:
    """``tree`` (changed in place) with each subquery's conditions on outer columns alone moved out (module doc)."""
    for sel in [s for s in tree.walk() if type(s) is exp.Select]:
        where = sel.args.get("where")
        if where is None:
            continue
        moved: list[exp.Expression] = []
        for c in conjuncts(where.this):
            sub = _subquery_of(c)
            if sub is None:
                continue
            inner_where = sub.args.get("where")
            if inner_where is None:
                continue
            outer = _visible(sel) - _own(sub)
            keep, out = [], []
            for ic in conjuncts(inner_where.this):
                (out if _reads_only(ic, outer) else keep).append(ic)
            if out:
                sub.set("where", exp.Where(this=exp.and_(*[k.copy() for k in keep])) if keep else None)
                moved += [o.copy() for o in out]
        if moved:
            sel.set("where", exp.Where(this=exp.and_(where.this.copy(), *moved)))
    return tree


def _subquery_of(c: exp.Expression) -> exp.Select | None:
    """The SELECT of ``EXISTS (sub)`` or ``x IN (SELECT ...)``, else None; None too when its body has
    aggregates, GROUP BY, HAVING, LIMIT or OFFSET: ``SELECT COUNT(*) FROM S WHERE r1.a = 3`` is one row (a 0)
    where the condition is false, so the condition decides its values, not whether it has rows."""
    c = unparen(c)
    if type(c) is exp.Exists:
        body = unparen(c.this)
    elif type(c) is exp.In and c.args.get("query") is not None:
        q = c.args["query"]
        body = unparen(q.this if type(q) is exp.Subquery else q)
    else:
        return None
    if type(body) is not exp.Select or any(body.args.get(k) for k in ("group", "having", "limit", "offset")) or \
            any(a.find_ancestor(exp.Select) is body for e in body.expressions for a in e.find_all(exp.AggFunc)):
        return None  # aggregates without GROUP BY are one row whatever the WHERE; a LIMIT counts the rows read
    return body


def _own(sel: exp.Select) -> set[str]:
    """The (lower-case) aliases of a SELECT's own FROM items."""
    from_ = sel.args.get("from_") or sel.args.get("from")
    items = ([from_.this] if isinstance(from_, exp.From) else []) + \
        [j.this for j in sel.args.get("joins") or [] if isinstance(j, exp.Join)]
    return {t.alias_or_name.lower() for t in items}


def _visible(sel: exp.Select) -> set[str]:
    """The aliases a SELECT's conditions may read: its own FROM's and those of the SELECTs enclosing it."""
    out: set[str] = set()
    node: exp.Expression | None = sel
    while node is not None:
        if type(node) is exp.Select:
            out |= _own(node)
        node = node.parent
    return out


def _reads_only(c: exp.Expression, outer: set[str]) -> bool:
    """Whether ``c`` reads columns, all qualified by an alias in ``outer``, and holds no subquery."""
    if not isinstance(c, exp.Expression):
        return False  # (a malformed tree: the general rules refuse it by name)
    cols = list(c.find_all(exp.Column))
    return bool(cols) and not any(isinstance(n, (exp.Select, exp.Subquery)) for n in c.walk()) and \
        all(col.table and col.table.lower() in outer for col in cols)
