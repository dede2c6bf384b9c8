"""A subquery's condition that reads only its correlation columns is a condition of the outer row: hoisted out.

Why this is exact: inside ``(SELECT SUM(1) FROM L l2 WHERE l2.k = l1.k AND
100 < (SELECT SUM(l3.q) FROM L l3 WHERE l3.k = l2.k))`` (TPC-H Q18's shape,
a subquery nested in a subquery) the deeper condition reads ``l2.k`` only,
which every row of the middle subquery has equal to the outer ``l1.k``.  So
for one outer row the condition is the same for all the middle rows: where
it holds, the middle subquery is what it was without it; where it does not,
the middle subquery has no rows.  In the calculus this is DBToaster's
factoring of a nested aggregate out of an ``AggSum`` whose group variables
it reads only (``AggSum([k], R(k, ..) * {k = k1} * (0 < n[k])) = (0 < n[k1]) *
AggSum(...)``), after which the nested condition is one level less deep.

A middle subquery without rows must then make the outer conjunct false, as
the hoisted condition does:

* a comparison with a scalar subquery whose value is NULL over no rows
  (:func:`null_on_no_rows`: SUM, AVG, MIN or MAX under ``+ - * /`` and
  constants; a comparison with NULL is not true); a COUNT of no rows is 0,
  and GREATEST, LEAST, COALESCE or CASE may be a value, which may compare
  true: not hoisted;
* ``EXISTS`` and ``IN (SELECT ...)`` (no rows: false) of a middle SELECT
  without aggregates (an aggregate without GROUP BY has a row over no rows);
  not under ``NOT``.

The condition moves with the middle columns it reads replaced by the outer
columns they equal; every column of the middle subquery must be qualified,
and no alias of a deeper subquery may name an outer table or a table of the
middle subquery (so no name binds differently once moved: ``FROM L l3, L l2``
deeper down reads its own ``l2``).  What is not hoisted is refused where it
stands (``unsupported subquery nested in a subquery``).  Conditions that read other middle columns stay (and
are refused where they stand if the front end cannot read them, by name).

>>> import sqlglot
>>> sel = sqlglot.parse_one('''SELECT SUM(l1.q) FROM L l1 WHERE 1 <= (SELECT SUM(1) FROM L l2
...     WHERE l1.k = l2.k AND 100 < (SELECT SUM(l3.q) FROM L l3 WHERE l2.k = l3.k))''')
>>> print(hoisted(sel).sql())
SELECT SUM(l1.q) FROM L AS l1 WHERE 1 <= (SELECT SUM(1) FROM L AS l2 WHERE l1.k = l2.k) AND 100 < (SELECT SUM(l3.q) FROM L AS l3 WHERE l1.k = l3.k)
>>> sel = sqlglot.parse_one('''SELECT l1.q FROM L l1 WHERE 0 = (SELECT COUNT(*) FROM L l2
...     WHERE l1.k = l2.k AND 100 < (SELECT SUM(l3.q) FROM L l3 WHERE l2.k = l3.k))''')
>>> hoisted(sel) is sel  # a COUNT of no rows is 0, and 0 = 0: the conjunct is not the condition's
True
"""

from __future__ import annotations

from sqlglot import exp

from .clauses import conjuncts, from_items

_CMPS = (exp.EQ, exp.NEQ, exp.LT, exp.LTE, exp.GT, exp.GTE)


def hoisted(sel: exp.Expression) -> exp.Expression:
    """``sel`` with every hoistable condition of its WHERE's subqueries moved into its WHERE (module doc), repeated
    until none is left; ``sel`` itself when there is none."""
    if type(sel) is not exp.Select or not isinstance(sel.args.get("where"), exp.Where):
        return sel
    out = sel.copy()
    moved = False
    while True:
        found = _one(out)
        if found is None:
            return out if moved else sel
        out.where(found, copy=False)
        moved = True


def _one(sel: exp.Select) -> exp.Expression | None:
    """Move one hoistable condition out of a subquery of ``sel``'s WHERE conjuncts; return it (None: none)."""
    outer_names = _names(sel)
    for c in conjuncts(sel.args["where"].this):
        middle = _middle(c)
        if middle is None or not isinstance(middle.args.get("where"), exp.Where):
            continue
        mine = _names(middle)
        if any(not col.table for col in middle.find_all(exp.Column)) or mine & outer_names:
            continue
        equal = _correlation(middle, mine)
        for d in conjuncts(middle.args["where"].this):
            if not any(isinstance(n, (exp.Subquery, exp.Select)) for n in d.walk()):
                continue
            deeper = {t.alias_or_name.lower() for s in d.find_all(exp.Select) for t in from_items(s)}
            reads = [col for col in d.find_all(exp.Column) if col.table.lower() in mine]
            if deeper & (outer_names | mine) or not reads or any(_key(col) not in equal for col in reads):
                continue
            _drop(middle, d)
            for col in list(d.find_all(exp.Column)):
                if col.table.lower() in mine:
                    col.replace(equal[_key(col)].copy())
            return d.copy()
    return None


def _middle(c: exp.Expression) -> exp.Select | None:
    """The subquery of a WHERE conjunct whose having no rows makes the conjunct false (module doc), or None."""
    if type(c) is exp.Exists:
        body = c.this
    elif type(c) is exp.In and c.args.get("query") is not None:
        body = c.args["query"]
    elif type(c) in _CMPS:
        subs = [s for s in c.find_all(exp.Subquery) if s.find_ancestor(exp.Subquery) is None]
        if len(subs) != 1:
            return None
        body = subs[0]
        inner = body.this
        if type(inner) is not exp.Select or len(inner.expressions) != 1 or inner.args.get("group") or \
                not null_on_no_rows(inner.expressions[0]):
            return None
    else:
        return None
    while type(body) in (exp.Subquery, exp.Paren):
        body = body.this
    if type(body) is not exp.Select or any(body.args.get(k) for k in ("limit", "offset", "having", "distinct")):
        return None
    if type(c) is not exp.Exists and type(c) is not exp.In:
        return body
    # an aggregate without GROUP BY has its one row over no rows: EXISTS and IN do not become false
    return None if any(isinstance(n, exp.AggFunc) for e in body.expressions for n in e.walk()) else body


_NULL_AGGS = (exp.Sum, exp.Avg, exp.Min, exp.Max)


def null_on_no_rows(value: exp.Expression) -> bool:
    """Whether a subquery's one SELECT item is NULL over no rows: SUM, AVG, MIN and MAX (of anything) under ``+ -
    * /`` and constants, at least one of them.  COUNT (0), COALESCE, GREATEST, LEAST and CASE may not be NULL, so
    a comparison with them may hold over no rows.

    >>> import sqlglot
    >>> [null_on_no_rows(sqlglot.parse_one(f"SELECT {v}").expressions[0])
    ...  for v in ("SUM(a) + 1", "-MAX(a) / 2 AS m", "COUNT(*)", "GREATEST(SUM(a), 0)", "1", "SUM(a) + b")]
    [True, True, False, False, False, False]
    """
    x = value.this if type(value) is exp.Alias else value
    if isinstance(x, _NULL_AGGS):
        return True
    if type(x) in (exp.Add, exp.Sub, exp.Mul, exp.Div):
        sides = (x.this, x.expression)
        return all(null_on_no_rows(y) or _constant(y) for y in sides) and any(null_on_no_rows(y) for y in sides)
    if type(x) in (exp.Paren, exp.Neg):
        return null_on_no_rows(x.this)
    return False


def _constant(x: exp.Expression) -> bool:
    while type(x) in (exp.Paren, exp.Neg):
        x = x.this
    return type(x) is exp.Literal


def _correlation(middle: exp.Select, mine: set[str]) -> dict[tuple[str, str], exp.Column]:
    """The middle subquery's columns equated with an outer column by a conjunct of its WHERE: ``{(alias, column):
    outer column}``."""
    out: dict[tuple[str, str], exp.Column] = {}
    for c in conjuncts(middle.args["where"].this):
        if type(c) is not exp.EQ or type(c.this) is not exp.Column or type(c.expression) is not exp.Column:
            continue
        for a, b in ((c.this, c.expression), (c.expression, c.this)):
            if a.table.lower() in mine and b.table and b.table.lower() not in mine:
                out.setdefault(_key(a), b)
    return out


def _key(col: exp.Column) -> tuple[str, str]:
    return col.table.lower(), col.name.lower()


def _names(sel: exp.Select) -> set[str]:
    return {t.alias_or_name.lower() for t in from_items(sel)}


def _drop(sel: exp.Select, conjunct: exp.Expression) -> None:
    """Remove one conjunct from ``sel``'s WHERE (the WHERE itself when it was the only one)."""
    rest = [c for c in conjuncts(sel.args["where"].this) if c is not conjunct]
    if not rest:
        sel.set("where", None)
        return
    sel.set("where", exp.Where(this=exp.and_(*[c.copy() for c in rest])))
