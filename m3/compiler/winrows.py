"""A closed window's group has its row while it had rows: the hidden ``COUNT(*)`` of a windowed view.

Why: a map holds no entry of value 0, so a window whose ``SUM(x)`` is 0
(rows with ``x = 0``, or ``+5`` and ``-5``) has no entry in the SUM's map,
and a view made of such maps has no row there; SQL (Flink, DuckDB) shows the
window's row with its 0 (issue 34).  A view with a ``COUNT(*)`` item has its
row while its group has rows (the count is not 0), and so does one reading
a MIN or MAX (its multiplicity map holds the group's values, 0 among them);
any other grouped view of a windowed stream gets the hidden ``COUNT(*)``
:data:`boreas.m3.nullable.ROWS` that a view over nullable columns keeps
already (:mod:`.threevalued`), which no out row holds
(:func:`boreas.m3.nullable.shown_columns`).  A window closes once and emits
its rows, so unlike a view that never closes the count costs no changelog
traffic: one first-order map more, dropped with the window.

A view is windowed here when it groups by a window column (``window_start``
or ``window_end``, by name, SELECT position or alias, as :func:`boreas.node.operators.m3closing.window_position`
finds a view's window), whatever the stream read.  The upper stages of a
window join (m3/winstages.py) are each evaluated over one window's rows, so
they ask for the count whenever they are grouped (``every_group``).

>>> import sqlglot
>>> def show(sql, every_group=False):
...     return counted_groups(sqlglot.parse_one(sql), every_group).sql()
>>> show("SELECT a, window_start, SUM(b) AS s FROM R GROUP BY a, window_start")
'SELECT a, window_start, SUM(b) AS s, COUNT(*) AS __rows__null FROM R GROUP BY a, window_start'
>>> show("SELECT a, window_end, COUNT(*) AS n, SUM(b) AS s FROM R GROUP BY a, window_end")
'SELECT a, window_end, COUNT(*) AS n, SUM(b) AS s FROM R GROUP BY a, window_end'
>>> show("SELECT a, window_end, MAX(b) AS m, SUM(b) AS s FROM R GROUP BY a, window_end")
'SELECT a, window_end, MAX(b) AS m, SUM(b) AS s FROM R GROUP BY a, window_end'
>>> ["__rows__null" in show(f"SELECT a, window_start AS ws, SUM(b) AS s FROM R GROUP BY {g}") for g in ("1, 2", "a, ws")]
[True, True]
>>> show("SELECT a, SUM(b) AS s FROM R GROUP BY a"), show("SELECT a, SUM(b) AS s FROM R GROUP BY a", True)
('SELECT a, SUM(b) AS s FROM R GROUP BY a', 'SELECT a, SUM(b) AS s, COUNT(*) AS __rows__null FROM R GROUP BY a')
"""

from __future__ import annotations

import sqlglot.expressions as exp

from ..nullable import ROWS
from .nullshown import counts_rows
from .windowfn import WINDOW_COLUMNS


def counted_groups(sel: exp.Expression, every_group: bool = False) -> exp.Expression:
    """``sel`` (a copy when changed) with ``COUNT(*) AS __rows__null`` appended where a group's row would
    otherwise vanish when its values are all 0 (module docstring); any other statement as it is."""
    if type(sel) is not exp.Select or (group := sel.args.get("group")) is None:
        return sel
    if not every_group and not any(_window_key(e, sel) for e in group.expressions):
        return sel
    aggs = [n for e in sel.expressions for n in e.walk() if isinstance(n, exp.AggFunc)]
    if not aggs or counts_rows(sel) or any(_extreme(a) for a in aggs) or any(_named_rows(e) for e in sel.expressions):
        return sel
    sel = sel.copy()  # (the caller's tree unchanged, as the other rewrites leave it)
    sel.append("expressions", exp.alias_(exp.Count(this=exp.Star()), ROWS))
    return sel


def _window_key(key: exp.Expression, sel: exp.Select) -> bool:
    """Whether GROUP BY ``key`` is a window column: by its name, by its position in the SELECT list
    (``GROUP BY 1, 2``) or by a SELECT alias of it (``window_start AS ws ... GROUP BY ws``)."""
    if type(key) is exp.Literal and key.is_int and 0 < int(key.this) <= len(sel.expressions):
        key = sel.expressions[int(key.this) - 1]
    elif type(key) is exp.Column and not key.table:
        key = next((e for e in sel.expressions if type(e) is exp.Alias and e.alias.lower() == key.name.lower()), key)
    key = key.this if type(key) is exp.Alias else key
    return type(key) is exp.Column and key.name.lower() in WINDOW_COLUMNS


def _extreme(agg: exp.Expression) -> bool:
    """A MIN or MAX of every row of its group (not under a FILTER): its multiplicity map keeps the group."""
    return isinstance(agg, (exp.Min, exp.Max)) and type(agg.parent) is not exp.Filter


def _named_rows(item: exp.Expression) -> bool:
    """An item named as the hidden count already (the rewrite over nullable columns added it)."""
    return type(item) is exp.Alias and item.alias == ROWS
