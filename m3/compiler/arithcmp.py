"""Comparisons whose sides are arithmetic over columns: ``a.price - b.price > 1000``, ``r.a + 1 < s.b * 2``.

Why a module of its own: the resolver (:mod:`.resolve`) compares a column
(or a function of one) with a constant or with another column; a side that
is arithmetic over columns has rules of its own — only numbers (arithmetic on
strings and dates is refused), a division only by a non-zero integer constant,
which is cleared exactly (both sides multiplied by the divisors) — and
a form of its own that the rest of the front end must see through.

A side is ``("arith", tree)``; ``tree`` is what an aggregated expression is
(:mod:`.aggregates`) without CASE or NULL: a column ``(alias, column)``, a
:class:`.resolve.Computed`, a number, ``(op, a, b)`` with op in ``+ - *``,
or ``("neg", a)``.  Being a tuple, generic walks over a predicate (the
columns a subquery's condition reads, the computed values to lift) find the
columns inside it.  The normaliser turns the tree into one polynomial
(:func:`..calculus.poly_value`): the comparison is then a guard where the
event binds all its variables, a *loop guard* where it binds some (the
trigger loops over the other side's map, which is keyed by the columns the
expression reads, and evaluates the expression per entry), and part of a
map's definition where it binds none.

>>> import sqlglot
>>> from .examples import resolver_over, stream
>>> res = resolver_over(stream("R", a="INT", c="FLOAT", s="STRING"))
>>> res.predicate(sqlglot.parse_one("a + (-1) * c > 1000"))
('>', ('arith', ('+', ('R', 'a'), ('*', -1, ('R', 'c')))), 1000)
>>> res.predicate(sqlglot.parse_one("a / 4 <= c - 1"))
('<=', ('R', 'a'), ('arith', ('-', ('*', ('R', 'c'), 4), 4)))
>>> res.predicate(sqlglot.parse_one("s || 'x' = a + 1"))
Traceback (most recent call last):
...
boreas.m3.errors.CompileError: unsupported DPIPE (s || 'x') in a comparison with arithmetic (only + - * and division by an integer constant, over numeric columns and constants)
"""

from __future__ import annotations

import math
from typing import Any, Protocol

from sqlglot import exp

from .constants import NotConstant, fold, is_constant
from .nodes import sql_of


class Resolver(Protocol):
    """What this module asks of :class:`.resolve.Resolver` (which imports this module: no import back)."""

    ctx: Any

    def constant(self, e: exp.Expression) -> Any: ...
    def computed(self, e: exp.Expression) -> Any: ...
    def column(self, e: exp.Expression) -> tuple[str, str]: ...
    def col_type(self, ref: Any) -> str: ...

ARITH = "arith"
_OPS = {exp.Add: "+", exp.Sub: "-", exp.Mul: "*"}
ARITH_NODES = (exp.Add, exp.Sub, exp.Mul, exp.Div, exp.Neg)
"""The sqlglot nodes that make a comparison side arithmetic (:func:`is_arithmetic`)."""


def is_arith(x) -> bool:
    """Whether a predicate's side is arithmetic (``("arith", tree)``; a column's alias may be spelt ``arith``).

    >>> is_arith(("arith", ("+", ("R", "a"), 1))), is_arith(("arith", "x"))
    (True, False)
    """
    return isinstance(x, tuple) and len(x) == 2 and x[0] == ARITH and not isinstance(x[1], str)


def is_arithmetic(e: exp.Expression) -> bool:
    """Whether a sqlglot comparison side is arithmetic over something other than constants only."""
    while type(e) is exp.Paren:
        e = e.this
    return isinstance(e, ARITH_NODES) and not is_constant(e)


def arith_refs(x) -> list:
    """The columns (and computed values) an arithmetic side, or any side, reads.

    >>> arith_refs(("arith", ("+", ("R", "a"), ("neg", ("S", "b"))))), arith_refs(3)
    ([('R', 'a'), ('S', 'b')], [])
    """
    if is_arith(x):
        return _tree_refs(x[1])
    return _tree_refs(x)


def _tree_refs(t) -> list:
    if isinstance(t, tuple) and len(t) == 2 and all(isinstance(y, str) for y in t):
        return [t]
    if isinstance(t, tuple):
        return [r for y in t[1:] for r in _tree_refs(y)]
    return [] if isinstance(t, (int, float)) else [t]  # a number, or a Computed


def comparison(res: Resolver, op: str, left: exp.Expression, right: exp.Expression, e: exp.Expression) -> tuple:
    """``(op, left, right)`` with an arithmetic side (or two); a side that is a column or a constant stays one.

    Divisions (by integer constants) are cleared: both sides are multiplied
    by the least common multiple of the divisors, so ``a / 10 > c`` is
    compared as ``a > c * 10`` and ``a / 49 = c`` holds at ``a = 49, c = 1``,
    as in SQL, where multiplying by a rounded ``1 / 49`` would miss it.
    """
    lt, rt = _operand(res, left, e), _operand(res, right, e)
    k = math.lcm(_denominator(lt), _denominator(rt))
    return (op, _side(_scaled(lt, k)), _side(_scaled(rt, k)))


def _operand(res: Resolver, side: exp.Expression, e: exp.Expression):
    if is_constant(side):
        v = res.constant(side)
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise res.ctx.error(f"cannot compare arithmetic with a non-number ({sql_of(e)})", e)
        return v
    return _tree(res, side)


def _side(tree):
    """A comparison side: a number or a column as itself, arithmetic as ``("arith", tree)``."""
    if isinstance(tree, (int, float)) or _is_ref(tree):
        return tree
    return (ARITH, tree)


def _is_ref(t) -> bool:
    """A column ``(alias, column)`` (an alias may be spelt like an operator: ``FROM R neg``)."""
    return isinstance(t, tuple) and len(t) == 2 and isinstance(t[0], str) and isinstance(t[1], str)


def _op(t) -> str | None:
    return t[0] if isinstance(t, tuple) and t and not _is_ref(t) else None


def _denominator(t) -> int:
    """The least common multiple of what divides ``t``'s value: multiplying ``t`` by it leaves no division.

    >>> _denominator(("+", ("/", ("R", "a"), 10), ("*", ("/", ("R", "b"), 2), ("/", ("R", "c"), 3))))
    30
    """
    op = _op(t)
    if op == "/":
        return t[2] * _denominator(t[1])
    if op == "*":
        return _denominator(t[1]) * _denominator(t[2])
    if op in ("+", "-"):
        return math.lcm(_denominator(t[1]), _denominator(t[2]))
    if op == "neg":
        return _denominator(t[1])
    return 1


def _scaled(t, k: int):
    """``t * k`` with every division gone (``k`` a multiple of :func:`_denominator` of ``t``): exact.

    >>> _scaled(("+", ("/", ("R", "a"), 10), 1), 10)
    ('+', ('R', 'a'), 10)
    >>> _scaled(("*", ("/", ("R", "b"), 2), ("/", ("R", "c"), 3)), 6), _scaled(("neg", "x"), 1)
    (('*', ('R', 'b'), ('R', 'c')), ('neg', 'x'))
    """
    op = _op(t)
    if op == "/":
        return _scaled(t[1], k // t[2])
    if op == "*":
        ka = _denominator(t[1])
        return ("*", _scaled(t[1], ka), _scaled(t[2], k // ka))
    if op in ("+", "-"):
        return (op, _scaled(t[1], k), _scaled(t[2], k))
    if op == "neg":
        return ("neg", _scaled(t[1], k))
    if isinstance(t, (int, float)) and not isinstance(t, bool):
        return t * k
    return t if k == 1 else ("*", t, k)


def value_tree(res: Resolver, e: exp.Expression):
    """Arithmetic over numeric columns as a tree (divisions kept as ``("/", a, d)``: a comparison clears them)."""
    return _tree(res, e)


def _tree(res: Resolver, e: exp.Expression):
    while type(e) is exp.Paren:
        e = e.this
    kind = type(e)
    if is_constant(e):
        v = res.constant(e)
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise res.ctx.error(f"unsupported arithmetic on {sql_of(e)} in a comparison (only on numbers)", e)
        return v
    computed = res.computed(e)
    if computed is not None or kind is exp.Column:
        ref = computed or res.column(e)
        t = res.col_type(ref)
        if t not in ("INT", "FLOAT"):
            raise res.ctx.error(f"unsupported arithmetic on {t} {sql_of(e)} in a comparison (only on numbers)", e)
        return ref
    if kind is exp.Neg:
        return ("neg", _tree(res, e.this))
    if kind is exp.Div:
        try:
            divisor = fold(e.expression)
        except NotConstant:
            divisor = None
        if isinstance(divisor, float) and divisor.is_integer():
            divisor = int(divisor)
        if isinstance(divisor, bool) or not isinstance(divisor, int) or divisor == 0:
            raise res.ctx.error(f"unsupported division by {sql_of(e.expression)} in a comparison (only by a "
                                "non-zero integer constant)", e)
        inner = ("/", _tree(res, e.this), abs(divisor))  # (cleared by comparison(): exact)
        return inner if divisor > 0 else ("neg", inner)
    if kind in _OPS:
        return (_OPS[kind], _tree(res, e.this), _tree(res, e.expression))
    raise res.ctx.error(f"unsupported {kind.__name__.upper()} ({sql_of(e)}) in a comparison with arithmetic "
                        "(only + - * and division by an integer constant, over numeric columns and constants)", e)

