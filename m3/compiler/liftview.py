"""The view of a query over a grouped derived table read by value: the plan's placeholders filled with its parts.

Why a step of its own: :mod:`.lifted` writes the view before its parts are
compiled, reading column ``j`` of part ``i`` as a placeholder ``#i.j[X, ...]``
(at the variables of the part's key columns, in order).  Once each part is
a view over maps (:func:`.views.view_decl`), its column ``j`` is a view
expression over its own key variables; put in the placeholder's place with
those variables renamed to the placeholder's, and every other variable of
it (a fold's, a ``TOTAL``'s) to a fresh one, the view reads the parts' maps
directly.  A part keyed by one variable at two key columns (two columns
joined in it) makes the plan's two variables one.

>>> from ..ast import Const, MapRef, Var, ViewColumn, ViewDecl
>>> from ..over import Over
>>> from ..printer import format_view
>>> part = ViewDecl("Q1_p0", ("g0",), (ViewColumn("rows", expr=MapRef("Q1_p0_rows", (Var("A"),))),), ("A",))
>>> count = Over("COUNT", Const(1), ("K",), MapRef("#0.0", (Var("K"),)))
>>> plan_view = ViewDecl("Q1", (), (ViewColumn("n", expr=count),))
>>> print(format_view(fill(plan_view, [(("A",), [part.columns[0].expr])])))
DECLARE VIEW Q1[](n := COUNT(1 FOR K : Q1_p0_rows[K]));
"""

from __future__ import annotations

import re
from dataclasses import fields, is_dataclass, replace

from ..ast import Expr, MapRef, Var, ViewColumn, ViewDecl, walk
from ..viewnodes import Arith, Fold, Total
from ..errors import CheckError, CompileError
from ..nullable import indicator
from ..over import Over
from ..printer import format_view_expr
from .lifted import Plan
from .totaldomain import over_entries

Part = tuple[tuple[str, ...], list[Expr]]  # a compiled part: its key variables, its columns as view expressions


def part_columns(nq, view: ViewDecl) -> Part:
    """A part's key variables and column expressions (a plain view's maps read at its keys in order)."""
    if view.general:
        return tuple(view.key_vars) if view.key_vars else tuple(v.name for v in nq.key_vars), \
            [c.expr for c in view.columns]
    keys = tuple(v.name for v in nq.key_vars)
    row = tuple(Var(k) for k in keys)
    out: list[Expr] = []
    for c in view.columns:
        num = MapRef(c.numerator or "", row)
        out.append(num if c.denominator is None else Arith("/", num, MapRef(c.denominator, row)))
    return keys, out


def lifted_view(name: str, plan: Plan, parts: list[Part]) -> ViewDecl:
    """The view of a plan whose part ``i`` compiled to ``parts[i]``."""
    flags = tuple(k for k in plan.keys if any(indicator(x) == k for x in plan.keys))  # a NULL key's (.threevalued)
    view = ViewDecl(name, plan.keys, tuple(ViewColumn(n, expr=e) for n, e in plan.columns), plan.key_vars, plan.where,
                    internal=flags + plan.internal, always=plan.always, fixed=plan.fixed)
    return fill(view, parts)


def safely(names: tuple[str, ...], build):
    """``build()`` (the view of a lifted query, or the check of the program holding them), its crash or a check
    failure of a view in ``names`` a CompileError naming the construct: a safety net, since a shape the translation
    missed must be refused, never a crash (the known shapes are refused by name before this)."""
    try:
        return build()
    except CheckError as bad:
        found = [(n, m) for m, _ in bad.errors for n in names if re.search(rf"\b{re.escape(n)}\b", m)]
        if not found:
            raise
        name, why = found[0]
    except (AttributeError, TypeError, KeyError, IndexError, ValueError) as bad:
        name, why = names[0], f"{type(bad).__name__}: {bad}"
    raise CompileError(f"unsupported query over a grouped derived table read by value in view {name}: its "
                       f"parts do not combine into a view ({why})") from None


def fill(view: ViewDecl, parts: list[Part]) -> ViewDecl:
    """``view`` with its placeholders replaced by the parts' expressions (module doc)."""
    same: dict[str, str] = {}  # a plan variable -> the one it is unified with
    exprs = [c.expr for c in view.columns] + ([view.where] if view.where is not None else [])
    for node in (n for e in exprs for n in walk(e)):
        if isinstance(node, MapRef) and node.name.startswith("#"):
            i, _ = _index(node.name)
            first: dict[str, str] = {}
            for pv, a in zip(parts[i][0], node.args):
                mine = _find(same, a.name)
                if pv in first and _find(same, first[pv]) != mine:
                    same[mine] = _find(same, first[pv])
                first.setdefault(pv, mine)
    taken = {x for e in exprs for n in walk(e) for x in ((n.name,) if isinstance(n, Var) else _bound(n))}

    def fresh(x: str) -> str:
        n = 1
        while f"{x}_{n}" in taken:
            n += 1
        taken.add(f"{x}_{n}")
        return f"{x}_{n}"

    row = {_find(same, k) for k in view.key_vars}

    def rebuild(e: Expr) -> Expr:
        def f(node):
            if isinstance(node, Var):
                return Var(_find(same, node.name))
            if isinstance(node, Over):
                node = over_entries(node)  # groups selected by a nested condition: their map under it
                if not isinstance(node.ref, MapRef):  # the entries it ranges over are a map's, not a computed value
                    raise CompileError(f"unsupported grouped derived table read by value whose groups are not one "
                                       f"map (they are {format_view_expr(node.ref)}: a subquery in its WHERE, or a "
                                       f"grouped derived table inside it) in view {view.name}")
                # a variable the parts made one with a row variable is the row's, no longer the aggregate's
                node = replace(node, vars=tuple(dict.fromkeys(x for v in node.vars if (x := _find(same, v)) not in row)))
            if isinstance(node, MapRef) and node.name.startswith("#"):
                i, j = _index(node.name)
                keys, columns = parts[i]
                rename = {k: a.name for k, a in zip(keys, node.args)}
                for x in sorted({n.name for n in walk(columns[j]) if isinstance(n, Var)} | _bound(columns[j])):
                    if x not in rename:
                        rename[x] = fresh(x)
                return _transform(columns[j], lambda n: _renamed(n, rename))
            return node
        return _transform(e, f)

    key_vars = tuple(_find(same, k) for k in view.key_vars)
    columns = tuple(replace(c, expr=rebuild(c.expr)) for c in view.columns)
    return replace(view, key_vars=key_vars, columns=columns, where=None if view.where is None else rebuild(view.where))


def _index(name: str) -> tuple[int, int]:
    i, j = name[1:].split(".")
    return int(i), int(j)


def _find(same: dict[str, str], x: str) -> str:
    while x in same:
        x = same[x]
    return x


def _bound(e: Expr) -> set[str]:
    """The variables folds, TOTALs and aggregates inside ``e`` range over."""
    out: set[str] = set()
    for n in walk(e):
        if isinstance(n, Fold):
            out.add(n.var)
        elif isinstance(n, (Total, Over)):
            out.update(n.vars)
    return out


def _renamed(node, rename: dict[str, str]):
    if isinstance(node, Var):
        return Var(rename.get(node.name, node.name))
    if isinstance(node, Fold):
        return replace(node, var=rename.get(node.var, node.var))
    if isinstance(node, (Total, Over)):
        return replace(node, vars=tuple(rename.get(v, v) for v in node.vars))
    return node


def _transform(e, f):
    """Rebuild a tree of frozen dataclasses bottom-up, ``f`` applied to each node once its children are done."""
    if isinstance(e, tuple):
        return tuple(_transform(x, f) for x in e)
    if not is_dataclass(e) or isinstance(e, type):
        return e
    changed = {fl.name: _transform(getattr(e, fl.name), f) for fl in fields(e) if fl.name != "pos"}
    return f(replace(e, **changed))
