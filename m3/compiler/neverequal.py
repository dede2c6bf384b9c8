"""A WHERE that its column types decide is false: ``int_col = 50.27`` as a conjunct makes the whole WHERE ``1 = 0``.

Why: an INT column never equals a constant with a fractional part (DuckDB compares them as decimals: 50 is not
50.27), so a WHERE holding such an equality as a conjunct holds for no row, NULL or not, whatever its other
conjuncts say.  Those other conjuncts are then never evaluated for the view's rows, so a construct in them that
the compiler refuses (a division by a column in a comparison, whose ``x / 0`` DuckDB reads as inf or NaN) does
not matter: the view is always empty, as the general rules compile ``WHERE 1 = 0`` (a map that never counts).
Conjuncts holding a subquery keep the WHERE as it is (a subquery DuckDB refuses at run time is not decided here),
and so does a WHERE reading a column not resolved here (unknown or ambiguous: the general rules refuse it by name)
or a query with a WITH clause (a CTE may name a stream again, with other columns and types).

>>> import sqlglot
>>> from .examples import stream
>>> rels = {"T": stream("T", c="INT", d="INT", f="FLOAT")}
>>> def r(sql): return never_equal(sqlglot.parse_one(sql), rels).sql()
>>> r("SELECT * FROM T AS z WHERE (z.c / z.d > 1 OR z.c < 2) AND z.d = 50.27")
'SELECT * FROM T AS z WHERE 1 = 0'
>>> r("SELECT * FROM T WHERE d = 50.0 AND c > 1"), r("SELECT * FROM T WHERE f = 50.27")
('SELECT * FROM T WHERE d = 50.0 AND c > 1', 'SELECT * FROM T WHERE f = 50.27')
>>> r("SELECT * FROM T WHERE zz = 1 AND d = 50.27")  # zz unknown: left for the general rules to refuse
'SELECT * FROM T WHERE zz = 1 AND d = 50.27'
"""

from __future__ import annotations

from decimal import Decimal, InvalidOperation

from sqlglot import exp

from ..ast import RelationDecl
from .clauses import conjuncts
from .resolve import unparen


def never_equal(sel: exp.Expression, relations: dict[str, RelationDecl]) -> exp.Expression:
    """``sel`` (changed in place) with its WHERE ``1 = 0`` when a conjunct compares an INT column with a
    constant that has a fractional part for equality (module doc)."""
    if type(sel) is not exp.Select or sel.args.get("where") is None:
        return sel
    parts = conjuncts(sel.args["where"].this)
    if not all(isinstance(p, exp.Expression) for p in parts):
        return sel  # (a malformed tree: the general rules refuse it by name)
    if any(isinstance(n, (exp.Select, exp.Subquery)) for p in parts for n in p.walk()):
        return sel
    if _with_around(sel):
        return sel  # a WITH may name a FROM table again (WITH S AS (...) ... FROM S): its types are not the stream's
    types = column_types(sel, relations)
    if not all((c.table.lower(), c.name.lower()) in types for c in sel.args["where"].find_all(exp.Column)):
        return sel  # a column not resolved here (unknown, ambiguous): the general rules refuse it by name
    if any(_never(p, types) for p in parts):
        sel.set("where", exp.Where(this=exp.EQ(this=exp.Literal.number(1), expression=exp.Literal.number(0))))
    return sel


def _never(c: exp.Expression, types: dict[tuple[str, str], str]) -> bool:
    c = unparen(c)
    if type(c) is not exp.EQ:
        return False
    for col, const in ((unparen(c.this), unparen(c.expression)), (unparen(c.expression), unparen(c.this))):
        if type(col) is exp.Column and type(const) is exp.Literal and not const.is_string:
            key = (col.table.lower(), col.name.lower())
            try:
                fractional = Decimal(str(const.this)) % 1 != 0
            except InvalidOperation:
                return False
            if fractional and types.get(key) == "INT":
                return True
    return False


def _with_around(sel: exp.Expression) -> bool:
    """Whether ``sel`` or a query enclosing it has a WITH clause."""
    node: exp.Expression | None = sel
    while node is not None:
        if node.args.get("with") or node.args.get("with_"):
            return True
        node = node.parent
    return False


def column_types(sel: exp.Select, relations: dict[str, RelationDecl]) -> dict[tuple[str, str], str]:
    """``(alias, column) -> type`` for the FROM's relations (an unqualified column: alias ``''``, when one
    relation alone has it)."""
    from_ = sel.args.get("from_") or sel.args.get("from")
    items = ([from_.this] if isinstance(from_, exp.From) else []) + \
        [j.this for j in sel.args.get("joins") or [] if isinstance(j, exp.Join)]
    out: dict[tuple[str, str], str] = {}
    seen: dict[str, int] = {}
    for t in items:
        rel = next((r for n, r in relations.items() if type(t) is exp.Table and n.lower() == t.name.lower()), None)
        if rel is None:
            return {}  # a derived table or an unknown name: its columns are not known here
        for col in rel.columns:
            out[(t.alias_or_name.lower(), col.name.lower())] = col.type
            seen[col.name.lower()] = seen.get(col.name.lower(), 0) + 1
            out[("", col.name.lower())] = col.type
    return {k: v for k, v in out.items() if k[0] or seen[k[1]] == 1}
