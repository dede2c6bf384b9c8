"""What a view shows as NULL: a nullable key's indicator beside it, a NULL-skipping aggregate's hidden COUNT, and
the hidden COUNT(*) keeping a group's row while every value of it is NULL or 0 (:func:`needs_rows`).

Why apart from :mod:`.threevalued` (which calls these while it rewrites a
SELECT): conditions and values are rewritten in place, while these add
items to the query, keys to GROUP BY and columns to SELECT, that the view
keeps out of its output rows (:func:`.outputs.view_names` names them,
:class:`boreas.m3.nullable.ViewNulls` reads them; docs/m3.md "NULLs").

>>> import sqlglot
>>> sel = sqlglot.parse_one("SELECT r.c, SUM(a) AS s FROM R r GROUP BY r.c")
>>> key_indicators(sel, [sel.expressions[0]], lambda col: "r")
>>> hidden_count(sel.expressions[1].this, sel)[1].sql(), sel.sql()
('COUNT(a)', 'SELECT r.c, SUM(a) AS s FROM R AS r GROUP BY r.c, r.c__null')
"""

from __future__ import annotations

from collections.abc import Callable

from sqlglot import exp

from ..nullable import indicator

#: The alias of the hidden COUNT of a SELECT item's NULL-skipping aggregate (``+ position``), named
#: ``<item>__null`` by :func:`.outputs.view_names`: the item is NULL where it is 0 (docs/m3.md "NULLs").
COUNT_PREFIX = "__nonnull_"


def counted_item(e: exp.Expression) -> int | None:
    """The SELECT position whose hidden COUNT ``e`` is (``AS __nonnull_<position>``), or None: a user's own
    alias that merely starts so (``__nonnull_0x``) is not one."""
    if type(e) is exp.Alias and e.alias.startswith(COUNT_PREFIX) and e.alias[len(COUNT_PREFIX):].isdigit():
        return int(e.alias[len(COUNT_PREFIX):])
    return None


def key_indicators(sel: exp.Select, keys: list[exp.Column], holder: Callable[[exp.Column], str],
                   selected: bool = False) -> None:
    """Each nullable key column's indicator made a key beside it: GROUP BY ``c`` groups by ``c, c__null``
    (SQL's NULL group is the indicator's 1, apart from the value 0's group), and a view of rows selects
    ``c__null`` too; the view names it ``<c's name>__null``, an internal key (:func:`.outputs.view_names`),
    and its reads show ``c`` as None where it is 1 (:func:`boreas.m3.nullable.null_keys`); ``holder``: the
    alias of the FROM item an unqualified column belongs to; ``selected``: a grouped query selects the
    indicator too (over a grouped derived table, whose regrouping reads keys from the SELECT list)."""
    group = sel.args.get("group")
    seen: set[tuple[str, str]] = set()
    for k in keys:
        spelt = (k.table.lower() or holder(k), k.name.lower())
        if spelt in seen:
            continue
        seen.add(spelt)
        flag = exp.column(indicator(k.name), k.table or None)
        if group is not None:
            group.append("expressions", flag)
            if selected:
                sel.append("expressions", flag.copy())
        elif not _aggregated(sel):
            sel.append("expressions", flag)


def counts_rows(sel: exp.Select) -> bool:
    """Whether an item of ``sel`` is a COUNT(*) or COUNT(1) without FILTER (never 0 in a group): its row exists
    while its group has rows, so the view needs no hidden :data:`boreas.m3.nullable.ROWS` count."""
    items = [e.this if type(e) is exp.Alias else e for e in sel.expressions]
    return any(type(e) is exp.Count and (type(e.this) is exp.Star or type(e.this) is exp.Literal) for e in items)


def needs_rows(sel: exp.Select) -> bool:
    """Whether the grouped aggregate query ``sel`` (a query reading nullable columns, rewritten) needs the hidden
    :data:`boreas.m3.nullable.ROWS` ``COUNT(*)`` of its group: no item counts every row, so every value of a
    group may be 0 while it has rows (``COUNT(b)`` over only NULLs, ``COUNT(DISTINCT b)``, a FILTER matching
    none, a SUM over only NULLs or of 0s), and a view's row of all-zero maps is no row; SQL shows it
    (``SELECT a, COUNT(b) ... GROUP BY a`` over ``(1, NULL)`` is ``(1, 0)``).  Its cost: one more map of the
    query's first-order class, ``<view>___rows__null`` (docs/m3.md "NULLs").

    >>> import sqlglot
    >>> [needs_rows(sqlglot.parse_one(q)) for q in ("SELECT a, COUNT(b) FROM R GROUP BY a",
    ...  "SELECT a, COUNT(b), COUNT(*) FROM R GROUP BY a", "SELECT COUNT(b) FROM R", "SELECT a FROM R GROUP BY a")]
    [True, False, False, False]
    """
    return sel.args.get("group") is not None and _aggregated(sel) and not counts_rows(sel)


def hidden_count(agg: exp.Expression, sel: exp.Select) -> tuple[int, exp.Expression] | None:
    """For a SUM/AVG/MIN/MAX that may read no value (of a nullable expression, or filtered) and is a SELECT
    item: (its position, the COUNT of the values it reads), the view's hidden column saying where it is
    NULL (:func:`boreas.m3.nullable.null_values`).  Under a FILTER the count is of the rows where both the FILTER
    and the argument's presence hold (a filtered COUNT counts its FILTER's rows whatever its argument,
    :mod:`.aggfilter`, so the presence joins the FILTER)."""
    outer = agg.parent if type(agg.parent) is exp.Filter else agg
    at = item_of(outer, sel)
    if at is None:
        return None
    if type(outer) is exp.Filter:
        arg, where = agg.this, outer.expression
        ifs = arg.args.get("ifs") or [] if type(arg) is exp.Case else []
        if len(ifs) == 1 and arg.args.get("default") is None:  # SUM(CASE WHEN present THEN b END) FILTER (WHERE p)
            both = exp.And(this=exp.Paren(this=where.this.copy()), expression=exp.Paren(this=ifs[0].this.copy()))
            return at, exp.Filter(this=exp.Count(this=exp.Star()), expression=exp.Where(this=both))
        return at, exp.Filter(this=exp.Count(this=arg.copy()), expression=where.copy())
    return at, exp.Count(this=agg.this.copy())


#: What a SELECT item may be over an aggregate that may be NULL: arithmetic, NULL where an operand is.
_ARITH = (exp.Add, exp.Sub, exp.Mul, exp.Div, exp.Neg, exp.Paren)


def item_of(node: exp.Expression, sel: exp.Select) -> int | None:
    """The position of the SELECT item of ``sel`` that is ``node`` or arithmetic over it (``SUM(c) * 2 + 1``:
    NULL where ``SUM(c)`` is, so one hidden count says where the item is NULL), else None.

    >>> import sqlglot
    >>> sel = sqlglot.parse_one("SELECT a, (SUM(c) + 1) * 2 AS x, CASE WHEN SUM(c) > 1 THEN 1 END FROM R")
    >>> sorted(item_of(s, sel) or 0 for s in sel.find_all(exp.Sum))
    [0, 1]
    """
    while node.parent is not sel:
        node = node.parent
        if node is None or not (isinstance(node, _ARITH) or (type(node) is exp.Alias and node.parent is sel)):
            return None
    return next((i for i, e in enumerate(sel.expressions) if e is node), None)


def is_key(col: exp.Column, sel: exp.Select) -> bool:
    """Whether a column outside aggregates and conditions is a key of the view: a GROUP BY item, or a SELECT
    item (aliased or not) of a query that is grouped or selects no aggregate."""
    parent = col.parent
    if type(parent) is exp.Group:
        return parent.parent is sel
    if type(parent) is exp.Alias:
        parent = parent.parent
    return parent is sel and col.arg_key != "group" and (sel.args.get("group") is not None or not _aggregated(sel))


def _aggregated(sel: exp.Select) -> bool:
    return any(isinstance(n, exp.AggFunc) for e in sel.expressions for n in e.walk())
