"""Aggregates that may be NULL read by HAVING and by arithmetic in a SELECT item.

Why apart from :mod:`.threevalued` (whose rewriter these take as ``rw``): a SUM/AVG/MIN/MAX skipping NULLs is NULL
where it reads no value (over only NULLs, or a FILTER matching none).  The rewriter makes each aggregate skip NULLs;
what stays is where SQL's result is NULL, which the maps do not hold (docs/m3.md "NULLs"):

* **In HAVING** a comparison over such aggregates is TRUE only where each reads a value: ``HAVING SUM(c) > 1`` is
  ``HAVING SUM(c) > 1 AND COUNT(c) > 0`` (the COUNT of what the SUM reads; of its FILTER's rows for a filtered one),
  NOT pushed down to the comparisons first as in WHERE (``NOT (SUM(c) > 1)`` is ``SUM(c) <= 1 AND COUNT(c) > 0``);
  ``SUM(c) IS NULL`` is ``NOT (COUNT(c) > 0)``.  A comparison over a COALESCE, NULLIF or CASE of such an aggregate is
  refused by name, and so is a MIN/MAX of a nullable value in HAVING (skipping NULLs it is a filtered fold,
  which HAVING does not read).
* **Arithmetic over one in a SELECT item** (``SUM(c) * 2 + COUNT(*)``) is NULL where it is: the item keeps the
  hidden COUNT a plain ``SUM(c)`` item keeps (:func:`.nullshown.hidden_count`), one per item, so aggregates of
  one item must read values present under the same condition (``SUM(b) + SUM(c)`` is refused by name: NULL where
  either reads none, which one count does not say).

>>> import sqlglot
>>> from .examples import PlainErrors
>>> from .threevalued import rewrite
>>> from ..ast import Column, RelationDecl
>>> rels = {"R": RelationDecl("R", "STREAM", (Column("a", "INT"), Column("c", "INT"), Column("c__null", "INT")))}
>>> def show(sql): return rewrite(sqlglot.parse_one(sql), rels, PlainErrors()).sql()
>>> show("SELECT a, COUNT(*) FROM R GROUP BY a HAVING NOT (SUM(c) > 1)")
'SELECT a, COUNT(*) FROM R GROUP BY a HAVING ((SUM(CASE WHEN c__null = 0 THEN c END) <= 1 AND COUNT(CASE WHEN c__null = 0 THEN 1 END) > 0))'
>>> show("SELECT a, SUM(c) * 2 AS x FROM R GROUP BY a")
'SELECT a, SUM(CASE WHEN c__null = 0 THEN c END) * 2 AS x, COUNT(CASE WHEN c__null = 0 THEN c END) AS __nonnull_1, COUNT(*) AS __rows__null FROM R GROUP BY a'
"""

from __future__ import annotations

from collections.abc import Callable

from sqlglot import exp

from .nodes import sql_of
from .nullcond import all_of

_NULLABLE_AGGS = (exp.Sum, exp.Avg, exp.Min, exp.Max)  # NULL over only NULLs
_NEGATED = {exp.EQ: exp.NEQ, exp.NEQ: exp.EQ, exp.GT: exp.LTE, exp.GTE: exp.LT, exp.LT: exp.GTE, exp.LTE: exp.GT}


def having_truth(rw, c: exp.Expression, negated: bool = False) -> exp.Expression:
    """A HAVING condition TRUE where SQL's (``NOT`` it, if ``negated``) is, before its aggregates skip NULLs."""
    t = type(c)
    if t is exp.Paren:
        return exp.Paren(this=having_truth(rw, c.this, negated))
    if t is exp.Not:
        return having_truth(rw, c.this, not negated)
    if t in (exp.And, exp.Or):
        join = (exp.Or if t is exp.And else exp.And) if negated else t
        return join(this=having_truth(rw, c.this, negated), expression=having_truth(rw, c.expression, negated))
    aggs = [n for n in c.walk(prune=lambda n: isinstance(n, exp.Select)) if _may_be_null(rw, n)]
    keys = [n for n in c.walk(prune=lambda n: isinstance(n, (exp.Select, exp.AggFunc, exp.Filter))) if rw.nullable(n)]
    if keys and aggs:
        raise rw.refuse(f"{keys[0].sql()} in HAVING beside {sql_of(aggs[0])} (each may be NULL: not built)", c)
    if keys:  # a nullable group key (its indicator a key too): TRUE where SQL's is, as in WHERE
        return rw.truth(c, negated)
    if not aggs:
        return exp.Not(this=c.copy()) if negated else c.copy()
    fold = next((a for a in aggs if isinstance(a, (exp.Min, exp.Max))), None)
    if fold is not None:  # a MIN/MAX skipping NULLs is a filtered fold, which HAVING does not read
        raise rw.refuse(f"in HAVING under {sql_of(fold)} (a filtered MIN/MAX in HAVING is not built)", c)
    branched = next((n for n in c.walk() if type(n) in (exp.Coalesce, exp.Nullif, exp.Case)), None)
    if branched is not None:
        raise rw.refuse(f"in HAVING under {sql_of(branched)} (an aggregate over only NULLs is NULL)", c)
    present = all_of([exp.GT(this=_count(a), expression=exp.Literal.number(0)) for a in aggs])
    if t is exp.Is and type(c.expression) is exp.Null:
        return present if negated else exp.Not(this=exp.Paren(this=present))
    atom = c.copy()
    if negated:
        atom = _NEGATED[t](this=atom.this, expression=atom.expression) if t in _NEGATED else \
            exp.Not(this=exp.Paren(this=atom))
    return exp.Paren(this=exp.And(this=atom, expression=present))


def grouped_key(rw, col: exp.Expression, sel: exp.Select) -> bool:
    """Whether ``col``, a nullable column in ``sel``'s HAVING outside aggregates, is one of its GROUP BY columns
    (``GROUP BY r.b HAVING r.b IS NULL``; by its own name or qualified): a key of the view with its indicator, which
    HAVING reads as WHERE reads a column (:func:`having_truth`).

    >>> import sqlglot
    >>> class Rw:
    ...     def local(self, c): return True
    ...     def holder(self, c): return "r"
    >>> q = sqlglot.parse_one("SELECT r.b, COUNT(*) FROM R r GROUP BY r.b HAVING b IS NULL AND r.a > 1")
    >>> [grouped_key(Rw(), c, q) for c in q.args["having"].find_all(exp.Column)]
    [True, False]
    """
    if col.find_ancestor(exp.Having) is None or col.find_ancestor(exp.AggFunc, exp.Filter) is not None:
        return False
    group = sel.args.get("group")
    table = lambda c: c.table.lower() or (rw.holder(c) if rw.local(c) else "")  # noqa: E731
    return group is not None and any(type(g) is exp.Column and g.name.lower() == col.name.lower()
                                     and table(g) == table(col) for g in group.expressions)


def unaliased(rw, c: exp.Expression, sel: exp.Select) -> exp.Expression:
    """``c`` (HAVING's condition, changed in place) with each column naming a SELECT item's alias replaced by the
    item's expression, where that holds an aggregate that may be NULL: ``SELECT SUM(c) AS s ... HAVING s <= 1``
    is ``HAVING SUM(c) <= 1``, which :func:`having_truth` sees (a column of the FROM items keeps its name)."""
    items = {e.alias.lower(): e.this for e in sel.expressions if type(e) is exp.Alias}
    for col in [n for n in c.walk(prune=lambda n: isinstance(n, exp.Select)) if type(n) is exp.Column]:
        item = items.get(col.name.lower()) if not col.table and not rw.local(col) else None
        if item is not None and any(_may_be_null(rw, n) for n in item.walk()):
            if col is c:
                return item.copy()
            col.replace(item.copy())
    return c


def _may_be_null(rw, n: exp.Expression) -> bool:
    """Whether ``n`` is a SUM/AVG/MIN/MAX that may read no value: filtered, or of what may be NULL."""
    if not isinstance(n, _NULLABLE_AGGS) or n.this is None or type(n.this) in (exp.Star, exp.Distinct):
        return False
    return type(n.parent) is exp.Filter or (rw.reads(n.this) and rw.present(n.this) is not None)


def _count(agg: exp.Expression) -> exp.Expression:
    """The COUNT of the values ``agg`` reads (under its FILTER, if it has one)."""
    count = exp.Count(this=agg.this.copy())
    if type(agg.parent) is exp.Filter:
        return exp.Filter(this=count, expression=agg.parent.expression.copy())
    return count


def one_count_per_item(counts: list[tuple[int, exp.Expression]],
                       refuse: Callable[[str, exp.Expression], Exception]) -> list[tuple[int, exp.Expression]]:
    """The hidden counts of a SELECT's items, one per item: aggregates of one item must be NULL together."""
    out: dict[int, exp.Expression] = {}
    for i, count in counts:
        if i in out and _where(out[i]) != _where(count):
            raise refuse(f"under an expression over aggregates NULL where different values are ({sql_of(out[i])}, "
                         f"{sql_of(count)}: one count per column says where it is NULL)", count)
        out.setdefault(i, count)
    return list(out.items())


def _where(count: exp.Expression) -> str:
    """Where a hidden count counts, as SQL text: ``COUNT(CASE WHEN p THEN v END)`` and ``COUNT(v) FILTER (WHERE
    p)`` (a SUM's and a MIN's) both count where ``p``."""
    if type(count) is exp.Filter:
        return sql_of(count.expression.this)
    arg = count.this
    if type(arg) is exp.Case and len(arg.args["ifs"]) == 1 and arg.args.get("default") is None:
        return sql_of(arg.args["ifs"][0].this)
    return sql_of(count)
