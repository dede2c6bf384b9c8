"""``*`` over relations with nullable columns written as the declared columns it stands for.

Why: a nullable column selected is a key of the view with its indicator beside it (:mod:`.nullshown`), which the
rewrite of :mod:`.threevalued` adds per named column; a ``*`` names none.  Written out as ``alias.name`` for each
declared column of each FROM item in order (an indicator ``c__null`` is the program's, never SQL's: left out), it
is the view of rows SQL's ``*`` is, and each nullable column is a key like any selected one (docs/m3.md "NULLs").
A ``*`` over a FROM item that is not a declared relation, or listing one name twice (SQL's ``*`` over a join of
two relations with a column ``b`` each: a view cannot have two columns ``b``), is refused by name.

>>> import sqlglot
>>> from .examples import PlainErrors
>>> from ..ast import Column, RelationDecl
>>> rels = {"R": RelationDecl("R", "STREAM", (Column("a", "INT"), Column("c", "INT"), Column("c__null", "INT"))),
...         "S": RelationDecl("S", "STREAM", (Column("d", "INT"),))}
>>> def show(sql): return star_columns(sqlglot.parse_one(sql), rels, PlainErrors()).sql()
>>> show("SELECT * FROM R r, S WHERE r.a = S.d")
'SELECT r.a, r.c, S.d FROM R AS r, S WHERE r.a = S.d'
>>> show("SELECT DISTINCT S.*, r.c FROM R r, S")
'SELECT DISTINCT S.d, r.c FROM R AS r, S'
>>> show("SELECT COUNT(*) FROM R")
'SELECT COUNT(*) FROM R'
"""

from __future__ import annotations

from sqlglot import exp

from ..ast import RelationDecl
from ..nullable import nullable_positions
from .resolve import Positions


def star_columns(sel: exp.Select, relations: dict[str, RelationDecl], ctx: Positions) -> exp.Select:
    """``sel`` (changed in place) with each ``*`` and ``alias.*`` of its SELECT list written as columns (module doc)."""
    if not any(_star_of(e) is not None for e in sel.expressions):
        return sel
    by_name = {n.lower(): r for n, r in relations.items()}
    items = [sel.args["from_"].this] + [j.this for j in sel.args.get("joins") or []] if sel.args.get("from_") else []
    declared: list[tuple[str, list[str]]] = []
    for t in items:
        if type(t) is not exp.Table or t.name.lower() not in by_name:
            raise ctx.error(f"unsupported * over {t.sql()} in a query reading nullable columns (name the columns; "
                            "docs/m3.md, \"NULLs\")", t)
        cols = [c.name for c in by_name[t.name.lower()].columns]
        flags = {i + 1 for i in nullable_positions(cols)}
        declared.append((t.alias_or_name, [c for i, c in enumerate(cols) if i not in flags]))
    out: list[exp.Expression] = []
    for e in sel.expressions:
        star = _star_of(e)
        if star is None:
            out.append(e)
            continue
        for alias, cols in declared:
            if star in ("", alias.lower()):
                out.extend(exp.column(c, alias) for c in cols)
    names = [c.name.lower() for c in out if type(c) is exp.Column]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise ctx.error(f"unsupported * listing {', '.join(twice)} twice in a query reading nullable columns (name "
                        "the columns; docs/m3.md, \"NULLs\")", sel)
    sel.set("expressions", out)
    return sel


def _star_of(e: exp.Expression) -> str | None:
    """``''`` for ``*``, the alias (lower case) for ``alias.*``, None for any other item."""
    if type(e) is exp.Star:
        return ""
    if type(e) is exp.Column and type(e.this) is exp.Star:
        return e.table.lower()
    return None
