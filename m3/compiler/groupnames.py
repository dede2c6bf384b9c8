"""A grouped derived table's GROUP BY items written as the SELECT items they name, on the tree.

Why: SQL lets ``GROUP BY`` name a selected column another way than the SELECT
list does: unqualified (``SELECT store_sales.k, COUNT(*) ... GROUP BY k``),
qualified where the SELECT is not, or by the SELECT alias (``SELECT R.A AS foo,
COUNT(*) ... GROUP BY foo``).  The passes that read a grouped derived table
(:mod:`.regroup`, :mod:`.lifted`) match a selected column with a group column
by equality of trees; writing every group item as the selected expression it
names, once, keeps them unaware of the spellings (the SQL front end translates).

A group item is rewritten only where its meaning is certain:

* a column ``[t.]n`` and exactly one selected *column* named ``n`` whose
  qualifier is the same or missing on one side (SQL would refuse two tables
  holding ``n`` unqualified as ambiguous);
* an unqualified ``n`` that no FROM item of that SELECT holds as a column
  (SQL's GROUP BY names an input column first) and exactly one SELECT item
  aliased ``n`` whose expression is a column.

>>> import sqlglot
>>> from ..ast import Column, RelationDecl
>>> rels = {"R": RelationDecl("R", "STREAM", (Column("A", "INT"), Column("B", "INT")))}
>>> def r(sql): return name_groups(sqlglot.parse_one(sql), rels).sql()
>>> r("SELECT foo FROM (SELECT R.A AS foo, COUNT(*) FROM R GROUP BY foo) AS q")
'SELECT foo FROM (SELECT R.A AS foo, COUNT(*) FROM R GROUP BY R.A) AS q'
>>> r("SELECT C FROM (SELECT R.A, COUNT(*) AS C FROM R GROUP BY A) AS s")
'SELECT C FROM (SELECT R.A, COUNT(*) AS C FROM R GROUP BY R.A) AS s'
>>> r("SELECT x FROM (SELECT R.B AS A, COUNT(*) AS x FROM R GROUP BY A) AS s")  # A is R's column: unchanged
'SELECT x FROM (SELECT R.B AS A, COUNT(*) AS x FROM R GROUP BY A) AS s'
"""

from __future__ import annotations

from sqlglot import exp

from ..ast import RelationDecl
from .resolve import unparen


def name_groups(tree: exp.Expression, relations: dict[str, RelationDecl]) -> exp.Expression:
    """``tree`` with every derived table's GROUP BY items written as the selected expressions they name."""
    for sel in list(tree.find_all(exp.Select)):
        group = sel.args.get("group")
        if type(group) is not exp.Group or type(sel.parent) is not exp.Subquery:
            continue
        for g in list(group.expressions):
            named = _named(unparen(g), sel, relations)
            if named is not None:
                g.replace(named.copy())
    return tree


def _named(g: exp.Expression, sel: exp.Select, relations: dict[str, RelationDecl]) -> exp.Expression | None:
    """The selected column ``g`` names another way than it is selected, else None."""
    if type(g) is not exp.Column or isinstance(g.this, exp.Star) or not _plain(g):
        return None  # (a column with more than a name and a table, `db.t.a`, `a(+)`, is left as written: refused)
    items = [(e.alias if type(e) is exp.Alias else "", unparen(e.this if type(e) is exp.Alias else e))
             for e in sel.expressions]
    columns = [x for _, x in items if type(x) is exp.Column and x.name.lower() == g.name.lower()
               and (not x.table or not g.table or x.table.lower() == g.table.lower())]
    if len(columns) == 1:
        return None if columns[0] == g else columns[0]
    inputs = _input_names(sel, relations)
    if columns or g.table or inputs is None or g.name.lower() in inputs:
        return None
    aliased = [x for a, x in items if a.lower() == g.name.lower() and type(x) is exp.Column]
    return aliased[0] if len(aliased) == 1 else None


def _plain(column: exp.Column) -> bool:
    """Whether ``column`` is only a name and maybe a table, each an identifier (quoted or not) and nothing more."""
    parts = [v for k, v in column.args.items() if v]
    return (all(k in ("this", "table") for k, v in column.args.items() if v)
            and all(type(p) is exp.Identifier and all(k in ("this", "quoted") for k, v in p.args.items() if v)
                    for p in parts))


def _input_names(sel: exp.Select, relations: dict[str, RelationDecl]) -> set[str] | None:
    """The column names the SELECT's FROM items hold (relations' columns, derived tables' outputs); None where
    an item's names are unknown here (a UNION, an unknown relation), so that no alias is trusted."""
    from_ = sel.args.get("from_") or sel.args.get("from")
    items = ([from_.this] if isinstance(from_, exp.From) else []) + \
        [j.this for j in sel.args.get("joins") or [] if isinstance(j, exp.Join)]
    names: set[str] = set()
    for item in items:
        if type(item) is exp.Table:
            rel = next((r for n, r in relations.items() if n.lower() == item.name.lower()), None)
            if rel is None:
                return None
            names |= {c.name.lower() for c in rel.columns}
        elif type(item) is exp.Subquery and type(item.this) is exp.Select and \
                not any(isinstance(e, exp.Star) or type(e) is exp.Column and isinstance(e.this, exp.Star)
                        for e in item.this.expressions):
            names |= {e.alias_or_name.lower() for e in item.this.expressions}
        else:
            return None
    return names
