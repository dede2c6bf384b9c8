"""Derived tables over nullable columns: each rewritten in its own scope, its NULLs passed out as columns.

Why a module of its own (docs/m3.md "NULLs", derived tables): a derived table ``(SELECT ...) t`` is a
relation the enclosing query reads by name, so what the enclosing query needs is, per column of ``t``,
where it is present.  The inner SELECT is rewritten as a query of its own (:mod:`.threevalued`), then
its items tell the outer scope:

* **a nullable key** (``SELECT c AS x ...``, grouped or a view of rows) is selected with its own indicator,
  named ``x__null`` (:func:`boreas.m3.nullable.indicator`): the outer query reads ``t.x`` as it reads a
  nullable column of a stream, two columns, value and indicator.  The inner rewrite's indicators are named
  after the source columns (``c__null``), which another item may be named (``SELECT b AS old_b, c AS b``):
  they are replaced by one per item, and an item already named ``x__null`` is refused;
* **a SUM/AVG that may read no value** (``SUM(c) AS s``) keeps the COUNT of what it reads, which
  the inner rewrite adds as a hidden item; here it is named ``s__values`` and ``t.s`` is present where
  ``t.s__values <> 0`` (SQL: NULL over only NULLs).  Such a column is not a key outside (one group per
  value would need an indicator, not a count): refused by name there.

The inner query's ``__rows__null`` (its group's COUNT(*), :func:`.nullshown.needs_rows`) stays an item of it:
a query selecting the derived table's rows as they are is the grouped query itself (:mod:`.regroup`, which
carries the count over, so a group whose COUNT(b) is 0 is a row); a query reading it by value counts its
groups in a part of its own (:mod:`.lifted`, which leaves the item out).  A MIN/MAX of a nullable column inside a
derived table is a filtered fold the enclosing query does not read: refused by name (:mod:`.nullaggs`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from sqlglot import exp

from ..nullable import ROWS, indicator
from .nullshown import counted_item

#: The suffix of a derived table's column counting the values of its NULL-skipping aggregate item.
VALUES_SUFFIX = "__values"


@dataclass
class DerivedNulls:
    """What the enclosing query knows of one derived table's columns (lower-case names)."""

    columns: set[str]
    nullable: set[str]
    counted: dict[str, str] = field(default_factory=dict)  # column -> its count column (present where <> 0)


def derived_tables(sel: exp.Select) -> list[exp.Subquery]:
    """The derived tables among ``sel``'s FROM items (FROM and JOINs)."""
    items = [sel.args.get("from_") and sel.args["from_"].this] + [j.this for j in sel.args.get("joins") or []]
    return [t for t in items if type(t) is exp.Subquery and type(t.this) is exp.Select]


def derived_chain(sub: exp.Subquery, top: exp.Select) -> bool:
    """Whether each SELECT around the derived table ``sub`` is ``top`` or itself a derived table's (a derived
    table inside a subquery of a WHERE is not read here: refused)."""
    sel = sub.parent_select
    while sel is not top:
        if sel is None or type(sel.parent) is not exp.Subquery or type(sel.parent.parent) not in (exp.From, exp.Join):
            return False
        sel = sel.parent.parent_select
    return True


def rewrite_derived(sub: exp.Subquery, make, refuse) -> tuple[str, DerivedNulls]:
    """Rewrite the derived table ``sub`` in place; its alias and what its columns are.  ``make(select)``: a
    rewriter of that SELECT (:class:`.threevalued._Rewriter`), ``refuse(what, node)`` an error to raise."""
    inner = sub.this
    alias = sub.alias_or_name.lower()
    if not alias:
        raise refuse("in a derived table without an alias", sub)
    if any(type(n) is exp.Star for n in inner.expressions):
        raise refuse(f"listed by * in a derived table ({sub.sql()}: name the columns)", sub)
    rw = make(inner)
    names = [e.alias_or_name for e in inner.expressions]
    keyed = []  # (item name, its nullable column) before the rewrite changes the items
    for name, e in zip(names, inner.expressions):
        col = e.this if type(e) is exp.Alias else e
        if type(col) is exp.Column and rw.nullable(col):
            keyed.append((name, col.copy()))
    rewritten = rw.select(inner)
    if rewritten is not inner:
        inner.replace(rewritten)
        inner = rewritten
    out = DerivedNulls(set(), set())
    for e in list(inner.expressions):
        if counted_item(e) is not None:
            name = names[counted_item(e)]
            e.set("alias", exp.to_identifier(name + VALUES_SUFFIX))
            out.nullable.add(name.lower())
            out.counted[name.lower()] = (name + VALUES_SUFFIX).lower()
    mine = {n.lower() for n in names}
    for e in list(inner.expressions)[len(names):]:  # the rewrite's indicators, named after the source columns
        if e.alias_or_name.lower() not in mine | {ROWS} and e.alias_or_name.lower().endswith(indicator("")):
            e.pop()
    shown = {e.alias_or_name.lower() for e in inner.expressions}
    for name, col in keyed:  # each item's own indicator, named after the item (t.x is present where x__null = 0)
        flag = indicator(name)
        if flag.lower() in shown:
            raise refuse(f"{name} with an item named {flag} beside it in a derived table (the name of {name}'s "
                         "NULL indicator: rename that item)", sub)
        inner.append("expressions", exp.alias_(exp.column(indicator(col.name), col.table or None), flag))
        shown.add(flag.lower())
        out.nullable.add(name.lower())
    out.columns = shown
    return alias, out
