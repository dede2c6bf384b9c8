"""The M3 abstract syntax tree: frozen dataclasses, one per construct.

Follows Figure 1 of the Cumulus paper (seed 001): a program is a list of
triggers ``ON +R(x, y) DO { m[x, z] += expr; ... }``; an expression is a
product of constants, variables, map references and ``IF a CMP b THEN e
ELSE 0``.  Boreas adds the declarations that make a program self-contained:
the relations events come from, each map's key columns, value type and
*defining query* (a sum of products over relation atoms, so a map's value can
be computed from existing data), and views (the query results, named output
columns over maps; AVG is the quotient of two maps).

A view column is a map, the quotient of two (AVG), or — for arithmetic over
aggregates, MIN/MAX, COUNT(DISTINCT), HAVING, DISTINCT and views without
aggregates — a *view expression* (map entries, constants, the row's key
variables, and the view language's own nodes in :mod:`.viewnodes`:
arithmetic, folds, conditions, ``TOTAL``) read when the view is read; such a
view names each output key's variable and may have a ``WHERE`` condition
(:class:`Cmp`, :class:`~.viewnodes.BoolOp`) that a row must meet to be in
the view.

Positions (``pos``) are kept for error messages and ignored by equality, so
``parse(print(p)) == p``.
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass, field
from functools import cached_property

from .errors import Pos

TYPES = ("INT", "FLOAT", "STRING", "DATE")
CMP_OPS = ("=", "<>", "<", "<=")  # Figure 1 has = < <=; <> is a Boreas extension
LIKE_OPS = ("LIKE", "NOT LIKE")  # a Boreas extension: a string column against a constant pattern (:mod:`.like`)

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


@dataclass(frozen=True)
class Call:
    """``YEAR(D)``, ``SUBSTRING(P, 1, 2)``: a scalar function of a variable and integer constants
    (:mod:`.functions`).  In a map definition it stands in a *lift* ``{K = YEAR(D)}`` (``K`` is the year of
    ``D``); in a trigger it is a value computed from the event's row (a map key, a side of a guard)."""

    fn: str
    args: tuple[Var | Const, ...]
    pos: Pos | None = field(default=None, compare=False, repr=False, kw_only=True)


Val = Var | Const | Call


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


Expr = Const | Var | Call | MapRef | RelAtom | Cmp | IfThen | Prod | Sum
# View expressions add the nodes of :mod:`.viewnodes` (``Arith``, ``Fold``, ``BoolOp``, ``Total``) and
# :class:`.over.Over`; :func:`walk` visits them through their ``children()``.


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
    """One value column of a view: a map, the quotient of two (AVG; 0 / 0 is 0), or ``expr``.

    ``numerator``/``denominator`` read the maps at the row's key, positionally
    (key column i of the view is key i of the map); ``expr`` is a view
    expression over the view's key variables (a view that names them).
    """

    name: str
    numerator: str | None = None
    denominator: str | None = None
    expr: Expr | None = None
    pos: Pos | None = field(default=None, compare=False, repr=False, kw_only=True)


@dataclass(frozen=True)
class ViewDecl:
    """``DECLARE VIEW v[key, ...](col := m, avg := s / c)``: a query's result.

    Its rows are the keys present in any of its maps; key columns are named by
    ``keys`` (the SQL output names).  A *general* view names each key
    column's variable (``key_vars``: ``v[k := K, k2 := K]``), reads maps
    through view expressions (``col := m[K] * 2``) and may keep only the rows
    meeting ``where``: its rows are the values of its variables at which some
    map it reads has an entry, and where ``where`` holds.

    ``internal`` names the key columns that are not output columns (``GROUP
    BY b`` with ``b`` not selected, written ``v[s, b INTERNAL]``): they keep
    the view's rows apart and can be read by name (the query API), but an
    output row leaves them out -- SQL returns only the selected columns, so two
    groups may give equal output rows.

    ``always`` (written ``ALWAYS`` after the columns) marks a view without keys whose one row is present
    whatever its maps hold, as SQL's aggregate without GROUP BY has its row over no rows: a constant term
    (``SELECT (SELECT COUNT(*) FROM R) + 1``) is then shown while the maps are empty.  A view with keys is
    ``ALWAYS`` at a fixed, finite set of output keys (``fixed``, written ``ALWAYS AT [0], [1]``): its rows at
    those keys are there whatever its maps hold, as SQL's UNION ALL of aggregates without GROUP BY has one row
    per branch (the key: the branch number) over no rows.
    """

    name: str
    keys: tuple[str, ...]
    columns: tuple[ViewColumn, ...]
    key_vars: tuple[str, ...] = ()
    where: Expr | None = None
    internal: tuple[str, ...] = ()
    always: bool = False  # a view without keys whose one row is there while its maps are empty (``ALWAYS``)
    fixed: tuple[tuple, ...] = ()  # an ALWAYS view's output keys whose rows are always there (``ALWAYS AT``)
    pos: Pos | None = field(default=None, compare=False, repr=False, kw_only=True)

    @property
    def general(self) -> bool:
        """Whether the view uses more than plain maps and quotients read positionally."""
        return bool(self.key_vars) or self.where is not None or any(c.expr is not None for c in self.columns)

    @property
    def output_keys(self) -> tuple[int, ...]:
        """The positions of the key columns an output row holds (every key but the internal ones)."""
        return tuple(i for i, k in enumerate(self.keys) if k not in self.internal)

    @property
    def plain_map(self) -> str | None:
        """The one map that is the whole view (one column, a map read positionally), else None."""
        if len(self.columns) == 1 and not self.general and self.columns[0].denominator is None:
            return self.columns[0].numerator
        return None

    @cached_property
    def maps(self) -> tuple[str, ...]:
        """Every map the view reads, in order of appearance (worked out once: the view is immutable, and
        ``changes()`` asks for it per changed row)."""
        names: list[str] = []
        for c in self.columns:
            found = [c.numerator, c.denominator] + [n.name for n in _walk_opt(c.expr) if isinstance(n, MapRef)]
            for m in found:
                if m is not None and m not in names:
                    names.append(m)
        for n in _walk_opt(self.where):
            if isinstance(n, MapRef) and n.name not in names:
                names.append(n.name)
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
    if isinstance(expr, Prod):
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
    elif isinstance(expr, (MapRef, RelAtom, Call)):
        for a in expr.args:
            yield from walk(a)
    elif hasattr(expr, "children"):  # view expressions (:mod:`.viewnodes`, :class:`.over.Over`)
        for c in expr.children():
            yield from walk(c)


def _walk_opt(expr: Expr | None):
    return () if expr is None else walk(expr)


def variables(expr: Expr) -> list[str]:
    """The variable names in ``expr``, in order of first appearance."""
    out: list[str] = []
    for node in walk(expr):
        if isinstance(node, Var) and node.name not in out:
            out.append(node.name)
    return out


def lift(c: Expr) -> tuple[str, Call | Sum | Prod] | None:
    """``(K, call)`` when ``c`` is a lift ``{K = call}`` of a map definition (:class:`Call`), of arithmetic
    ``{K = A + B}`` (a computed key), or of a constant (a constant key, ``{K = 0}``: where ``K`` is bound already,
    the lift is the comparison it also reads as),
    else None.

    >>> lift(Cmp("=", Var("K"), Call("YEAR", (Var("D"),)))), lift(Cmp("=", Var("K"), Var("D")))
    (('K', Call(fn='YEAR', args=(Var(name='D'),))), None)
    >>> lift(Cmp("=", Var("K"), Prod((Const(2), Var("A")))))[0], lift(Cmp("=", Var("K"), Const(0)))
    ('K', ('K', Const(value=0)))
    """
    if isinstance(c, Cmp) and c.op == "=" and isinstance(c.left, Var) and isinstance(c.right, (Call, Sum, Prod, Const)):
        return c.left.name, c.right
    return None
