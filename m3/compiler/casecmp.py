"""A comparison with a CASE over several columns is the OR of its branches, each under its conditions.

Why: ``CASE WHEN c1 THEN v1 WHEN c2 THEN v2 ELSE d END > k`` holds exactly where ``c1 AND v1 > k`` or
``NOT c1 AND c2 AND v2 > k`` or ``NOT c1 AND NOT c2 AND d > k`` does (the CASE takes the first branch
whose condition holds; its columns are declared without NULL, a nullable one's conditions are read from its
indicator first, :mod:`.threevalued`).  Each branch is then a comparison the resolver already translates
(arithmetic: :mod:`.arithcmp`), so a CASE over several columns needs no function of its own in a condition
(:mod:`.casewhen` is the CASE of one column, a value of the row).

A branch dividing by a column its own condition gives a sign (``WHEN v > 0 THEN d / v``: TPC-DS Q34's
vehicles per dependant) compared with a constant is compared with the division cleared, in integers:
``d / v > 1.2`` is ``d * 5 > 6 * v`` (the constant read as the exact fraction its decimal digits write, the
comparison flipped where the divisor is negative), defined where the divisor is 0 (there the branch is not
taken).  This is exact only where the quotient is of integers: DuckDB computes ``d / v`` as a rounded
double, and the rounded quotient of integers sits on the same side of a decimal constant as the exact one
(``7 / 25`` is ``0.28``: equal, where ``7 < 0.28 * 25`` holds in floating point, ``0.28 * 25`` being
``7.000000000000001``), while a quotient of floats may round onto the constant.  So only a numerator of INT
columns and integer constants (``+ - *``) over an INT divisor, compared with a constant, is cleared, for
values whose products stay below 2**50; any other division by a column (no guard, a DOUBLE operand, a
compared column) is left as written and refused by :mod:`.arithcmp`: DuckDB reads ``x / 0`` as ``inf`` or
``NaN``, and a rounded quotient of floats, neither of which a cleared comparison does.

Only a CASE with ELSE is expanded (an ELSE NULL compares as neither true nor false).

>>> import sqlglot
>>> def r(sql):  # a, b INT; c DOUBLE
...     e = sqlglot.parse_one(sql)
...     return expand(e, lambda col: col.name in "ab").sql() if expandable(e) else None
>>> r("CASE WHEN a > 0 THEN b / a ELSE 0 END > 1.2")
'(a > 0 AND (b) * 5 > 6 * a) OR (NOT a > 0 AND 0 > 1.2)'
>>> r("CASE WHEN a < 0 THEN (b + 1) / a WHEN b = 2 THEN c ELSE b END <= 3")
'(a < 0 AND (b + 1) >= 3 * a) OR (NOT a < 0 AND b = 2 AND c <= 3) OR (NOT a < 0 AND NOT b = 2 AND b <= 3)'
>>> r("CASE WHEN a > 0 THEN b / a ELSE 0 END < 0.28"), r("CASE WHEN c > 0 THEN b / c ELSE 0 END < 1")
('(a > 0 AND (b) * 25 < 7 * a) OR (NOT a > 0 AND 0 < 0.28)', '(c > 0 AND b / c < 1) OR (NOT c > 0 AND 0 < 1)')
>>> r("CASE WHEN a > 0 THEN b ELSE c END = c"), r("CASE WHEN a > 0 THEN b END = 1")
('(a > 0 AND b = c) OR (NOT a > 0 AND c = c)', None)
"""

from __future__ import annotations

import math
from collections.abc import Callable
from decimal import Decimal
from fractions import Fraction

from sqlglot import exp

from .constants import NotConstant, fold, is_constant

IsInt = Callable[[exp.Column], bool]


def unparen(e: exp.Expression) -> exp.Expression:
    """``e`` without its parentheses (the resolver imports this module, so it has its own)."""
    while type(e) is exp.Paren:
        e = e.this
    return e

_CMP = {exp.EQ: exp.EQ, exp.NEQ: exp.NEQ, exp.LT: exp.GT, exp.LTE: exp.GTE, exp.GT: exp.LT, exp.GTE: exp.LTE}


def _case_side(e: exp.Expression, values: bool = False) -> exp.Case | None:
    """The CASE one side of comparison ``e`` is, if it is one over several columns with an ELSE; with
    ``values``, any CASE with an ELSE and no subquery (over aggregates in HAVING, or over a grouped derived
    table's values: each branch is a comparison of values computed when the view is read)."""
    if type(e) not in _CMP:
        return None
    for side in (unparen(e.this), unparen(e.expression)):
        if type(side) is exp.Case and side.args.get("default") is not None and \
                type(side.args["default"]) is not exp.Null and (
                    side.find(exp.Select) is None if values else side.find(exp.AggFunc, exp.Select) is None and
                    len({c.sql() for c in side.find_all(exp.Column)}) > 1):
            return side
    return None


def expandable(e: exp.Expression, values: bool = False) -> bool:
    """Whether :func:`expand` rewrites comparison ``e`` (``values``: see :func:`_case_side`).

    >>> import sqlglot
    >>> c = sqlglot.parse_one("CASE WHEN AVG(a) > 0 THEN SUM(a) / AVG(a) ELSE 0 END > 1")
    >>> expandable(c), expandable(c, values=True)
    (False, True)
    """
    return _case_side(e, values) is not None


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


def _integral(e: exp.Expression, is_int: IsInt) -> bool:
    """Whether ``e`` is INT columns and integer constants under ``+ - *`` only: an integer, exactly."""
    e = unparen(e)
    if type(e) is exp.Column:
        return is_int(e)
    if type(e) is exp.Literal:
        return not e.is_string and e.is_int
    if type(e) is exp.Neg:
        return _integral(e.this, is_int)
    return type(e) in (exp.Add, exp.Sub, exp.Mul) and _integral(e.this, is_int) and _integral(e.expression, is_int)


def _fraction(e: exp.Expression) -> Fraction | None:
    """The constant ``e`` as the exact fraction its decimal digits write (``0.28`` is 7/25), or None."""
    if not is_constant(e):
        return None
    try:
        v = fold(e)
    except NotConstant:
        return None
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
        return None
    return Fraction(Decimal(repr(v)))


def _branch(cmp: type, value: exp.Expression, other: exp.Expression, case_left: bool,
            guards: list[exp.Expression], is_int: IsInt) -> exp.Expression:
    """``value <cmp> other`` (or ``other <cmp> value``); ``N / v`` with ``v`` signed by the guards, ``N``
    and ``v`` integers and ``other`` a constant ``P / Q``, compared as ``N * Q <cmp> P * v`` (module doc)."""
    value = unparen(value)
    k = _fraction(other)
    if type(value) is exp.Div and k is not None:
        divisor = unparen(value.expression)
        sign = next((s for s in (_sign(g, divisor.sql()) for g in guards) if s), 0)
        if sign and type(divisor) is exp.Column and is_int(divisor) and _integral(value.this, is_int):
            num = exp.paren(unparen(value.this).copy())
            value = num if k.denominator == 1 else exp.Mul(this=num, expression=exp.Literal.number(k.denominator))
            other = exp.Mul(this=exp.Literal.number(k.numerator), expression=divisor.copy())
            if sign < 0:
                cmp = _CMP[cmp]
    left, right = (value, other) if case_left else (other, value)
    return cmp(this=left.copy(), expression=right.copy())


def expand(e: exp.Expression, is_int: IsInt, values: bool = False) -> exp.Expression:
    """Comparison ``e`` with its CASE side as the OR of the branches (module doc); ``e`` is :func:`expandable`
    (with the same ``values``); ``is_int`` says whether a column is INT (a division is cleared only over
    integers)."""
    case = _case_side(e, values)
    case_left = unparen(e.this) is case
    other = unparen(e.expression if case_left else e.this)
    subject = case.this
    branches, before = [], []
    for b in case.args.get("ifs") or []:
        cond = b.this if subject is None else exp.EQ(this=subject.copy(), expression=b.this.copy())
        guards = [*before, cond]
        body = _branch(type(e), b.args["true"], other, case_left, [cond], is_int)
        branches.append(exp.and_(*[g.copy() for g in guards], body))
        before.append(exp.Not(this=exp.paren(cond.copy()) if type(cond) in (exp.And, exp.Or) else cond.copy()))
    branches.append(exp.and_(*[g.copy() for g in before], _branch(type(e), case.args["default"], other, case_left, [], is_int)))
    return exp.or_(*[exp.paren(b) for b in branches])
