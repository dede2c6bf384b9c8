"""HAVING over an outer join: a condition of the view over its parts' aggregates, TRUE where SQL's is.

Why its own module: an outer join's aggregates are read across its parts (:mod:`.outer`, :mod:`.outerview`), so
HAVING cannot go to each part (a group's SUM is the sum of its parts'); it is a condition of the view, which is
evaluated when the view is read and costs nothing per event (docs/m3.md "Outer joins").  Each aggregate is read as
:func:`.outerview.flagged` reads it: a value, and a flag that is 0 where SQL's value is NULL (a SUM over only NULLs,
a MIN/MAX of no value).  HAVING keeps the groups where its condition is TRUE, in SQL's three-valued logic: a
comparison with a NULL operand is NULL, so it holds only where every flag of its operands is 1; ``NOT`` swaps TRUE
and FALSE and keeps NULL, so it is read as the comparison's own negation (with the same flags); ``AND``/``OR`` of
TRUE (FALSE) sides by De Morgan; ``x IS [NOT] NULL`` reads the flag.  Other predicates are refused by name.

>>> import sqlglot
>>> from ..ast import MapRef
>>> from ..printer import format_view_expr
>>> from .outerview import Reader, components
>>> class Ctx:
...     def error(self, message, node=None, keyword=None): return ValueError(message)
>>> cond = sqlglot.parse_one("SELECT 1 HAVING NOT (SUM(s.c) > 2 OR COUNT(*) = 1)").args["having"].this
>>> found = components([("having", cond)], lambda x: True, Ctx())
>>> [f.sql() for f in found]
['SUM(s.c)', 'COUNT(s.c)', 'COUNT(*)']
>>> r = Reader({id(f): i for i, f in enumerate(found)}, lambda i: MapRef(f"#0.{i}", ()), [], (), Ctx())
>>> format_view_expr(truth(cond, r))
'0 < LEAST(#0.1[], 1) AND #0.0[] <= 2 AND #0.2[] <> 1'
"""

from __future__ import annotations

from sqlglot import exp

from ..ast import Cmp, Const, Expr
from ..viewnodes import BoolOp
from .nodes import sql_of
from .outerview import Reader, flagged
from .resolve import unparen

#: SQL's comparisons as view comparisons (``=``, ``<>``, ``<``, ``<=``; ``>`` and ``>=`` by swapping the sides),
#: with their negations (NOT of a comparison whose operands are not NULL).
_OPS = {exp.EQ: ("=", False), exp.NEQ: ("<>", False), exp.LT: ("<", False), exp.LTE: ("<=", False),
        exp.GT: ("<", True), exp.GTE: ("<=", True)}
_NEGATED = {exp.EQ: exp.NEQ, exp.NEQ: exp.EQ, exp.LT: exp.GTE, exp.LTE: exp.GT, exp.GT: exp.LTE, exp.GTE: exp.LT}


def _all(parts: list[Expr], op: str = "AND") -> Expr:
    flat = [x for p in parts for x in (p.args if isinstance(p, BoolOp) and p.op == op else (p,))]
    return flat[0] if len(flat) == 1 else BoolOp(op, tuple(flat))


def truth(cond: exp.Expression, r: Reader, want: bool = True) -> Expr:
    """The view condition that holds where ``cond`` (HAVING's, over the reader's aggregates and group columns) is
    TRUE, or FALSE if not ``want`` (module doc); NULL is neither."""
    c = unparen(cond)
    if type(c) is exp.Not:
        return truth(c.this, r, not want)
    if type(c) in (exp.And, exp.Or):
        op = "AND" if (type(c) is exp.And) == want else "OR"
        return _all([truth(c.this, r, want), truth(c.expression, r, want)], op)
    if type(c) is exp.Is and type(c.expression) is exp.Null:  # never NULL itself
        _, flag = flagged(c.this, r)
        if flag is None:
            return Cmp("<", Const(0), Const(0 if want else 1))
        return Cmp("<", Const(0), flag) if not want else Cmp("<=", flag, Const(0))
    if type(c) in _OPS:
        kind = type(c) if want else _NEGATED[type(c)]
        op, swap = _OPS[kind]
        (a, fa), (b, fb) = flagged(c.this, r), flagged(c.expression, r)
        compared = Cmp(op, b, a) if swap else Cmp(op, a, b)
        present = [Cmp("<", Const(0), f) for f in (fa, fb) if f is not None]  # NULL: neither TRUE nor FALSE
        return _all(present + [compared])
    raise r.ctx.error(f"unsupported {sql_of(c)} in HAVING over an outer join (comparisons, AND, OR, NOT and IS "
                      "[NOT] NULL of its aggregates and group columns)", c)


def having_of(q: exp.Select, keys: list, values: list, scope: dict | None = None, ctx=None) -> exp.Expression | None:
    """The HAVING condition of an outer join's query ``q``, a name of a column in it read as that column's
    expression (DuckDB's ``HAVING n > 1`` for ``COUNT(*) AS n``, ``HAVING k > 1`` for ``r.a AS k``, as the inner
    join's path reads them: a key's name first); ``keys``/``values``: ``(name, expression)``.  ``scope`` (each FROM
    item's alias: its column names, lower case) binds a name as DuckDB does: a FROM item's column first (its
    GROUP BY column, ``GROUP BY r.b HAVING b IS NULL``), a name two items hold refused as ambiguous (``ctx``).

    >>> import sqlglot
    >>> q = sqlglot.parse_one("SELECT r.a AS k, COUNT(*) AS n FROM R r GROUP BY r.a HAVING n > 1 AND k > 0")
    >>> having_of(q, [("k", q.expressions[0].this)], [("n", q.expressions[1].this)]).sql()
    'COUNT(*) > 1 AND r.a > 0'
    >>> q = sqlglot.parse_one("SELECT r.b AS a, COUNT(*) FROM R r GROUP BY r.b HAVING b IS NULL AND a > 1")
    >>> having_of(q, [("a", q.expressions[0].this)], [], {"r": {"a", "b"}}).sql()  # r.a is not grouped: the alias
    'r.b IS NULL AND r.b > 1'
    >>> class Ctx:
    ...     def error(self, message, node=None): return ValueError(message)
    >>> having_of(q, [], [], {"r": {"a", "b"}, "s": {"b"}}, Ctx())
    Traceback (most recent call last):
    ...
    ValueError: ambiguous column b in HAVING (in r and s: qualify it, as DuckDB asks)
    """
    found = q.args.get("having")
    if found is None:
        return None
    cond = found.this.copy()
    named = {n.lower(): e for n, e in values} | {n.lower(): e for n, e in keys}
    group = [g for g in (q.args.get("group").expressions if q.args.get("group") else []) if type(g) is exp.Column]
    for col in list(cond.find_all(exp.Column)):
        if col.table:
            continue
        name = col.name.lower()
        holders = sorted(a for a, cols in (scope or {}).items() if name in cols)
        if len(holders) > 1:
            raise ctx.error(f"ambiguous column {col.name} in HAVING (in {' and '.join(holders)}: qualify it, as "
                            "DuckDB asks)", col)
        grouped = next((g for g in group if holders and g.name.lower() == name
                        and g.table.lower() in ("", holders[0])), None)
        if grouped is not None:
            col.replace(grouped.copy())
        elif name in named:
            col.replace(named[name].copy())
    return cond
