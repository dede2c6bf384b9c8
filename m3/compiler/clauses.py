"""A SELECT's clauses, checked before its expressions are resolved (:mod:`.frontend`).

Why apart from the front end: these checks read only a clause's shape -- which
clauses are present, that each is the node sqlglot puts there, which relation
occurrences FROM holds and how they are joined -- never an expression's meaning,
and :mod:`.frontend` (statements, queries and the passes that rewrite them) stays
one concept: a SELECT turned into a :class:`.frontend.SqlQuery`.
"""

from __future__ import annotations

from sqlglot import exp

from ..ast import RelationDecl
from .nodes import sql_of
from .positions import Ctx
from .resolve import unparen

_CLAUSES = (("limit", r"\bLIMIT\b", " (a view holds every group; top-k views are not supported: limit when reading)"),
            ("offset", r"\bOFFSET\b", ""), ("with", r"\bWITH\b", ""),
            ("with_", r"\bWITH\b", ""), ("qualify", r"\bQUALIFY\b", ""), ("windows", r"\bWINDOW\b", ""))


def refuse_clauses(sel: exp.Select, ctx: Ctx) -> None:
    """Refuse a clause the front end has no translation for (LIMIT, OFFSET, QUALIFY, WINDOW, a WITH left over)."""
    for key, keyword, why in _CLAUSES:
        if keyword and sel.args.get(key):
            word = keyword.strip(chr(92) + "b").replace(chr(92) + "s+", " ")
            raise ctx.error(f"unsupported {word} clause{why}", keyword=keyword)


_CLAUSE_TYPES = {"where": exp.Where, "group": exp.Group, "order": exp.Order, "from": exp.From, "from_": exp.From,
                 "having": exp.Having, "distinct": exp.Distinct}


def check_clauses(sel: exp.Select, ctx: Ctx) -> None:
    """Each clause is the node sqlglot puts there (a tree built by hand may hold anything)."""
    for key, cls in _CLAUSE_TYPES.items():
        value = sel.args.get(key)
        if value is not None and type(value) is not cls:
            what = sql_of(value) if isinstance(value, exp.Expression) else repr(value)
            raise ctx.error(f"malformed {key.rstrip('_').upper()} clause ({what})", sel)
    for key, cls in (("joins", exp.Join), ("expressions", exp.Expression)):
        value = sel.args.get(key) or []
        if not isinstance(value, list) or not all(isinstance(v, cls) for v in value):
            raise ctx.error(f"malformed {key.upper()} of SELECT", sel)


def from_items(sel: exp.Select) -> list[exp.Expression]:
    """The FROM clause's items, its joins' included, whatever they are (relations, derived tables)."""
    from_ = sel.args.get("from_") or sel.args.get("from")
    items = ([from_.this] if isinstance(from_, exp.From) else []) + [getattr(j, "this", None) for j in sel.args.get("joins") or []]
    return [t for t in items if isinstance(t, exp.Expression)]  # (a malformed tree's other items: refused elsewhere)


def tables_of(sel: exp.Select, relations: dict[str, RelationDecl], ctx: Ctx) -> list[tuple[str, str]]:
    """The FROM clause's relation occurrences as ``(alias, relation)``; only inner joins."""
    from_ = sel.args.get("from") or sel.args.get("from_")
    if from_ is None:
        raise ctx.error("a query needs a FROM clause", sel)
    tables: list[tuple[str, str]] = []
    for item in [from_.this] + [j.this for j in sel.args.get("joins") or []]:
        if type(item) is not exp.Table:
            raise ctx.error(f"unsupported FROM item {type(item).__name__.upper()} (only relation names)", item)
        if item.args.get("db") or item.args.get("catalog"):
            raise ctx.error(f"unsupported qualified relation name {sql_of(item)}", item)
        alias = item.args.get("alias")
        if alias is not None and alias.args.get("columns"):
            raise ctx.error(f"unsupported column aliases in FROM ({sql_of(item)})", item)
        rel = next((r for r in relations if r.lower() == item.name.lower()), None)
        if rel is None:
            known = ", ".join(relations) or "none declared"
            raise ctx.error(f"unknown relation {item.name} (relations: {known})", item)
        name = item.alias or rel
        if any(a.lower() == name.lower() for a, _ in tables):
            raise ctx.error(f"alias {name} used twice in FROM", item)
        tables.append((name, rel))
    for j in sel.args.get("joins") or []:
        side, kind = str(j.args.get("side") or "").upper(), str(j.args.get("kind") or "").upper()
        if side or kind not in ("", "INNER", "CROSS"):
            raise ctx.error(f"unsupported {(side + ' ' + kind).strip()} JOIN (only inner equi-joins)", j)
        if j.args.get("using"):
            raise ctx.error("unsupported JOIN ... USING (write ON a.x = b.y)", j)
    return tables


def conjuncts(e: exp.Expression) -> list[exp.Expression]:
    """The AND-ed parts of a condition, parentheses looked through."""
    e = unparen(e)
    if type(e) is exp.And:
        return conjuncts(e.this) + conjuncts(e.expression)
    return [e]
