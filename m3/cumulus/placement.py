"""Choose each map's partition column (docs/cumulus.md §3.2), and say why.

A map entry is placed by the slot of its value at the map's *partition
column*.  Two entries meet on one member only if their partition values are
equal, so the choice decides which statements read only their own member
(LOCAL) and which need another member's entries.  The rule:

1. **Key classes.**  Union-find over ``(map, key position)`` and ``(relation,
   column)``: a map key joins the relation columns its variable occupies in
   the map's definition; in a statement, one variable at several map
   positions (or an event variable, i.e. a relation column) joins them.
   Positions of one class hold the same values.
2. **Pins.**  Maps the user replicates (``replicate="m2"``) are held whole by
   every member (:data:`~.layout.EVERYWHERE`).  ``<map name key>`` pins win; then ``key="col"`` (``o_orderkey``
   or ``orders.o_orderkey``, case ignored) pins every map with a position in
   that column's class (its lowest such position).
3. **Search.**  The others start on their position in the largest class, then
   hill-climb single changes (a view's maps move together: a view is read per
   key) while the cost falls: Σ over statements of the class cost
   (:data:`.plan.COST`, +2 for a LOOP target), 100 per sequential trigger,
   +0.5 per map on a DATE or FLOAT column (few distinct values).  Steepest step first, ties to the
   earlier map and lower position: deterministic.

>>> from ..compiler.pipeline import compile_sql
>>> p = compile_sql('''CREATE STREAM R(a INT, b INT); CREATE STREAM S(b INT, c INT);
...     SELECT r.a, SUM(s.c) AS total FROM R r, S s WHERE r.b = s.b GROUP BY r.a''')
>>> pl = place(p)
>>> pl.columns, pl.cost
({'Q1_total': 0, 'm1': 0, 'm2': 1}, 6)
>>> print("\\n".join(pl.explain()))
Q1_total on A (key 0): its only key column; 2 of its 4 writes read another member's map (first: statement 1 of ON +R)
m1 on B (key 0): its only key column; read from another member by 2 statements (first: statement 1 of ON +R)
m2 on A (key 1): chosen automatically: A is in the class of R.a (the cost search moved it from B); all 4 statements writing or reading it are local
>>> place(p, key="s.b").columns, place(p, key="s.b").cost
({'Q1_total': 0, 'm1': 0, 'm2': 0}, 12)
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import pairwise

from ..ast import MapRef, Program, RelAtom, Sum, Var, walk
from .layout import EVERYWHERE
from .plan import (
    LOCAL,
    SEQUENTIAL_COST,
    StatementPlan,
    classify,
    classify_statement,
    refuse_replicated_views,
    sequential,
)

TYPE_COST = {"DATE": 0.5, "FLOAT": 0.5}
"""Extra cost of partitioning on a column of few distinct values (one hot member)."""


class PlacementError(ValueError):
    """A ``key``/``<map>`` pin that names nothing, or pins a view's maps apart (messages as in §2.5)."""


@dataclass(frozen=True, slots=True)
class KeyClass:
    """Map key positions and relation columns that hold the same values."""

    maps: tuple[tuple[str, int], ...]
    columns: tuple[tuple[str, str], ...]  # (relation, column name)

    def describe(self) -> str:
        return ", ".join(f"{r}.{c}" for r, c in self.columns) or ", ".join(f"{m}:{p}" for m, p in self.maps)


@dataclass(frozen=True, slots=True)
class MapPlacement:
    map: str
    column: int | str | None  # key position; None: kept whole on the home segment; EVERYWHERE: replicated
    key: str | None  # that key column's name
    reason: str


@dataclass(frozen=True, slots=True)
class Placement:
    """Every map's partition column, with a reason each, and the total cost of the plan it gives."""

    maps: tuple[MapPlacement, ...]
    cost: float

    @property
    def columns(self) -> dict[str, int | str | None]:
        return {m.map: m.column for m in self.maps}

    def reason(self, map_name: str) -> str:
        return next(m.reason for m in self.maps if m.map == map_name)

    def explain(self) -> list[str]:
        """One line per map: ``m1 on O_ORDERKEY (key 1): reason``."""
        def where(m: MapPlacement) -> str:
            if m.column == EVERYWHERE:
                return "every member"
            return "home" if m.column is None else f"{m.key} (key {m.column})"
        return [f"{m.map} on {where(m)}: {m.reason}" for m in self.maps]


class _UnionFind:
    def __init__(self) -> None:
        self.parent: dict = {}

    def find(self, x):
        self.parent.setdefault(x, x)
        while self.parent[x] != x:
            self.parent[x] = self.parent[self.parent[x]]
            x = self.parent[x]
        return x

    def union(self, a, b) -> None:
        self.parent[self.find(a)] = self.find(b)


def key_classes(program: Program) -> tuple[KeyClass, ...]:
    """The key classes of ``program`` (step 1), largest first, then in program order."""
    uf = _UnionFind()
    for m in program.maps:
        for p in range(len(m.keys)):
            uf.find(("map", m.name, p))
        terms = m.definition.terms if isinstance(m.definition, Sum) else (m.definition,) if m.definition else ()
        for n, term in enumerate(terms):
            scope = ("def", m.name, n)
            for p, k in enumerate(m.keys):
                uf.union(("var", scope, k.name), ("map", m.name, p))
            _join_scope(uf, scope, walk(term))
    for t in program.triggers:
        for n, stmt in enumerate(t.statements):
            scope = ("stmt", t.relation, t.sign, n)
            for i, v in enumerate(t.vars):
                uf.union(("var", scope, v), ("rel", t.relation, i))
            _join_scope(uf, scope, walk(stmt.target))
            _join_scope(uf, scope, walk(stmt.expr))
    for r in program.relations:
        for i in range(len(r.columns)):
            uf.find(("rel", r.name, i))
    groups: dict = {}
    for node in list(uf.parent):
        if node[0] != "var":
            groups.setdefault(uf.find(node), []).append(node)
    order = {("map", m.name, p): (1, i, p) for i, m in enumerate(program.maps) for p in range(len(m.keys))}
    order.update({("rel", r.name, c): (0, i, c) for i, r in enumerate(program.relations) for c in range(len(r.columns))})
    out = []
    for nodes in groups.values():
        nodes.sort(key=order.__getitem__)
        out.append(KeyClass(tuple((n[1], n[2]) for n in nodes if n[0] == "map"),
                            tuple((n[1], program.relation(n[1]).columns[n[2]].name) for n in nodes if n[0] == "rel")))
    out.sort(key=lambda c: (-(len(c.maps) + len(c.columns)), min(order[("map", *x)] for x in c.maps) if c.maps else (2,)))
    return tuple(out)


def _join_scope(uf: _UnionFind, scope, nodes) -> None:
    """Join each variable occurrence of one scope to its map or relation position.

    An ``=`` guard joins nothing: it holds only where its statement fires,
    not for the columns at large (classification uses it, per statement).
    """
    for node in nodes:
        if isinstance(node, (RelAtom, MapRef)):
            kind = "rel" if isinstance(node, RelAtom) else "map"
            for p, a in enumerate(node.args):
                if isinstance(a, Var):
                    uf.union(("var", scope, a.name), (kind, node.name, p))


def place(program: Program, key: str | None = None, pins: Mapping[str, str] | None = None, box: str = "",
          replicate: Sequence[str] = ()) -> Placement:
    """Each map's partition column: ``replicate`` (held whole by every member), ``pins`` (map → key column name),
    then ``key``, then the search."""
    classes = key_classes(program)
    class_of = {mp: c for c in classes for mp in c.maps}
    maps = {m.name: m for m in program.maps}
    for name in replicate:
        if name not in maps:
            raise PlacementError(f"box {box!r} replicates map {name!r}, which it does not have (maps: {', '.join(maps)})")
        if name in (pins or {}):
            raise PlacementError(f"box {box!r} both replicates map {name!r} and pins it to key {pins[name]!r}: "
                                 "a replicated map has no partition key; drop one")
    refuse_replicated_views(program, replicate, box)  # (before a view's maps share the column of one named)
    fixed = _pins(program, classes, class_of, key, pins or {}, box)
    for name in replicate:
        fixed[name] = (EVERYWHERE, "replicated by replicate=: every member holds all of it")
    choice, reasons, free = _start(program, class_of, fixed)
    start = dict(choice)
    cost = _climb(program, choice, free)
    for group in free:
        for m in group:
            p = choice[m]
            how = f"chosen automatically: {maps[m].keys[p].name} is in the class of {class_of[(m, p)].describe()}"
            if p != start[m]:
                how += f" (the cost search moved it from {maps[m].keys[start[m]].name})"
            reasons[m] = how
    plan = classify(program, choice, box)
    return Placement(tuple(MapPlacement(m.name, choice[m.name], None if choice[m.name] in (None, EVERYWHERE)
                                        else m.keys[choice[m.name]].name,
                                        f"{reasons[m.name]}; {_locality(plan, m.name)}") for m in program.maps), cost)


def _pins(program: Program, classes, class_of, key: str | None, pins: Mapping[str, str], box: str) -> dict:
    """Step 2: map → (column, reason) for the maps ``<map>`` pins and ``key`` fix; ``<map>`` wins."""
    fixed: dict[str, tuple[int, str]] = {}
    maps = {m.name: m for m in program.maps}
    if key is not None:
        chosen = _key_class(program, classes, key, box)
        for m in program.maps:
            hits = [p for p in range(len(m.keys)) if class_of[(m.name, p)] in chosen]
            if hits:
                fixed[m.name] = (hits[0], f"key={key!r}: {m.keys[hits[0]].name} is in the class of {chosen[0].describe()}")
        if not fixed:
            raise PlacementError(f"key {key!r} partitions no map of box {box!r} (no map is keyed by it)")
    for name, col in pins.items():
        if name not in maps:
            raise PlacementError(f"box {box!r} has no map {name!r} (maps: {', '.join(maps)})")
        names = [k.name.lower() for k in maps[name].keys]
        if col.lower() not in names:
            raise PlacementError(f"map {name!r} has no key {col!r} (keys: {', '.join(k.name for k in maps[name].keys) or 'none'})")
        fixed[name] = (names.index(col.lower()), f"pinned by <map name={name!r} key={col!r}>")
    return fixed


def _start(program: Program, class_of, fixed: dict) -> tuple[dict, dict, list[list[str]]]:
    """Columns before the search, their reasons, and the groups (a view's maps) the search may move."""
    maps = {m.name: m for m in program.maps}
    choice: dict[str, int | None] = {}
    reasons: dict[str, str] = {}
    free: list[list[str]] = []
    for group in _view_groups(program):
        pinned = [(fixed[m][0], m) for m in group if m in fixed]
        arity = min(len(maps[m].keys) for m in group)  # (a view's maps share its leading keys; some have more)
        if pinned:
            for (c1, m1), (c2, m2) in pairwise(pinned):
                if c1 != c2:
                    view = next((v.name for v in program.views if m1 in v.maps), "?")
                    raise PlacementError(f"maps {m1} and {m2} of view {view} must be partitioned on the same key column")
            col, by = pinned[0]
            short = next((m for m in group if isinstance(col, int) and col >= len(maps[m].keys)), None)
            if short is not None:
                view = next((v.name for v in program.views if by in v.maps), "?")
                raise PlacementError(f"map {by} of view {view} is pinned to key column {col}, which map {short} of "
                                     f"the same view does not have (keys: {', '.join(k.name for k in maps[short].keys)})")
            for m in group:
                choice[m] = col
                reasons[m] = fixed[m][1] if m in fixed else f"shares its view's column with {by} ({fixed[by][1]})"
        elif arity <= 1:
            for m in group:
                choice[m] = 0 if arity else None
                reasons[m] = "its only key column" if arity else "no key columns: kept whole on the box's home segment"
        else:  # the position in the largest class (summed over the group); ties: the lower position
            best = max(range(arity), key=lambda p: (sum(len(class_of[(m, p)].maps) + len(class_of[(m, p)].columns)
                                                        for m in group), -p))
            choice.update(dict.fromkeys(group, best))
            free.append(group)
    return choice, reasons, free


def _climb(program: Program, choice: dict, free: list[list[str]]) -> float:
    """Step 3: apply the best single-group change while it lowers the cost; return the final cost."""
    arity = {m.name: len(m.keys) for m in program.maps}
    objective = _Cost(program)
    cost = objective(choice)
    while True:
        step = None
        for group in free:
            for p in range(min(arity[m] for m in group)):
                if p != choice[group[0]]:
                    c = objective({**choice, **dict.fromkeys(group, p)})
                    if c < (cost if step is None else step[0]) - 1e-9:
                        step = (c, group, p)
        if step is None:
            return cost
        cost, group, p = step
        choice.update(dict.fromkeys(group, p))


class _Cost:
    """The search's objective: the plan's cost, plus :data:`TYPE_COST` per map on a DATE or FLOAT column.

    A statement's class depends only on the columns of the maps it names, so
    it is kept per such combination: a search step reclassifies only the
    statements of the maps it moves.
    """

    def __init__(self, program: Program):
        self.program = program
        self.names = [[[s.target.name] + [n.name for n in walk(s.expr) if isinstance(n, MapRef)] for s in t.statements]
                      for t in program.triggers]
        self.memo: dict[tuple, StatementPlan] = {}

    def __call__(self, columns: Mapping[str, int | None]) -> float:
        total: float = 0
        for ti, (t, names) in enumerate(zip(self.program.triggers, self.names)):
            plans = []
            for si, stmt_names in enumerate(names):
                k = (ti, si, tuple(columns[n] for n in stmt_names))
                if k not in self.memo:
                    self.memo[k] = classify_statement(t, si + 1, columns)
                plans.append(self.memo[k])
            total += sum(p.cost for p in plans) + (SEQUENTIAL_COST if sequential(plans) else 0)
        return total + sum(TYPE_COST.get(m.keys[columns[m.name]].type, 0) for m in self.program.maps
                           if columns[m.name] not in (None, EVERYWHERE))


def _locality(plan, map_name: str) -> str:
    """What the choice leaves remote: reads of this map from another member, and its writes that wait for one."""
    touching = [(t, s) for t, s in plan.statements()
                if s.statement.target.name == map_name or any(r.ref.name == map_name for r in s.refs)]
    if not touching:
        return "no statement writes or reads it"
    read = [(t, s) for t, s in touching if any(r.ref.name == map_name and r.cls != LOCAL for r in s.refs)]
    writes = [(t, s) for t, s in touching if s.statement.target.name == map_name]
    waiting = [(t, s) for t, s in writes if s.cls != LOCAL]
    if not read and not waiting:
        return f"all {len(touching)} statements writing or reading it are local"
    parts = []
    if read:
        t, s = read[0]
        parts.append(f"read from another member by {len(read)} statements (first: statement {s.index} of {t.name})")
    if waiting:
        t, s = waiting[0]
        parts.append(f"{len(waiting)} of its {len(writes)} writes read another member's map "
                     f"(first: statement {s.index} of {t.name})")
    return "; ".join(parts)


def _view_groups(program: Program) -> list[list[str]]:
    """Maps that must share their column (a view's maps, transitively), in program order."""
    uf = _UnionFind()
    for m in program.maps:
        uf.find(m.name)
    for v in program.views:
        for a, b in pairwise(v.maps):
            uf.union(a, b)
    groups: dict[str, list[str]] = {}
    for m in program.maps:
        groups.setdefault(uf.find(m.name), []).append(m.name)
    return list(groups.values())


def _key_class(program: Program, classes: tuple[KeyClass, ...], key: str, box: str) -> list[KeyClass]:
    """The class(es) of the relation column ``key`` names (``col`` or ``relation.col``, case ignored)."""
    rel, _, col = key.rpartition(".")
    hits = [(r.name, c.name) for r in program.relations for c in r.columns
            if c.name.lower() == col.lower() and (not rel or r.name.lower() == rel.lower())]
    if not hits:
        listing = "; ".join(f"{r.name}: {', '.join(c.name for c in r.columns)}" for r in program.relations)
        raise PlacementError(f"key {key!r} is not a column of any relation of box {box!r} ({listing})")
    found = [c for c in classes if any(h in c.columns for h in hits)]
    if len(found) > 1:
        names = " or ".join(f"{r}.{c}" for r, c in hits)
        raise PlacementError(f"key {key!r} of box {box!r} is ambiguous: name one of {names}")
    return found
