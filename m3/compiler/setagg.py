"""Set operations of aggregated queries: each branch a part, the view a condition on what each has at a key.

Why: SQL's ``SELECT a, SUM(b) ... GROUP BY a UNION ALL SELECT c, COUNT(*) ... GROUP BY c`` holds one row per
(branch, group): a key may occur once per branch, so the branches' maps cannot be added (as :mod:`.union` adds
views of rows).  In the calculus each branch is an aggregate query of its own (a *part*, compiled from the
general rules, :mod:`.lifted`; :mod:`.setbranch` says what the view reads of it: its values, whether it has a
row at a key, whether a value is NULL), and the set operation is existence over the parts, as DBToaster lifts
it: a row is in ``A INTERSECT B`` where both have it, in ``A EXCEPT B`` where A has it and B has not, in ``A
UNION B`` where either has it.  A branch grouped by its selected columns has at most one row per key, so two
branches hold the same row at a key exactly where both have a row there with equal values (NULL equal to NULL,
as set operations compare):

==================  =====================================================================================
``UNION ALL``       keyed by the keys and a constant branch key ``{BR = i}`` (internal: a key in two branches
                    is two rows), value ``j`` the sum of the parts' ``#i.j * LEAST(rows_i, 1)`` (0 at another
                    branch's rows), where a part has its row
``UNION``           as UNION ALL, a row of branch ``i`` kept unless an earlier branch has the same row at its
                    key (that branch read at the row: a part of its own with the branch key ``i``)
keyless UNION [ALL] keyed by the branch key alone, ``ALWAYS AT [0], ..., [n - 1]`` (a row per branch also over
                    no rows, as SQL's: :attr:`boreas.m3.ast.ViewDecl.fixed`), ``LEAST(rows_i, 1)`` replaced by
                    ``GREATEST(0, 1 - (BR - i) * (BR - i))``, 1 at branch ``i``'s row (its rows may be none)
``INTERSECT``       keyed by the keys: branch 0's values, where every branch has the same row
``EXCEPT``          keyed by the keys: branch 0's values, where branch 0 has its row and no later one the same
==================  =====================================================================================

``INTERSECT ALL`` and ``EXCEPT ALL`` are INTERSECT and EXCEPT: every branch holds each row once.  A DISTINCT
branch is the branch.  Branches without GROUP BY have one row each, also over no rows (SQL): an INTERSECT or
EXCEPT of them is a view without keys whose row is there while its condition holds (``ALWAYS``).  Over nullable
columns each branch comes rewritten (:mod:`.nullsetops`): a nullable key has its indicator key (internal), a
value its ``__null`` column (0 where it is NULL), and the branches must have their nullable keys at the same
places.  Cost: that of
the parts (first-order for SUM/COUNT/AVG, domain-bound for MIN/MAX), a lookup per part at each row read; UNION
of n branches compiles branch ``k`` once more for each later branch (``n (n - 1) / 2`` more parts).

A UNION ALL branch may be grouped by columns it does not select (its rows values only, or a key beside): they
are internal keys in slots of its own, the other branches' parts holding constants there (:mod:`.setgroups`).

Refused by name: a branch whose GROUP BY columns are not its selected non-aggregate items (in a UNION ALL: not
all of them), items that are keys in one branch and values in another, ORDER BY or LIMIT in a branch, a
HAVING other than comparisons of aggregates and group columns under AND, OR, NOT, a chain of different kinds.

>>> import sqlglot
>>> from .examples import PlainErrors
>>> from ..printer import format_view_expr
>>> from ..ast import Column, RelationDecl
>>> p = plan(sqlglot.parse_one("SELECT a, SUM(b) AS s FROM R GROUP BY a UNION ALL SELECT c, COUNT(*) FROM S GROUP BY c"),
...          PlainErrors(), {})
>>> [s.sql() for s in p.parts], p.keys, p.internal
(['SELECT a, SUM(b) AS c0, COUNT(*) AS c1 FROM R GROUP BY a', 'SELECT c, COUNT(*) AS c0, COUNT(*) AS c1 FROM S GROUP BY c'], ('a', '__branch'), ('__branch',))
>>> format_view_expr(p.columns[0][1])
'#0.0[A, BRANCH] * LEAST(#0.1[A, BRANCH], 1) + #1.0[A, BRANCH] * LEAST(#1.1[A, BRANCH], 1)'
>>> format_view_expr(p.where)
'0 < #0.1[A, BRANCH] OR 0 < #1.1[A, BRANCH]'
>>> p = plan(sqlglot.parse_one("SELECT SUM(b) AS s FROM R UNION ALL SELECT COUNT(*) FROM S"), PlainErrors(), {})
>>> p.keys, p.fixed, p.where, format_view_expr(p.columns[0][1])
(('__branch',), ((0,), (1,)), None, '#0.0[BRANCH] * GREATEST(0, 1 - (BRANCH - 0) * (BRANCH - 0)) + #1.0[BRANCH] * GREATEST(0, 1 - (BRANCH - 1) * (BRANCH - 1))')
>>> p = plan(sqlglot.parse_one("SELECT a, SUM(b) AS s FROM R GROUP BY a EXCEPT SELECT c, COUNT(*) FROM S GROUP BY c"),
...          PlainErrors(), {"R": RelationDecl("R", "STREAM", (Column("a", "INT"), Column("b", "INT"))),
...                          "S": RelationDecl("S", "STREAM", (Column("c", "INT"),))})
>>> p.keys, format_view_expr(p.columns[0][1]), format_view_expr(p.where)
(('a',), '#0.0[A]', '0 < #0.1[A] AND NOT (0 < #1.1[A] AND #0.0[A] = #1.0[A])')
"""

from __future__ import annotations

import functools

from sqlglot import exp

from ..ast import Cmp, Const, Expr, RelationDecl, Var
from ..nullable import indicator
from ..viewnodes import Arith, BoolOp
from .lifted import Plan
from .nodes import sql_of
from .resolve import Positions
from .setbranch import Branch, aggregated, flat_bool, inexact, shown_items
from .setgroups import hidden_slots
from .setlifted import plan_union
from .setparts import key_variables, output_names

BRANCH = "__branch"  # the internal key: which branch a row is of
_KINDS = {exp.Union: "UNION", exp.Intersect: "INTERSECT", exp.Except: "EXCEPT"}


def _kind(u: exp.Expression) -> str:
    return _KINDS[type(u)] + (" ALL" if u.args.get("distinct") is False else "")


def _leaves(u: exp.Expression, kind: str) -> list[exp.Expression]:
    """The operands of a chain of one kind (EXCEPT's right side a leaf: A - B - C is left-associative)."""
    if isinstance(u, exp.SetOperation) and _kind(u) == kind:
        right = [u.expression] if kind.startswith("EXCEPT") else _leaves(u.expression, kind)
        return _leaves(u.this, kind) + right
    return [u]


def _aggregated(s: exp.Expression) -> bool:
    return type(s) is exp.Select and any(aggregated(e) for e in s.expressions)


#: What a set-operation node of such a statement may hold: its two sides (a LIMIT, OFFSET or ORDER BY of it is
#: left to :mod:`.union` and :mod:`.setops`, which refuse it by name).
_PARTS = frozenset({"this", "expression", "distinct"})


def _bare(u: exp.Expression) -> bool:
    return not isinstance(u, exp.SetOperation) or (
        all(k in _PARTS or v in (None, False, [], "") for k, v in u.args.items())
        and _bare(u.this) and _bare(u.expression))


def aggregated_union(sel: exp.Expression) -> bool:
    """Whether ``sel`` is a set-operation statement (no WITH, LIMIT, OFFSET or ORDER BY of its own) whose operands
    are all aggregated queries (a chain of another kind inside one is refused by :func:`plan`)."""
    if not isinstance(sel, exp.SetOperation):
        return False
    leaves = _all_leaves(sel)
    return _bare(sel) and all(map(_aggregated, leaves))


def _all_leaves(u: exp.Expression) -> list[exp.Expression]:
    if isinstance(u, exp.SetOperation):
        return _all_leaves(u.this) + _all_leaves(u.expression)
    return [u]


def plan(sel: exp.Expression, ctx: Positions, relations: dict[str, RelationDecl]) -> Plan:
    """The parts and the view over them (module doc); ``relations``: the streams and tables (column types)."""
    kind = _kind(sel)
    leaves = _leaves(sel, kind)
    for leaf in leaves:
        if type(leaf) is not exp.Select:
            raise ctx.error(f"unsupported {_kind(leaf) if isinstance(leaf, exp.SetOperation) else 'operand'} inside "
                            f"a {kind} of aggregated queries ({sql_of(leaf)}): one kind of set operation per "
                            "statement", leaf)
    first = leaves[0].copy()
    first.set("expressions", shown_items(first))  # (over nullable columns: its hidden counts are not outputs)
    names = output_names(first)
    branches = [Branch.of(b, len(names), ctx, kind) for b in leaves]
    keyed = [not aggregated(e.this if type(e) is exp.Alias else e) for e in first.expressions]
    for b, leaf in zip(branches, leaves) if kind != "UNION ALL" else ():  # UNION ALL compares no values
        for v in b.values:
            why = inexact(v, leaf, relations)
            if why is not None:
                raise ctx.error(f"unsupported {kind} of aggregated queries comparing {sql_of(v)}: {why} (UNION ALL "
                                "compares no values; docs/m3.md, \"a set operation statement of aggregated queries\")", leaf)
    for b in leaves[1:]:
        if [not aggregated(e.this if type(e) is exp.Alias else e) for e in shown_items(b)] != keyed:
            raise ctx.error(f"unsupported {kind} branch of aggregated queries {sql_of(b)}: each branch grouped by "
                            "exactly its selected columns, at the same places (a key may occur once per branch)", b)
    key_names = [n for n, k in zip(names, keyed) if k]
    flagged = branches[0].flagged
    for b, leaf in zip(branches[1:], leaves[1:]):
        if b.flagged != flagged:
            raise ctx.error(f"unsupported {kind} of aggregated queries over nullable columns whose branches differ in "
                            f"which keys are nullable ({sql_of(leaf)}): every branch's key at a place nullable, or "
                            "none (docs/m3.md, \"NULLs\")", leaf)
    key_names += [indicator(key_names[n]) for n in flagged]  # internal: NULL keys (:func:`.liftview.lifted_view`)
    value_names = [n for n, k in zip(names, keyed) if not k]
    keyless = not key_names and not any(b.hidden for b in branches)
    if keyless and not all(b.keyless for b in branches) or any(b.keyless for b in branches) and \
            any(b.hidden for b in branches):
        raise ctx.error(f"unsupported {kind} of aggregated queries mixing branches with and without GROUP BY "
                        f"({sql_of(sel)})", sel)
    if kind == "UNION" and any(b.hidden for b in branches):  # its rows values: lifted keys (:mod:`.setlifted`)
        return plan_union(branches, key_names, value_names, ctx)
    hidden = hidden_slots(branches, leaves, len(key_names), relations, ctx)  # (UNION ALL only: :mod:`.setgroups`)
    if kind.startswith("UNION"):
        return _union(kind, branches, key_names + hidden, value_names, ctx, tuple(hidden))
    return _intersect_except(kind, branches, key_names, value_names, ctx)


def _same(branches: list[Branch], a: tuple[int, int], b: tuple[int, int], row_a: tuple, row_b: tuple) -> Expr:
    """Where branch ``a[0]`` (part ``a[1]``) and branch ``b[0]`` (part ``b[1]``) hold equal values (NULL equal
    to NULL); both are known to have their row."""
    ba, bb = branches[a[0]], branches[b[0]]
    out: list[Expr] = []
    for j in range(len(ba.values)):
        eq = Cmp("=", ba.value(a[1], row_a, j), bb.value(b[1], row_b, j))
        na, nb = ba.is_null(a[1], row_a, j), bb.is_null(b[1], row_b, j)
        if na is None and nb is None:
            out.append(eq)
            continue
        nulls = [x for x in (na, nb) if x is not None]
        both = BoolOp("AND", (na, nb)) if len(nulls) == 2 else None
        neither = BoolOp("AND", tuple(BoolOp("NOT", (x,)) for x in nulls) + (eq,))
        out.append(neither if both is None else BoolOp("OR", (both, neither)))
    return out[0] if len(out) == 1 else BoolOp("AND", tuple(out))


def _intersect_except(kind: str, branches: list[Branch], key_names: list[str], value_names: list[str],
                      ctx: Positions) -> Plan:
    key_vars = tuple(key_variables(key_names))
    row = tuple(Var(v) for v in key_vars)
    conds = [branches[0].condition(0, row, ctx)]
    for i, b in enumerate(branches[1:], 1):
        same = flat_bool("AND", [b.condition(i, row, ctx), _same(branches, (0, 0), (i, i), row, row)])
        conds.append(same if kind.startswith("INTERSECT") else BoolOp("NOT", (same,)))
    columns = tuple((n, branches[0].value(0, row, j)) for j, n in enumerate(value_names)) + tuple(
        (indicator(n), branches[0].counted(0, row, j) or branches[0].rows(0, row))
        for j, n in enumerate(value_names) if _nullable(branches, j))
    return Plan(tuple(b.part(None) for b in branches), tuple(key_names), key_vars, columns,
                flat_bool("AND", conds), always=not key_names)


def _union(kind: str, branches: list[Branch], key_names: list[str], value_names: list[str], ctx: Positions,
           hidden: tuple[str, ...] = ()) -> Plan:
    key_vars = tuple(key_variables(key_names + [BRANCH.strip("_")]))
    row = tuple(Var(v) for v in key_vars)
    n = len(branches)
    parts = [b.part(i) for i, b in enumerate(branches)]
    seen: dict[tuple[int, int], int] = {}  # (earlier branch k, branch i) -> branch k's part keyed as branch i
    if kind == "UNION":
        for i in range(1, n):
            for k in range(i):
                seen[(k, i)] = len(parts)
                parts.append(branches[k].part(i))
    keyless = not key_names  # each branch's one row at its branch key, there also over no rows (SQL)
    mark = [_at(row[-1], i) if keyless else Arith("LEAST", b.rows(i, row), Const(1)) for i, b in enumerate(branches)]
    total = []
    for j in range(len(value_names)):
        terms = [Arith("*", b.value(i, row, j), mark[i]) for i, b in enumerate(branches)]
        total.append(functools.reduce(lambda a, c: Arith("+", a, c), terms))  # 0 at another branch's rows
    mine = []
    for i, b in enumerate(branches):
        has = b.condition(i, row, ctx)
        if keyless:  # (a condition of branch i's row alone)
            has = flat_bool("AND", [Cmp("<", Const(0), mark[i]), has])
        if kind == "UNION":  # not a row an earlier branch has at the key (read there as if of branch i)
            has = flat_bool("AND", [has] + [BoolOp("NOT", (flat_bool("AND", [
                branches[k].condition(seen[(k, i)], row, ctx), _same(branches, (k, seen[(k, i)]), (i, i), row, row)]),))
                for k in range(i)])
        mine.append(has)
    for j, n in enumerate(value_names):  # where a value is NULL: 0 (:func:`boreas.m3.nullable.shown_columns`)
        if _nullable(branches, j, keyless):
            value_names.append(indicator(n))
            total.append(functools.reduce(lambda a, c: Arith("+", a, c), [
                mark[i] if keyless and b.counted(i, row, j) is None else Arith("*", Arith(
                    "LEAST", b.counted(i, row, j) or b.rows(i, row), Const(1)), mark[i])
                for i, b in enumerate(branches)]))
    columns = tuple(zip(value_names, total))
    where = None if keyless and all(c == Cmp("<", Const(0), m) for c, m in zip(mine, mark)) else flat_bool("OR", mine)
    return Plan(tuple(parts), tuple(key_names) + (BRANCH,), key_vars, columns, where, internal=hidden + (BRANCH,),
                always=keyless, fixed=tuple((i,) for i in range(len(branches))) if keyless else ())


def _at(branch: Expr, i: int) -> Expr:
    """1 where the branch key is ``i``, else 0 (the key an integer): ``GREATEST(0, 1 - (BR - i) * (BR - i))``."""
    d = Arith("-", branch, Const(i))
    return Arith("GREATEST", Const(0), Arith("-", Const(1), Arith("*", d, d)))


def _nullable(branches: list[Branch], j: int, keyless: bool = False) -> bool:
    """Whether value ``j`` gets its NULL indicator column: some branch reads nullable columns for it, or (a
    UNION's rows without GROUP BY, ``keyless``) is an aggregate other than COUNT, NULL over no rows."""
    return any(j in b.nonnull or keyless and j < len(b.values) and b.counted(0, (), j) is not None
               for b in branches)
