"""Constant keys: an outer join's padded column read as a key is one constant in the part that pads it.

Why (docs/m3.md "Outer joins"): ``SELECT s.c, COUNT(*) FROM R r LEFT JOIN S s ON r.b = s.b GROUP BY s.c``
is the inner join grouped by ``s.c`` plus the rows of ``r`` without a match, all in the group ``s.c = NULL``.
The view is keyed by ``s.c`` and its indicator ``s.c__null`` (an internal key, so reads show None where it is
1: :class:`boreas.m3.nullable.ViewNulls`); in the anti part both are constants, ``(0, 1)``, and in the inner
part the indicator is 0 (or the column's own indicator where ``s.c`` is nullable).  A part's SELECT leaves
its constant keys out; :func:`with_constants` puts them back into its resolved query as :class:`ConstKey`,
which the normaliser binds as DBToaster binds a constant, by a lift ``{K = 0}`` in every term
(:func:`.normalize.lift_computed`): after a delta the lift binds ``K`` to the constant (:mod:`.lifts`), so
the part's map has its entries at that key and the view reads it as any part's (:mod:`.liftview`).

>>> from .sqlquery import SqlQuery
>>> q = SqlQuery("Q1_p1", (("r", "R"),), (), None, (("k1", ("r", "a")),), ())
>>> [str(r) for _, r in with_constants(q, {0: ConstKey(0, "INT", 0), 2: ConstKey(1, "INT", 2)}).group_by]
['0', "('r', 'a')", '1']
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from sqlglot import exp

from ..nullable import ZERO, indicator
from .padding import conjuncts, refs
from .resolve import Positions
from .sqlquery import SqlQuery

#: Column types whose padded NULL a constant key stands for: each type's zero (0, 0.0, '' and 1970-01-01, the
#: zeros a nullable key's NULL is stored as, :data:`..nullable.ZERO`); the indicator tells it from a value.
KEYED_TYPES = dict(ZERO)


@dataclass(frozen=True)
class ConstKey:
    """A key column that is the constant ``value`` in every row of a part; ``slot``, its position among the
    part's keys, keeps two constant keys of equal value two variables (a view's keys stay apart)."""

    value: object
    type: str
    slot: int

    def __str__(self) -> str:
        return repr(self.value)


def with_constants(q: SqlQuery, constants: dict[int, ConstKey]) -> SqlQuery:
    """``q`` (a part whose SELECT left its constant keys out) with them at their positions among its keys."""
    if not constants:
        return q
    group = list(q.group_by)
    for pos in sorted(constants):
        group.insert(pos, (f"k{pos}", constants[pos]))
    return replace(q, group_by=tuple(group))


def _type(k: exp.Column, q: exp.Select, relations: dict) -> str:
    """The declared type of a FROM item's column (``k`` qualified by its alias)."""
    from_ = q.args.get("from_") or q.args.get("from")
    tables = ([from_.this] if isinstance(from_, exp.From) else []) + [j.this for j in q.args.get("joins") or []]
    rel = next(t.name for t in tables if t.alias_or_name.lower() == k.table.lower())
    decl = next(r for n, r in relations.items() if n.lower() == rel.lower())
    return next(c.type for c in decl.columns if c.name.lower() == k.name.lower())


def padded_keys(keys: list, values: list, sides: set[str], maybe: frozenset, relations: dict, q: exp.Select,
                kind: str, ctx: Positions) -> list:
    """The indicator keys beside an outer join's keys: ``(i, its indicator column)`` for a nullable key ``i``,
    ``(i, None)`` for a padded one that is not nullable (0 where its side is present); a padded key that is
    not a column, or a value reading one outside an aggregate, is refused by name.  HAVING (named ``"HAVING"``
    in ``values``) may read one: :mod:`.outerview` reads a key with its indicator, NULL where that is 1."""
    for name, v in values:  # a padded key outside an aggregate is NULL in its part, read there as its constant
        col = next((c for c in (v.find_all(exp.Column) if v is not None else ()) if refs(c) & sides and
                    c.find_ancestor(exp.AggFunc) is None), None)
        if col is not None and name != "HAVING":  # HAVING reads it with its indicator: NULL, not TRUE, where padded
            raise ctx.error(f"unsupported {kind} JOIN reading the padded key {col.sql()} outside an aggregate "
                            f"({v.sql()}): it is NULL in the rows without a match, read there as its part's "
                            f"constant; select it as a column of its own", col)
    out = []
    equal = {frozenset((c.left.sql().lower(), c.right.sql().lower())) for j in q.args.get("joins") or []
             for c in conjuncts(j.args.get("on")) if type(c) is exp.EQ and type(c.left) is type(c.right) is exp.Column}
    for i, (_, k) in enumerate(keys):
        padded = bool(refs(k) & sides)
        other = next((o for _, o in keys if padded and frozenset((k.sql().lower(), o.sql().lower())) in equal), None)
        if other is not None:  # one variable where matched: the plan's two keys would be one in every part
            raise ctx.error(f"unsupported {kind} JOIN reading {k.sql()} and {other.sql()} as keys: the ON condition "
                            f"makes them one key where rows match, and {k.sql()} is NULL where they do not: "
                            "select one of them", k)
        if padded and type(k) is not exp.Column and (not keyable(k) or
                                                     any(_type(c, q, relations) != "INT" for c in k.find_all(exp.Column))):
            raise ctx.error(f"unsupported {kind} JOIN reading {k.sql()} as a key (selected or grouped by): an "
                            "expression key over a padded column is built for + - * % and COALESCE over INT "
                            "columns only: aggregate it", k)
        if padded and type(k) is exp.Column and _type(k, q, relations) not in KEYED_TYPES:
            raise ctx.error(f"unsupported {kind} JOIN reading {k.sql()} as a key (selected or grouped by): it is "
                            f"NULL in the rows without a match, a constant key of its part, built for columns "
                            f"only: aggregate it, or COALESCE it in an aggregate", k)
        if type(k) is not exp.Column and maybe and any((c.table.lower(), c.name.lower()) in maybe
                                                       for c in k.find_all(exp.Column)):
            raise ctx.error(f"unsupported {kind} JOIN reading {k.sql()} as a key: an expression key over a "
                            "nullable column (its NULL group) is not built over an outer join", k)
        if type(k) is exp.Column and (k.table.lower(), k.name.lower()) in maybe:
            out.append((i, exp.column(indicator(k.name), k.table)))
        elif padded:
            out.append((i, None))
    return out


def keyable(k: exp.Expression) -> bool:
    """Whether an expression key over an outer join is built: ``+ - * %``, unary minus, integer constants and
    ``COALESCE`` over columns (a part folds it with its padded columns NULL: :func:`part_constants`).

    >>> import sqlglot
    >>> [keyable(sqlglot.parse_one(e)) for e in ("s.d % 2 + 1", "COALESCE(s.d, r.a) * 2", "s.d / 2", "ABS(s.d)")]
    [True, True, False, False]
    """
    return all(type(n) in (exp.Column, exp.Add, exp.Sub, exp.Mul, exp.Mod, exp.Neg, exp.Paren, exp.Coalesce,
                           exp.Identifier) or type(n) is exp.Literal and n.is_int for n in k.walk())


def int_constant(e: exp.Expression) -> int | None:
    """The value of an expression of int literals under ``+ - * %`` and unary minus (``%`` as SQL's: the sign
    of the dividend), else None: a key a part folds to ``-1`` or ``0 + 1`` is that constant there.

    >>> import sqlglot
    >>> [int_constant(sqlglot.parse_one(e)) for e in ("-1", "0 + 1", "-5 % 2", "(2 * 3) - 1", "1 % 0", "a + 1")]
    [-1, 1, -1, 5, None, None]
    """
    if type(e) is exp.Literal:
        return int(e.name) if e.is_int else None
    if type(e) in (exp.Paren, exp.Neg):
        inner = int_constant(e.this)
        return None if inner is None else (inner if type(e) is exp.Paren else -inner)
    if type(e) in (exp.Add, exp.Sub, exp.Mul, exp.Mod):
        a, b = int_constant(e.this), int_constant(e.expression)
        if a is None or b is None or (type(e) is exp.Mod and b == 0):
            return None
        if type(e) is exp.Mod:
            return (abs(a) % abs(b)) * (-1 if a < 0 else 1)
        return a + b if type(e) is exp.Add else a - b if type(e) is exp.Sub else a * b
    return None


def part_constants(keys: list, shown: int, padded: set[str], relations: dict, q: exp.Select,
                   folded: list | None = None) -> dict[int, ConstKey]:
    """The keys (of ``keys``: the ``shown`` ones, then :func:`padded_keys`) that are constants in a part padding
    the sides ``padded``: a padded key 0 and its indicator 1; a padded key's indicator 0 where its side is
    present and it is not nullable.  An expression key is as ``folded`` (per key, as this part reads it) says:
    NULL, a padded key as above; an integer (``COALESCE(s.d, 0)``), that constant with its indicator 0; an
    expression still reading columns (``COALESCE(s.d, r.a)``: ``r.a``), a key of the part, its indicator 0."""
    out = {}
    for n, (x, k) in enumerate(keys):
        f = folded[n] if folded is not None else k
        if n < shown:
            if refs(k) & padded and type(k) is exp.Column:
                t = _type(k, q, relations)
                out[n] = ConstKey(KEYED_TYPES[t], t, n)
            elif refs(k) & padded and (type(f) is exp.Null or (value := int_constant(f)) is not None):
                out[n] = ConstKey(0 if type(f) is exp.Null else value, "INT", n)
        elif refs(keys[x][1]) & padded and (type(keys[x][1]) is exp.Column or type(folded[x]) is exp.Null):
            out[n] = ConstKey(1, "INT", n)
        elif k is None:
            out[n] = ConstKey(0, "INT", n)
    return out
