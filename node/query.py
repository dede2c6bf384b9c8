"""The query API of a node: Cumulus's READ_SLICE, READ_SUM, READ_MIN, READ_MAX and READ_STABLE over HTTP.

Applications read the maps of the ``m3`` boxes a node runs where they are,
preaggregated at the node, instead of subscribing to every change.  The
reads go straight to the box's :class:`~boreas.m3.Runtime`:

``GET /query/{box}?map=NAME&key=V&key=_&agg=slice|sum|min|max&stable=1``
    ``NAME`` is a map, a view, or one of the box's out streams (which stands
    for the view it carries); without ``map`` the view on the box's first out
    stream.  Keys bind the key columns in order; ``_`` (or a missing trailing
    key) is a wildcard.  Answer: ``{"box", "node", "map", "version", "agg",
    "stable", "keys": [[column, type], ...], "rows": [{"key": [...],
    "value": ...}]}`` -- for ``sum``/``min``/``max`` one row whose key is the
    pattern (wildcards as null).  DATE keys are ISO dates in and out.
``GET /query/{box}/maps``
    the box's maps and views with their key columns (and each view's maps),
    each view's value columns' M3 types (``types``, from the column's
    expression: ``MAX(f)`` of a FLOAT is FLOAT, though its map ``V_v`` is an
    INT count), and which view each out stream carries.

**Partitioned boxes** (docs/cumulus.md §5): a member of a partitioned box
holds only the entries of its segments (and the box's home maps on the home
member), and answers from them as above, pre-aggregated for the client to
merge: a slice's rows, a partial ``sum``, ``min`` or ``max``, which is
``null`` when no entry of this member matches (a partial of nothing, for
``sum`` too, so that it is never mistaken for a value).  The answer adds
``"layout"`` (the version), ``"member"`` and ``"segments"`` (the ids of the
segments it owns).  ``layout=L`` asks for layout version ``L``; a member at
another version answers 409 ``{"error": "layout 5, asked for 4", "layout":
{...}}`` with its own layout, which the client then uses.  For a
partitioned box ``stable=1&epoch=S`` reads this member's maps at the end of
stable epoch ``S`` (every member's at the same ``S`` is a consistent cut of
the box, §4.2); ``version`` is then ``S``, and 410 says ``S`` is no longer
(or not yet) readable here; the epoch comes from the leader
(:mod:`boreas.node.cumulus.api`: ``GET /segments/{box}/stable``).

404 for a box that is not here (it may have moved: ask the Head again) or
not an ``m3`` box, or an unknown map (the message lists the box's maps); 422
for a bad key (too many, or not of the column's type) or aggregate.  A first
key that is not of its column's type but looks like a name (a map name
given as a key: ``key=Revnue``) is refused saying it is neither, with the
box's maps.

Consistency: the dataflow applies each batch to a runtime synchronously, on
the node's event loop, between two reads, so no read ever sees a half-applied
batch (a failed batch is rolled back by the runtime).  ``stable=1`` is
READ_STABLE: it reads under the runtime's lock and reports the ``version``
(completed batches) it read, which is the box's last consistent state.
"""

from __future__ import annotations

from boreas.catalog.words import close_matches, counted, did_you_mean
import datetime as dt
import logging
from dataclasses import dataclass
from typing import Any

from aiohttp import web
from boreas.m3.ast import Program
from boreas.m3.cumulus import Layout
from boreas.m3.nullable import ViewNulls, shown_columns
from boreas.m3.query import AGGREGATES, aggregate
from boreas.m3.runtime.program import Runtime
from boreas.m3.runtime.valuetypes import value_type
from boreas.wire.server import json_error

from .operators.m3box import M3Operator, date_of

log = logging.getLogger(__name__)

WILDCARD = "_"
_TRUE = ("1", "true", "yes", "on")


class QueryFailed(Exception):
    """A query that cannot be answered: ``status`` (404 or 422) and a message saying why."""

    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status


@dataclass(frozen=True)
class Target:
    """What a query reads: a map, or a view computed from its maps (several columns, or AVG)."""

    name: str
    keys: tuple[tuple[str, str], ...]
    map: str | None = None   # read this map directly (a map, or a view that is one plain map)
    view: str | None = None  # else compute the view's rows


def partition_of(op: object) -> tuple[Layout, int] | None:
    """``(layout, member)`` when ``op`` is one member's part of a partitioned ``m3`` box, else None."""
    layout = getattr(op, "layout", None)
    if isinstance(op, M3Operator) and layout is not None:
        return layout, int(getattr(op, "member"))
    return None


def check_layout(layout: Layout, asked: str | None) -> None:
    """Refuse a read that asks for another layout version than the member's (409, with the member's layout)."""
    if asked is None or asked == "":
        return
    try:
        version = int(asked)
    except ValueError:
        raise QueryFailed(422, f"layout={asked!r}: expected a layout version (an integer)") from None
    if version != layout.version:
        raise LayoutMismatch(layout, version)


class LayoutMismatch(QueryFailed):
    """A read asked for a layout version this member is not at (409; the answer carries the member's layout)."""

    def __init__(self, layout: Layout, asked: int):
        super().__init__(409, f"layout {layout.version}, asked for {asked}")
        self.layout = layout


def resolve(op: M3Operator, name: str | None) -> Target:
    """The map or view ``name`` stands for in box ``op`` (an out stream name stands for its view)."""
    program = op.plan.program
    if not name and not op.box.outputs:
        raise QueryFailed(404, f"m3 box {op.box.name!r} has no out stream (no view): name a map with map=")
    name = name or op.box.outputs[0]
    if op.plan.topn is not None and name in op.box.outputs:  # (its view is the inner query's, unranked)
        raise QueryFailed(422, f"m3 box {op.box.name!r} ranks its view by ROW_NUMBER(): out stream {name!r} "
                               "is the ranked rows, which a query does not read (subscribe to it, or name a map "
                               f"with map=: {', '.join(m.name for m in program.maps)})")
    view_name = op.view_of_stream(name) or (name if any(v.name == name for v in program.views) else None)
    if view_name is not None:
        view = program.view(view_name)
        keys = op.runtime.views[view_name].keys
        if view.plain_map is not None and ViewNulls.of(view.keys, view.internal, ()) is None and not view.always:
            # one map is the whole view: its reads are the map's (but a NULL key is the view's to show, and an
            # ALWAYS view's one row is there while the map is empty: COUNT(*) 0)
            return Target(name, keys, map=view.plain_map)
        return Target(name, keys, view=view_name)  # computed when read (quotients, HAVING, MIN, ...)
    for decl in program.maps:
        if decl.name == name:
            return Target(name, tuple((k.name, k.type) for k in decl.keys), map=name)
    names = [*op.box.outputs, *(v.name for v in program.views), *(m.name for m in program.maps)]
    raise QueryFailed(404, f"m3 box {op.box.name!r} has no map, view or out stream {name!r}"
                           f"{did_you_mean(close_matches(name, names, n=1))} ({readable(op)})")


def refuse_computed_view(op: M3Operator, target: Target) -> None:
    """Refuse (422) reading a member's view computed when read (a partitioned window join's leaf, docs/cumulus.md
    §3.13): its rows are disjoint over the members, but a reader binding a key would ask the owner of the view's
    key at its first map's partition position, which for such a view is another column; its maps are read."""
    if target.view is not None and op.plan.program.view(target.view).general:
        raise QueryFailed(422, f"view {target.view} of partitioned m3 box {op.box.name!r} is computed from its maps "
                               "when it is read, which a read of a partitioned box does not merge: read its maps "
                               f"with map= ({', '.join(op.plan.program.view(target.view).maps)}), or subscribe to "
                               "the box's out stream")


def readable(op: M3Operator) -> str:
    """What a query of box ``op`` can name: ``out streams: ...; views: ...; maps: ...``."""
    program = op.plan.program
    return (f"out streams: {', '.join(op.box.outputs)}; views: {', '.join(v.name for v in program.views)}; "
            f"maps: {', '.join(m.name for m in program.maps)}")


def parse_query_keys(op: M3Operator, target: Target, texts: list[str], map_given: bool) -> tuple:
    """:func:`parse_keys`; a bad first key that looks like a name, with no map given, is refused as
    neither a key nor a name the box has (the message lists its maps)."""
    try:
        return parse_keys(texts, target.keys, f"{target.name!r}")
    except QueryFailed as exc:
        if map_given or not texts[0].isidentifier() or not str(exc).startswith("key 0 "):
            raise
        raise QueryFailed(422, f"{exc}, nor a map, view or out stream of m3 box {op.box.name!r} "
                               f"({readable(op)}; name a map with map=)") from None


def parse_keys(texts: list[str], keys: tuple[tuple[str, str], ...], what: str) -> tuple:
    """Key texts as typed values (None for ``_``); QueryFailed(422) names the bad one."""
    if len(texts) > len(keys):
        raise QueryFailed(422, f"{what} has {counted(len(keys), 'key column')} "
                               f"({', '.join(f'{n} {t}' for n, t in keys)}), {counted(len(texts), 'key')} "
                               f"{'was' if len(texts) == 1 else 'were'} given")
    return tuple(_key(text, name, kind, i) for i, (text, (name, kind)) in enumerate(zip(texts, keys)))


def _key(text: str, name: str, kind: str, index: int) -> Any:
    if text == WILDCARD:
        return None
    try:
        if kind == "INT":
            return int(text)
        if kind == "FLOAT":
            return float(text)
        if kind == "DATE":
            return date_of(int(text)) if text.lstrip("-").isdigit() else dt.date.fromisoformat(text)
    except ValueError:
        raise QueryFailed(422, f"key {index} ({name} {kind}): {text!r} is not "
                               f"{'a date (YYYY-MM-DD)' if kind == 'DATE' else 'an ' + kind}") from None
    return text


def read(op: M3Operator, target: Target, agg: str, keys: tuple, stable: bool,
         partial: bool = False) -> tuple[int, list]:
    """``(version, [(key, value), ...])``; for an aggregate one row whose key is the pattern.

    ``partial``: the aggregate is one member's part of a partitioned box's, None when no entry matched.
    """
    runtime = op.runtime
    for _ in range(3):  # a version that moved during the read means a batch came in between: read again
        version = runtime.version
        rows = _read(runtime, target, agg, keys, stable, partial)
        if runtime.version == version:
            return version, rows
    return runtime.version, _read(runtime, target, agg, keys, True, partial)


def _read(runtime: Runtime, target: Target, agg: str, keys: tuple, stable: bool, partial: bool = False) -> list:
    pattern = keys + (None,) * (len(target.keys) - len(keys))
    if target.map is not None:
        if partial and agg != "slice":  # the matching entries, to tell "none" from a value
            entries = runtime.read_slice(target.map, *keys)
            return [(pattern, aggregate(agg, entries) if entries else None)]
        if stable:
            found = runtime.read_stable(target.map, agg, *keys)
        else:
            found = getattr(runtime, f"read_{agg}")(target.map, *keys)
        return list(found) if agg == "slice" else [(pattern, found)]
    rows = list(runtime.view(target.view or "", *pattern).items())
    if agg == "slice":
        return rows
    if partial and not rows:
        return [(pattern, None)]
    return [(pattern, _aggregate(agg, [v for _, v in rows]))]


def _epoch(text: str | None, box: str) -> int:
    """The ``epoch=`` of a stable read of a partitioned box (the client gets it from the leader)."""
    try:
        return int(text or "")
    except ValueError:
        raise QueryFailed(422, f"a stable read of partitioned box {box!r} names its epoch (epoch=N, from "
                               f"GET /segments/{box}/stable on member 0)") from None


def _aggregate(agg: str, values: list) -> Any:
    """sum/min/max of view values, column by column when a view has several; a NULL value (None: a SUM over
    only NULLs, docs/m3.md "NULLs") is skipped, as SQL's aggregates skip it, and a column of only NULLs is None."""
    fn = {"sum": sum, "min": min, "max": max}[agg]
    if not values:
        return 0 if agg == "sum" else None
    if isinstance(values[0], tuple):
        return tuple(_skipping_nulls(fn, column) for column in zip(*values))
    return _skipping_nulls(fn, values)


def _skipping_nulls(fn, values) -> Any:
    present = [v for v in values if v is not None]
    return fn(present) if present else None


def jsonable(value: Any) -> Any:
    if isinstance(value, dt.date):
        return value.isoformat()
    if isinstance(value, (tuple, list)):
        return [jsonable(v) for v in value]
    return value


class QueryApi:
    """The HTTP handlers; the node's dataflow holds the operators (``dataflow.operators[box]``)."""

    def __init__(self, dataflow: Any, endpoint: str):
        self.dataflow = dataflow
        self.endpoint = endpoint

    def _box(self, name: str) -> M3Operator:
        op = self.dataflow.operators.get(name)
        if op is None:
            raise QueryFailed(404, f"no box {name!r} on node {self.endpoint}")
        if not isinstance(op, M3Operator):
            raise QueryFailed(404, f"box {name!r} is a {op.box.type} box; only m3 boxes have maps to query")
        return op

    def add_routes(self, router: web.UrlDispatcher) -> None:
        """Register ``GET /query/{box}`` and ``GET /query/{box}/maps``."""
        router.add_get("/query/{box}", self.handle)
        router.add_get("/query/{box}/maps", self.handle_maps)

    async def handle(self, request: web.Request) -> web.Response:
        """``GET /query/{box}``: one read (one member's part of it, for a partitioned box)."""
        box = request.match_info["box"]
        q = request.query
        try:
            op = self._box(box)
            part = partition_of(op)
            stable = q.get("stable", "").lower() in _TRUE
            if part is not None and not stable:  # a stable read names its epoch, which names its layout
                check_layout(part[0], q.get("layout"))
            agg = q.get("agg", "slice").lower()
            if agg not in AGGREGATES:
                raise QueryFailed(422, f"agg={agg!r}: expected one of {', '.join(AGGREGATES)}")
            target = resolve(op, q.get("map") or None)
            if part is not None:
                refuse_computed_view(op, target)
            keys = parse_query_keys(op, target, q.getall("key", []), bool(q.get("map")))
            if stable and part is not None:  # READ_STABLE across members: the maps at the end of one epoch
                epoch = _epoch(q.get("epoch"), box)
                try:
                    at = op.at_epoch(epoch)
                except LookupError as exc:
                    raise QueryFailed(410, str(exc)) from None
                version, rows = epoch, _read(at, target, agg, keys, True, partial=True)
            else:
                version, rows = read(op, target, agg, keys, stable, partial=part is not None)
        except LayoutMismatch as exc:
            return json_error(exc.status, str(exc), box=box, layout=exc.layout.to_dict())
        except QueryFailed as exc:
            return json_error(exc.status, str(exc), box=box)
        answer = {
            "box": box, "node": self.endpoint, "map": target.name, "version": version, "agg": agg,
            "stable": stable, "keys": [list(k) for k in target.keys],
            "rows": [{"key": jsonable(k), "value": jsonable(v)} for k, v in rows],
        }
        if part is not None:
            layout, member = part
            if stable:
                layout = op.layout_at(version)
            answer.update(layout=layout.version, member=member, segments=[s.id for s in layout.segments_of(member)])
            if target.name in layout.replicated:  # every member holds all of it: one answer is the whole map
                answer["replicated"] = True
        return web.json_response(answer)

    async def handle_maps(self, request: web.Request) -> web.Response:
        """``GET /query/{box}/maps``: what can be read, and by which names (entries: this node's)."""
        box = request.match_info["box"]
        try:
            op = self._box(box)
        except QueryFailed as exc:
            return json_error(exc.status, str(exc), box=box)
        program, runtime = op.plan.program, op.runtime
        view_maps = {v.name: list(v.maps) for v in program.views}
        answer = {
            "box": box, "node": self.endpoint, "version": runtime.version,
            "default": op.box.outputs[0] if op.box.outputs else None,
            "streams": {stream: view.name for stream, view in zip(op.box.outputs, op.plan.views)},
            "views": {name: {"keys": [list(k) for k in info.keys], "values": list(info.values),
                             "types": view_types(program, name), "maps": view_maps.get(name, [])}
                      for name, info in runtime.views.items()},
            "maps": {m.name: {"keys": [[k.name, k.type] for k in m.keys], "value": m.value_type,
                              "entries": runtime.store.size(m.name)} for m in program.maps},
        }
        part = partition_of(op)
        if part is not None:
            answer.update(layout=part[0].version, member=part[1])
        return web.json_response(answer)


def view_types(program: Program, name: str) -> list[str]:
    """The M3 type of each value column a row of view ``name`` holds (its ``values``, in order), from the
    column's expression (:func:`~boreas.m3.runtime.valuetypes.value_type`): the client types an Arrow read by
    it, as a view's value ``v`` is not always map ``V_v``'s value (a MIN/MAX's map counts its values)."""
    decl = program.view(name)
    return [value_type(program, decl, i) for i in shown_columns([c.name for c in decl.columns])]
