"""Names beside a one-row derived table: ``*`` over it and relations, and its columns read unqualified deeper.

Why: :mod:`.onerow` reads a one-row derived table's columns as its scalar
subqueries, but only where it knows the name is the table's: ``*`` beside
relations, or an unqualified ``C`` inside a nested subquery (``WHERE r1.A >
(SELECT SUM(C) FROM R r2)``, DBToaster's ``r_aggcomparison``), need the
relations' columns to say which item a name belongs to.  Given them, ``*``
is each item's columns in FROM order (``r1.A, r1.B, S.C``: DuckDB's names; a one-row table's column selected is
aliased by its name, which it keeps once it is a subquery)
and an unqualified name that no FROM item between it and the one-row table
holds is the table's (SQL's scoping: the innermost item with the name).
Then :mod:`.onerow` reads them as it reads any qualified column.

Left as written: a ``*`` over a FROM item whose columns are not known (a
derived table other than a one-row one with aliased columns), two columns
of one name in the expansion, and a name that a relation beside the one-row
table also holds (ambiguous, as SQL says).

>>> import sqlglot
>>> cols = {"R": ["A", "B"]}
>>> one_row_names(sqlglot.parse_one('''SELECT * FROM R r1, (SELECT SUM(r3.B) AS C FROM R r3) S
...     WHERE r1.A > (SELECT SUM(C) FROM R r2)'''), cols).sql()
'SELECT r1.A, r1.B, S.C AS C FROM R AS r1, (SELECT SUM(r3.B) AS C FROM R AS r3) AS S WHERE r1.A > (SELECT SUM(S.C) FROM R AS r2)'
>>> one_row_names(sqlglot.parse_one("SELECT * FROM R r1, (SELECT SUM(r3.B) FROM R r3) S"), cols).sql()
'SELECT * FROM R AS r1, (SELECT SUM(r3.B) FROM R AS r3) AS S'
"""

from __future__ import annotations

from sqlglot import exp

from .onerow import one_row_body


def one_row_names(sel: exp.Expression, columns: dict[str, list[str]]) -> exp.Expression:
    """``sel`` (a copy when anything changes) with ``*`` expanded and unqualified reads qualified, as above."""
    if not any(one_row_body(s) is not None for s in sel.find_all(exp.Subquery)):
        return sel
    sel = sel.copy()
    for scope in list(sel.find_all(exp.Select)):
        items = _items(scope)
        ones = [i for i in items if one_row_body(i) is not None]
        if not ones:
            continue
        _expand(scope, items, columns)
        for item in ones:
            _qualify(scope, item, items, columns)
        aliases = {i.alias_or_name.lower() for i in ones if i.alias_or_name}
        scope.set("expressions", [exp.alias_(e, e.name) if type(e) is exp.Column and e.table.lower() in aliases
                                  else e for e in scope.expressions])  # its name kept once it is a subquery
    return sel


def _items(s: exp.Select) -> list[exp.Expression]:
    from_ = s.args.get("from_") or s.args.get("from")
    return ([from_.this] if isinstance(from_, exp.From) else []) + \
        [j.this for j in s.args.get("joins") or [] if isinstance(j, exp.Join)]


def _names(item: exp.Expression, columns: dict[str, list[str]]) -> list[str] | None:
    """The columns of a FROM item, when known: a relation's, or a derived table's aliased ones."""
    if type(item) is exp.Table:
        return next((cs for n, cs in columns.items() if n.lower() == item.name.lower()), None)
    if type(item) is exp.Subquery and type(item.this) is exp.Select:
        body = item.this
        if all(type(e) is exp.Alias or type(e) is exp.Column and not isinstance(e.this, exp.Star)
               for e in body.expressions):
            return [e.alias_or_name for e in body.expressions]
    return None


def _expand(scope: exp.Select, items: list[exp.Expression], columns: dict[str, list[str]]) -> None:
    if not any(type(e) is exp.Star for e in scope.expressions) or len(scope.expressions) != 1 or len(items) < 2:
        return
    out = []
    for item in items:
        names = _names(item, columns)
        if names is None or not item.alias_or_name:
            return
        out += [exp.column(n, table=item.alias_or_name) for n in names]
    if len({c.name.lower() for c in out}) != len(out):
        return  # two columns of one name: left for the front end (which names what it refuses)
    scope.set("expressions", out)


def _qualify(scope: exp.Select, item: exp.Subquery, items: list[exp.Expression],
             columns: dict[str, list[str]]) -> None:
    mine = {n.lower() for n in _names(item, columns) or []}
    others = set()
    for other in items:
        if other is not item:
            names = _names(other, columns)
            if names is None:
                return  # an item whose columns are not known may hold the name: left as written
            others |= {n.lower() for n in names}
    for c in list(scope.find_all(exp.Column)):
        if c.table or isinstance(c.this, exp.Star) or c.name.lower() not in mine - others:
            continue
        inner = c.find_ancestor(exp.Select)
        if inner is scope or inner is None or _inside(c, item):
            continue  # its own scope's reads are onerow's; a read inside the table itself is the table's own
        if _held_between(c, scope, columns):
            continue
        c.set("table", exp.to_identifier(item.alias_or_name))


def _inside(node: exp.Expression, item: exp.Expression) -> bool:
    while node is not None:
        if node is item:
            return True
        node = node.parent
    return False


def _held_between(c: exp.Column, scope: exp.Select, columns: dict[str, list[str]]) -> bool:
    """Whether a SELECT between the column and ``scope`` has a FROM item that holds (or may hold) its name."""
    node = c.find_ancestor(exp.Select)
    while node is not None and node is not scope:
        for i in _items(node):
            names = _names(i, columns)
            if names is None or c.name.lower() in {n.lower() for n in names}:
                return True
        node = node.find_ancestor(exp.Select)
    return False
