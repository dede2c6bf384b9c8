"""The M3 abstract syntax tree: frozen dataclasses, one per construct.

Follows Figure 1 of the Cumulus paper (seed 001): a program is a list of
triggers ``ON +R(x, y) DO { m[x, z] += expr; ... }``; an expression is a
product of constants, variables, map references and ``IF a CMP b THEN e
ELSE 0``.  Boreas adds the declarations that make a program self-contained:
the relations events come from, each map's key columns, value type and
*defining query* (a sum of products over relation atoms, so a map's value can
be computed from existing data), and views (the query results, named output
columns over maps; AVG is the quotient of two maps).

Positions (``pos``) are kept for error messages and ignored by equality, so
``parse(print(p)) == p``.
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass, field

from .errors import Pos

TYPES = ("INT", "FLOAT", "STRING", "DATE")
CMP_OPS = ("=", "<>", "<", "<=")  # Figure 1 has = < <=; <> is a Boreas extension

ConstValue = int | float | str | datetime.date


@dataclass(frozen=True)
class Const:
    """A literal: INT, FLOAT, STRING or DATE (a ``datetime.date``)."""

    value: ConstValue
    pos: Pos | None = field(default=None, compare=False, repr=False, kw_only=True)

    @property
    def type(self) -> str:
        return const_type(self.value)


@dataclass(frozen=True)
class Var:
    """A variable: an event variable if the trigger binds it, else a loop variable."""

    name: str
    pos: Pos | None = field(default=None, compare=False, repr=False, kw_only=True)


Val = Var | Const


@dataclass(frozen=True)
class MapRef:
    """``m[a, b]``: one entry of a map (on the right: a slice over loop variables)."""

    name: str
    args: tuple[Val, ...]
    pos: Pos | None = field(default=None, compare=False, repr=False, kw_only=True)


@dataclass(frozen=True)
class RelAtom:
    """``R(a, b)``: the multiplicity of a tuple in relation R (map definitions only)."""

    name: str
    args: tuple[Val, ...]
    pos: Pos | None = field(default=None, compare=False, repr=False, kw_only=True)


@dataclass(frozen=True)
class Cmp:
    """``{a < b}``: 1 if the comparison holds, else 0 (a factor)."""

    op: str
    left: Expr
    right: Expr
    pos: Pos | None = field(default=None, compare=False, repr=False, kw_only=True)


@dataclass(frozen=True)
class IfThen:
    """``IF a CMP b THEN e ELSE 0`` (Figure 1)."""

    cond: Cmp
    then: Expr
    pos: Pos | None = field(default=None, compare=False, repr=False, kw_only=True)


@dataclass(frozen=True)
class Prod:
    """A product of two or more factors."""

    factors: tuple[Expr, ...]
    pos: Pos | None = field(default=None, compare=False, repr=False, kw_only=True)


@dataclass(frozen=True)
class Sum:
    """A sum of two or more terms (map definitions only: trigger terms are monomials)."""

    terms: tuple[Expr, ...]
    pos: Pos | None = field(default=None, compare=False, repr=False, kw_only=True)


Expr = Const | Var | MapRef | RelAtom | Cmp | IfThen | Prod | Sum


@dataclass(frozen=True)
class Column:
    """A typed column: of a relation, or a key of a map."""

    name: str
    type: str
    pos: Pos | None = field(default=None, compare=False, repr=False, kw_only=True)


@dataclass(frozen=True)
class RelationDecl:
    """``CREATE STREAM|TABLE R(a INT, ...)``: where events come from."""

    name: str
    kind: str  # "STREAM" or "TABLE"
    columns: tuple[Column, ...]
    pos: Pos | None = field(default=None, compare=False, repr=False, kw_only=True)


@dataclass(frozen=True)
class MapDecl:
    """``DECLARE MAP m[k INT, ...] : FLOAT := definition``.

    The definition sums over every variable that is not a key.
    """

    name: str
    keys: tuple[Column, ...]
    value_type: str
    definition: Expr | None = None
    pos: Pos | None = field(default=None, compare=False, repr=False, kw_only=True)


@dataclass(frozen=True)
class ViewColumn:
    """One value column of a view: a map, or the quotient of two (AVG)."""

    name: str
    numerator: str
    denominator: str | None = None
    pos: Pos | None = field(default=None, compare=False, repr=False, kw_only=True)


@dataclass(frozen=True)
class ViewDecl:
    """``DECLARE VIEW v[key, ...](col := m, avg := s / c)``: a query's result.

    Its rows are the keys present in any of its maps; key columns are named by
    ``keys`` (the SQL output names).
    """

    name: str
    keys: tuple[str, ...]
    columns: tuple[ViewColumn, ...]
    pos: Pos | None = field(default=None, compare=False, repr=False, kw_only=True)

    @property
    def maps(self) -> tuple[str, ...]:
        names: list[str] = []
        for c in self.columns:
            for m in (c.numerator, c.denominator):
                if m is not None and m not in names:
                    names.append(m)
        return tuple(names)


@dataclass(frozen=True)
class Statement:
    """``m[keys] += expr``."""

    target: MapRef
    expr: Expr
    pos: Pos | None = field(default=None, compare=False, repr=False, kw_only=True)


@dataclass(frozen=True)
class Trigger:
    """``ON +R(x, y) DO { ... }`` (sign +1) or ``ON -R(...)`` (sign -1)."""

    relation: str
    sign: int
    vars: tuple[str, ...]
    statements: tuple[Statement, ...]
    pos: Pos | None = field(default=None, compare=False, repr=False, kw_only=True)


@dataclass(frozen=True)
class Program:
    """A whole M3 program: declarations and triggers."""

    relations: tuple[RelationDecl, ...] = ()
    maps: tuple[MapDecl, ...] = ()
    views: tuple[ViewDecl, ...] = ()
    triggers: tuple[Trigger, ...] = ()

    def relation(self, name: str) -> RelationDecl:
        return _find(self.relations, name, "relation")

    def map(self, name: str) -> MapDecl:
        return _find(self.maps, name, "map")

    def view(self, name: str) -> ViewDecl:
        return _find(self.views, name, "view")

    def trigger(self, relation: str, sign: int) -> Trigger | None:
        for t in self.triggers:
            if t.relation == relation and t.sign == sign:
                return t
        return None


def _find(items, name, what):
    for item in items:
        if item.name == name:
            return item
    raise KeyError(f"no {what} named {name!r}")


def const_type(value: ConstValue) -> str:
    """The M3 type of a Python constant.

    >>> const_type(3), const_type(2.5), const_type("x"), const_type(datetime.date(2020, 1, 1))
    ('INT', 'FLOAT', 'STRING', 'DATE')
    """
    if isinstance(value, bool):
        raise TypeError("booleans are not M3 constants")
    if isinstance(value, int):
        return "INT"
    if isinstance(value, float):
        return "FLOAT"
    if isinstance(value, str):
        return "STRING"
    if isinstance(value, datetime.date):
        return "DATE"
    raise TypeError(f"not an M3 constant: {value!r}")


def walk(expr: Expr):
    """Yield ``expr`` and every sub-expression, pre-order."""
    yield expr
    if isinstance(expr, (Prod,)):
        for f in expr.factors:
            yield from walk(f)
    elif isinstance(expr, Sum):
        for t in expr.terms:
            yield from walk(t)
    elif isinstance(expr, Cmp):
        yield from walk(expr.left)
        yield from walk(expr.right)
    elif isinstance(expr, IfThen):
        yield from walk(expr.cond)
        yield from walk(expr.then)
    elif isinstance(expr, (MapRef, RelAtom)):
        for a in expr.args:
            yield from walk(a)


def variables(expr: Expr) -> list[str]:
    """The variable names in ``expr``, in order of first appearance."""
    out: list[str] = []
    for node in walk(expr):
        if isinstance(node, Var) and node.name not in out:
            out.append(node.name)
    return out
