"""Aggregates of one SELECT and the arithmetic they aggregate, names resolved by a :class:`.resolve.Resolver`.

Why apart from :mod:`.resolve`: the resolver answers what a name or a
condition means against the FROM clause (columns, constants, selections);
this module decides what may be *aggregated* and how it reads, which has
rules of its own: MIN, MAX and the DISTINCT aggregates take a column (its
values become the keys of a multiplicity map), SUM, COUNT and AVG take
arithmetic, and NULL may stand only where an aggregate skips it.  It reads
names and conditions through the resolver (so a subquery's
:class:`.subqueries.ScopedResolver` resolves outer columns here too).

An aggregated expression is a column, a number, ``(op, a, b)`` with op in
``+ - *``, ``("neg", a)``, or ``("case", ((predicate, value), ...),
default)`` for CASE (and ``IF``), whose values may be ``None`` (SQL NULL)
only as the whole argument of SUM, COUNT or AVG, or a branch of such a
CASE.  Inside arithmetic a NULL would make the whole value NULL, which the
runtime (no NULLs) cannot represent, so it is refused there.  Every node
type read here is listed in :data:`.nodes.READS`.

>>> import sqlglot
>>> from .examples import resolver_over, stream
>>> res = resolver_over(stream("R", a="INT", s="STRING"))
>>> aggregate(res, sqlglot.parse_one("SUM(CASE WHEN s = 'A' THEN a * 2 END)"))
('SUM', ('case', ((('=', ('R', 's'), 'A'), ('*', ('R', 'a'), 2)),), None))
>>> aggregate(res, sqlglot.parse_one("COUNT(DISTINCT s)")), aggregate(res, sqlglot.parse_one("AVG(a / 4 - 1)"))
(('COUNT DISTINCT', ('R', 's')), ('AVG', ('-', ('*', ('R', 'a'), 0.25), 1)))
>>> aggregate(res, sqlglot.parse_one("MAX(a + 1)"))
Traceback (most recent call last):
...
boreas.m3.errors.CompileError: unsupported MAX(a + 1): only of a column (its values are the keys of a multiplicity map)
"""

from __future__ import annotations

from sqlglot import exp

from ..functions import result_type
from .constants import NotConstant, fold, is_constant
from .nodes import sql_of
from .resolve import ColRef, Computed, Resolver, unparen, value_phrase

_ARITH = {exp.Add: "+", exp.Sub: "-", exp.Mul: "*"}
_AGGREGATES = {exp.Sum: "SUM", exp.Count: "COUNT", exp.Avg: "AVG", exp.Min: "MIN", exp.Max: "MAX"}


def aggregate(res: Resolver, node: exp.Expression) -> tuple[str, object]:
    """``(kind, argument)``: SUM, COUNT, AVG of arithmetic (COUNT: the rows where it is not NULL), or MIN,
    MAX, COUNT DISTINCT, SUM DISTINCT, AVG DISTINCT of a column (a multiplicity map is keyed by its value)."""
    kind = _AGGREGATES.get(type(node))
    if kind is None:
        raise res.ctx.error(f"unsupported aggregate {type(node).__name__.upper()} "
                             "(only SUM, COUNT, AVG, MIN and MAX)", node)
    arg = node.this
    if node.args.get("expressions"):
        raise res.ctx.error(f"unsupported {kind} of several expressions ({sql_of(node)})", node)
    if type(arg) is exp.Distinct:
        if arg.args.get("on") is not None:
            raise res.ctx.error(f"unsupported DISTINCT ON in {kind} ({sql_of(node)})", node)
        if len(arg.expressions) != 1:
            raise res.ctx.error(f"unsupported {kind}(DISTINCT ...) of {len(arg.expressions)} expressions "
                                 "(only of one column)", node)
        ref = _folded(res, kind, arg.expressions[0], "DISTINCT ")
        return (kind, ref) if kind in ("MIN", "MAX") else (f"{kind} DISTINCT", ref)
    if kind in ("MIN", "MAX"):
        return (kind, _folded(res, kind, arg, ""))
    if kind == "COUNT":
        if arg is None or type(arg) is exp.Star:
            return ("COUNT", 1)
        if type(unparen(arg)) is exp.Column:
            res.column(unparen(arg))  # any type; never NULL, so COUNT(x) = COUNT(*)
            return ("COUNT", 1)
    return (kind, arith(res, arg, nullable=True))


def _folded(res: Resolver, kind: str, arg: exp.Expression | None, distinct: str) -> ColRef | Computed:
    """The column (or function of one) MIN, MAX or an aggregate of DISTINCT values reads (its values become map
    keys)."""
    col = unparen(arg) if isinstance(arg, exp.Expression) else arg
    computed = res.computed(col) if isinstance(col, exp.Expression) else None
    if computed is not None:  # MAX(YEAR(d)): the multiplicity map is keyed by the lifted value
        if kind in ("SUM", "AVG") and result_type(computed.fn) not in ("INT", "FLOAT"):
            raise res.ctx.error(f"cannot aggregate {computed.fn} ({sql_of(col)}): its values are strings", col)
        return computed
    if type(col) is not exp.Column or isinstance(col.this, exp.Star):
        what = sql_of(col) if isinstance(col, exp.Expression) else "nothing"
        raise res.ctx.error(f"unsupported {kind}({distinct}{what}): only of a column (its values are the keys "
                             "of a multiplicity map)", col if isinstance(col, exp.Expression) else arg)
    ref = res.column(col)
    if kind in ("SUM", "AVG") and res.col_type(ref) not in ("INT", "FLOAT"):
        raise res.ctx.error(f"cannot aggregate non-numeric column {sql_of(col)}", col)
    return ref


def arith(res: Resolver, e: exp.Expression, nullable: bool = False):
    """An aggregated expression (module doc); ``nullable``: whether NULL may stand here."""
    e = unparen(e)
    kind = type(e)
    if kind is exp.Column:
        ref = res.column(e)
        if res.col_type(ref) not in ("INT", "FLOAT"):
            raise res.ctx.error(f"cannot aggregate non-numeric column {sql_of(e)}", e)
        return ref
    if kind is exp.Null:
        if nullable:
            return None
        raise res.ctx.error("unsupported NULL inside arithmetic (the M3 runtime has no NULLs; "
                             "write ELSE 0 in a CASE that is added or multiplied)", e)
    if kind in (exp.Case, exp.If):
        return _case(res, e, nullable)
    if _constant_tree(e):
        v = res.constant(e)
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise res.ctx.error(f"cannot aggregate {value_phrase(v)} ({sql_of(e)})", e)
        return v
    if kind is exp.Neg:
        return ("neg", arith(res, e.this))
    if kind is exp.Div:
        try:
            divisor = fold(e.expression)
        except NotConstant:
            divisor = None
        if isinstance(divisor, bool) or not isinstance(divisor, (int, float)) or divisor == 0:
            raise res.ctx.error(f"unsupported division by {sql_of(e.expression)} (only by a non-zero constant)", e)
        return ("*", arith(res, e.this), 1 / divisor)
    op = _ARITH.get(kind)
    if op is not None:
        return (op, arith(res, e.this), arith(res, e.expression))
    if isinstance(e, exp.AggFunc):
        raise res.ctx.error(f"unsupported aggregate of an aggregate ({sql_of(e)})", e)
    computed = res.computed(e)  # EXTRACT(MONTH FROM d): a variable its lift defines (:func:`.normalize.lift_computed`)
    if computed is not None:
        if result_type(computed.fn) not in ("INT", "FLOAT"):
            raise res.ctx.error(f"cannot aggregate {computed.fn} ({sql_of(e)}): its values are strings", e)
        return computed
    raise res.ctx.error(f"unsupported expression {kind.__name__.upper()} ({sql_of(e)}) in an aggregate", e)


def _case(res: Resolver, e: exp.Expression, nullable: bool):
    """``CASE [x] WHEN c THEN v ... [ELSE d] END`` (or ``IF(c, v, d)``): the first branch whose condition holds."""
    if type(e) is exp.If:
        pairs, default = [(e.this, e.args.get("true"))], e.args.get("false")
    else:
        ifs = e.args.get("ifs")
        for i in ifs if isinstance(ifs, list) else [ifs]:
            if type(i) is not exp.If or i.args.get("false") is not None:
                raise res.ctx.error(f"unsupported CASE branch {sql_of(i) if i is not None else '(none)'}", e)
        pairs, default = [(i.this, i.args.get("true")) for i in ifs], e.args.get("default")
    if not pairs or any(v is None for _, v in pairs):
        raise res.ctx.error(f"CASE without a WHEN ... THEN ({sql_of(e)})", e)
    subject = e.this if type(e) is exp.Case else None
    if subject is not None and type(unparen(subject)) is not exp.Column:
        raise res.ctx.error(f"unsupported CASE {sql_of(subject)} WHEN ... (only CASE column WHEN constant)", e)
    branches = []
    for cond, value in pairs:
        if subject is not None:
            ref, v = res.against(unparen(subject), cond)
            p = ("=", ref, v)
        else:
            p = res.predicate(cond)
        branches.append((p, arith(res, value, nullable)))
    if default is None and not nullable:
        raise res.ctx.error("unsupported CASE without ELSE inside arithmetic (its NULL would make the whole "
                             "value NULL; the M3 runtime has no NULLs: write ELSE 0)", e)
    return ("case", tuple(branches), None if default is None else arith(res, default, nullable))


def _constant_tree(e: exp.Expression) -> bool:
    """Arithmetic on constants only (folded as a whole, so DATE - INTERVAL and 0.06 - 0.01 fold as DuckDB would)."""
    return is_constant(e) and not any(type(n) in (exp.Null, exp.Case, exp.If) for n in e.walk())
