"""INTERSECT and EXCEPT statements of views of rows: one row-count map per branch, and a condition over them.

A set operation keeps a row by whether each branch *has* it, which a sum of
the branches cannot say (UNION can: a row is in ``A UNION B`` while the sum of
its counts is above 0, :mod:`.union`).  So each branch is compiled as ``SELECT
DISTINCT`` on its own -- its map counts the branch's rows per distinct row --
and the maps stay apart; the view's condition reads them at the row:

* ``A INTERSECT B INTERSECT C``: ``rows_A > 0 AND rows_B > 0 AND rows_C > 0``;
* ``A EXCEPT B EXCEPT C`` (left-associative: A minus B, minus C):
  ``rows_A > 0 AND rows_B <= 0 AND rows_C <= 0``.

``INTERSECT ALL`` and ``EXCEPT ALL`` (bags) keep each branch a view of rows
(no DISTINCT: its map counts how many times each row occurs) and the view is
a multiset view whose ``count`` is computed from those counts when read
(:func:`bag_count`): ``LEAST(count_A, count_B, ...)`` for INTERSECT ALL, and
``GREATEST(count_A - count_B - count_C, 0)`` for EXCEPT ALL (left-associative:
``max(max(a - b, 0) - c, 0)`` is ``max(a - b - c, 0)`` for counts >= 0),
holding the rows whose count is above 0.

Every map is a first-order count maintained by its own branch's relations, so
an event costs what it costs in the branch alone; a view's rows are where one
of its maps has an entry, then the condition decides (a row only B has is
read and dropped).  The branches pair their columns by position (names from
the first); types must match.  A chain mixing ALL and set operations, a set
operation of aggregated queries beside views of rows (all aggregated: :mod:`.setagg`) and a UNION inside one
are refused by name;
a statement with a subquery in a branch's WHERE is a view over its branches
as parts (:mod:`.setparts`).

>>> import sqlglot
>>> from .examples import PlainErrors
>>> op, sides = branches(sqlglot.parse_one("SELECT a FROM R EXCEPT SELECT b FROM S EXCEPT SELECT c FROM T"), PlainErrors())
>>> op, [s.sql() for s in sides]
('EXCEPT', ['SELECT DISTINCT a FROM R', 'SELECT DISTINCT b FROM S', 'SELECT DISTINCT c FROM T'])
>>> op, sides = branches(sqlglot.parse_one("SELECT a FROM R INTERSECT ALL SELECT b FROM S"), PlainErrors())
>>> op, [s.sql() for s in sides]
('INTERSECT ALL', ['SELECT a FROM R', 'SELECT b FROM S'])
>>> branches(sqlglot.parse_one("SELECT a FROM R EXCEPT ALL SELECT b FROM S EXCEPT SELECT c FROM T"), PlainErrors())
Traceback (most recent call last):
...
boreas.m3.errors.CompileError: unsupported EXCEPT ALL beside EXCEPT in one statement (SELECT a FROM R EXCEPT ALL SELECT b FROM S): a chain is all bags or all sets
"""

from __future__ import annotations

import functools
from dataclasses import replace

from sqlglot import exp

from ..calculus import Agg, V, substitute
from ..errors import CompileError
from .columns import Aggregate
from .nodes import sql_of
from .predicates import conj, negate
from .resolve import Positions
from .union import branch_renaming

_ARGS = frozenset({"this", "expression", "distinct", "with_", "with"})
KINDS = {exp.Intersect: "INTERSECT", exp.Except: "EXCEPT"}


def is_setop(u: exp.Expression) -> bool:
    """Whether a statement is an INTERSECT or EXCEPT (this module's) rather than a UNION (:mod:`.union`)."""
    return type(u) in KINDS


def branches(u: exp.Expression, ctx: Positions) -> tuple[str, list[exp.Select]]:
    """``(kind, branches)`` of an INTERSECT or EXCEPT statement (kind ``INTERSECT ALL`` or ``EXCEPT ALL`` for bags),
    each branch of a set operation made ``SELECT DISTINCT``."""
    bag = u.args.get("distinct") is False
    kind = KINDS[type(u)] + (" ALL" if bag else "")
    w = u.args.get("with_") or u.args.get("with")
    body = u.copy()
    body.set("with_" if "with_" in body.args else "with", None)
    sides = _sides(body, type(body), bag, ctx)
    for b in sides:
        if type(b) is not exp.Select:
            raise ctx.error(f"unsupported {kind} branch {sql_of(b)} (a SELECT; a UNION inside an {kind} is not "
                            "supported)", b)
        aggregated = b.args.get("group") is not None or b.args.get("having") is not None or \
            any(isinstance(n, exp.AggFunc) for e in b.expressions for n in e.walk())
        if aggregated:
            raise ctx.error(f"unsupported {kind} of an aggregated query ({sql_of(b)}) and a view of rows: every "
                            f"branch aggregated (compiled as parts, compiler/setagg.py) or none", b)
        if not bag:
            b.set("distinct", exp.Distinct())
        if w is not None:
            b.set("with_" if "with_" in b.args else "with", w.copy())
    return kind, sides


def _sides(u: exp.Expression, cls: type, bag: bool, ctx: Positions) -> list[exp.Expression]:
    """The operands of a chain of one operation: INTERSECT on both sides, EXCEPT on its left (A - B - C)."""
    if not isinstance(u, exp.SetOperation):
        return [u]
    kind = KINDS.get(type(u), "UNION")
    if type(u) is not cls:
        raise ctx.error(f"unsupported {kind} inside an {KINDS[cls]} ({sql_of(u)}): one kind of set operation per "
                        "statement", u)
    if (u.args.get("distinct") is False) != bag:
        raise ctx.error(f"unsupported {kind} ALL beside {kind} in one statement ({sql_of(u)}): a chain is all bags "
                        "or all sets", u)
    for arg, value in u.args.items():
        if arg not in _ARGS and value not in (None, False, [], ""):
            raise ctx.error(f"unsupported {arg.rstrip('_').upper()} of {kind} ({sql_of(u)})", u)
    right = u.expression if cls is exp.Except else None
    if right is not None and isinstance(right, exp.SetOperation):
        raise ctx.error(f"unsupported {kind} of a parenthesised set operation ({sql_of(right)})", right)
    return _sides(u.this, cls, bag, ctx) + (_sides(u.expression, cls, bag, ctx) if right is None else [right])


def _shifted(x, offset: int):
    """A view expression or condition with its map references moved by ``offset`` (``("map", i)`` and kin)."""
    if isinstance(x, tuple) and x and x[0] in ("map", "avg", "fold"):
        return (x[0], *[i + offset if isinstance(i, int) else i for i in x[1:]])
    if isinstance(x, tuple):
        return tuple(_shifted(y, offset) for y in x)
    return x


def combine(kind: str, base, others: list):
    """``base`` (the first branch's :class:`.normalize.NormalQuery`) with every other branch's row-count map
    beside its own, keyed by the same variables, and the condition of ``kind`` over them (module doc)."""
    name, aggregates, conds = base.name, list(base.aggregates), []
    taken = {a.name for a in aggregates}
    used = {v.name for a in aggregates for t in a.agg.terms for v in t.vars()} | {k.name for k in base.keys}
    for n, nq in enumerate(others, start=2):
        if nq.nested is not None or base.nested is not None:
            raise CompileError(f"unsupported subquery in WHERE of an {kind} branch in view {name}")
        if len(nq.key_vars) != len(base.key_vars):
            raise CompileError(f"{kind} branches of view {name} select {len(base.key_vars)} and "
                               f"{len(nq.key_vars)} columns")
        mapping: dict[V, V] = {}
        for v, w in zip(nq.key_vars, base.key_vars):
            if v.type != w.type:
                raise CompileError(f"{kind} branches of view {name}: a {w.type} column beside a {v.type} one "
                                   "(cast one side)")
            if mapping.setdefault(v, w) != w or len(set(mapping.values())) != len(mapping):
                raise CompileError(f"{kind} branches of view {name} equate different columns (one selects a "
                                   "column twice)")
        rename = branch_renaming(nq.aggregates, mapping, used)
        offset = len(aggregates)
        for a in nq.aggregates:
            label, k = f"{a.name}_{n}", n
            while label in taken:
                k += 1
                label = f"{a.name}_{k}"
            taken.add(label)
            keys = tuple(rename.get(x, x) if isinstance(x, V) else x for x in a.agg.keys)
            aggregates.append(Aggregate(label, Agg(keys, tuple(substitute(t, rename) for t in a.agg.terms)),
                                        rename.get(a.folded, a.folded) if a.folded is not None else None))
        if kind.endswith(" ALL"):  # bags: the branch's count column, read at the row
            conds.append(_shifted(nq.columns[0][1], offset))
            continue
        has = _shifted(nq.where, offset)
        conds.append(has if kind == "INTERSECT" else negate(has))
    if kind.endswith(" ALL"):
        count, holds = bag_count(kind, [base.columns[0][1], *conds])
        return replace(base, aggregates=tuple(aggregates), columns=((base.columns[0][0], count),), where=holds)
    return replace(base, aggregates=tuple(aggregates), where=conj([base.where, *conds]))


def bag_count(kind: str, counts: list) -> tuple[tuple, tuple]:
    """``(count, condition)`` of an INTERSECT ALL or EXCEPT ALL row from its branches' counts (column expressions
    of :mod:`.columns`): how many times the row occurs, and that it occurs (module doc).

    >>> bag_count("INTERSECT ALL", [("map", 0), ("map", 1), ("map", 2)])
    (('LEAST', ('LEAST', ('map', 0), ('map', 1)), ('map', 2)), ('>', ('LEAST', ('LEAST', ('map', 0), ('map', 1)), ('map', 2)), 0))
    >>> bag_count("EXCEPT ALL", [("map", 0), ("map", 1)])
    (('GREATEST', ('-', ('map', 0), ('map', 1)), 0), ('>', ('-', ('map', 0), ('map', 1)), 0))
    """
    if kind == "INTERSECT ALL":
        count = functools.reduce(lambda a, b: ("LEAST", a, b), counts)
        return count, (">", count, 0)
    left = functools.reduce(lambda a, b: ("-", a, b), counts)
    return ("GREATEST", left, 0), (">", left, 0)
