"""An outer-join query's value columns over its parts: each aggregate the sum of its parts', NULL where SQL's is.

Why its own module: :mod:`.outer` splits the query into parts; this says what each value column reads of
them.  ``SUM``, ``COUNT`` and ``AVG`` add across parts (:func:`components`: AVG is its SUM over its COUNT).
A ``SUM`` or ``AVG`` of an argument that may be NULL (a padded column, a CASE with a NULL branch) is NULL
where it counts no value; SQL's arithmetic with it is NULL too, and ``GREATEST``/``LEAST`` skip it (as
DuckDB).  Boreas has no NULLs yet and reads a NULL aggregate as 0, as :mod:`.fromless` does, so each
expression carries a flag that is 1 where it is not NULL (``LEAST(COUNT(x), 1)`` for such an aggregate), and a
column is its value times its flag (:func:`column`): ``SUM(s.c) * 2 + COUNT(*)`` reads 0 where ``SUM(s.c)``
is NULL, not ``COUNT(*)``; ``GREATEST(1, SUM(s.c))`` reads 1.

>>> import sqlglot
>>> from ..ast import MapRef
>>> from ..printer import format_view_expr
>>> class Ctx:
...     def error(self, message, node=None, keyword=None): return ValueError(message)
>>> e = sqlglot.parse_one("SUM(s.c) * 2 + COUNT(*)")
>>> found = components([("x", e)], lambda x: may_be_null(x, {"s"}), Ctx())
>>> [f.sql() for f in found]
['COUNT(*)', 'SUM(s.c)', 'COUNT(s.c)']
>>> index = {id(f): i for i, f in enumerate(found)}
>>> r = Reader(index, lambda i: MapRef(f"#0.{i}", ()), [], (), Ctx())
>>> format_view_expr(column(e, r))
'(#0.1[] * 2 + #0.0[]) * LEAST(#0.2[], 1)'
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, field

from sqlglot import exp

from ..ast import Const, Expr, Var
from ..viewnodes import Arith
from .nodes import sql_of
from .padding import refs
from .resolve import Positions, unparen

_ARITH = {exp.Add: "+", exp.Sub: "-", exp.Mul: "*", exp.Div: "/"}


def may_be_null(x: exp.Expression, sides: set[str]) -> bool:
    """Whether an aggregated expression may be NULL: it reads a side some part pads, or a NULL (CASE branches)."""
    return bool(refs(x) & sides) or x.find(exp.Null) is not None or \
        any(c.args.get("default") is None for c in x.find_all(exp.Case))


def components(values: list, nullable: Callable[[exp.Expression], bool], ctx: Positions,
               every: bool = False) -> list[exp.Expression]:
    """The additive aggregates the value columns read: SUM and COUNT; AVG as its SUM and its COUNT; a SUM of
    a ``nullable`` argument with its COUNT (where it is NULL; alone too if ``every``: its NULL shown)."""
    out = []
    for _, v in values:
        for n in (v.walk() if v is not None else ()):
            if not isinstance(n, exp.AggFunc):
                continue
            if type(n) is exp.Count and isinstance(n.this, exp.Distinct):  # one part's, checked by :mod:`.outer`
                n.meta["one_part"] = True
                out.append(n)
                continue
            if type(n) not in (exp.Sum, exp.Count, exp.Avg, exp.Min, exp.Max) or isinstance(n.this, exp.Distinct):
                raise ctx.error(f"unsupported {sql_of(n)} over an outer join (SUM, COUNT and AVG add across its "
                                "matched and padded parts, MIN and MAX are the least/greatest of theirs, "
                                "COUNT(DISTINCT) is one part's; other DISTINCT aggregates do not combine yet)", n)
            if type(n) in (exp.Min, exp.Max):  # each part's, and its COUNT: whether that part has a value
                n.meta["count"] = exp.Count(this=n.this.copy())
                out += [n, n.meta["count"]]
            elif type(n) is exp.Avg:
                n.meta["parts"] = (exp.Sum(this=n.this.copy()), exp.Count(this=n.this.copy()))
                out += list(n.meta["parts"])
            elif type(n) is exp.Sum and nullable(n.this) and (every or n is not unparen(v)):  # alone: 0 where NULL
                n.meta["count"] = exp.Count(this=n.this.copy())
                out += [n, n.meta["count"]]
            else:
                out.append(n)
    return out


@dataclass(frozen=True)
class Reader:
    """What a value column reads: ``index``, each aggregate node's (by ``id``) component; ``total``, a
    component's sum over the parts; the key columns and their variables."""

    index: dict[int, int]
    total: Callable[[int], Expr]
    keys: list[exp.Expression]
    key_vars: tuple[str, ...]
    ctx: Positions
    each: Callable[[int], list[Expr | None]] | None = None  # a component per part (None: NULL there), for MIN/MAX
    nulls: dict[int, str] = field(default_factory=dict)  # a key's position: its indicator key's variable (1: NULL)


def column(e: exp.Expression, r: Reader) -> Expr:
    """A value column as a view expression over the parts, 0 where SQL's is NULL (module doc)."""
    value, flag = _read(e, r)
    return value if flag is None else Arith("*", value, flag)


def flagged(e: exp.Expression, r: Reader) -> tuple[Expr, Expr | None]:
    """A value column's value, and what is 0 where SQL's is NULL (None: never NULL), for a query over nullable
    columns, whose view shows that NULL (:mod:`.outernulls`)."""
    return _read(e, r)


Flagged = tuple[Expr, Expr | None]  # a value, and 1 where it is not NULL (None: never NULL)


def _times(a: Expr | None, b: Expr | None) -> Expr | None:
    return b if a is None else a if b is None else Arith("*", a, b)


def _read(e: exp.Expression, r: Reader) -> Flagged:
    e = unparen(e)
    if type(e) is exp.Avg:
        s, c = (r.total(r.index[id(x)]) for x in e.meta["parts"])
        return Arith("/", s, Arith("GREATEST", c, Const(1))), Arith("LEAST", c, Const(1))
    if type(e) is exp.Sum and "count" in e.meta:
        return r.total(r.index[id(e)]), Arith("LEAST", r.total(r.index[id(e.meta["count"])]), Const(1))
    if type(e) in (exp.Min, exp.Max) and r.each is not None:
        return extreme(e, r)
    if isinstance(e, exp.AggFunc):
        return r.total(r.index[id(e)]), None
    if type(e) is exp.Column:  # a group column; NULL where its indicator key is 1 (padded, or a NULL value)
        for i, (k, v) in enumerate(zip(r.keys, r.key_vars)):
            if k == e:
                return Var(v), Arith("-", Const(1), Var(r.nulls[i])) if i in r.nulls else None
    if type(e) is exp.Literal and not e.is_string:
        return Const(int(e.name) if e.is_int else float(e.name)), None
    if type(e) is exp.Neg:
        v, f = _read(e.this, r)
        return Arith("-", Const(0), v), f
    if type(e) in _ARITH:
        (a, fa), (b, fb) = _read(e.this, r), _read(e.expression, r)
        if type(e) is exp.Div and fb is not None:  # a NULL divisor is 0 here: divide by 1 (the result is NULL)
            b = Arith("-", Arith("+", b, Const(1)), fb)
        return Arith(_ARITH[type(e)], a, b), _times(fa, fb)
    if type(e) in (exp.Greatest, exp.Least):
        return functools.reduce(lambda x, y: _extreme(type(e).__name__.upper(), x, y),
                                [_read(a, r) for a in [e.this, *e.expressions]])
    raise r.ctx.error(f"unsupported expression {sql_of(e)} over an outer join's aggregates (aggregates, group "
                      "columns and numbers with + - * /, GREATEST and LEAST)", e)


def _extreme(op: str, x: Flagged, y: Flagged) -> Flagged:
    """GREATEST/LEAST of two flagged values, skipping a NULL one (as DuckDB): NULL only where both are."""
    (a, fa), (b, fb) = x, y
    if fa is None and fb is None:
        return Arith(op, a, b), None
    if fa is not None:  # a NULL a reads b
        a = Arith("+", Arith("*", fa, a), Arith("*", Arith("-", Const(1), fa), b))
    if fb is not None:
        b = Arith("+", Arith("*", fb, b), Arith("*", Arith("-", Const(1), fb), a))
    return Arith(op, a, b), (None if fa is None or fb is None else Arith("GREATEST", fa, fb))


#: The most parts whose MIN/MAX :func:`extreme` combines (each named up to once per part after it).
MAX_EXTREME_PARTS = 4


def extreme(e: exp.Min | exp.Max, r: Reader) -> Flagged:
    """MIN/MAX over an outer join: the least/greatest of its parts' (a part's MIN over no value is 0, so each is
    flagged by its part's COUNT of the argument and skipped where that is 0: :func:`_extreme`), NULL where no
    part has a value (docs/m3.md "Outer joins").

    >>> class Ctx:
    ...     def error(self, message, node=None, keyword=None): return ValueError(message)
    >>> from ..ast import MapRef
    >>> from ..printer import format_view_expr
    >>> import sqlglot
    >>> m = sqlglot.parse_one("MIN(r.a)")
    >>> found = components([("m", m)], lambda x: False, Ctx())
    >>> [f.sql() for f in found]
    ['MIN(r.a)', 'COUNT(r.a)']
    >>> index = {id(f): i for i, f in enumerate(found)}
    >>> r = Reader(index, None, [], (), Ctx(), lambda i: [MapRef(f"#0.{i}", ()), MapRef(f"#1.{i}", ())])
    >>> value, flag = extreme(m, r)
    >>> format_view_expr(flag)
    'GREATEST(LEAST(#0.1[], 1), LEAST(#1.1[], 1))'
    """
    values, counts = r.each(r.index[id(e)]), r.each(r.index[id(e.meta["count"])])
    found = [(v, Arith("LEAST", c, Const(1))) for v, c in zip(values, counts) if v is not None and c is not None]
    if not found:  # the argument is NULL in every part (a padded column of every part that reads it)
        return Const(0), Const(0)
    op = "LEAST" if type(e) is exp.Min else "GREATEST"
    if len(found) == 1:
        return found[0]
    if len(found) > MAX_EXTREME_PARTS:  # (each part's extreme is named once per part after it: n^2 in size)
        raise r.ctx.error(f"unsupported {sql_of(e)} over an outer join of {len(found)} parts that read it (at most "
                          f"{MAX_EXTREME_PARTS}: the least/greatest of parts that may have no value is not built as "
                          "one node yet)", e)
    # A part without a value reads the first part's that has one (``first``), so the extreme skips it; each
    # part named once per step, not the running result twice (a chain of n parts grew as 2^n: a review).
    first, none_before = Const(0), None
    for v, f in found:
        here = f if none_before is None else Arith("*", none_before, f)
        first = Arith("+", first, Arith("*", here, v))
        rest = Arith("-", Const(1), f)
        none_before = rest if none_before is None else Arith("*", none_before, rest)
    filled = [Arith("+", Arith("*", f, v), Arith("*", Arith("-", Const(1), f), first)) for v, f in found]
    flag = functools.reduce(lambda a, b: Arith("GREATEST", a, b), [f for _, f in found])
    return functools.reduce(lambda a, b: Arith(op, a, b), filled), flag


def numeric_extremes(sel: exp.Select, relations: dict, ctx: Positions) -> None:
    """Refuse a MIN/MAX over an outer join whose argument reads a column that is not a number: :func:`extreme`
    reads the parts' values through arithmetic with their flags (a STRING or DATE one crashed at run time: a
    review)."""
    aliases = {t.alias_or_name.lower(): t.name.lower() for t in sel.find_all(exp.Table)}
    for m in sel.find_all(exp.Min, exp.Max):
        for c in m.find_all(exp.Column):
            relation = aliases.get(c.table.lower())
            decl = next((d for n, d in relations.items() if n.lower() == relation), None)
            col = next((x for x in decl.columns if x.name.lower() == c.name.lower()), None) if decl else None
            if col is not None and col.type.upper() not in ("INT", "FLOAT", "INTEGER", "BIGINT", "DOUBLE"):
                raise ctx.error(f"unsupported {sql_of(m)} over an outer join reading {sql_of(c)}, a {col.type}: "
                                "the parts' extremes are combined as numbers (MIN/MAX of an INT or FLOAT column)", m)
