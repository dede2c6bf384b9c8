"""Constant rows and values without relations: a FROM-less derived table of constants, a function of constants.

Why: a view that reads no relation is a *constant view* (``SELECT 1 AS a WHERE 2 > 3``: one fixed row, or none;
:mod:`.fromless` writes it, the runtime reads it without maps).  Two spellings reach it through other constructs,
and both are rewritten here on the tree, before the general rules, so that those rules stay unaware of them:

* a derived table without FROM, of constants only (``FROM (SELECT 1 AS A) S``), is one row: each column of it the
  query reads (``S.A``; ``A`` when no other FROM item has a column ``A``) is that constant, and the item leaves
  FROM.  With no FROM item left the query is without FROM (:mod:`.fromless`); otherwise the others are joined as
  before (a cross product with one row changes nothing);
* a scalar function of constants (``SUBSTRING('FOO', 1, 2)``) is its value, computed by the runtime's own
  function (:func:`..functions.apply`, DuckDB's semantics), so that a constant and a column agree.

>>> import sqlglot
>>> def r(sql, rels=None): return constant_rows(sqlglot.parse_one(sql), rels or {}).sql()
>>> r("SELECT 1 AS B FROM (SELECT 1 AS A) S WHERE A = 2")
'SELECT 1 AS B WHERE 1 = 2'
>>> r("SELECT S.A + R.a AS x FROM R, (SELECT 2 AS A, 'u' AS t) AS S WHERE S.t = R.s", {"R": ["a", "s"]})
"SELECT 2 + R.a AS x FROM R WHERE 'u' = R.s"
>>> r("SELECT a FROM (SELECT 1 AS a) S, R", {"R": ["a"]})  # ambiguous: left for the general rules to refuse
'SELECT a FROM (SELECT 1 AS a) AS S, R'
>>> r("SELECT * FROM (SELECT 1 AS a) k")  # * lists the derived table's columns: left for the general rules
'SELECT * FROM (SELECT 1 AS a) AS k'
>>> fold_call(sqlglot.parse_one("SUBSTRING('FOO', 1, 2)")), fold_call(sqlglot.parse_one("SUBSTRING(a, 1, 2)"))
('FO', None)
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from sqlglot import exp

from ..functions import apply
from .constants import NotConstant, fold, is_constant
from .resolve import Positions, unparen


def constant_rows(sel: exp.Expression, relations: Mapping[str, Sequence[str]]) -> exp.Expression:
    """``sel`` with its FROM-less derived tables of constants replaced by their values (module doc);
    ``relations``: each relation's column names (case-insensitive)."""
    if type(sel) is not exp.Select:
        return sel
    items = _from_items(sel)
    rows = [(i, t, _row_of(t)) for i, t in enumerate(items)]
    rows = [(i, t, row) for i, t, row in rows if row is not None]
    if not rows:
        return sel
    if any(type(e) is exp.Star or type(e) is exp.Column and type(e.this) is exp.Star for e in sel.expressions) or \
            any(c.find_ancestor(exp.Group, exp.Order) is not None for c in sel.find_all(exp.Column)
                if any(c.name.lower() in r for _, _, r in rows)):
        return sel  # * would lose its columns, a constant in GROUP BY or ORDER BY reads as a position: refused later
    others = [t for t in items if all(t is not x for _, x, _ in rows)]
    other_columns = {c.lower() for t in others for c in _columns_of(t, relations)}
    gone = []
    for _, t, row in rows:
        alias = t.alias_or_name.lower()
        for col in list(sel.find_all(exp.Column)):
            name, top = col.name.lower(), col.find_ancestor(exp.Select) is sel
            if name in row and (col.table.lower() == alias and _scope_of(col, alias) is sel or not col.table and top and name not in other_columns
                                and "*" not in other_columns and sum(name in r for _, _, r in rows) == 1):
                item = col.parent is sel and col.arg_key == "expressions"  # SELECT k.t: still named t
                col.replace(exp.alias_(row[name].copy(), col.name) if item else row[name].copy())
        if not any(c.table.lower() == alias or not c.table and c.name.lower() in row and
                   c.find_ancestor(exp.Select) is sel for c in sel.find_all(exp.Column)):
            gone.append(t)  # else a column of it is left (ambiguous): the general rules refuse it by name
    _drop(sel, gone)
    return sel


def fold_call(e: exp.Expression) -> object | None:
    """The value of a scalar function of constants (``SUBSTRING('FOO', 1, 2)``), None when ``e`` is not one."""
    e = unparen(e)
    if type(e) is not exp.Substring or e.args.get("zero_start") or not is_constant(e):
        return None
    try:
        s, start = fold(e.this), fold(e.args["start"])
        length = fold(e.args["length"]) if e.args.get("length") is not None else None
    except (NotConstant, KeyError):
        return None
    if not isinstance(s, str) or not isinstance(start, int) or start < 1 or \
            (length is not None and (not isinstance(length, int) or length < 0)):
        return None  # DuckDB's SUBSTRING from position 0 or of a negative length: not this function's domain
    return apply("SUBSTRING", (s, start) + (() if length is None else (length,)))


def constant_in(e: exp.In, ctx: Positions) -> bool:
    """Whether ``c IN (v, ...)`` of constants holds (DuckDB: ``1 IN (1.0)`` holds; no NULL among them, no string
    beside a number: refused by name)."""
    if any(isinstance(n, exp.Null) for n in e.walk()):
        raise ctx.error(f"unsupported NULL in a constant IN list ({e.sql()}): SQL's IN is then NULL, not false", e)
    try:
        value, values = fold(e.this), [fold(x) for x in e.expressions]
    except NotConstant as bad:
        raise ctx.error(f"unsupported {bad.node.sql()} in a constant IN list ({bad})", e) from None
    _same_kind([value, *values], e, ctx)
    return value in values


def constant_comparison(e: exp.Expression, ctx: Positions) -> None:
    """Refuse a comparison of two constants, a string and a number (``'1' = 1``), by name (:func:`_same_kind`)."""
    if is_constant(e.this) and is_constant(e.expression):
        try:
            values = [fold(e.this), fold(e.expression)]
        except NotConstant:
            return  # refused by name where its value is read
        _same_kind(values, e, ctx)


def _same_kind(values: list, e: exp.Expression, ctx: Positions) -> None:
    """Refuse strings beside numbers: DuckDB casts the string (``'1' IN (1)`` holds, ``2 IN (1, 'x')`` is an
    error), Python's ``==`` does not; the cast's rules are not this compiler's."""
    if any(isinstance(v, str) for v in values) and \
            any(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values):
        raise ctx.error(f"unsupported comparison of a string with a number ({e.sql()}): DuckDB casts the "
                        "string; write both sides as numbers or both as strings", e)


def _scope_of(col: exp.Column, alias: str) -> exp.Expression | None:
    """The innermost SELECT around ``col`` whose FROM declares ``alias`` (a subquery may declare it again)."""
    node = col.find_ancestor(exp.Select)
    while node is not None and alias not in {t.alias_or_name.lower() for t in _declared(node)}:
        node = node.find_ancestor(exp.Select)
    return node


def _declared(sel: exp.Select) -> list[exp.Expression]:
    """Every FROM item of a SELECT, joined by any kind of join."""
    from_ = sel.args.get("from_") or sel.args.get("from")
    return ([from_.this] if isinstance(from_, exp.From) else []) + \
        [j.this for j in sel.args.get("joins") or [] if isinstance(j, exp.Join)]


def _from_items(sel: exp.Select) -> list[exp.Expression]:
    from_ = sel.args.get("from_") or sel.args.get("from")
    joins = sel.args.get("joins") or []
    if any(type(j) is not exp.Join or j.args.get("on") or j.args.get("using") or j.side or j.kind for j in joins):
        return []  # an explicit JOIN: left as it is
    return ([from_.this] if isinstance(from_, exp.From) else []) + [j.this for j in joins]


def _row_of(item: exp.Expression) -> dict[str, exp.Expression] | None:
    """A FROM-less derived table of constants as ``{column: constant}``, else None."""
    if type(item) is not exp.Subquery or any(v for k, v in item.args.items() if k not in ("this", "alias")):
        return None
    body = unparen(item.this)
    if type(body) is not exp.Select or any(v not in (None, False, [], "") for k, v in body.args.items()
                                           if k != "expressions"):
        return None
    row: dict[str, exp.Expression] = {}
    for e in body.expressions:
        value = unparen(e.this if type(e) is exp.Alias else e)
        if type(e) is not exp.Alias or not is_constant(value) or e.alias.lower() in row:
            return None
        row[e.alias.lower()] = exp.Paren(this=value.copy()) if not isinstance(value, exp.Literal) else value
    return row


def _columns_of(item: exp.Expression, relations: Mapping[str, Sequence[str]]) -> list[str]:
    if type(item) is exp.Table:
        rel = next((cols for name, cols in relations.items() if name.lower() == item.name.lower()), [])
        return list(rel)
    if type(item) is exp.Subquery and type(unparen(item.this)) is exp.Select:
        return [e.alias_or_name for e in unparen(item.this).expressions]
    return ["*"]


def _drop(sel: exp.Select, gone: list[exp.Expression]) -> None:
    """Remove the FROM items ``gone`` (the next item becomes FROM's first; none left: no FROM)."""
    rest = [t for t in _from_items(sel) if all(t is not g for g in gone)]
    sel.set("joins", [exp.Join(this=t.copy()) for t in rest[1:]] or None)
    sel.set("from_" if "from_" in exp.Select.arg_types else "from", exp.From(this=rest[0].copy()) if rest else None)
