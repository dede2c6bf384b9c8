"""``*`` and ``alias.*`` over a grouped derived table written as the columns they stand for, on the tree.

Why: ``SELECT * FROM (SELECT R.A, COUNT(*) AS C FROM R GROUP BY R.A) s`` selects
``s.A, s.C``; the passes that read a grouped derived table (:mod:`.regroup`,
:mod:`.lifted`) read named columns, so the star is expanded once, here, into
``alias.name`` for each column in FROM order (the SQL front end translates).
Relations' columns come from their declarations, a derived table's from its
SELECT list.  A star is left as it is (for the later passes to read or refuse)
when no grouped derived table is in FROM, or when some FROM item's names are
not all known: an unnamed expression (``SUM(x)`` without alias: SQL's name for
it is the engine's), a star inside it, or a UNION.

>>> import sqlglot
>>> from ..ast import Column, RelationDecl
>>> rels = {"R": RelationDecl("R", "STREAM", (Column("A", "INT"), Column("B", "INT")))}
>>> def r(sql): return expand_stars(sqlglot.parse_one(sql), rels).sql()
>>> r("SELECT * FROM (SELECT R.A, COUNT(*) AS C FROM R GROUP BY R.A) AS s WHERE s.A = 3")
'SELECT s.A, s.C FROM (SELECT R.A, COUNT(*) AS C FROM R GROUP BY R.A) AS s WHERE s.A = 3'
>>> r("SELECT t.*, R.B FROM R, (SELECT R.A AS k, SUM(R.B) AS n FROM R GROUP BY R.A) AS t WHERE R.A = t.k")
'SELECT t.k, t.n, R.B FROM R, (SELECT R.A AS k, SUM(R.B) AS n FROM R GROUP BY R.A) AS t WHERE R.A = t.k'
>>> r("SELECT * FROM (SELECT R.A, SUM(R.B) FROM R GROUP BY R.A) AS s")  # an unnamed column: left
'SELECT * FROM (SELECT R.A, SUM(R.B) FROM R GROUP BY R.A) AS s'
"""

from __future__ import annotations

from sqlglot import exp

from ..ast import RelationDecl
from .lifted import is_grouped, items_of


def expand_stars(tree: exp.Expression, relations: dict[str, RelationDecl]) -> exp.Expression:
    """``tree`` with each SELECT's stars over a grouped derived table expanded (module doc)."""
    for sel in list(tree.find_all(exp.Select)):
        if not any(_is_star(e) for e in sel.expressions) or not any(is_grouped(i) for i in items_of(sel)):
            continue
        names = [_names(i, relations) for i in items_of(sel)]
        if any(n is None for n in names):
            continue
        out: list[exp.Expression] = []
        for e in sel.expressions:
            if not _is_star(e):
                out.append(e)
                continue
            table = e.table.lower() if type(e) is exp.Column else ""
            for alias, columns in names:
                if not table or alias.lower() == table:
                    out += [exp.column(c, table=alias) for c in columns]
        sel.set("expressions", out)
    return tree


def _is_star(e: exp.Expression) -> bool:
    return isinstance(e, exp.Star) or type(e) is exp.Column and isinstance(e.this, exp.Star)


def _names(item: exp.Expression, relations: dict[str, RelationDecl]) -> tuple[str, list[str]] | None:
    """A FROM item's name and its columns' names, or None where they are not all known."""
    if type(item) is exp.Table:
        rel = next((r for n, r in relations.items() if n.lower() == item.name.lower()), None)
        return None if rel is None else (item.alias_or_name, [c.name for c in rel.columns])
    if type(item) is not exp.Subquery or type(item.this) is not exp.Select or not item.alias_or_name:
        return None
    columns = []
    for e in item.this.expressions:
        if _is_star(e) or not (type(e) in (exp.Alias, exp.Column)) or not e.alias_or_name:
            return None
        columns.append(e.alias_or_name)
    return item.alias_or_name, columns
