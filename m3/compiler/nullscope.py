"""Which columns of a query's FROM items are nullable (docs/m3.md "NULLs"), read by :mod:`.threevalued`.

Why apart: the scope of a SELECT (its FROM items' columns, the nullable ones) is what every NULL rule asks,
and it is the one place that knows a nullable column from a relation's declaration
(:func:`boreas.m3.nullable.nullable_positions`).
"""

from __future__ import annotations

from sqlglot import exp

from ..ast import RelationDecl
from ..nullable import nullable_positions


def reads_nullable_relation(tree: exp.Expression, relations: dict[str, RelationDecl]) -> bool:
    """Whether a FROM item of ``tree`` (or of a subquery in it) is a relation with a nullable column."""
    by_name = {n.lower(): r for n, r in relations.items()}
    return any(type(t) is exp.Table and t.name.lower() in by_name and
               nullable_positions([c.name for c in by_name[t.name.lower()].columns]) for t in tree.walk())


def nullable_names(relations: dict[str, RelationDecl]) -> set[str]:
    return {r.columns[i].name.lower() for r in relations.values() for i in nullable_positions([c.name for c in r.columns])}


def in_scope(sel: exp.Select, relations: dict[str, RelationDecl]) -> dict[str, tuple[set[str], set[str]]]:
    """Each FROM item's alias (lower case): (its columns, its nullable columns), lower case."""
    by_name = {n.lower(): r for n, r in relations.items()}
    items = [sel.args.get("from_") and sel.args["from_"].this] + [j.this for j in sel.args.get("joins") or []]
    out = {}
    for t in items:
        if type(t) is exp.Table and t.name.lower() in by_name:
            cols = [c.name for c in by_name[t.name.lower()].columns]
            out[t.alias_or_name.lower()] = ({c.lower() for c in cols}, {cols[i].lower() for i in nullable_positions(cols)})
    return out


def clause_of(n: exp.Expression, sel: exp.Select) -> exp.Expression | None:
    """The WHERE or JOIN of ``sel`` that ``n`` is in (not one around ``sel``, a derived table's SELECT), if any."""
    a = n.parent
    while a is not None and a is not sel and type(a) not in (exp.Where, exp.Join):
        a = a.parent
    return a if a is not sel else None
