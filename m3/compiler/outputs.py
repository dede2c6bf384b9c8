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
  outputs or FROM columns (the note names those not selected), so a typo is not silently accepted.

Selected columns are the view's keys (``*`` and ``alias.*`` expand to the
FROM columns, a column may be selected twice); GROUP BY columns not selected
are its *internal* keys: they keep the groups apart, but SQL returns only
the selected columns, so no output row holds them; every other item is a view
expression over aggregates and group columns (:mod:`.viewexpr`).  A query
that aggregates nowhere and has no GROUP BY or HAVING is a view of rows:
its keys are the selected columns and one more column, ``count``, holds how
many times the row occurs (1 with ``DISTINCT``); a grouped query that
selects no value gets the same ``count`` (1: one row per group).

>>> import sqlglot
>>> from .examples import PlainErrors, resolver_over, stream
>>> res = resolver_over(stream("R", a="INT", b="INT"))
>>> items = select_items(sqlglot.parse_one("SELECT *, a, SUM(b) * 2 FROM R"), res, PlainErrors())
>>> [(i.name, i.ref, i.value) for i in items]
[('a', ('R', 'a'), None), ('b', ('R', 'b'), None), ('a', ('R', 'a'), None), ('expr_1', None, ('*', ('agg', 'SUM', ('R', 'b')), 2))]
>>> view_names(items[:3], [], [], "Q1", ("agg", "COUNT", 1), PlainErrors())
([('a', ('R', 'a')), ('b', ('R', 'b')), ('a_1', ('R', 'a'))], [('count', ('agg', 'COUNT', 1))], ())
>>> items = select_items(sqlglot.parse_one("SELECT SUM(a) AS s FROM R GROUP BY b"), res, PlainErrors())
>>> view_names(items, [("R", "b")], [], "Q1", None, PlainErrors())
([('b', ('R', 'b'))], [('s', ('agg', 'SUM', ('R', 'a')))], ('b',))
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlglot import exp

from .arithkey import ArithKey, arith_key, constant_value, is_key_arithmetic, keyed
from .constants import is_constant
from ..nullable import SUFFIX, indicator
from .nodes import sql_of
from .nullexprkeys import KEY_PREFIX
from .nullshown import COUNT_PREFIX
from .resolve import ColRef, Computed, Positions, Resolver, unparen
from .viewexpr import columns_of, has_aggregate, view_expr


@dataclass(frozen=True)
class Item:
    """One SELECT item: a column (``ref``: a key of the view) or a view expression (``value``, :mod:`.viewexpr`)."""

    name: str  # as written (alias, column name, or a generated name)
    node: exp.Expression  # the expression, alias removed
    ref: ColRef | Computed | ArithKey | None = None  # a column, a function of one (:meth:`.resolve.Resolver.computed`)
    # or arithmetic over columns (:mod:`.arithkey`)
    value: object = None


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
    """The SELECT list: columns (``*`` and ``alias.*`` expanded, FROM order) and expressions over aggregates."""
    items: list[Item] = []
    computed = 0
    for item in sel.expressions:
        alias = item.alias if type(item) is exp.Alias else None
        node = unparen(item.this) if type(item) is exp.Alias else unparen(item)
        if isinstance(node, exp.Star) or (type(node) is exp.Column and isinstance(node.this, exp.Star)):
            if alias:
                raise ctx.error(f"unsupported alias of {sql_of(node)}", item)
            items += [Item(ref[1], node, ref=ref) for ref in res.star(node)]
        elif type(node) is exp.Column:
            ref = res.column(node)
            items.append(Item(alias or ref[1], node, ref=ref))
        elif (key := res.computed(node)) is not None:  # EXTRACT(YEAR FROM d), SUBSTRING(p, 1, 2): a computed key
            items.append(Item(alias or type(node).__name__.lower(), node, ref=key))  # unaliased: "extract"
        else:
            computed += 1
            name = f"{type(node).__name__.lower()}_{computed}" if isinstance(node, exp.AggFunc) else f"expr_{computed}"
            items.append(Item(alias or name, node, value=view_expr(res, node)))
    return items


def grouped(sel: exp.Select, items: list[Item], having_pred) -> bool:
    """Whether the query aggregates (an aggregate in SELECT or HAVING, or a GROUP BY); else its view is its rows."""
    return (sel.args.get("group") is not None or having_pred is not None
            or any(has_aggregate(i.value) for i in items))


def group_columns(sel: exp.Select, items: list[Item], res: Resolver, ctx: Positions) -> list[ColRef]:
    """The GROUP BY columns, in order, each once (see module doc for how names are looked up); an arithmetic
    key (``GROUP BY A * 2``, :mod:`.arithkey`) selected too makes its SELECT item a key (``items`` is updated)."""
    group = sel.args.get("group")
    if group is None:
        bad = next((i for i in items if i.ref is not None), None)
        if bad is not None:
            raise ctx.error(f"column {sql_of(bad.node)} is selected beside aggregates but there is no GROUP BY", bad.node)
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
            refs.append(_grouped_item(item, g, ctx, res))
        elif type(g) is exp.Column:
            refs.append(res.column(g))
        elif type(g) is exp.Literal and not g.is_string and str(g.this).isdigit():
            k = int(g.this)
            if not 1 <= k <= len(items):
                raise ctx.error(f"GROUP BY {k}: the SELECT list has {len(items)} items", g)
            refs.append(_grouped_item(items[k - 1], g, ctx, res))
        elif (key := res.computed(g)) is not None:
            refs.append(key)
        elif is_key_arithmetic(g):
            refs.append(arith_key(res, g))
        else:
            raise ctx.error(f"unsupported GROUP BY expression {sql_of(g)} (group by columns, EXTRACT, "
                            "SUBSTRING or MOD of a column, or arithmetic over columns)", g)
    for n, i in enumerate(items):  # SELECT A * 2 ... GROUP BY A * 2: the item is the key
        if i.ref is None and is_key_arithmetic(i.node) and (key := arith_key(res, i.node)) in refs:
            items[n] = Item(i.name, i.node, ref=key)
    out: list[ColRef] = []
    for r in refs:
        if r not in out:
            out.append(r)
    for i in items:
        if i.ref is not None and i.ref not in out:
            raise ctx.error(f"column {sql_of(i.node)} is selected but not in GROUP BY", i.node)
    return out


def _grouped_item(item: Item, g: exp.Expression, ctx: Positions, res: Resolver) -> ColRef:
    if item.ref is None and is_key_arithmetic(item.node):  # GROUP BY 1 or an alias of A * 2
        return arith_key(res, item.node)
    if item.ref is None:
        what = "the aggregate" if has_aggregate(item.value) else "the expression"
        raise ctx.error(f"GROUP BY {sql_of(g)} names {what} {sql_of(item.node)} (group by columns only)", g)
    return item.ref


def read_keys(items: list[Item], groups: list, having_pred) -> tuple[list[Item], object]:
    """SELECT expressions and HAVING with arithmetic that is a group key read as that key (``GROUP BY a * 2
    HAVING a * 2 > 2``: :func:`.arithkey.keyed`)."""
    return ([Item(i.name, i.node, i.ref, keyed(i.value, groups)) for i in items], keyed(having_pred, groups))


def check_grouped(items: list[Item], groups: list[ColRef], having_pred, ctx: Positions,
                  having_node: exp.Expression | None = None) -> None:
    """Outside aggregates, SELECT expressions and HAVING read GROUP BY columns only."""
    for i in items:
        for ref in columns_of(i.value):
            if ref not in groups:
                raise ctx.error(f"{_named(ref)} in {sql_of(i.node)} is neither grouped nor inside an aggregate"
                                f"{_hint(ref)}", i.node)
    for ref in columns_of(having_pred):
        if ref not in groups:
            raise ctx.error(f"{_named(ref)} in HAVING is neither grouped nor inside an aggregate{_hint(ref)}",
                            having_node.this if having_node is not None else None)


def _named(ref) -> str:
    """How an error names a group column or a computed value (``column R.b``, ``value YEAR(d)``)."""
    return f"value {ref}" if isinstance(ref, Computed) else f"column {ref[0]}.{ref[1]}"


def _hint(ref) -> str:
    """A computed value outside aggregates is read as a group key: say how to make it one."""
    return " (a function of a column read outside aggregates must be a group key: GROUP BY it, or compare it " \
           "in WHERE)" if isinstance(ref, Computed) else ""


def check_rows(items: list[Item], res: Resolver, ctx: Positions) -> list[Item]:
    """A query without aggregates selects columns and arithmetic over them (keys, :mod:`.arithkey`): its view
    holds each distinct row with its count.  Returns the items, arithmetic ones made keys; a constant
    (``SELECT 6 AS k, a``) is the same in every row, so it is a value column of the view, not a key."""
    out = []
    for i in items:
        if i.ref is None and is_key_arithmetic(i.node):
            key = arith_key(res, i.node)
            value = constant_value(key)  # a * 0: the same in every row, a constant column (below)
            i = Item(i.name, i.node, ref=key) if value is None else Item(i.name, i.node, value=value)
            if value is not None:
                out.append(i)
                continue
        if i.ref is None and is_constant(i.node):  # SELECT 6 AS k, a FROM R: the same in every row, a value column
            out.append(i)
            continue
        if i.ref is None:
            raise ctx.error(f"unsupported expression {sql_of(i.node)} in a query without aggregates (select columns "
                            "or arithmetic over them: the view holds each distinct combination of their values with "
                            "its count)", i.node)
        out.append(i)
    return out


def order_note(name: str, sel: exp.Select, items: list[Item], names: list[str], res: Resolver,
               ctx: Positions) -> str | None:
    """The note that ORDER BY was ignored (None without ORDER BY), after checking its items name outputs."""
    order = sel.args.get("order")
    if order is None:
        return None
    written = {sql_of(i.node).lower() for i in items}
    outputs = {n.lower() for n in names} | {i.name.lower() for i in items}
    refs = {i.ref for i in items}
    unselected: list[str] = []
    unknown: list[str] = []
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
        if type(x) is exp.Column and (res.has_column(x) or x.table):  # a FROM column not selected: SQL sorts by it
            res.column(x)  # ambiguous, or an unknown column of a named table: refused
            unselected.append(sql_of(x))
            continue
        unknown.append(sql_of(x))  # neither an output nor a column (DuckDB refuses it; DBToaster ignores ORDER BY)
    why = f"; {', '.join(unselected)} not selected: select it to sort by it" if unselected else ""
    why += f"; {', '.join(unknown)} names no output or column: nothing to sort by" if unknown else ""
    return f"{name}: ORDER BY ignored: a view is a set of rows (sort them when reading the view{why})"


def _count_names(names: list[str]) -> list[str]:
    """The hidden COUNT of item ``k``'s NULL-skipping aggregate (``__nonnull_<k>``, :mod:`.nullshown`), and the
    indicator of item ``k``'s arithmetic key (``__nullkey_<k>``, :mod:`.nullexprkeys`), named ``<item k's
    name>__null``: where it is 0 (1) the item is NULL (``boreas.m3.nullable.null_values``, ``null_keys``)."""
    out = []
    for n in names:
        at = next((len(p) for p in (COUNT_PREFIX, KEY_PREFIX) if n.startswith(p) and n[len(p):].isdigit()), None)
        out.append(indicator(names[int(n[at:])]) if at is not None else n)
    return out


def _null_flags(keys: list[tuple[str, ColRef]], internal: list[str]) -> tuple[list, list[str]]:
    """A nullable key column's indicator (``c__null``, added by :mod:`.threevalued`) as an internal key named
    after its column's key, ``<key>__null``: what the view's reads turn into None (``boreas.m3.nullable``)."""
    named = {ref: n for n, ref in keys if isinstance(ref, tuple)}
    out, hide = [], list(internal)
    computed = {n.lower(): n for n, ref in keys if isinstance(ref, ArithKey)}  # an arithmetic key's (.nullexprkeys)
    for n, ref in keys:
        of = isinstance(ref, tuple) and len(ref) == 2 and isinstance(ref[1], str) and ref[1].lower().endswith(SUFFIX) \
            and named.get((ref[0], ref[1][:-len(SUFFIX)])) or \
            n.lower().endswith(SUFFIX) and computed.get(n.lower()[:-len(SUFFIX)])
        if of:
            if n in hide:
                hide.remove(n)
            n = indicator(of)
            hide.append(n)
        out.append((n, ref))
    return out, hide


def view_names(items: list[Item], groups: list[ColRef], rename: list[str], view: str, count,
               ctx: Positions) -> tuple[list[tuple[str, ColRef]], list[tuple[str, object]], tuple[str, ...]]:
    """``(keys, values, internal)`` with their final names: DuckDB-unique, then renamed by ``CREATE VIEW
    v(names)``.

    Selected columns are the view's keys (a column selected twice is two key
    columns); group columns not selected are keys too (named after their
    column, after the others), and ``internal`` names them: no output row
    holds them (SQL returns the selected columns only).  ``count`` (a view expression or None) is one
    more value column, named ``count``: the number of times a row occurs in
    the result (1 after DISTINCT or GROUP BY), for views that select no value.
    """
    names = unique_names([i.name for i in items])
    if len(rename) > len(names):
        raise ctx.error(f"view {view} names {len(rename)} columns but selects {len(names)}")
    names[:len(rename)] = rename
    names = _count_names(names)
    lowered = [n.lower() for n in names]
    dup = next((n for n in names if lowered.count(n.lower()) > 1), None)
    if dup is not None:
        raise ctx.error(f"view {view} names column {dup} twice")
    keys = [(n, i.ref) for i, n in zip(items, names) if i.ref is not None]
    selected = {r for _, r in keys}
    hidden = [r for r in groups if r not in selected]
    internal = unique_names([r.fn.lower() if isinstance(r, Computed) else "expr" if isinstance(r, ArithKey)
                             else r[1] for r in hidden], set(names))
    keys += list(zip(internal, hidden))
    keys, internal = _null_flags(keys, internal)
    values = [(n, i.value) for i, n in zip(items, names) if i.ref is None]
    if count is not None:
        values.append((unique_names(["count"], {n for n, _ in keys} | set(names))[0], count))
    return keys, values, tuple(internal)