"""Nullable columns read inside a subquery, and SQL's three-valued ``IN``/``NOT IN`` of a subquery.

Why apart from :mod:`.threevalued` (whose rewriter these take as ``parent``): a subquery is rewritten in its own
scope, its FROM items first and the enclosing query's for a correlation (:meth:`.threevalued._Rewriter.child`), and
what its rows mean depends on where it stands; the rules below keep every shape exact or refuse it by name
(docs/m3.md "NULLs"):

* **Its WHERE and ON** keep a row where they are TRUE, as the outer query's.  A correlation by equality with a
  nullable column never holds on a NULL (SQL: NULL never equals); where both sides are nullable columns it is
  ``s.b = r.b AND s.b__null = r.b__null AND s.b__null = 0``: a second correlation by equality (indicators) and a
  condition of the subquery alone, so no outer-only condition is left inside.
* **EXISTS** reads rows, not values: items reading nullable columns become ``1`` (over aggregates: refused).
* **A scalar subquery** of aggregates over nullable arguments, all present under the same condition ``P``
  (``(SELECT SUM(s.c) FROM S s WHERE w)``), is ``(SELECT SUM(s.c) FROM S s WHERE w AND P)``: an aggregate skipping
  NULLs is the aggregate of the rows where its argument is present, and over only NULLs it reads no row: NULL, as
  SQL's SUM/AVG/MIN/MAX over only NULLs (a COUNT over none is 0 both ways).  Aggregates present under different
  conditions (``SUM(s.c) / COUNT(*)``), a FILTER or DISTINCT over one, and a column selected without aggregate
  are refused by name.
* **``x IN (SELECT y ...)``** is TRUE where ``x`` is present and a row has ``y`` present and equal: ``y``'s
  presence joins the subquery's WHERE.  **``x NOT IN (SELECT y ...)``** is TRUE where no row has ``y`` equal to
  ``x`` and none has ``y`` NULL (``1 NOT IN (2, NULL)`` is NULL): ``NOT EXISTS (... WHERE w AND y IS NULL) AND
  x NOT IN (SELECT y ... WHERE w AND y IS NOT NULL)``.  A nullable ``x`` NOT IN a subquery is refused by name
  (``NULL NOT IN`` no rows is TRUE, of some rows NULL: a condition on the subquery's emptiness beside it).
* GROUP BY or HAVING reading a nullable column inside a subquery, an outer join there, a LIMIT or OFFSET over
  one (a NULL skipped would change the rows kept), and a scalar subquery with HAVING whose aggregates skip
  NULLs (its rows would change) are refused by name.

>>> import sqlglot
>>> from .examples import PlainErrors
>>> from .threevalued import rewrite
>>> from ..ast import Column, RelationDecl
>>> cols = lambda *names: tuple(Column(n, "INT") for n in names)
>>> rels = {"R": RelationDecl("R", "STREAM", cols("a", "b", "b__null")),
...         "S": RelationDecl("S", "STREAM", cols("b", "b__null", "d"))}
>>> def show(sql): return rewrite(sqlglot.parse_one(sql), rels, PlainErrors()).sql()
>>> show("SELECT a FROM R r WHERE EXISTS (SELECT * FROM S s WHERE s.b = r.b)")
'SELECT a FROM R AS r WHERE EXISTS(SELECT * FROM S AS s WHERE (s.b = r.b AND s.b__null = r.b__null AND s.b__null = 0))'
>>> show("SELECT a FROM R r WHERE r.a NOT IN (SELECT s.b FROM S s WHERE s.d > 1)")
'SELECT a FROM R AS r WHERE (NOT r.a IN (SELECT s.b FROM S AS s WHERE s.d > 1 AND s.b__null = 0) AND NOT EXISTS(SELECT 1 FROM S AS s WHERE s.d > 1 AND NOT s.b__null = 0))'
>>> show("SELECT a FROM R r WHERE r.a < (SELECT AVG(s.b) FROM S s WHERE s.d = r.a)")
'SELECT a FROM R AS r WHERE r.a < (SELECT AVG(s.b) FROM S AS s WHERE s.d = r.a AND s.b__null = 0)'
"""

from __future__ import annotations

from sqlglot import exp

from ..nullable import SUFFIX
from .clauses import conjuncts
from .nodes import sql_of
from .nullcond import all_of, never

_AGGS = (exp.Sum, exp.Avg, exp.Min, exp.Max, exp.Count)


def subqueries(sel: exp.Select) -> list[exp.Select]:
    """The SELECTs nested directly in ``sel`` (its subqueries, not theirs)."""
    return [n for n in sel.walk() if type(n) is exp.Select and n is not sel and n.parent_select is sel]


def rewrite_subquery(parent, sub: exp.Select) -> None:
    """``sub`` (a subquery of ``parent``'s SELECT) rewritten in place in its own scope (module doc)."""
    child = parent.child(sub)
    for inner in subqueries(sub):
        rewrite_subquery(child, inner)
    for j in sub.args.get("joins") or []:
        if j.side or j.kind not in ("", "INNER", "CROSS", None):
            if child.reads(j) or child.reads(sub):
                raise child.refuse(f"in a subquery with an outer join ({sql_of(j)})", j)
    if (sub.args.get("limit") or sub.args.get("offset")) and any(child.reads(x) for x in _own_parts(sub)):
        raise child.refuse(f"in a subquery with LIMIT or OFFSET ({sql_of(sub)}: a NULL skipped changes the rows "
                           "it keeps)", sub)
    for part in ("group", "having"):
        node = sub.args.get(part)
        if node is not None and child.reads(node):
            raise child.refuse(f"in a subquery's {part.upper().replace('GROUP', 'GROUP BY')} ({sql_of(node)})", node)
    where = sub.args.get("where")
    if where is not None and child.decides(where):
        where.set("this", child.truth(where.this))
    for j in sub.args.get("joins") or []:
        on = j.args.get("on")
        if on is not None and child.decides(on):
            j.set("on", child.truth(on))
    if type(sub.parent) is not exp.Exists and _in_query(sub) is None:
        refuse_outer_presence(parent, sub.parent if type(sub.parent) is exp.Subquery else sub, sub,
                              "the subquery reads no row: COUNT 0, SUM NULL")
    if not any(child.reads(e) for e in sub.expressions):
        return
    aggs = [n for e in sub.expressions for n in child_nodes(e) if isinstance(n, exp.AggFunc)]
    if type(sub.parent) is exp.Exists:
        if aggs:
            raise child.refuse(f"under an aggregate of an EXISTS subquery ({sql_of(sub)})", sub)
        sub.set("expressions", [exp.Literal.number(1) if child.reads(e) else e for e in sub.expressions])
    elif _in_query(sub) is not None:
        if aggs or len(sub.expressions) != 1 or not _read_by_truth(_in_query(sub)):
            raise child.refuse(f"selected by an IN subquery other than as its one column in a condition "
                               f"({sql_of(sub)})", sub)
    else:
        _scalar(child, sub, aggs)


def _own_parts(sub: exp.Select) -> list[exp.Expression]:
    """The clauses of ``sub`` a nullable column may be read in."""
    return [*sub.expressions, *(sub.args.get(k) for k in ("where", "group", "having") if sub.args.get(k))]


def child_nodes(e: exp.Expression):
    """The nodes of ``e`` outside its own subqueries."""
    return e.walk(prune=lambda n: isinstance(n, exp.Select) and n is not e)


def _scalar(child, sub: exp.Select, aggs: list[exp.Expression]) -> None:
    """A scalar subquery's aggregates over nullable arguments: the rows where their argument is present."""
    bad = [a for a in aggs if type(a) not in _AGGS or type(a.parent) is exp.Filter or type(a.this) is exp.Distinct]
    if not aggs or bad or any(child.reads(n) for e in sub.expressions for n in child_nodes(e)
                              if type(n) is exp.Column and n.find_ancestor(exp.AggFunc) is None):
        raise child.refuse(f"in a scalar subquery other than under its aggregates, each plain ({sql_of(sub)})", sub)
    present = {}
    for a in aggs:
        p = None if a.this is None or type(a.this) is exp.Star else child.present(a.this)
        present[sql_of(p) if p is not None and p is not False else p] = p
    if False in present or len(present) > 1:
        raise child.refuse(f"in a scalar subquery whose aggregates read values present under different conditions "
                           f"({sql_of(sub)}: SQL's NULL of each is its own)", sub)
    for a in aggs:
        if a.this is not None and type(a.this) is not exp.Star:
            a.set("this", child.value(a.this))
    (p,) = present.values()
    if p is not None and sub.args.get("having") is not None:
        raise child.refuse(f"under an aggregate of a scalar subquery with HAVING ({sql_of(sub)}: its rows would "
                           "change)", sub)
    if p is not None:
        sub.where(p, copy=False)


def refuse_outer_presence(parent, c: exp.Expression, sub: exp.Expression | None = None,
                          holds: str = "NOT EXISTS holds") -> None:
    """A subquery left with a condition on an outer column's indicator alone (``s.d = r.b`` with only ``r.b``
    nullable: ``r.b__null = 0`` inside) where its rows are not only tested for existence: under ``NOT EXISTS``
    (``c``, its subquery ``sub``), ``NOT IN`` and a scalar subquery (``(SELECT COUNT(*) ...)`` is 0 where
    ``r.b`` is NULL) that condition is an OR or a value outside it: refused by name (``holds``: what SQL gives
    where the outer column is NULL)."""
    sub = c.this if sub is None else sub
    where = sub.args.get("where") if type(sub) is exp.Select else None
    child = parent.child(sub) if where is not None else None
    for part in conjuncts(where.this) if where is not None else []:
        cols = list(part.find_all(exp.Column))
        flags = [x for x in cols if x.name.lower().endswith(SUFFIX)]
        if cols and not any(child.local(x) for x in cols) and flags:
            kind = {exp.Exists: "NOT EXISTS", exp.In: "NOT IN"}.get(type(c), "a scalar subquery")
            outer = exp.column(flags[0].name[:-len(SUFFIX)], flags[0].table or None).sql()
            raise parent.refuse(f"{outer} compared in {kind} with a column that is not nullable (where {outer} is "
                                f"NULL, {holds})", c)


def in_subquery(parent, c: exp.In, negated: bool) -> exp.Expression:
    """``x IN (SELECT y ...)`` (``NOT`` it if ``negated``) TRUE where SQL's is (module doc)."""
    sub = c.args["query"].this
    x = c.this
    if type(sub) is not exp.Select or len(sub.expressions) != 1:
        if parent.reads(x):
            raise parent.refuse(f"IN a subquery that is not one SELECT of one column ({sql_of(c)})", c)
        return exp.Not(this=c.copy()) if negated else c.copy()
    child = parent.child(sub)
    item = sub.expressions[0]
    y = item.this if type(item) is exp.Alias else item
    px, py = parent.present(x), child.present(y)
    if px is False or py is False:
        if negated:
            raise parent.refuse(f"NULL NOT IN a subquery ({sql_of(c)})", c)
        return never()
    if negated:
        refuse_outer_presence(parent, c, sub, "NOT IN holds")
    if negated and px is not None:
        raise parent.refuse(f"{sql_of(x)} NOT IN a subquery ({sql_of(c)}: NULL NOT IN no rows is TRUE, NOT IN "
                            "some rows NULL)", c)
    out = c.copy()
    out.set("this", parent.value(x))
    kept = out.args["query"].this
    if py is not None:
        kept.expressions[0].replace(_with_value(item, child.value(y)))
        kept.where(py.copy(), copy=False)
    if not negated:
        return all_of([out, px])
    if py is None:
        return exp.Not(this=out)
    if any(sub.args.get(k) for k in ("group", "having", "limit", "offset")):
        raise parent.refuse(f"NOT IN a grouped or limited subquery selecting one ({sql_of(c)})", c)
    nulls = sub.copy()
    nulls.set("expressions", [exp.Literal.number(1)])
    nulls.set("distinct", None)
    nulls.where(exp.Not(this=py.copy()), copy=False)
    return exp.Paren(this=exp.And(this=exp.Not(this=out), expression=exp.Not(this=exp.Exists(this=nulls))))


def _with_value(item: exp.Expression, value: exp.Expression) -> exp.Expression:
    return exp.alias_(value, item.alias) if type(item) is exp.Alias else value


def _in_query(sub: exp.Select) -> exp.In | None:
    """The IN whose subquery ``sub`` is, if it is one."""
    holder = sub.parent
    if type(holder) is exp.Subquery and type(holder.parent) is exp.In and holder.arg_key == "query":
        return holder.parent
    return None


def _read_by_truth(node: exp.Expression) -> bool:
    """Whether ``node`` stands in a WHERE or ON through AND, OR, NOT and parentheses only (where
    :meth:`.threevalued._Rewriter.truth` reaches it)."""
    below, up = node, node.parent
    while type(up) in (exp.And, exp.Or, exp.Not, exp.Paren):
        below, up = up, up.parent
    return type(up) is exp.Where or (type(up) is exp.Join and below.arg_key == "on")
