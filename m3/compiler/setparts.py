"""Set operations whose branches hold nested subqueries: each branch a part of its own, the view over their counts.

Why not the maps of :mod:`.union` and :mod:`.setops`: a branch with a subquery
in its WHERE is not a sum of its relations' rows but a ``TOTAL`` over them
where the nested condition holds (:mod:`.nested`), keyed by the variables that
condition reads; two such branches have different extra keys and conditions,
so their maps cannot be added or set side by side in one query.  What every
branch *does* have is its row count per output row, a view expression over
its own first-order maps.  So the statement becomes a view over parts (as a
grouped derived table read by value is, :mod:`.lifted`, :mod:`.liftview`):

* part ``i`` is branch ``i`` compiled as a query of its own, as a bag
  (``SELECT DISTINCT`` dropped: a set operation reads only whether its count
  is above 0, and under ``INTERSECT ALL`` and ``EXCEPT ALL`` a DISTINCT
  branch's count is ``LEAST(c, 1)``, 1 where the bag count is above 0), its
  column 0 the count of each row (``#i.0[K, ...]``: a constant column such as
  ``SELECT s, 9`` would be a value column before it, so it is refused);
* the view, keyed by the first branch's column names, reads those counts at
  its row and combines them as SQL does:

  ========================  ===============================================
  ``UNION ALL``             ``count := c0 + c1 + ...`` where it is above 0
  ``UNION``                 ``count := 1`` where ``0 < c0 OR 0 < c1 ...``
  ``INTERSECT``             ``count := 1`` where ``0 < c0 AND 0 < c1 ...``
  ``EXCEPT``                ``count := 1`` where ``0 < c0 AND c1 <= 0 ...``
  ``INTERSECT ALL``         ``count := LEAST(c0, c1, ...)`` where above 0
  ``EXCEPT ALL``            ``count := GREATEST(c0 - c1 - ..., 0)`` where above 0
  ========================  ===============================================

Unaliased expressions are named as the front end names them (``expr_1``).
Each part keeps its own cost class (a nested subquery's TOTAL is domain-bound);
the combination costs a lookup per part at each row read.  Branches pair
their columns by position (names from the first, as SQL); a branch with a
different number of columns is refused, and so is ``*`` in the first branch
(its names are not known before the parts are compiled).

>>> import sqlglot
>>> from .examples import PlainErrors
>>> from ..printer import format_view_expr
>>> sel = sqlglot.parse_one("SELECT a FROM R WHERE a IN (SELECT b FROM S) UNION SELECT c FROM T")
>>> nested_branches(sel)
True
>>> p = plan("UNION", list(sel.find_all(sqlglot.exp.Select))[0:1] + [sel.expression], PlainErrors())
>>> [s.sql() for s in p.parts], p.keys, p.key_vars
(['SELECT a FROM R WHERE a IN (SELECT b FROM S)', 'SELECT c FROM T'], ('a',), ('A',))
>>> format_view_expr(p.columns[0][1]), format_view_expr(p.where)
('1', '0 < #0.0[A] OR 0 < #1.0[A]')
"""

from __future__ import annotations

import functools

from sqlglot import exp

from ..ast import Cmp, Const, Expr, MapRef, Var
from ..viewnodes import Arith, BoolOp
from .lifted import Plan
from .nodes import sql_of
from .outputs import unique_names
from .resolve import Positions
from .subqueries import contains_subquery


def nested_branches(sel: exp.Expression) -> bool:
    """Whether a set-operation statement has a branch whose WHERE holds a subquery (module doc)."""
    if not isinstance(sel, exp.SetOperation):
        return False
    return any(type(b) is exp.Select and isinstance(b.args.get("where"), exp.Where) and
               contains_subquery(b.args["where"].this) for b in _leaves(sel))


def _leaves(u: exp.Expression) -> list[exp.Expression]:
    if isinstance(u, exp.SetOperation):
        return _leaves(u.this) + _leaves(u.expression)
    return [u]


def plan(kind: str, branches: list[exp.Select], ctx: Positions) -> Plan:
    """The parts and the view of a set operation ``kind`` (``UNION ALL``, ``UNION``, ``INTERSECT [ALL]``,
    ``EXCEPT [ALL]``) over ``branches`` (validated by :mod:`.union` or :mod:`.setops`)."""
    first = branches[0]
    if any(isinstance(e, exp.Star) or isinstance(e.this, exp.Star) for e in first.expressions):
        raise ctx.error(f"unsupported * in the first branch of an {kind} whose branches hold subqueries "
                        f"({sql_of(first)}): name the columns", first)
    names = output_names(first)
    parts = []
    key_vars = tuple(key_variables(names))
    counts: list[Expr] = []
    for i, b in enumerate(branches):
        if len(b.expressions) != len(names):
            raise ctx.error(f"{kind} branches select {len(names)} and {len(b.expressions)} columns", b)
        constant = next((e for e in b.expressions if _constant(e)), None)
        if constant is not None:  # the part's view would hold it as a value column before its count (column 0)
            raise ctx.error(f"unsupported constant column {sql_of(constant)} in the {kind} branch {sql_of(b)} of a "
                            "set operation whose branches hold subqueries: select a column", constant)
        part = b.copy()
        part.set("distinct", None)  # a bag: a DISTINCT part's count := 1 would be read without its WHERE
        parts.append(part)
        count: Expr = MapRef(f"#{i}.0", tuple(Var(v) for v in key_vars))
        if b.args.get("distinct") is not None and kind.endswith(" ALL"):
            count = Arith("LEAST", count, Const(1))  # a bag count is a whole number >= 0: 1 where above 0
        counts.append(count)
    count, where = combine(kind, counts)
    return Plan(tuple(parts), tuple(names), key_vars, (("count", count),), where)


def output_names(first: exp.Select) -> list[str]:
    """The view's column names from the first branch: an alias, a column's name, else named as the front end names
    an unaliased item (``expr_1``, ``sum_2``: :func:`.outputs.select_items`), made unique as DuckDB's.

    >>> import sqlglot
    >>> output_names(sqlglot.parse_one("SELECT a, a, b + 1, c AS d FROM R"))
    ['a', 'a_1', 'expr_1', 'd']
    """
    out, computed = [], 0
    for e in first.expressions:
        x = e.this if type(e) is exp.Alias else e
        while type(x) is exp.Paren:
            x = x.this
        name = e.alias if type(e) is exp.Alias else x.name if type(x) is exp.Column else ""
        if not name:
            computed += 1
            name = f"{type(x).__name__.lower()}_{computed}" if isinstance(x, exp.AggFunc) else f"expr_{computed}"
        out.append(name)
    return unique_names(out)


def _constant(e: exp.Expression) -> bool:
    """Whether a SELECT item reads no column and no aggregate (``9``, ``'x'``, ``1 + 2``): a value column of a view
    of rows, not a key."""
    return not any(isinstance(n, (exp.Column, exp.AggFunc, exp.Star, exp.Subquery, exp.Select)) for n in e.walk())


def key_variables(names: list[str]) -> list[str]:
    """Upper-cased, de-duplicated variable names for the view's key columns (``a``, ``A`` → ``A``, ``A_2``)."""
    taken: set[str] = set()
    out = []
    for n in names:
        base = candidate = n.upper()
        k = 1
        while candidate in taken:
            k += 1
            candidate = f"{base}_{k}"
        taken.add(candidate)
        out.append(candidate)
    return out


def combine(kind: str, counts: list[Expr]) -> tuple[Expr, Expr]:
    """``(count, condition)`` of a row from its branches' counts (module doc's table).

    >>> from ..printer import format_view_expr
    >>> c = [MapRef("#0.0", (Var("A"),)), MapRef("#1.0", (Var("A"),)), MapRef("#2.0", (Var("A"),))]
    >>> [format_view_expr(x) for x in combine("EXCEPT", c)]
    ['1', '0 < #0.0[A] AND #1.0[A] <= 0 AND #2.0[A] <= 0']
    >>> [format_view_expr(x) for x in combine("UNION ALL", c[:2])]
    ['#0.0[A] + #1.0[A]', '0 < #0.0[A] + #1.0[A]']
    """
    def above(x: Expr) -> Expr:
        return Cmp("<", Const(0), x)

    if kind == "UNION ALL":
        total = functools.reduce(lambda a, b: Arith("+", a, b), counts)
        return total, above(total)
    if kind == "INTERSECT ALL":
        least = functools.reduce(lambda a, b: Arith("LEAST", a, b), counts)
        return least, above(least)
    if kind == "EXCEPT ALL":
        left = functools.reduce(lambda a, b: Arith("-", a, b), counts)
        return Arith("GREATEST", left, Const(0)), above(left)
    if kind == "UNION":
        return Const(1), BoolOp("OR", tuple(above(c) for c in counts))
    if kind == "INTERSECT":
        return Const(1), BoolOp("AND", tuple(above(c) for c in counts))
    if kind == "EXCEPT":
        return Const(1), BoolOp("AND", (above(counts[0]),) + tuple(Cmp("<=", c, Const(0)) for c in counts[1:]))
    raise ValueError(f"unknown set operation {kind}")


def unordered(sel: exp.Expression, name: str, ctx: Positions) -> tuple[exp.Expression, str | None]:
    """A set-operation statement without its ORDER BY, and the note that it was ignored (a view is a set of
    rows, as :func:`.outputs.order_note` says of a SELECT's); ORDER BY what is not an output of the first
    branch (a name or a position) is refused, as SQL does.

    >>> import sqlglot
    >>> from .examples import PlainErrors
    >>> s, note = unordered(sqlglot.parse_one("SELECT a FROM R INTERSECT SELECT b FROM S ORDER BY a"), "Q1", PlainErrors())
    >>> s.sql(), note
    ('SELECT a FROM R INTERSECT SELECT b FROM S', 'Q1: ORDER BY ignored: a view is a set of rows (sort them when reading the view)')
    """
    order = sel.args.get("order") if isinstance(sel, exp.SetOperation) else None
    if order is None:
        return sel, None
    first = _leaves(sel)[0]
    names = {e.alias_or_name.lower() for e in first.expressions} if type(first) is exp.Select else set()
    width = len(first.expressions) if type(first) is exp.Select else 0
    for o in order.expressions:
        x = o.this if type(o) is exp.Ordered else o
        while type(x) is exp.Paren:
            x = x.this
        if type(x) is exp.Literal and not x.is_string and str(x.this).isdigit() and 1 <= int(x.this) <= width:
            continue
        if type(x) is exp.Column and not x.table and x.name.lower() in names:
            continue
        raise ctx.error(f"ORDER BY {sql_of(x)} of a set operation is not one of its output columns (order by an "
                        "output's name or position)", x)
    sel = sel.copy()
    sel.set("order", None)
    return sel, f"{name}: ORDER BY ignored: a view is a set of rows (sort them when reading the view)"


def set_kind(u: exp.Expression) -> str:
    """``UNION`` or ``UNION ALL`` of a union statement (a UNION anywhere at its top makes it a set)."""
    return "UNION" if isinstance(u, exp.Union) and u.args.get("distinct") is not False else "UNION ALL"
