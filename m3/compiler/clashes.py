"""Two FROM items of one SELECT named alike up to case: their qualified reads told apart by column, as DuckDB does.

Why: relation names, aliases and CTE names are case-insensitive (quoted or
not, as in DuckDB, and as the front end resolves them everywhere), so in
``FROM (SELECT g AS k, SUM(w) AS s FROM U GROUP BY g) t, T`` both items are
named ``t``.  DuckDB accepts that and reads ``q.c`` from the one item named
``q`` that has a column ``c``: ``t.k`` is the derived table's, ``T.v`` the
stream's; a read two of them could answer (``t.g`` when both have ``g``),
or a ``*`` over them, it refuses as ambiguous.  The later passes compare
names in lower case, each on its own (:mod:`.derived` took every ``T.x``
for a column of the derived table ``t``, :mod:`.liftquery` took ``T`` for
the grouped table), so a clash that reached them came out as an unrelated
error (``unknown column T.g``, "joined with relations on some of its group
columns") or, for a derived table of rows, as a view joining the derived
table with itself.  Here, first, on the statement as written (before CTEs
are inlined and derived tables flattened), every clashing item but the
first gets an alias of its own (``T AS T_2``) and each qualified read the
one it reads; an ambiguous read is refused naming both items.

A ``q.c`` inside a subquery reads the subquery's own ``q`` when its FROM
has one (an inner name hides an outer one, as in SQL: :mod:`.derived`).

>>> import sqlglot
>>> from .examples import PlainErrors, stream
>>> rels = {"T": stream("T", g="INT", v="INT"),
...         "U": stream("U", g="INT", w="INT")}
>>> sel = sqlglot.parse_one("SELECT t.k, SUM(T.v) FROM (SELECT g AS k FROM U) t, T WHERE t.k = T.g GROUP BY t.k")
>>> separate(sel, rels, PlainErrors()).sql()
'SELECT t.k, SUM(T_2.v) FROM (SELECT g AS k FROM U) AS t, T AS T_2 WHERE t.k = T_2.g GROUP BY t.k'
>>> separate(sqlglot.parse_one("SELECT COUNT(*) FROM (SELECT g FROM U) t, T WHERE t.g = T.g"), rels, PlainErrors())
Traceback (most recent call last):
...
boreas.m3.errors.CompileError: the alias t of a derived table and the stream T name the same relation in FROM and both have a column g: names are case-insensitive (quoted or not), so t.g could read either; rename one
"""

from __future__ import annotations

from typing import Iterator

from sqlglot import exp

from ..ast import RelationDecl
from .nodes import sql_of
from .resolve import Positions


def separate(tree: exp.Expression, relations: dict[str, RelationDecl], ctx: Positions) -> exp.Expression:
    """``tree`` (a copy when changed) with the FROM items of each SELECT named apart and their reads told apart
    (module doc); an ambiguous read is refused."""
    if not any(_clashes(s) for s in tree.walk() if isinstance(s, exp.Select)):
        return tree
    tree = tree.copy()
    for sel in [s for s in tree.walk() if isinstance(s, exp.Select)]:
        for group in _clashes(sel):
            _separate_group(sel, group, relations, ctx)
    return tree


def _clashes(sel: exp.Select) -> list[list[exp.Expression]]:
    """``sel``'s FROM items grouped by name up to case, the groups of two or more."""
    groups: dict[str, list[exp.Expression]] = {}
    for item in _from_items(sel):
        if item.alias_or_name:  # a derived table without alias: nothing can name it
            groups.setdefault(item.alias_or_name.lower(), []).append(item)
    return [g for g in groups.values() if len(g) > 1]


def _separate_group(sel: exp.Select, group: list[exp.Expression], relations: dict[str, RelationDecl],
                    ctx: Positions) -> None:
    ctes = _ctes_seen_from(sel)
    name = group[0].alias_or_name.lower()
    reads = [c for c in sel.walk() if type(c) is exp.Column and c.table.lower() == name and _reads_from(c, sel, name)]
    for e in sel.expressions:
        if type(e) is exp.Star or type(e) is exp.Column and isinstance(e.this, exp.Star) and e.table.lower() == name:
            said = [(_describe(item, ctes, relations), item.alias_or_name) for item in group[:2]]
            raise _error(said[0], said[1], f"{sql_of(e)} could read either", ctx, e)
    columns = [_columns(item, ctes, relations) for item in group]
    said = [(_describe(item, ctes, relations), item.alias_or_name) for item in group]  # before the renaming
    taken = {i.alias_or_name.lower() for i in _from_items(sel)}
    spelled = [group[0].alias_or_name]
    for item in group[1:]:
        n = 2
        while f"{name}_{n}" in taken:
            n += 1
        taken.add(f"{name}_{n}")
        spelled.append(f"{item.alias_or_name}_{n}")
        if type(item) is exp.Table:
            item.set("alias", exp.TableAlias(this=exp.to_identifier(spelled[-1])))
        else:
            item.args["alias"].set("this", exp.to_identifier(spelled[-1]))
    for c in reads:
        if isinstance(c.this, exp.Star):
            raise _error(said[0], said[1], f"{sql_of(c)} could read either", ctx, c)
        holders = [k for k, cols in enumerate(columns) if cols is None or c.name.lower() in cols]
        if len(holders) > 1:
            a, b = said[holders[0]], said[holders[1]]
            known = all(columns[k] is not None for k in holders)
            why = f"both have a column {c.name}" if known else f"the columns of one are not known (read {c.name})"
            raise _error(a, b, f"{sql_of(c)} could read either", ctx, c, why)
        if holders:
            c.set("table", exp.to_identifier(spelled[holders[0]]))


def _reads_from(c: exp.Column, sel: exp.Select, name: str) -> bool:
    """Whether ``c`` (qualified by ``name``) reads ``sel``'s FROM: no SELECT between them declares ``name``, and it
    is not inside a derived table of ``sel``'s FROM (which does not see its siblings)."""
    node = c.parent
    while node is not None and node is not sel:
        if isinstance(node, exp.Select) and (any(i.alias_or_name.lower() == name for i in _from_items(node))
                                             or type(node.parent) is exp.Subquery and _is_from_item(node.parent)):
            return False
        node = node.parent
    return node is sel


def _is_from_item(n: exp.Expression) -> bool:
    return type(n.parent) in (exp.From, exp.Join) and n.arg_key == "this"


def _columns(item: exp.Expression, ctes: dict[str, exp.CTE], relations: dict[str, RelationDecl]) -> set[str] | None:
    """The column names (lower case) a FROM item has; None when not known here (a ``*`` in a derived table)."""
    if type(item) is exp.Table and item.name.lower() in ctes:
        cte = ctes[item.name.lower()]
        named, body = cte.args["alias"].args.get("columns"), cte.this
    elif type(item) is exp.Table:
        rel = next((r for r in relations.values() if r.name.lower() == item.name.lower()), None)
        return {c.name.lower() for c in rel.columns} if rel is not None else None
    else:
        named, body = item.args["alias"].args.get("columns"), item.this
    if named:
        return {n.name.lower() for n in named}
    while isinstance(body, exp.SetOperation):
        body = body.this  # a UNION's columns are named by its first branch
    if type(body) is not exp.Select or any(isinstance(e, exp.Star) or isinstance(e.this, exp.Star)
                                           for e in body.expressions):
        return None
    return {e.alias_or_name.lower() for e in body.expressions}


def _error(a: tuple[str, str], b: tuple[str, str], could: str, ctx: Positions, node: exp.Expression,
           why: str = "") -> Exception:
    """The ambiguity, both items named (``a``, ``b``: what each is, its name as written)."""
    case = "names are case-insensitive (quoted or not), so " if a[1] != b[1] else ""
    return ctx.error(f"{a[0]} and {b[0]} name the same relation in FROM{' and ' + why if why else ''}: "
                     f"{case}{could}; rename one", node)


def _from_items(sel: exp.Select) -> Iterator[exp.Expression]:
    """``sel``'s FROM and JOIN items that have a name: relations, CTE reads and derived tables."""
    from_ = sel.args.get("from_") or sel.args.get("from")
    items = ([from_.this] if isinstance(from_, exp.From) else []) + \
        [j.this for j in sel.args.get("joins") or [] if isinstance(j, exp.Join)]
    return (i for i in items if isinstance(i, (exp.Table, exp.Subquery)))


def _ctes_seen_from(sel: exp.Select) -> dict[str, exp.CTE]:
    """The CTEs ``sel`` may read (its own WITH's and those of the queries around it), by lower-case name.  Only
    for telling reads apart; inlining them is :mod:`.derived`'s."""
    out: dict[str, exp.CTE] = {}
    node: exp.Expression | None = sel
    while node is not None:
        w = node.args.get("with_") or node.args.get("with")
        if type(w) is exp.With:
            for cte in w.expressions:
                if type(cte) is exp.CTE and cte.alias:
                    out.setdefault(cte.alias.lower(), cte)
        node = node.parent
    return out


def _describe(item: exp.Expression, ctes: dict[str, exp.CTE], relations: dict[str, RelationDecl]) -> str:
    """What a FROM item is, in the words of the error: "the alias t of a derived table", "the stream T"."""
    alias = item.args.get("alias")
    aliased = alias is not None and bool(alias.name)
    if type(item) is exp.Subquery:
        return f"the alias {item.alias} of a derived table"
    written = item.name
    rel = next((r for r in relations.values() if r.name.lower() == written.lower()), None)
    if written.lower() in ctes:
        cte = ctes[written.lower()].alias
        hides = f", which hides the {rel.kind.lower()} {rel.name}" if rel is not None else ""
        what = f"CTE {cte}" if written == cte else f"{written} (the CTE {cte}{hides})"
        return f"the alias {item.alias} of {what}" if aliased else f"the {what}" if written == cte else what
    what = f"{rel.kind.lower()} {rel.name}" if rel is not None else f"relation {written}"
    return f"the alias {item.alias} of {what}" if aliased else f"the {what}"
