"""A library function of several numbers (``VEC_LENGTH(p.x - q.x, p.y - q.y, p.z - q.z)``): its SQL form.

Why apart from :class:`.resolve.Computed` (a function of one column and
constants): each argument of DBToaster's vector functions (:data:`..library.VECTOR`)
is arithmetic over columns of any of the joined relations, so the call is a
value of the joined variables, not of one row.  The normaliser gives it a
variable ``K`` and the lift ``{K = VEC_LENGTH(X + -1 * X_2, ...)}`` (each
argument a polynomial, :func:`.normalize.lift_computed`), as DBToaster's
``(K ^= vec_length(...))``: the delta of an event that binds some of the
variables computes the call per entry of the map over the others, which is
keyed by the variables the call reads (:mod:`.lifts`, :mod:`.materialize`);
where the event binds them all the trigger computes it from the row.

An argument is what a comparison's arithmetic side is (:mod:`.arithcmp`):
a column, a number, ``+ - *`` and a division by a non-zero constant (here a
product by its inverse, as an aggregated expression divides), over numeric
columns.  Cost class: a map keyed by the columns the call reads of the
relations the event does not bind (one loop over its entries per event).

>>> import sqlglot
>>> from .examples import resolver_over, stream
>>> res = resolver_over(stream("R", a="INT", c="FLOAT", s="STRING"))
>>> print(library_call(res, sqlglot.parse_one("VEC_LENGTH(a - c, c / 2, 1)")))
VEC_LENGTH(a - c, c * 0.5, 1)
>>> library_call(res, sqlglot.parse_one("VEC_DOT(a, c, 1)"))
Traceback (most recent call last):
...
boreas.m3.errors.CompileError: VEC_DOT takes 6 numbers, not 3 (VEC_DOT(a, c, 1))
>>> library_call(res, sqlglot.parse_one("VEC_LENGTH(a, s, 1)"))
Traceback (most recent call last):
...
boreas.m3.errors.CompileError: VEC_LENGTH of a STRING (it takes numbers) (VEC_LENGTH(a, s, 1))
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlglot import exp

from ..functions import check_call
from ..library import VECTOR
from .arithcmp import Resolver, value_tree
from .nodes import sql_of


@dataclass(frozen=True)
class LibCall:
    """``fn(tree, ...)``: a library function of several numbers, each an arithmetic tree (module doc)."""

    fn: str  # a name of :data:`..library.VECTOR`
    args: tuple

    def __str__(self) -> str:
        return f"{self.fn}({', '.join(map(_text, self.args))})"


def _text(t) -> str:
    if isinstance(t, tuple) and len(t) == 2 and all(isinstance(x, str) for x in t):
        return t[1]
    if isinstance(t, tuple) and t[0] == "neg":
        return f"-{_text(t[1])}"
    if isinstance(t, tuple):
        return f"{_text(t[1])} {t[0]} {_text(t[2])}"
    return str(t)


def is_library_call(e: exp.Expression) -> bool:
    """Whether ``e`` calls a function of :data:`..library.VECTOR` (spelled by the library's name: :mod:`.libcalls`)."""
    return type(e) is exp.Anonymous and e.name.upper() in VECTOR


def library_call(res: Resolver, e: exp.Anonymous) -> LibCall:
    """The call with its arguments resolved (module doc); refused with the reason where they are not numbers."""
    fn = e.name.upper()
    columns = [a if type(a) is exp.Column else None for a in map(_bare, e.expressions)]
    problem = check_call(fn, [None if c is None else res.col_type(res.column(c)) for c in columns])
    if problem is not None:
        raise res.ctx.error(f"{problem} ({sql_of(e)})", e)
    return LibCall(fn, tuple(_divided(value_tree(res, a)) for a in e.expressions))


def _bare(e: exp.Expression) -> exp.Expression:
    while type(e) is exp.Paren:
        e = e.this
    return e


def _divided(t):
    """A tree with each division by a constant ``("/", a, d)`` as the product by its inverse."""
    if isinstance(t, tuple) and t and t[0] == "/" and not isinstance(t[1], str):
        return ("*", _divided(t[1]), 1 / t[2])
    if isinstance(t, tuple) and t and t[0] in ("+", "-", "*", "neg") and not (len(t) == 2 and isinstance(t[1], str)):
        return (t[0], *map(_divided, t[1:]))
    return t


def tree_refs(t) -> list:
    """The columns (and computed values) an argument reads."""
    if isinstance(t, tuple) and len(t) == 2 and all(isinstance(x, str) for x in t):
        return [t]
    if isinstance(t, tuple):
        return [r for x in t[1:] for r in tree_refs(x)]
    return [] if isinstance(t, (int, float)) else [t]
