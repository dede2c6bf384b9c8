"""The SELECT list of one query: its items, their output names, GROUP BY and ORDER BY.

Why separate from the FROM/WHERE translation: these clauses name things
(output columns, aliases, positions) rather than compute them, and DuckDB's
naming rules — which the views must follow, since users read a view by the
names DuckDB would give — live in one place:

* duplicate output names are made unique in SELECT order, case-insensitively,
  by appending ``_1``, ``_2``, ... (:func:`unique_names`), as DuckDB names a
  view's columns;
* ``GROUP BY x`` names a FROM column when there is one, else a SELECT alias;
  ``GROUP BY 2`` names the second SELECT item; ``GROUP BY ALL`` every selected
  column;
* ``ORDER BY`` is accepted and ignored: a view is a set of rows (a map has
  no order), and the query's notes say so.  Its items must still name
  outputs, so a typo is not silently accepted.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlglot import exp

from .nodes import sql_of
from .resolve import ColRef, Positions, Resolver, unparen


@dataclass(frozen=True)
class Item:
    """One SELECT item: a column (``ref``) or an aggregate (``aggregate`` = (kind, arithmetic))."""

    name: str  # as written (alias, column name, or a generated aggregate name)
    node: exp.Expression  # the expression, alias removed
    ref: ColRef | None = None
    aggregate: tuple[str, object] | None = None


def unique_names(names: list[str], taken: set[str] | None = None) -> list[str]:
    """Names made unique the way DuckDB names a view's columns (case-insensitive; ``name_1``, ``name_2``).

    >>> unique_names(["a", "A", "s", "s", "a_1"])
    ['a', 'A_1', 's', 's_1', 'a_1_1']
    """
    used = {t.lower() for t in taken or ()}
    out = []
    for name in names:
        new, n = name, 0
        while new.lower() in used:
            n += 1
            new = f"{name}_{n}"
        used.add(new.lower())
        out.append(new)
    return out


def select_items(sel: exp.Select, res: Resolver, ctx: Positions) -> list[Item]:
    """The SELECT list: group columns and SUM/COUNT/AVG aggregates (anything else is refused)."""
    items: list[Item] = []
    aggregates = 0
    for item in sel.expressions:
        alias = item.alias if type(item) is exp.Alias else None
        node = unparen(item.this) if type(item) is exp.Alias else unparen(item)
        if type(node) is exp.Column and not isinstance(node.this, exp.Star):
            ref = res.column(node)
            if any(i.ref == ref for i in items):
                raise ctx.error(f"column {sql_of(node)} is selected twice (a view has one key column per group column)",
                                node)
            items.append(Item(alias or ref[1], node, ref=ref))
        elif isinstance(node, exp.AggFunc):
            aggregates += 1
            items.append(Item(alias or f"{type(node).__name__.lower()}_{aggregates}", node,
                              aggregate=res.aggregate(node)))
        elif isinstance(node, exp.Star) or (type(node) is exp.Column and isinstance(node.this, exp.Star)):
            raise ctx.error(f"unsupported SELECT {sql_of(node)} (an aggregate query selects group columns and "
                            "aggregates)", node)
        else:
            bad = next((n for n in node.walk() if isinstance(n, exp.AggFunc)), None)
            what = "arithmetic over aggregates" if bad is not None else f"non-aggregate expression {sql_of(node)}"
            raise ctx.error(f"unsupported {what} in SELECT", node)
    if not any(i.aggregate for i in items):
        raise ctx.error("a query must compute at least one aggregate (SUM, COUNT or AVG)", sel)
    return items


def group_columns(sel: exp.Select, items: list[Item], res: Resolver, ctx: Positions) -> list[ColRef]:
    """The GROUP BY columns, in order, each once (see module doc for how names are looked up)."""
    group = sel.args.get("group")
    if group is None:
        return []
    refs: list[ColRef] = []
    if group.args.get("all"):
        refs = [i.ref for i in items if i.ref is not None]
    for g in group.expressions:
        g = unparen(g)
        if type(g) is exp.Column and not g.table and not res.has_column(g):
            item = next((i for i in items if i.name.lower() == g.name.lower()), None)
            if item is None:
                res.column(g)  # the unknown-column error
            refs.append(_grouped_item(item, g, ctx))
        elif type(g) is exp.Column:
            refs.append(res.column(g))
        elif type(g) is exp.Literal and not g.is_string and str(g.this).isdigit():
            k = int(g.this)
            if not 1 <= k <= len(items):
                raise ctx.error(f"GROUP BY {k}: the SELECT list has {len(items)} items", g)
            refs.append(_grouped_item(items[k - 1], g, ctx))
        else:
            raise ctx.error(f"unsupported GROUP BY expression {sql_of(g)} (group by columns only)", g)
    out: list[ColRef] = []
    for r in refs:
        if r not in out:
            out.append(r)
    for i in items:
        if i.ref is not None and i.ref not in out:
            raise ctx.error(f"column {sql_of(i.node)} is selected but not in GROUP BY", i.node)
    return out


def _grouped_item(item: Item, g: exp.Expression, ctx: Positions) -> ColRef:
    if item.ref is None:
        raise ctx.error(f"GROUP BY {sql_of(g)} names the aggregate {sql_of(item.node)}", g)
    return item.ref


def order_note(name: str, sel: exp.Select, items: list[Item], names: list[str], res: Resolver,
               ctx: Positions) -> str | None:
    """The note that ORDER BY was ignored (None without ORDER BY), after checking its items name outputs."""
    order = sel.args.get("order")
    if order is None:
        return None
    written = {sql_of(i.node).lower() for i in items}
    outputs = {n.lower() for n in names} | {i.name.lower() for i in items}
    refs = {i.ref for i in items}
    for o in order.expressions:
        x = unparen(o.this if type(o) is exp.Ordered else o)
        if type(x) is exp.Literal and not x.is_string and str(x.this).isdigit() and 1 <= int(x.this) <= len(items):
            continue
        if type(x) is exp.Column and not x.table and x.name.lower() in outputs:
            continue
        if type(x) is exp.Column and res.has_column(x) and res.column(x) in refs:
            continue
        if sql_of(x).lower() in written:
            continue
        raise ctx.error(f"ORDER BY {sql_of(x)} is not an output of the view (order by an output's name or position)",
                        x)
    return f"{name}: ORDER BY ignored: a view is a set of rows (sort them when reading the view)"


def view_names(items: list[Item], groups: list[ColRef], rename: list[str], view: str,
               ctx: Positions) -> tuple[list[tuple[str, ColRef]], list[tuple[str, tuple[str, object]]]]:
    """``(group_by, aggregates)`` with their final names: DuckDB-unique, then renamed by ``CREATE VIEW v(names)``.

    Group columns not selected are view keys too (named after their column, after the others).
    """
    names = unique_names([i.name for i in items])
    if len(rename) > len(names):
        raise ctx.error(f"view {view} names {len(rename)} columns but selects {len(names)}")
    names[:len(rename)] = rename
    lowered = [n.lower() for n in names]
    dup = next((n for n in names if lowered.count(n.lower()) > 1), None)
    if dup is not None:
        raise ctx.error(f"view {view} names column {dup} twice")
    by_ref = {i.ref: n for i, n in zip(items, names) if i.ref is not None}
    hidden = [r for r in groups if r not in by_ref]
    by_ref.update(zip(hidden, unique_names([r[1] for r in hidden], set(names))))
    return ([(by_ref[r], r) for r in groups],
            [(n, i.aggregate) for i, n in zip(items, names) if i.aggregate is not None])
