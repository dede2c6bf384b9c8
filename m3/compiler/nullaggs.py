"""Aggregates over nullable values skip NULLs, as SQL's do (docs/m3.md "NULLs"; the rewrite is :mod:`.threevalued`'s).

Why a module of its own: how an aggregate reads a nullable argument is one rule, apart from conditions and
values.  ``SUM(e)``, ``AVG(e)`` and ``COUNT(e)`` aggregate ``CASE WHEN present(e) THEN e END`` (a CASE's NULL
is what they already skip, :mod:`.nulls`); ``MIN(e)``/``MAX(e)`` read ``e FILTER (WHERE present(e))`` (a fold
reads the rows FILTER keeps, :mod:`.aggfilter`); ``COUNT(DISTINCT c)`` the distinct values of the rows where
``c`` is present.  ``rw`` is the SELECT's rewriter (:class:`.threevalued._Rewriter`): which columns are nullable,
and the ``present``/``value``/``truth`` of an expression.
"""

from __future__ import annotations

from sqlglot import exp

from .nodes import sql_of
from .nullshown import item_of

AGGS = (exp.Sum, exp.Avg, exp.Min, exp.Max, exp.Count)
NULLABLE_AGGS = (exp.Sum, exp.Avg, exp.Min, exp.Max)  # NULL over only NULLs


def skip_nulls(rw, agg: exp.Expression, beside_nested: bool = False) -> exp.Expression:
    """Rewrite ``agg`` to skip NULLs; the aggregate node after (a MIN/MAX is wrapped in a FILTER).

    ``beside_nested``: the query's MIN/MAX may be a filtered fold beside its nested condition, because the view
    reading it takes its rows from the query's COUNT(*) and the fold's presence from its COUNT (an outer join's
    part, :mod:`.outernulls`).  Elsewhere it is refused: a view of the query alone takes a group's row from its
    fold, so a group whose values are all NULL would have no row (a DuckDB check found it missing)."""
    arg = agg.this
    filt = agg.parent if type(agg.parent) is exp.Filter else None
    if filt is not None and rw.reads(filt.expression):
        filt.expression.set("this", rw.truth(filt.expression.this))
    if arg is None or type(arg) is exp.Star or not rw.reads(arg):
        return agg
    counted = next((n for n in arg.walk() if type(n) is exp.Column and rw.count_of(n) is not None), None)
    if counted is not None:  # its presence is a count, which a view over a derived table cannot test per row
        raise rw.refuse(f"{counted.sql()} under {sql_of(agg)}: an aggregate over a derived table's SUM/AVG/MIN/MAX "
                        "that may be NULL (read it in WHERE, or COALESCE it inside the derived table)", agg)
    if type(arg) is exp.Distinct:  # COUNT(DISTINCT c): the distinct values of the rows where c is present
        one = arg.expressions[0] if type(agg) is exp.Count and len(arg.expressions) == 1 and \
            type(arg.expressions[0]) is exp.Column else None
        present = rw.present(one) if one is not None else False
        if present is False:
            raise rw.refuse(f"under DISTINCT other than COUNT(DISTINCT of one column) ({sql_of(agg)})", agg)
        one.replace(rw.value(one))
        return agg if present is None else filtered(agg, filt, present)
    outer = filt if filt is not None else agg
    top = outer.parent.parent if type(outer.parent) is exp.Alias else outer.parent
    if isinstance(agg, NULLABLE_AGGS) and type(top) is not exp.Select and (isinstance(agg, (exp.Min, exp.Max)) or (
            item_of(outer, agg.parent_select) is None and agg.find_ancestor(exp.Having) is None)):
        raise rw.refuse(f"under an expression over {sql_of(agg)} other than arithmetic over a SUM/AVG or HAVING's "
                        "(NULL over only NULLs, which a view expression does not carry)", agg)
    present = rw.present(arg)
    value = exp.Literal.number(1) if type(agg) is exp.Count else rw.value(arg)
    if present is None:
        agg.set("this", value)
    elif present is False:
        agg.set("this", exp.Null())
    elif type(agg) is exp.Count and filt is not None:  # COUNT(c) FILTER (WHERE p): the rows where p and c present
        agg.set("this", value)  # (a filtered COUNT counts its FILTER's rows, whatever its argument: :mod:`.aggfilter`)
        agg = filtered(agg, filt, present)
    elif isinstance(agg, (exp.Min, exp.Max)):  # a fold reads the rows FILTER keeps (:mod:`.aggfilter`)
        own = agg.parent_select
        if own is not None and type(own.parent) is exp.Subquery and type(own.parent.parent) in (exp.From, exp.Join):
            raise rw.refuse(f"under {sql_of(agg)} in a derived table (the enclosing query does not read a filtered "
                            "fold's column: COALESCE the argument inside the derived table)", agg)
        if not beside_nested and any(isinstance(n, exp.Select) for n in agg.root().walk() if n is not agg.root()):
            raise rw.refuse(f"under {sql_of(agg)} in a query with a subquery (a filtered fold beside "
                            "nested aggregates is not built)", agg)
        agg.set("this", value)
        agg = filtered(agg, filt, present)
    else:
        agg.set("this", exp.Case(ifs=[exp.If(this=present, true=value)]))
    return agg


def filtered(agg: exp.Expression, filt: exp.Filter | None, present: exp.Expression) -> exp.Expression:
    """``agg`` reading only the rows where ``present`` holds: its FILTER's condition and ``present``."""
    if filt is not None:
        filt.expression.set("this", exp.And(this=exp.Paren(this=filt.expression.this), expression=present))
        return agg
    wrapped = exp.Filter(this=agg.copy(), expression=exp.Where(this=present))
    agg.replace(wrapped)
    return wrapped.this
