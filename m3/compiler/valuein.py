"""``(SELECT agg ...) IN (SELECT c FROM ... WHERE w)``: the existence of a row whose ``c`` is that value.

Why: SQL's ``v IN (q)`` holds when some row of ``q`` equals ``v``; that is
``EXISTS (q WHERE w AND c = v)``, and with ``v`` a scalar subquery the
front end already compiles the comparison of an inner column with it (a
subquery in an ``EXISTS`` subquery's WHERE, Q20's shape).  The rewrite is
exact when ``v`` is not NULL or when it is: ``v IN (q)`` of a NULL ``v`` is
NULL, false in a WHERE, as ``c = NULL`` finds no row.  ``NOT IN`` is left as
it is (of a NULL ``v`` SQL's ``NOT IN`` is NULL too, where ``NOT EXISTS``
would hold), and so are a subquery ``q`` with GROUP BY, HAVING, DISTINCT,
LIMIT or several columns, and a value subquery that reads a column its own
FROM does not declare (a correlated one: moved one level deeper it would
read another scope).

>>> import sqlglot
>>> from .examples import stream
>>> rels = {"R": stream("R", a="INT", b="INT")}
>>> sel = sqlglot.parse_one("SELECT r1.a FROM R r1 WHERE (SELECT COUNT(*) / 2 FROM R) IN (SELECT r3.a FROM R r3)")
>>> exists_of_values(sel, rels).sql()
'SELECT r1.a FROM R AS r1 WHERE EXISTS(SELECT r3.a FROM R AS r3 WHERE r3.a = (SELECT COUNT(*) / 2 FROM R))'
>>> sel = sqlglot.parse_one("SELECT a FROM R WHERE NOT (SELECT SUM(b) FROM R) IN (SELECT a FROM R WHERE a > 1)")
>>> exists_of_values(sel, rels).sql()
'SELECT a FROM R WHERE NOT (SELECT SUM(b) FROM R) IN (SELECT a FROM R WHERE a > 1)'
>>> sel = sqlglot.parse_one("SELECT r1.a FROM R r1 WHERE (SELECT SUM(b) FROM R r2 WHERE r2.a = r1.b) IN (SELECT a FROM R)")
>>> exists_of_values(sel, rels) is sel and "EXISTS" not in sel.sql()  # correlated: kept
True
"""

from __future__ import annotations

from sqlglot import exp

from ..ast import RelationDecl

_KEPT = ("group", "having", "distinct", "limit", "offset", "order")


def exists_of_values(sel: exp.Expression, relations: dict[str, RelationDecl]) -> exp.Expression:
    """The statement with each rewritable ``(SELECT ...) IN (SELECT c ...)`` an ``EXISTS`` (module doc)."""
    for node in list(sel.find_all(exp.In)):
        found = _parts(node, relations)
        if found is None:
            continue
        value, inner, column = found
        body = inner.copy()
        body.where(exp.EQ(this=column.copy(), expression=value.copy()), copy=False)
        node.replace(exp.Exists(this=body))
    return sel


def _parts(node: exp.In, relations: dict[str, RelationDecl]) -> tuple[exp.Subquery, exp.Select, exp.Expression] | None:
    """``(value subquery, IN's SELECT, its column)`` when the IN is rewritable, else None."""
    value, query = node.this, node.args.get("query")
    while type(value) is exp.Paren:
        value = value.this
    if type(value) is not exp.Subquery or query is None or type(node.parent) is exp.Not:
        return None
    inner = query.this if type(query) is exp.Subquery else query
    if type(inner) is not exp.Select or len(inner.expressions) != 1 or any(inner.args.get(k) for k in _KEPT):
        return None
    item = inner.expressions[0]
    column = item.this if type(item) is exp.Alias else item
    if type(value.this) is not exp.Select or not _own_columns(value.this, relations):
        return None
    return value, inner, column


def _own_columns(sel: exp.Select, relations: dict[str, RelationDecl]) -> bool:
    """Whether the subquery is uncorrelated: it reads no subquery of its own, its FROM names declared relations,
    and each column it reads is one of theirs (qualified by one of their aliases, or unqualified)."""
    if any(True for _ in sel.find_all(exp.Subquery)):
        return False
    declared = {r.lower(): rel for r, rel in relations.items()}
    tables = list(sel.find_all(exp.Table))
    if any(t.name.lower() not in declared for t in tables):
        return False
    columns = {t.alias_or_name.lower(): {c.name.lower() for c in declared[t.name.lower()].columns} for t in tables}
    every = set().union(*columns.values()) if columns else set()
    return all(c.name.lower() in (columns.get(c.table.lower(), set()) if c.table else every)
               for c in sel.find_all(exp.Column))
