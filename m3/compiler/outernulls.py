"""Outer joins over nullable columns: each part's three-valued logic spelt over indicators (docs/m3.md "NULLs").

Why its own module: an outer join's query is split into parts (:mod:`.outer`), inner joins whose padded side's
columns are NULL literals folded away (:mod:`.padding`); a nullable column of a side that is present in a part
is still NULL or not per row.  :mod:`.threevalued` checks such a query as its inner join and leaves it as it
is; here each part, once built, gets the rewrite a query of inner joins gets (:func:`.threevalued.rewriter`):

* **Folding** knows the nullable columns (:func:`nullable_columns`): ``s.c IS NULL`` of a present side is
  FALSE only where ``s.c`` is not nullable (``maybe`` of :func:`.padding.fold`).
* **The ON condition never matches a NULL.**  A comparison in it reading the preserved side's nullable column
  ``r.b`` and the other side is TRUE only where ``r.b`` is present, so :func:`implied` adds ``r.b IS NOT
  NULL``, a conjunct of the preserved side alone: the anti part splits on it (:func:`.outer.parts`), the rows
  whose ``r.b`` is NULL padded, and the others matched by ``NOT EXISTS`` with ``r.b`` known present there
  (no condition on the outer row is left inside the ``NOT EXISTS``, which it could not take out).
* **Each part** (:func:`explicit`): its WHERE TRUE where SQL's is, its ``NOT EXISTS`` rewritten in its own
  scope (a correlation with a nullable column holding only where it is present), its SUM, COUNT and AVG
  parts skipping NULLs (:func:`.nullaggs.skip_nulls`), its MIN/MAX filtered folds of the present values (in
  the anti part beside its match count too: the view reads rows and presence from the parts' COUNTs).
* **The view** (:func:`.outer.plan`): a key that is a nullable column of a side no part pads is grouped with
  its indicator, an internal key; a SUM/AVG that may read no value keeps its COUNT as a hidden column
  ``<column>__null`` (the NULL of an expression over it as :func:`.outerview.flagged` says), and ``__rows__null``
  the rows, so reads show SQL's NULLs (:class:`boreas.m3.nullable.ViewNulls`).

>>> import sqlglot
>>> from .examples import PlainErrors
>>> from ..ast import Column, RelationDecl
>>> cols = lambda *names: tuple(Column(n, "INT") for n in names)
>>> rels = {"R": RelationDecl("R", "STREAM", cols("a", "b", "b__null")),
...         "S": RelationDecl("S", "STREAM", cols("b", "b__null", "d"))}
>>> sel = sqlglot.parse_one("SELECT r.a FROM R r LEFT JOIN S s ON r.b = s.b")
>>> sorted(nullable_columns(sel, rels))
[('r', 'b'), ('s', 'b')]
>>> [c.sql() for c in implied(sqlglot.parse_one("SELECT 1 FROM R r, S s WHERE r.b = s.b").args["where"].this,
...                           {"r"}, nullable_columns(sel, rels))]
['NOT r.b IS NULL']
>>> part = sqlglot.parse_one("SELECT r.a AS k0, SUM(s.d) AS c0 FROM R r WHERE NOT r.b IS NULL AND "
...                          "NOT EXISTS (SELECT * FROM S s WHERE r.b = s.b) GROUP BY r.a")
>>> explicit(part, rels, PlainErrors()).sql()
'SELECT r.a AS k0, SUM(s.d) AS c0 FROM R AS r WHERE (r.b__null = 0 AND NOT EXISTS(SELECT * FROM S AS s WHERE (r.b = s.b AND s.b__null = 0))) GROUP BY r.a'
"""

from __future__ import annotations

from sqlglot import exp

from ..ast import Cmp, Const, Expr, RelationDecl
from ..nullable import ROWS, indicator
from .nullaggs import skip_nulls
from .nullcond import all_of
from .nullscope import in_scope
from .nullsub import rewrite_subquery
from .outerview import Reader, flagged
from .padding import conjuncts, refs
from .resolve import Positions
from .threevalued import rewriter

#: Comparisons TRUE only where every column they read is present.
_STRICT = (exp.EQ, exp.NEQ, exp.GT, exp.GTE, exp.LT, exp.LTE, exp.Between, exp.In, exp.Like, exp.ILike)
#: What may be TRUE of a NULL operand (a comparison over these is not strict).
_LENIENT = (exp.Coalesce, exp.Nullif, exp.Case, exp.Is, exp.Greatest, exp.Least, exp.Select)


def nullable_columns(sel: exp.Select, relations: dict[str, RelationDecl]) -> frozenset:
    """The nullable columns ((alias, column), lower case) of the FROM items of ``sel``, where it reads one; else
    none: an outer join reading no nullable column compiles as before (docs/m3.md "Outer joins")."""
    found = frozenset((a, n) for a, (_, nl) in in_scope(sel, relations).items() for n in nl)
    names = {n for _, n in found}
    read = any(type(c) is exp.Column and c.name.lower() in names for c in sel.walk())
    return found if read else frozenset()


def implied(on: exp.Expression, side: set[str], maybe: frozenset) -> list[exp.Expression]:
    """``x IS NOT NULL`` for each nullable column ``x`` of ``side`` that a comparison conjunct of ``on`` reading
    another side too needs present (module doc)."""
    out: dict[str, exp.Expression] = {}
    for c in conjuncts(on):
        if not _strict(c) or not refs(c) - side:
            continue
        for col in c.find_all(exp.Column):
            if col.table.lower() in side and (col.table.lower(), col.name.lower()) in maybe:
                out.setdefault(col.sql(), exp.Not(this=exp.Is(this=col.copy(), expression=exp.Null())))
    return list(out.values())


def _strict(c: exp.Expression) -> bool:
    """Whether a condition is TRUE only where every column it reads is present: a comparison over no COALESCE,
    CASE, IS, ...; or NOT of one (TRUE where the comparison is FALSE, which needs its operands too)."""
    c = c.this.this if type(c) is exp.Not and type(c.this) is exp.Paren else c.this if type(c) is exp.Not else c
    return type(c) in _STRICT and c.find(*_LENIENT) is None


def lenient(on: exp.Expression | None, side: set[str], maybe: frozenset) -> exp.Expression | None:
    """A conjunct of an outer join's ON condition that reads a nullable column of the preserved ``side`` and the
    other side and may be TRUE where that column is NULL (``COALESCE(r.b, 0) = s.d``, an OR): the preserved rows
    would need splitting on the column's presence inside the match, which is not built (refused by name).

    >>> import sqlglot
    >>> c = sqlglot.parse_one("SELECT 1 FROM R r, S s WHERE COALESCE(r.b, 0) = s.d AND NOT r.b = s.b").find(exp.And)
    >>> b = frozenset({("r", "b")})
    >>> lenient(c, {"r"}, b).sql(), lenient(c.expression, {"r"}, b)
    ('COALESCE(r.b, 0) = s.d', None)
    """
    for c in conjuncts(on) if on is not None else []:
        if refs(c) - side and not _strict(c) and any(
                (col.table.lower(), col.name.lower()) in maybe for col in c.find_all(exp.Column)
                if col.table.lower() in side):
            return c
    return None


def not_true(c: exp.Expression) -> exp.Expression:
    """``c`` is not TRUE (FALSE or NULL): the preserved rows an ON conjunct of their own side pads, read by
    :func:`explicit` as the complement of where ``c`` is TRUE."""
    return exp.Not(this=exp.Is(this=exp.Paren(this=c), expression=exp.true()))


def _not_true(c: exp.Expression) -> exp.Expression | None:
    """The condition ``c`` says is not TRUE (:func:`not_true`), if it says one."""
    if type(c) is exp.Not and type(c.this) is exp.Is and type(c.this.expression) is exp.Boolean:
        return c.this.this.this if type(c.this.this) is exp.Paren else c.this.this
    return None


def _is_present(c: exp.Expression) -> tuple[str, str] | None:
    """The column ``c`` says is not NULL (``NOT x IS NULL``), if it says one."""
    if type(c) is exp.Not and type(c.this) is exp.Is and type(c.this.expression) is exp.Null and \
            type(c.this.this) is exp.Column:
        return c.this.this.table.lower(), c.this.this.name.lower()
    return None


def explicit(part: exp.Select, relations: dict[str, RelationDecl], ctx: Positions) -> exp.Select:
    """An outer join's part (items: keys, then SUM/COUNT aggregates) with its NULLs over indicators (module
    doc), changed in place and returned."""
    rw = rewriter(part, relations, ctx)
    where = part.args.get("where")
    if where is not None:
        parts = conjuncts(where.this)
        known = frozenset(k for k in map(_is_present, parts) if k is not None)
        out = []
        for c in parts:
            if type(c) is exp.Not and type(c.this) is exp.Exists:  # the anti part's: the outer row's known present
                rewrite_subquery(rewriter(part, relations, ctx, known), c.this.this)
                out.append(c)
            elif _not_true(c) is not None:
                out.append(exp.Not(this=exp.Paren(this=rw.truth(_not_true(c)))))
            else:
                out.append(rw.truth(c))
        where.set("this", all_of(out))
    for agg in [n for n in part.find_all(exp.Sum, exp.Count, exp.Min, exp.Max) if n.parent_select is part]:
        # A MIN/MAX of a nullable column of the preserved side in the anti part is a filtered fold beside its match
        # count: the view reads the part's rows from its COUNT(*), the fold's presence from its COUNT (the nested-
        # fold rule of :func:`.nested.nested_vars` still needs the match to read group columns only).
        skip_nulls(rw, agg, beside_nested=True)
    return part


def reads_nullable(e: exp.Expression, maybe: frozenset) -> bool:
    """Whether ``e`` reads one of the nullable columns ``maybe``."""
    return any((c.table.lower(), c.name.lower()) in maybe for c in e.find_all(exp.Column))


def null_columns(names: list, shown: list, keys: list, key_vars: tuple, values: list, reader: Reader,
                 rows: Expr) -> tuple:
    """The rest of an outer join's :class:`.lifted.Plan` over nullable columns: its key names (an indicator
    key ``<key>__null`` beside each nullable one), key variables, columns (a hidden ``<column>__null`` beside
    each that may be NULL, 0 where it is, and ``__rows__null``) and condition."""
    n = len(shown)
    key_names = list(names[:n]) + [indicator(names[i]) for i, _ in keys[n:]]
    columns, hidden = [], []
    for name, (_, v) in zip(names[n:], values):
        value, flag = flagged(v, reader) if v is not None else (Const(1), None)
        columns.append((name, value))
        if flag is not None:
            hidden.append((indicator(name), flag))
    rest = hidden + [(ROWS, rows)] if hidden else []
    return tuple(key_names), key_vars, tuple(columns + rest), Cmp("<", Const(0), rows)
