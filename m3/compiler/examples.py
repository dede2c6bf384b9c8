"""What a doctest or a test builds to show one construct of the compiler on its own.

The front end compiles a whole script with a :class:`.positions.Ctx`, which
points every error at the line:col of the construct at fault.  A construct
shown alone (one predicate, one aggregate, one rewrite of a SELECT) has no
script to point into, so each module's doctest used to declare its own
throw-away context; these are that set-up written once:

* :class:`PlainErrors` is the context: the same :class:`CompileError` as the
  front end raises, message for message, without a position;
* :func:`stream` declares a stream from column names and types;
* :func:`resolver_over` resolves names against relations, each FROM'd under
  its own name, as ``FROM R, S`` does.

>>> import sqlglot
>>> res = resolver_over(stream("R", a="INT", s="STRING"))
>>> res.column(sqlglot.parse_one("a"))
('R', 'a')
>>> res.column(sqlglot.parse_one("b"))
Traceback (most recent call last):
...
boreas.m3.errors.CompileError: unknown column b
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlglot import exp

from ..ast import Column, RelationDecl
from ..errors import CompileError
from .resolve import Resolver


@dataclass(frozen=True)
class PlainErrors:
    """A compile context whose errors carry no position (there is no script text to point into)."""

    def error(self, message: str, node: exp.Expression | None = None, keyword: str | None = None) -> CompileError:
        return CompileError(message)


def stream(name: str, **columns: str) -> RelationDecl:
    """A stream declared with ``column=TYPE`` pairs, in their order: ``CREATE STREAM name(column TYPE, ...)``."""
    return RelationDecl(name, "STREAM", tuple(Column(c, t) for c, t in columns.items()))


def resolver_over(*relations: RelationDecl) -> Resolver:
    """A resolver of names over the relations, each under its own name as its alias (``FROM R, S``)."""
    return Resolver([(r.name, r.name) for r in relations], {r.name: r for r in relations}, PlainErrors())
