"""Expressions over aggregates: SELECT items such as ``SUM(a) / COUNT(*)`` and HAVING conditions.

DBToaster maintains each aggregate of a query as its own map; an expression
over aggregates is computed from those maps when a view row is read.  So the
front end translates these expressions into *view expressions* that name
aggregates rather than columns of a row:

* ``("agg", kind, arg)``: an aggregate; kind ``SUM``, ``COUNT``, ``AVG``
  with an arithmetic argument (:mod:`.resolve`), ``MIN``, ``MAX`` or
  ``COUNT DISTINCT``, ``SUM DISTINCT``, ``AVG DISTINCT`` of a column;
* ``("col", (alias, column))``: a GROUP BY column (its value in the row), or
  ``("col", Computed(...))``: a computed group key (``HAVING EXTRACT(YEAR FROM
  d) > 1994`` grouped by that year);
* a number; ``(op, a, b)`` with op in ``+ - * /``; ``("neg", a)``.

A HAVING condition is a predicate of :mod:`.predicates` whose comparisons
hold view expressions on both sides (``(">", ("agg", "SUM", ...), 10)``);
NOT is pushed into them (no NULLs: two-valued logic), BETWEEN and IN become
comparisons.

>>> import sqlglot
>>> from .examples import resolver_over, stream
>>> res = resolver_over(stream("R", a="INT", b="INT"))
>>> view_expr(res, sqlglot.parse_one("SUM(b) / COUNT(*) * 2 - a"))
('-', ('*', ('/', ('agg', 'SUM', ('R', 'b')), ('agg', 'COUNT', 1)), 2), ('col', ('R', 'a')))
>>> having(res, sqlglot.parse_one("total > 2"), {"total": ("agg", "SUM", ("R", "b"))})
('>', ('agg', 'SUM', ('R', 'b')), 2)
>>> having(res, sqlglot.parse_one("NOT (MAX(b) > 3 OR COUNT(DISTINCT b) IN (1, 2))"))
('and', ('<=', ('agg', 'MAX', ('R', 'b')), 3), ('and', ('<>', ('agg', 'COUNT DISTINCT', ('R', 'b')), 1), ('<>', ('agg', 'COUNT DISTINCT', ('R', 'b')), 2)))
>>> has_aggregate(("+", ("col", ("R", "a")), 1)), columns_of(("+", ("col", ("R", "a")), ("agg", "SUM", ("R", "b"))))
(False, [('R', 'a')])
"""

from __future__ import annotations

import datetime
import functools

from sqlglot import exp

from .aggfilter import Filtered, filtered_aggregate, is_filtered_aggregate, rows_read
from .aggregates import aggregate
from .casecmp import expand, expandable
from .constants import NotConstant, fold, is_constant
from .nodes import sql_of
from .predicates import FALSE, TRUE, disj, negate
from .resolve import Resolver, unparen

_ARITH = {exp.Add: "+", exp.Sub: "-", exp.Mul: "*", exp.Div: "/"}
_CMP = {exp.EQ: "=", exp.NEQ: "<>", exp.LT: "<", exp.LTE: "<=", exp.GT: ">", exp.GTE: ">="}


def view_expr(res: Resolver, e: exp.Expression, aliases: dict | None = None):
    """A SELECT item or HAVING operand as a view expression (module doc); ``aliases``: SELECT items by their
    lower-cased names, which HAVING may name where no FROM column has the name (``HAVING total > 1``)."""
    e = unparen(e)
    kind = type(e)
    if isinstance(e, exp.AggFunc):
        return ("agg",) + aggregate(res, e)
    if is_filtered_aggregate(e):  # AGG(...) FILTER (WHERE c) (:mod:`.aggfilter`)
        return ("agg",) + filtered_aggregate(res, e)
    if kind is exp.Column:
        if aliases and not e.table and not res.has_column(e) and e.name.lower() in aliases:
            return aliases[e.name.lower()]
        return ("col", res.column(e))
    if kind is not exp.Neg and _ARITH.get(kind) is None and is_constant(e):
        try:
            v = fold(e)
        except NotConstant as nc:
            raise res.ctx.error(nc.message, nc.node) from None
        if isinstance(v, bool) or v is None:
            raise res.ctx.error(f"unsupported constant {sql_of(e)} in an expression over aggregates", e)
        return v
    if kind is exp.Neg:
        inner = _number(res, view_expr(res, e.this, aliases), e.this)
        return -inner if isinstance(inner, (int, float)) else ("neg", inner)
    op = _ARITH.get(kind)
    if op is not None:
        a = _number(res, view_expr(res, e.this, aliases), e.this)
        b = _number(res, view_expr(res, e.expression, aliases), e.expression)
        if isinstance(a, (int, float)) and isinstance(b, (int, float)) and op != "/":
            return a + b if op == "+" else a - b if op == "-" else a * b
        return (op, a, b)
    if kind in (exp.Greatest, exp.Least):  # GREATEST(1, SUM(b)), DBToaster's LISTMAX: pairwise, computed when read
        args = [_number(res, view_expr(res, a, aliases), a) for a in [e.this, *e.expressions]]
        return functools.reduce(lambda a, b: (kind.__name__.upper(), a, b), args)
    computed = res.computed(e)
    if computed is not None:  # EXTRACT, SUBSTRING of a column: read as a group column (it must be a group key)
        return ("col", computed)
    raise res.ctx.error(_unsupported(e), e)


def _unsupported(e: exp.Expression) -> str:
    """Why ``e`` cannot be computed where it stands: over aggregates, or in a view without aggregates, where the
    message would otherwise send the user looking for an aggregate that is not there (issue 33/34)."""
    kind = e.key.upper() if type(e) is not exp.Anonymous else str(e.this).upper()
    sel = e.find_ancestor(exp.Select)
    grouped = sel is not None and (sel.args.get("group") is not None or sel.find(exp.AggFunc) is not None)
    if grouped:
        return (f"unsupported expression {kind} ({sql_of(e)}) over aggregates "
                "(aggregates, group columns and numbers with + - * /, GREATEST and LEAST)")
    return (f"unsupported expression {kind} ({sql_of(e)}) in a view without aggregates: its SELECT items are "
            "columns, functions of one column (EXTRACT, SUBSTRING, MOD by a constant, LOWER, SPLIT_INDEX, "
            "DATE_FORMAT, ..., a CASE of one column) and + - * over them")


def value_kind(res: Resolver, x) -> str:
    """``NUMBER``, ``STRING`` or ``DATE``: what a view expression holds (MIN/MAX of a DATE column is a DATE)."""
    if isinstance(x, tuple) and x[0] == "col":
        t = res.col_type(x[1])
    elif isinstance(x, tuple) and x[0] == "agg" and x[1] in ("MIN", "MAX"):  # of a column, or filtered: its column
        t = res.col_type(x[2].ref if isinstance(x[2], Filtered) else x[2])
    elif isinstance(x, str):
        t = "STRING"
    elif isinstance(x, datetime.date):
        t = "DATE"
    else:
        t = "NUMBER"
    return "NUMBER" if t in ("INT", "FLOAT") else t


def _number(res: Resolver, x, node: exp.Expression):
    kind = value_kind(res, x)
    if kind != "NUMBER":
        raise res.ctx.error(f"unsupported arithmetic on a {kind} ({sql_of(node)})", node)
    return x


def _compare(res: Resolver, op: str, a, b, node: exp.Expression):
    ka, kb = value_kind(res, a), value_kind(res, b)
    if ka != kb:
        raise res.ctx.error(f"cannot compare a {ka} with a {kb} ({sql_of(node)})", node)
    return (op, a, b)


def having(res: Resolver, e: exp.Expression, aliases: dict | None = None, negated: bool = False):
    """A HAVING condition (``NOT`` it, if ``negated``) as a predicate over view expressions (``aliases``: see
    :func:`view_expr`).  NOT is pushed down to the comparisons, each TRUE only where its aggregates that may be
    NULL read a row (:func:`.aggfilter.rows_read`): SQL's NOT of NULL is NULL."""
    e = unparen(e)
    kind = type(e)
    if kind in (exp.And, exp.Or):
        join = ("or" if kind is exp.And else "and") if negated else ("and" if kind is exp.And else "or")
        return (join, having(res, e.this, aliases, negated), having(res, e.expression, aliases, negated))
    if kind is exp.Not:
        return having(res, e.this, aliases, not negated)
    if kind is exp.Boolean:
        return TRUE if bool(e.this) != negated else FALSE
    if expandable(e, values=True):  # a CASE over aggregates compared: the OR of its branches (:mod:`.casecmp`)
        return having(res, expand(e, lambda _: False, values=True), aliases, negated)
    atom = _atom(res, e, aliases)
    present: list = []
    for count in filter(None, map(rows_read, aggregates_of(atom))):
        present += [(">", count, 0)] if (">", count, 0) not in present else []
    atom = negate(atom) if negated else atom
    for p in present:
        atom = ("and", atom, p)
    return atom


def _atom(res: Resolver, e: exp.Expression, aliases: dict | None):
    """One comparison of HAVING (BETWEEN, IN of constants) as a predicate."""
    kind = type(e)
    if kind is exp.Between:
        x = view_expr(res, e.this, aliases)
        return ("and", _compare(res, ">=", x, view_expr(res, e.args["low"], aliases), e),
                _compare(res, "<=", x, view_expr(res, e.args["high"], aliases), e))
    if kind is exp.In:
        if e.args.get("query") is not None or e.args.get("unnest") is not None:
            raise res.ctx.error(f"unsupported IN ({sql_of(e)}) in HAVING (only a list of constants)", e)
        items = list(e.expressions)
        field = e.args.get("field")
        if field is not None:
            if type(field) is not exp.List:
                raise res.ctx.error(f"unsupported IN {sql_of(field)} (only a list of constants)", e)
            items += field.expressions
        if not items:
            raise res.ctx.error(f"IN with an empty list ({sql_of(e)})", e)
        x = view_expr(res, e.this, aliases)
        return disj(_compare(res, "=", x, view_expr(res, i, aliases), e) for i in items)
    op = _CMP.get(kind)
    if op is None:
        raise res.ctx.error(f"unsupported condition {kind.__name__.upper()} ({sql_of(e)}) in HAVING", e)
    return _compare(res, op, view_expr(res, e.this, aliases), view_expr(res, e.expression, aliases), e)


def has_aggregate(x) -> bool:
    """Whether a view expression (or HAVING predicate) holds an aggregate."""
    if not isinstance(x, tuple) or not x:
        return False
    if x[0] == "agg":
        return True
    if x[0] == "col":
        return False
    return any(has_aggregate(y) for y in x[1:])


def columns_of(x) -> list:
    """The GROUP BY columns a view expression (or HAVING predicate) reads, in order."""
    if not isinstance(x, tuple) or not x or x[0] == "agg":
        return []
    if x[0] == "col":
        return [x[1]]
    return [c for y in x[1:] for c in columns_of(y)]


def aggregates_of(x) -> list:
    """The aggregates of a view expression (or HAVING predicate), in order."""
    if not isinstance(x, tuple) or not x or x[0] == "col":
        return []
    if x[0] == "agg":
        return [x]
    return [a for y in x[1:] for a in aggregates_of(y)]
