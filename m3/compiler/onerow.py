"""A derived table with aggregates and no GROUP BY is one row: its columns are scalar subqueries.

Why: ``(SELECT SUM(b) AS x, COUNT(*) AS n FROM S WHERE ...) t`` has exactly
one row, whatever ``S`` holds (SQL's SUM of no rows is NULL, COUNT's 0), so
joining it changes no row of the query that reads it, and ``t.x`` is the
value ``(SELECT SUM(b) FROM S WHERE ...)``.  That is DBToaster's
nested-aggregate normal form: an aggregate read by value is a scalar
subquery, keyed by what it is correlated on.  So the rule is a translation,
not a construct: the derived table leaves FROM, each read of its columns
becomes its scalar subquery (correlated where its WHERE reads outer
columns), and the rules for scalar subqueries compile the result (in WHERE:
:mod:`.nested`; in the SELECT list: :mod:`.selectsub`; a query left
without FROM: :mod:`.fromless`).  ``EXISTS (SELECT ... WHERE c)`` left
without FROM is ``c`` (its one row exists where ``c`` holds).

Left as written (for the front end to compile or refuse by name): a derived
table that is not aggregates only (a column outside an aggregate, GROUP BY,
HAVING, DISTINCT, LIMIT), one with a column list alias or in an outer join,
an outer query that aggregates over it alone (its aggregates would be over
one row), and ``*`` over it beside other FROM items.

>>> import sqlglot
>>> sel = sqlglot.parse_one('''SELECT R.a FROM R, (SELECT SUM(S.b) AS x FROM S WHERE S.d > 0) t WHERE R.c > t.x''')
>>> one_row_tables(sel).sql()
'SELECT R.a FROM R WHERE R.c > (SELECT SUM(S.b) FROM S WHERE S.d > 0)'
>>> one_row_tables(sqlglot.parse_one("SELECT * FROM (SELECT COUNT(*) FROM R) n")).sql()
'SELECT (SELECT COUNT(*) FROM R) AS count_1'
>>> one_row_tables(sqlglot.parse_one('''SELECT a FROM R WHERE EXISTS (SELECT 1 FROM (SELECT SUM(S.b) AS x
...     FROM S WHERE S.d = R.b) t WHERE R.a < t.x)''')).sql()
'SELECT a FROM R WHERE R.a < (SELECT SUM(S.b) FROM S WHERE S.d = R.b)'
"""

from __future__ import annotations

from sqlglot import exp

from .nodes import unread_args
from .resolve import unparen

_BODY = frozenset({"expressions", "from", "from_", "joins", "where"})


def one_row_tables(sel: exp.Expression) -> exp.Expression:
    """``sel`` (a copy when anything changes) with its one-row derived tables read as scalar subqueries, in
    every SELECT of the tree (innermost first).  Nothing is refused here: what is left as written is refused
    by the passes that read it."""
    if not any(_one_row(s) is not None for s in sel.find_all(exp.Subquery)) or next(unread_args(sel), None):
        return sel  # nothing to rewrite, or a field no pass reads: left for the front end to refuse whole
    sel = sel.copy()
    for scope in reversed(list(sel.find_all(exp.Select))):
        for item in [i for i in _items(scope) if _one_row(i) is not None]:
            _inline(scope, item)
    for e in list(sel.find_all(exp.Exists)):
        body = e.this
        if type(body) is exp.Select and not _items(body) and _plain(body) and e.find_ancestor(exp.Not) is None:
            where = body.args.get("where")
            e.replace(where.this.copy() if where is not None else exp.true())
    return sel


def one_row_body(item: exp.Expression) -> exp.Select | None:
    """The body of ``item`` when it is a derived table of aggregates without GROUP BY (one row), else None
    (read by :mod:`.singleton`, whose aggregates range over such rows)."""
    return _one_row(item)


def _items(s: exp.Select) -> list[exp.Expression]:
    from_ = s.args.get("from_") or s.args.get("from")
    return ([from_.this] if isinstance(from_, exp.From) else []) + \
        [j.this for j in s.args.get("joins") or [] if isinstance(j, exp.Join)]


def _plain(s: exp.Select) -> bool:
    """A SELECT of no aggregates, groups or row limits (its rows are its FROM's: here, one)."""
    return all(v in (None, False, [], "") for k, v in s.args.items() if k not in _BODY) and not any(
        isinstance(x, exp.AggFunc) for e in s.expressions for x in e.walk())


def _one_row(item: exp.Expression) -> exp.Select | None:
    """The body of ``item`` when it is a derived table of aggregates without GROUP BY (one row), else None."""
    if type(item) is not exp.Subquery or type(item.this) is not exp.Select:
        return None
    if not isinstance(item.parent, (exp.From, exp.Join)) or any(
            v not in (None, False, [], "") for k, v in item.args.items() if k not in ("this", "alias")):
        return None
    alias = item.args.get("alias")
    if alias is not None and (type(alias) is not exp.TableAlias or alias.args.get("columns")):
        return None
    join = item.parent
    if type(join) is exp.Join and (join.args.get("side") or join.args.get("using") or
                                   str(join.args.get("kind") or "").upper() not in ("", "INNER", "CROSS")):
        return None
    body = item.this
    if any(v not in (None, False, [], "") for k, v in body.args.items() if k not in _BODY) or not _items(body):
        return None
    for e in body.expressions:
        x = unparen(e.this if type(e) is exp.Alias else e)
        if isinstance(x, exp.Star) or not _aggregates_only(x, body):
            return None
    return body


def _aggregates_only(x: exp.Expression, body: exp.Select) -> bool:
    """Whether every column ``x`` reads of ``body``'s own FROM is inside an aggregate, and it has one."""
    aggs = [a for a in x.walk() if isinstance(a, exp.AggFunc)]
    if not aggs or any(isinstance(n, (exp.Select, exp.Subquery)) for n in x.walk()):
        return False
    return all(any(c.find_ancestor(type(a)) is a for a in aggs) for c in x.find_all(exp.Column))


def _outputs(body: exp.Select) -> list[tuple[str, exp.Expression]]:
    """Each column of the one row as (name, value), unaliased ones named as a query over a grouped derived
    table names them (``count_1``, ``expr_2``: :func:`.liftquery._outputs`' rule)."""
    out, computed = [], 0
    for e in body.expressions:
        x = unparen(e.this if type(e) is exp.Alias else e)
        name = e.alias if type(e) is exp.Alias else ""
        if not name:
            computed += 1
            name = f"{type(x).__name__.lower()}_{computed}" if isinstance(x, exp.AggFunc) else f"expr_{computed}"
        out.append((name, x))
    return out


def _inline(scope: exp.Select, item: exp.Subquery) -> None:
    body = item.this
    alias = item.alias_or_name.lower() if item.args.get("alias") is not None else ""
    outs = _outputs(body)
    names = {n.lower(): x for n, x in outs}
    others = [i for i in _items(scope) if i is not item]
    if any(j.args.get("side") or j.args.get("using") for j in scope.args.get("joins") or []):
        return  # an outer join beside it: left as written
    stars = [e for e in scope.expressions if type(e) is exp.Star or type(e) is exp.Column and type(e.this) is exp.Star]
    if stars and (others or len(stars) > 1):
        return  # * beside other FROM items: left for the front end (which names what it refuses)
    if not others and any(isinstance(x, exp.AggFunc) and x.find_ancestor(exp.Select) is scope
                          for e in scope.expressions for x in e.walk()):
        return  # aggregates over the one row alone: left as written
    reads = []
    for c in scope.find_all(exp.Column):
        if isinstance(c.this, exp.Star) or c.name.lower() not in names:
            continue
        own = c.find_ancestor(exp.Select) is scope
        if c.table.lower() == alias and alias or not c.table and own and not others:
            reads.append(c)
        elif not c.table and own:
            return  # an unqualified name another FROM item may hold: left as written (ambiguous or not ours)
    where_sub = body.args.get("where")

    def scalar(x: exp.Expression) -> exp.Subquery:
        s = exp.Select(expressions=[x.copy()])
        s.set("from_" if "from_" in body.args else "from", (body.args.get("from_") or body.args.get("from")).copy())
        if body.args.get("joins"):
            s.set("joins", [j.copy() for j in body.args["joins"]])
        if where_sub is not None:
            s.set("where", where_sub.copy())
        return exp.Subquery(this=s)

    for c in reads:
        c.replace(scalar(names[c.name.lower()]))
    if stars:
        scope.set("expressions", [exp.Alias(this=scalar(x), alias=exp.to_identifier(n)) for n, x in outs])
    holder = item.parent
    if type(holder) is exp.Join:
        on = holder.args.get("on")
        holder.pop()
        if on is not None:
            _and_where(scope, on)
        return
    joins = list(scope.args.get("joins") or [])
    key = "from_" if "from_" in scope.args else "from"
    if not joins:
        scope.set(key, None)
        return
    first = joins.pop(0)
    scope.set(key, exp.From(this=first.this))
    scope.set("joins", joins)
    if first.args.get("on") is not None:
        _and_where(scope, first.args["on"])


def _and_where(scope: exp.Select, cond: exp.Expression) -> None:
    old = scope.args.get("where")
    scope.set("where", exp.Where(this=cond.copy() if old is None else exp.and_(old.this, cond.copy())))
