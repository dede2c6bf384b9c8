"""A view of rows with uncorrelated scalar subqueries in its SELECT list: its rows counted per key, the values beside.

Why: ``SELECT r.a, r.b, (SELECT SUM(b) FROM S) AS c FROM R r WHERE ...`` is a
view of rows (each row with its multiplicity) whose column ``c`` is one value
for every row: DBToaster's nested aggregate lifted into a variable,
``R(a, b) * (C ^= AggSum([], S(b) * b))``.  Its rows are those of
``SELECT r.a, r.b, COUNT(*) ... GROUP BY r.a, r.b`` (a view of rows is keyed
by its columns and counts each row's occurrences in its ``count`` column, the
row present while that count is above 0), and ``c`` is read beside them.  So
the query is written as that aggregate query, with ``COUNT(*) AS count`` last,
which :mod:`.selectsub` compiles (an uncorrelated scalar subquery in the
SELECT list of an aggregate query: a part of its own, read at each row).
SQL's NULL of a subquery over no rows is shown as 0, as there.

Left as written (for the front end to compile or refuse by name): a column
that is not a plain column or an expression of subqueries and constants only,
a correlated subquery, aggregates, GROUP BY, HAVING, DISTINCT, ORDER BY, a
limit, a FROM item that is not a relation, a column named ``count`` or two
columns of one name.

>>> import sqlglot
>>> rels = {"R": ["a", "b"], "S": ["b", "d"]}
>>> rows_with_values(sqlglot.parse_one(
...     "SELECT r.a, r.b, (SELECT SUM(S.b) FROM S) * 2 AS c FROM R r WHERE r.a > 1"), rels).sql()
'SELECT r.a, r.b, (SELECT SUM(S.b) FROM S) * 2 AS c, COUNT(*) AS count FROM R AS r WHERE r.a > 1 GROUP BY r.a, r.b'
>>> rows_with_values(sqlglot.parse_one("SELECT r.a, (SELECT SUM(S.b) FROM S WHERE S.d = r.b) FROM R r"), rels).sql()
'SELECT r.a, (SELECT SUM(S.b) FROM S WHERE S.d = r.b) FROM R AS r'
"""

from __future__ import annotations

from sqlglot import exp

from .resolve import unparen

_BODY = frozenset({"expressions", "from", "from_", "joins", "where"})


def rows_with_values(sel: exp.Expression, columns: dict[str, list[str]]) -> exp.Expression:
    """``sel`` as its aggregate query (module doc) when it is such a view of rows, else ``sel`` unchanged."""
    if type(sel) is not exp.Select or any(v not in (None, False, [], "") for k, v in sel.args.items()
                                          if k not in _BODY):
        return sel
    items = _items(sel)
    if not items or any(type(i) is not exp.Table or _relation(i, columns) is None for i in items):
        return sel
    keys, names, subs = [], [], 0
    for e in sel.expressions:
        x = unparen(e.this if type(e) is exp.Alias else e)
        names.append(e.alias_or_name.lower())
        if type(x) is exp.Column and not isinstance(x.this, exp.Star):
            keys.append(x)
            continue
        found = list(x.find_all(exp.Subquery))
        if not found or any(isinstance(n, (exp.Column, exp.Star, exp.AggFunc)) and n.find_ancestor(exp.Subquery) is None
                            for n in x.walk()):
            return sel
        if any(_correlated(s, columns) for s in found):
            return sel
        subs += 1
    if not subs or not keys or "count" in names or len(set(names)) != len(names) or "" in names:
        return sel
    out = sel.copy()
    out.set("expressions", [e.copy() for e in sel.expressions] +
            [exp.Alias(this=exp.Count(this=exp.Star()), alias=exp.to_identifier("count"))])
    out.set("group", exp.Group(expressions=[k.copy() for k in keys]))
    return out


def _items(s: exp.Select) -> list[exp.Expression]:
    from_ = s.args.get("from_") or s.args.get("from")
    joins = s.args.get("joins") or []
    if not isinstance(from_, exp.From) or any(
            j.args.get("side") or j.args.get("using") or j.args.get("method") or
            str(j.args.get("kind") or "").upper() not in ("", "INNER", "CROSS") for j in joins):
        return []
    return [from_.this] + [j.this for j in joins]


def _relation(t: exp.Table, columns: dict[str, list[str]]) -> list[str] | None:
    return next((cs for n, cs in columns.items() if n.lower() == t.name.lower()), None)


def _correlated(sub: exp.Subquery, columns: dict[str, list[str]]) -> bool:
    """Whether the subquery reads a column its own FROM items (relations, named derived tables) do not hold."""
    aliases, names = set(), set()
    for t in sub.find_all(exp.Table):
        aliases.add(t.alias_or_name.lower())
        names |= {c.lower() for c in _relation(t, columns) or []}
    for s in sub.find_all(exp.Subquery):
        if s is not sub and s.alias_or_name:
            aliases.add(s.alias_or_name.lower())
        if isinstance(s.this, exp.Select):
            names |= {e.alias_or_name.lower() for e in s.this.expressions}
    return any(c.table.lower() not in aliases if c.table else c.name.lower() not in names
               for c in sub.find_all(exp.Column) if not isinstance(c.this, exp.Star))
