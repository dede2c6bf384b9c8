"""Comparisons whose sides are arithmetic over columns: ``a.price - b.price > 1000``, ``r.a + 1 < s.b * 2``.

Why a module of its own: the resolver (:mod:`.resolve`) compares a column
(or a function of one) with a constant or with another column; a side that
is arithmetic over columns has rules of its own — only numbers (arithmetic on
strings and dates is refused), a division only by a non-zero constant — and
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
>>> from ..ast import Column, RelationDecl
>>> from ..errors import CompileError
>>> from .resolve import Resolver
>>> class Ctx:
...     def error(self, message, node=None): return CompileError(message)
>>> r = RelationDecl("R", "STREAM", (Column("a", "INT"), Column("c", "FLOAT"), Column("s", "STRING")))
>>> res = Resolver([("R", "R")], {"R": r}, Ctx())
>>> res.predicate(sqlglot.parse_one("a + (-1) * c > 1000"))
('>', ('arith', ('+', ('R', 'a'), ('*', -1, ('R', 'c')))), 1000)
>>> res.predicate(sqlglot.parse_one("a / 4 <= c - 1"))
('<=', ('arith', ('*', ('R', 'a'), 0.25)), ('arith', ('-', ('R', 'c'), 1)))
>>> res.predicate(sqlglot.parse_one("s || 'x' = a + 1"))
Traceback (most recent call last):
...
boreas.m3.errors.CompileError: unsupported DPIPE (s || 'x') in a comparison with arithmetic (only + - * and division by a constant, over numeric columns and constants)
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sqlglot import exp

from .constants import NotConstant, fold, is_constant
from .nodes import sql_of

if TYPE_CHECKING:
    from .resolve import Resolver

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
    """``(op, left, right)`` with an arithmetic side (or two); a side that is a column or a constant stays one."""
    return (op, _side(res, left, e), _side(res, right, e))


def _side(res: Resolver, side: exp.Expression, e: exp.Expression):
    if is_constant(side):
        v = res.constant(side)
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise res.ctx.error(f"cannot compare arithmetic with a non-number ({sql_of(e)})", e)
        return v
    tree = _tree(res, side)
    return tree if isinstance(tree, tuple) and len(tree) == 2 and isinstance(tree[0], str) \
        and isinstance(tree[1], str) else (ARITH, tree)


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
        if isinstance(divisor, bool) or not isinstance(divisor, (int, float)) or divisor == 0:
            raise res.ctx.error(f"unsupported division by {sql_of(e.expression)} in a comparison (only by a "
                                "non-zero constant)", e)
        return ("*", _tree(res, e.this), 1 / divisor)
    if kind in _OPS:
        return (_OPS[kind], _tree(res, e.this), _tree(res, e.expression))
    raise res.ctx.error(f"unsupported {kind.__name__.upper()} ({sql_of(e)}) in a comparison with arithmetic "
                        "(only + - * and division by a constant, over numeric columns and constants)", e)

