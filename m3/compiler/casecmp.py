"""A comparison with a CASE over several columns is the OR of its branches, each under its conditions.

Why: ``CASE WHEN c1 THEN v1 WHEN c2 THEN v2 ELSE d END > k`` holds exactly where ``c1 AND v1 > k`` or
``NOT c1 AND c2 AND v2 > k`` or ``NOT c1 AND NOT c2 AND d > k`` does (the CASE takes the first branch
whose condition holds; its columns are declared without NULL, a nullable one's conditions are read from its
indicator first, :mod:`.threevalued`).  Each branch is then a comparison the resolver already translates
(arithmetic: :mod:`.arithcmp`), so a CASE over several columns needs no function of its own in a condition
(:mod:`.casewhen` is the CASE of one column, a value of the row).

A branch dividing by a column its own condition gives a sign (``WHEN v > 0 THEN d / v``: TPC-DS Q34's
vehicles per dependant) is compared with the division cleared, both sides multiplied by the divisor
(the comparison flipped where it is negative): exact, and defined where the divisor is 0 (there the
branch is not taken).  A division by a column without such a guard is left as written and refused by
:mod:`.arithcmp`: DuckDB reads ``x / 0`` as ``inf`` or ``NaN``, which a cleared comparison does not.

Only a CASE with ELSE is expanded (an ELSE NULL compares as neither true nor false).

>>> import sqlglot
>>> def r(sql):
...     e = sqlglot.parse_one(sql)
...     return expand(e).sql() if expandable(e) else None
>>> r("CASE WHEN a > 0 THEN b / a ELSE 0 END > 1.2")
'(a > 0 AND b > 1.2 * a) OR (NOT a > 0 AND 0 > 1.2)'
>>> r("CASE WHEN a < 0 THEN (b + 1) / a WHEN b = 2 THEN c ELSE b END <= 3")
'(a < 0 AND (b + 1) >= 3 * a) OR (NOT a < 0 AND b = 2 AND c <= 3) OR (NOT a < 0 AND NOT b = 2 AND b <= 3)'
>>> r("CASE WHEN a > 0 THEN b ELSE c END = c"), r("CASE WHEN a > 0 THEN b END = 1")
('(a > 0 AND b = c) OR (NOT a > 0 AND c = c)', None)
"""

from __future__ import annotations

from sqlglot import exp

from .constants import is_constant


def unparen(e: exp.Expression) -> exp.Expression:
    """``e`` without its parentheses (the resolver imports this module, so it has its own)."""
    while type(e) is exp.Paren:
        e = e.this
    return e

_CMP = {exp.EQ: exp.EQ, exp.NEQ: exp.NEQ, exp.LT: exp.GT, exp.LTE: exp.GTE, exp.GT: exp.LT, exp.GTE: exp.LTE}


def _case_side(e: exp.Expression) -> exp.Case | None:
    """The CASE one side of comparison ``e`` is, if it is one over several columns with an ELSE."""
    if type(e) not in _CMP:
        return None
    for side in (unparen(e.this), unparen(e.expression)):
        if type(side) is exp.Case and side.args.get("default") is not None and \
                type(side.args["default"]) is not exp.Null and side.find(exp.AggFunc, exp.Select) is None and \
                len({c.sql() for c in side.find_all(exp.Column)}) > 1:
            return side
    return None


def expandable(e: exp.Expression) -> bool:
    """Whether :func:`expand` rewrites comparison ``e``."""
    return _case_side(e) is not None


def _sign(cond: exp.Expression, divisor: str) -> int:
    """+1 or -1 where ``cond`` says ``divisor`` is positive or negative (``v > 0``, ``0 > v``), else 0."""
    cond = unparen(cond)
    for node, other, flip in ((cond.this, cond.expression, 1), (cond.expression, cond.this, -1)) \
            if type(cond) in (exp.GT, exp.LT, exp.GTE) else ():
        if node.sql() != divisor or not is_constant(other) or type(other) is not exp.Literal or other.is_string:
            continue
        k = float(other.this)
        if type(cond) is exp.GT and (k >= 0 if flip == 1 else k <= 0):
            return flip
        if type(cond) is exp.LT and (k <= 0 if flip == 1 else k >= 0):
            return -flip
        if type(cond) is exp.GTE and flip == 1 and k > 0:
            return 1
    return 0


def _times(e: exp.Expression, divisor: str) -> exp.Expression:
    """``e * divisor`` with the division by ``divisor`` in each of its terms cancelled."""
    e = unparen(e)
    if type(e) is exp.Div and unparen(e.expression).sql() == divisor:
        return e.this.copy()
    if type(e) in (exp.Add, exp.Sub):
        return type(e)(this=_times(e.this, divisor), expression=_times(e.expression, divisor))
    if type(e) is exp.Neg:
        return exp.Neg(this=exp.paren(_times(e.this, divisor)))
    if type(e) is exp.Mul and _divides(e.expression, divisor) and not _divides(e.this, divisor):
        return exp.Mul(this=exp.paren(e.this.copy()), expression=exp.paren(_times(e.expression, divisor)))
    if type(e) is exp.Mul:
        return exp.Mul(this=exp.paren(_times(e.this, divisor)), expression=exp.paren(e.expression.copy()))
    return exp.Mul(this=exp.paren(e.copy()) if not is_constant(e) and type(e) is not exp.Column else e.copy(),
                   expression=exp.maybe_parse(divisor))


def _divides(e: exp.Expression, divisor: str) -> bool:
    return any(unparen(d.expression).sql() == divisor for d in e.find_all(exp.Div))


def _branch(cmp: type, value: exp.Expression, other: exp.Expression, case_left: bool,
            guards: list[exp.Expression]) -> exp.Expression:
    """``value <cmp> other`` (or ``other <cmp> value``), a division by a column the guards sign cleared."""
    value = unparen(value)
    for div in [d for d in value.find_all(exp.Div) if not is_constant(d.expression)]:
        divisor = unparen(div.expression).sql()
        sign = next((s for s in (_sign(g, divisor) for g in guards) if s), 0)
        if sign == 0 or _divides(other, divisor):
            continue
        value, other = _times(value, divisor), _times(other, divisor) if not is_constant(other) else \
            exp.Mul(this=other.copy(), expression=exp.maybe_parse(divisor))
        if sign < 0:
            cmp = _CMP[cmp]
        break
    left, right = (value, other) if case_left else (other, value)
    return cmp(this=left.copy(), expression=right.copy())


def expand(e: exp.Expression) -> exp.Expression:
    """Comparison ``e`` with its CASE side as the OR of the branches (module doc); ``e`` is :func:`expandable`."""
    case = _case_side(e)
    case_left = unparen(e.this) is case
    other = unparen(e.expression if case_left else e.this)
    subject = case.this
    branches, before = [], []
    for b in case.args.get("ifs") or []:
        cond = b.this if subject is None else exp.EQ(this=subject.copy(), expression=b.this.copy())
        guards = [*before, cond]
        body = _branch(type(e), b.args["true"], other, case_left, [cond])
        branches.append(exp.and_(*[g.copy() for g in guards], body))
        before.append(exp.Not(this=exp.paren(cond.copy()) if type(cond) in (exp.And, exp.Or) else cond.copy()))
    branches.append(exp.and_(*[g.copy() for g in before], _branch(type(e), case.args["default"], other, case_left, [])))
    return exp.or_(*[exp.paren(b) for b in branches])
