"""Aggregates over a FROM of one-row derived tables: AggSum over a singleton domain is its body.

Why: a derived table of aggregates without GROUP BY has exactly one row, whatever its input
(:mod:`.onerow`), and so does a product of them.  An aggregate of the query that reads only such tables
(``SELECT SUM(1) FROM (SELECT SUM(1) FROM R) t``: DBToaster's ``r_aggofnestedagg``) ranges over that one
row: in the calculus ``AggSum([], D * e)`` with ``D`` a domain of one tuple is ``e`` at that tuple.  So
``SUM(e)``, ``MIN(e)`` and ``MAX(e)`` are ``e`` (SQL's NULL of the inner SUM over no rows stays NULL,
as the SUM of one NULL is), ``COUNT(*)`` is 1, and ``COUNT(e)`` (also DISTINCT) is 1 where ``e`` can be
no NULL (a constant, or a column the table computes as a COUNT: that column is then not read).  The query is then one of values read
from one-row tables, which :mod:`.onerow` turns into scalar subqueries (a query without FROM:
:mod:`.fromless`, or a constant view: :mod:`.constrow`): the nested aggregates are maintained as maps
of their own, first-order.

Left as written (refused by name by the passes that read it): a WHERE, GROUP BY, HAVING, DISTINCT or
row limit on the outer query (its rows would be zero or one, SUM's NULL of none not built here), AVG
(its value is a DOUBLE where ``e`` may be an INT), ``COUNT(e)`` of what may be NULL, an aggregate over
a subquery or reading a column of an enclosing query (SQL's aggregate of that query), any FROM item that is
not a one-row derived table.  A constant term (a constant aggregate or item, a constant added) beside a value
read is rewritten as any other: the query without FROM it becomes shows its one row always (sqlM).

>>> import sqlglot
>>> single_row_aggregates(sqlglot.parse_one("SELECT SUM(1) FROM (SELECT SUM(1) FROM R) r")).sql()
'SELECT 1 AS sum_1 FROM (SELECT SUM(1) FROM R) AS r'
>>> single_row_aggregates(sqlglot.parse_one('''SELECT MAX(t.s) - MIN(u.n) AS v, SUM(t.s * u.n) AS k
...     FROM (SELECT SUM(b) AS s FROM R) t, (SELECT COUNT(*) AS n FROM S) u''')).sql()
'SELECT t.s - u.n AS v, (t.s * u.n) AS k FROM (SELECT SUM(b) AS s FROM R) AS t, (SELECT COUNT(*) AS n FROM S) AS u'
>>> single_row_aggregates(sqlglot.parse_one("SELECT COUNT(*), SUM(t.s) FROM (SELECT SUM(b) AS s FROM R) t")).sql()
'SELECT 1 AS count_1, t.s AS sum_2 FROM (SELECT SUM(b) AS s FROM R) AS t'
>>> single_row_aggregates(sqlglot.parse_one("SELECT COUNT(t.s) FROM (SELECT SUM(b) AS s FROM R) t")).sql()
'SELECT COUNT(t.s) FROM (SELECT SUM(b) AS s FROM R) AS t'
>>> single_row_aggregates(sqlglot.parse_one("SELECT SUM(R.a) FROM R")).sql()
'SELECT SUM(R.a) FROM R'
>>> one_row_reads(sqlglot.parse_one("SELECT a FROM R WHERE a < (SELECT MAX(t.x) FROM (SELECT SUM(b) AS x FROM S) t)"), {}).sql()
'SELECT a FROM R WHERE a < ((SELECT SUM(b) FROM S))'
"""

from __future__ import annotations

from sqlglot import exp

from .onerow import one_row_body, one_row_tables
from .onerowstar import one_row_names
from .rowvalues import rows_with_values
from .sumjoin import joined
from .resolve import unparen

_BODY = frozenset({"expressions", "from", "from_", "joins"})
_SAME = (exp.Sum, exp.Min, exp.Max)


def one_row_reads(sel: exp.Expression, columns: dict[str, list[str]]) -> exp.Expression:
    """``sel`` with the reads of its one-row tables made scalar subqueries, and what that leaves nested undone:
    their names beside relations resolved (:mod:`.onerowstar`), aggregates over them alone their values, their
    columns scalar subqueries (:func:`.onerow.one_row_tables`), a FROM-less ``(SELECT v)`` inside a subquery
    ``v``, a SUM of a SUM subquery inside a subquery the sum over the join (:func:`.sumjoin.joined`), and a view
    of rows reading scalar subqueries its rows counted (:mod:`.rowvalues`): the front end's one pass for all."""
    sel = one_row_tables(single_row_aggregates(one_row_names(sel, columns)))
    return rows_with_values(_nested_sum_joins(_scalars_in_place(sel)), columns)


def _nested_sum_joins(sel: exp.Expression) -> exp.Expression:
    """``sel`` with each subquery that is a SUM of a SUM subquery (:func:`.sumjoin.joined`) written as the sum
    over the join, where no enclosing query names a FROM item as the inner one does and every column the
    subquery reads is qualified (so no name binds differently once the FROMs are one)."""
    def rule(s: exp.Subquery) -> exp.Select | None:
        if s is sel or type(s.this) is not exp.Select or any(not c.table for c in s.this.find_all(exp.Column)):
            return None
        out = joined(s.this)
        if out is None:
            return None
        inner = {t.alias_or_name.lower() for t in s.this.find_all(exp.Table)}
        node = s.find_ancestor(exp.Select)
        while node is not None:
            if inner & {t.alias_or_name.lower() for t in node.find_all(exp.Table) if t.find_ancestor(exp.Select) is node}:
                return None
            node = node.find_ancestor(exp.Select)
        return out

    if not any(rule(s) is not None for s in sel.find_all(exp.Subquery)):
        return sel
    sel = sel.copy()
    for s in reversed(list(sel.find_all(exp.Subquery))):
        out = rule(s)
        if out is not None:
            s.set("this", out)
    return sel


def _scalars_in_place(sel: exp.Expression) -> exp.Expression:
    """``sel`` with each scalar subquery of one value and no FROM (``(SELECT (SELECT SUM(b) FROM S))``, what
    a nested query over one-row tables becomes) read as that value: one level of nesting fewer."""
    found = [s for s in sel.find_all(exp.Subquery) if s is not sel and _bare(s)]
    if not found:
        return sel
    sel = sel.copy()
    for s in reversed([s for s in sel.find_all(exp.Subquery) if s is not sel and _bare(s)]):
        x = s.this.expressions[0]
        x = (x.this if type(x) is exp.Alias else x).copy()
        for a in [a for a in x.find_all(exp.AggFunc) if a.find_ancestor(exp.Select) is None]:
            value = _over_no_from(a)
            if a is x:
                x = value
            else:
                a.replace(value)
        s.replace(exp.Paren(this=x))
    return sel


def _bare(s: exp.Subquery) -> bool:
    body = s.this
    return (type(body) is exp.Select and len(body.expressions) == 1 and s.find_ancestor(exp.Select) is not None
            and not isinstance(s.parent, (exp.From, exp.Join, exp.In, exp.Exists, exp.Any, exp.All))
            and all(v in (None, False, [], "") for k, v in s.args.items() if k != "this")
            and all(v in (None, False, [], "") for k, v in body.args.items() if k != "expressions")
            and not isinstance(body.expressions[0], exp.Star)
            # (SELECT COUNT(*)) aggregates over its own one row: read in place it would be the outer query's
            and all(_over_no_from(a) is not None for a in body.expressions[0].find_all(exp.AggFunc)
                    if a.find_ancestor(exp.Select) is body))


def _over_no_from(agg: exp.AggFunc) -> exp.Expression | None:
    """The value of an aggregate of a SELECT without FROM: over its one row when its argument is a constant
    (``COUNT(*)``, ``COUNT(2)``: 1; ``SUM(1)``, ``MIN(1)``, ``MAX(1)``: the constant); itself where its argument
    reads columns (all of enclosing queries: SQL makes it an aggregate of theirs); else None (left as written)."""
    arg = unparen(agg.this)
    if arg.find(exp.Column) is not None:
        return None if arg.find(exp.Select, exp.Subquery) is not None else agg.copy()
    if type(agg) is exp.Count and (isinstance(arg, exp.Star) or isinstance(arg, exp.Literal)):
        return exp.Literal.number(1)
    return arg.copy() if type(agg) in _SAME and isinstance(arg, exp.Literal) else None


def single_row_aggregates(sel: exp.Expression) -> exp.Expression:
    """``sel`` (a copy when anything changes) with each SELECT whose FROM is one-row derived tables only
    and whose aggregates are all of the kinds above read as the values of that one row."""
    scopes = [s for s in sel.find_all(exp.Select) if _rewritable(s)]
    if not scopes:
        return sel
    sel = sel.copy()
    for scope in reversed([s for s in sel.find_all(exp.Select) if _rewritable(s)]):
        _rewrite(scope)
    return sel


def _items(s: exp.Select) -> list[exp.Expression] | None:
    """The FROM items of ``s`` when they are inner or cross joined without a condition, else None."""
    from_ = s.args.get("from_") or s.args.get("from")
    if not isinstance(from_, exp.From):
        return None
    joins = s.args.get("joins") or []
    if any(j.args.get("side") or j.args.get("using") or j.args.get("on") is not None or
           str(j.args.get("kind") or "").upper() not in ("", "INNER", "CROSS") for j in joins):
        return None
    return [from_.this] + [j.this for j in joins]


def _own_aggregates(scope: exp.Select) -> list[exp.AggFunc]:
    return [a for e in scope.expressions for a in e.find_all(exp.AggFunc) if a.find_ancestor(exp.Select) is scope]


def _rewritable(scope: exp.Select) -> bool:
    if any(v not in (None, False, [], "") for k, v in scope.args.items() if k not in _BODY):
        return False
    items = _items(scope)
    if not items or any(one_row_body(i) is None for i in items):
        return False
    aggs = _own_aggregates(scope)
    values = [_value(a, scope) for a in aggs]
    if not aggs or any(v is None for v in values):
        return False
    # a constant term beside values read (SELECT COUNT(*), SUM(t.x) ...) is the query without FROM's: its view is
    # ALWAYS (:mod:`.fromless`), so its one row is there while the maps are empty, as SQL's (sqlM)
    return True


def _never_null(x: exp.Expression, scope: exp.Select) -> bool:
    """Whether ``x`` is a non-NULL constant or a column one of ``scope``'s one-row tables computes as a COUNT."""
    x = unparen(x)
    if isinstance(x, exp.Literal):
        return True
    if type(x) is not exp.Column:
        return False
    for item in _items(scope) or []:
        if x.table and x.table.lower() != item.alias_or_name.lower():
            continue
        for e in one_row_body(item).expressions:
            if type(e) is exp.Alias and e.alias.lower() == x.name.lower():
                return type(unparen(e.this)) is exp.Count
    return False


def _own_column(c: exp.Column, scope: exp.Select) -> bool:
    """Whether ``c`` reads a column of one of ``scope``'s one-row tables (not a column of an enclosing query)."""
    for item in _items(scope) or []:
        if c.table and c.table.lower() != item.alias_or_name.lower():
            continue
        if any(e.alias_or_name.lower() == c.name.lower() for e in one_row_body(item).expressions):
            return True
    return False


def _value(agg: exp.AggFunc, scope: exp.Select) -> exp.Expression | None:
    """What ``agg`` is over the one row, or None when it is left as written."""
    arg = agg.this
    if type(arg) is exp.Distinct:
        arg = arg.expressions[0] if len(arg.expressions) == 1 else None
    if arg is None or any(isinstance(n, (exp.Select, exp.Subquery, exp.AggFunc)) for n in arg.walk()):
        return None
    if any(not _own_column(c, scope) for c in arg.find_all(exp.Column)):  # SQL's aggregate of an outer query
        return None
    if type(agg) is exp.Count:
        return exp.Literal.number(1) if isinstance(arg, exp.Star) or _never_null(arg, scope) else None
    if type(agg) in _SAME and not isinstance(arg, exp.Star):
        return arg if isinstance(unparen(arg), (exp.Literal, exp.Column)) else exp.Paren(this=arg.copy())
    return None


def _rewrite(scope: exp.Select) -> None:
    computed, names = 0, []
    for e in scope.expressions:  # named as the view names an unaliased item (:func:`.liftquery._outputs`' rule)
        x = unparen(e.this if type(e) is exp.Alias else e)
        if type(e) is exp.Alias or type(x) is exp.Column:
            names.append(None)
            continue
        computed += 1
        names.append(f"{type(x).__name__.lower()}_{computed}" if isinstance(x, exp.AggFunc) else f"expr_{computed}")
    for a in _own_aggregates(scope):
        a.replace(_value(a, scope).copy())
    scope.set("expressions", [e if n is None else exp.Alias(this=e.copy(), alias=exp.to_identifier(n))
                              for e, n in zip(scope.expressions, names)])
