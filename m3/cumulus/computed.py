"""Views computed when read in a partitioned box: the placements under which a member computes whole rows.

A view computed when read (a MAX, an internal key, a view of rows, a GROUP BY without aggregates) is evaluated
from its maps' entries.  A member holds only the entries of its segments, so its evaluation is a row of the
box's only when every entry that row reads is its own: **every map the view reads is partitioned on the same
key variable of the view** (the owner of a row's value of that variable owns all of its entries, as slots hash
values, not maps).  Then the members' rows are disjoint and each is the one-node box's.  Under any other
placement (a map partitioned on a column that is not among the view's keys, as a MAX per window on its price; two
maps on different variables; a map kept whole) a member would evaluate part of a group: refused by name
(:func:`refuse_unkeyed`).

Which views may run so is the box's to say (``allowed``): the windowed leaves of a window join, whose closed rows
members gather to member 0 (docs/cumulus.md §3.13, "Window joins").  Maps such a view reads that the search
placed on another column are pinned to one of its keys (:func:`keyed_pins`), so Nexmark's q7 (a MAX of price
per window) plans with its maximum partitioned by the window.

>>> from ..compiler.pipeline import compile_sql
>>> p = compile_sql("CREATE STREAM R(a INT, b INT, w INT); SELECT w, MAX(b) AS m FROM R GROUP BY w")
>>> [(m.name, [k.name for k in m.keys]) for m in p.maps], keyed_columns(p.views[0])
([('Q1_m', ['W', 'B'])], {'Q1_m': {0: 'W'}})
>>> refuse_unkeyed(p, {"Q1_m": 0}, ("Q1",), "g")
>>> refuse_unkeyed(p, {"Q1_m": 1}, ("Q1",), "g")
Traceback (most recent call last):
...
boreas.m3.cumulus.plan.PlanError: box 'g': view Q1 is computed from its maps when it is read, and its map Q1_m is partitioned on B, which is not a key of the view (W): a member would compute a row from part of its entries; partition the map by a key of the view (<map name="Q1_m" key="W"/>), or deploy this box unpartitioned
>>> keyed_pins(p, ("Q1",), {"Q1_m": 1}, {})
{'Q1_m': 'W'}
"""

from __future__ import annotations

from collections.abc import Collection, Mapping

from ..ast import MapRef, Program, Var, ViewDecl, walk
from .layout import EVERYWHERE
from .plan import PlanError, refuse_computed_views


def keyed_columns(view: ViewDecl) -> dict[str, dict[int, str]]:
    """Per map the view reads, its key positions read at a key variable of the view, and that variable (a map
    read twice keeps the positions where both reads agree)."""
    names = view.key_vars or view.keys
    upper = {n.upper() for n in names}
    out: dict[str, dict[int, str]] = {}

    def seen(name: str, found: dict[int, str]) -> None:
        out[name] = found if name not in out else {p: v for p, v in out[name].items() if found.get(p) == v}

    for c in view.columns:
        for positional in (c.numerator, c.denominator):  # (key column i of the view is key i of the map)
            if positional is not None:
                seen(positional, {i: n.upper() for i, n in enumerate(names)})
        exprs = [e for e in (c.expr,) if e is not None]
        for node in (n for e in exprs for n in walk(e)):
            if isinstance(node, MapRef):
                seen(node.name, {p: a.name.upper() for p, a in enumerate(node.args)
                                 if isinstance(a, Var) and a.name.upper() in upper})
    if view.where is not None:
        for node in walk(view.where):
            if isinstance(node, MapRef):
                seen(node.name, {p: a.name.upper() for p, a in enumerate(node.args)
                                 if isinstance(a, Var) and a.name.upper() in upper})
    return out


def _problem(program: Program, view: ViewDecl, columns: Mapping[str, int | str | None]) -> str | None:
    """Why members would not compute ``view``'s rows whole under ``columns`` (None: they would)."""
    keyed = keyed_columns(view)
    at: dict[str, str] = {}
    for name, positions in keyed.items():
        col = columns.get(name)
        keys = [k.name for k in program.map(name).keys]
        if col is None or col == EVERYWHERE:
            where = "kept whole on the home segment" if col is None else "replicated"
            return f"its map {name} is {where}, not partitioned by a key of the view"
        if col not in positions:
            return f"its map {name} is partitioned on {keys[col]}, which is not a key of the view"
        at[name] = positions[col]
    if len(set(at.values())) > 1:
        return "its maps are partitioned on different keys (" + ", ".join(f"{m}: {v}" for m, v in at.items()) + \
            "), so a row's entries are on several members"
    return None


def windowed_leaves(program: Program, windowed_join: bool) -> tuple[str, ...]:
    """The views a box may run partitioned although computed when read: a window join's (``windowed_join``)
    leaves, whose closed rows members gather to member 0; none in any other box."""
    return tuple(v.name for v in program.views if v.general) if windowed_join else ()


def refuse_misplaced(program: Program, columns: Mapping[str, int | str | None], box: str,
                     windowed_join: bool) -> None:
    """What planning refuses about views computed when read, asked again of a placement it did not make: a
    partition written out in the catalog form (``<map ... position=...>``) is kept as written, not planned
    (catalog/submission.py), so a member checks it when it builds (node/cumulus/part.py)."""
    allowed = windowed_leaves(program, windowed_join)
    refuse_computed_views(program, box, allowed)
    refuse_unkeyed(program, columns, allowed, box)


def refuse_unkeyed(program: Program, columns: Mapping[str, int | str | None], allowed: Collection[str],
                   box: str = "") -> None:
    """Refuse (PlanError) an ``allowed`` view computed when read whose rows a member would compute from part of
    their entries under ``columns`` (module docstring), saying which map and why."""
    for view in program.views:
        if not view.general or view.name not in allowed:
            continue
        why = _problem(program, view, columns)
        if why is not None:
            keys = ", ".join(k for k, n in zip(view.key_vars or view.keys, view.keys) if n not in view.internal) \
                or ", ".join(view.key_vars or view.keys)
            name = next(iter(keyed_columns(view)), "")
            hint = next(iter(keyed_columns(view).get(name, {}).values()), None)
            pin = f' (<map name="{name}" key="{hint}"/>)' if hint else ""
            raise PlanError(f"box {box!r}: view {view.name} is computed from its maps when it is read, and {why} "
                            f"({keys}): a member would compute a row from part of its entries; partition the map by "
                            f"a key of the view{pin}, or deploy this box unpartitioned")


def keyed_pins(program: Program, allowed: Collection[str], columns: Mapping[str, int | str | None],
               pins: Mapping[str, str]) -> dict[str, str]:
    """Pins (map → key column name) putting the maps of each ``allowed`` view that ``columns`` places wrong, none
    of them pinned already, on one key variable of the view every one of them is read at: the one their first
    map is placed on if it is such a variable, else the first that is not a window bound, else the first."""
    out: dict[str, str] = {}
    for view in program.views:
        if not view.general or view.name not in allowed or _problem(program, view, columns) is None:
            continue
        keyed = keyed_columns(view)
        if any(m in pins for m in keyed):
            continue  # (pinned by the box: its placement stands, and is refused if wrong)
        shared = set.intersection(*(set(p.values()) for p in keyed.values())) if keyed else set()
        if not shared:
            continue
        first, col = next(iter(keyed)), columns.get(next(iter(keyed)))
        order = [v for v in (view.key_vars or view.keys) if v.upper() in shared]
        current = keyed[first].get(col) if isinstance(col, int) else None
        var = current if current in shared else next((v.upper() for v in order if "WINDOW_" not in v.upper()),
                                                     order[0].upper())
        for name, positions in keyed.items():
            position = next(p for p, v in positions.items() if v == var)
            out[name] = program.map(name).keys[position].name
    return out
