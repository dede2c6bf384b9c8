"""A node's HTTP API for the partitioned boxes it is a member of (docs/cumulus.md §2.7, §4.2, §7).

``GET /segments/{box}[?member=M]``
    the entries of each segment this member holds, per map: ``{"box",
    "node", "member", "own" (the node's own member), "members" (hosted here),
    "version", "layout": {...}, "segments": {id: {map: entries}},
    "work_rows": {"kept", "sent"}}`` (``boreas segments``, ``boreas
    rebalance``; ``work_rows``: rows this member coordinated for members on
    this node and on others, since the node started).  A node that
    hosts a guest member after a failover (docs/cumulus.md §6.3) answers for
    every member it hosts, or for member ``M``.
``GET /segments/{box}/members/{member}/query?...``
    ``GET /query/{box}`` of one member hosted here (the guest's reads).
``GET /segments/{box}/stable``
    on member 0 (the leader): the stable epoch, ``{"epoch", "age" (seconds
    since it ended), "current", "positions": [[stream, producer, seq], ...]}``
    (the last input batch of each producer it covers); READ_STABLE reads
    every member at that epoch (``GET /query/{box}?stable=1&epoch=S``).
``POST /segments/{box}/load?job=J&part=K``
    a bulk load of initial map values into this member (a Spark task,
    ``boreas.spark.load_view``): the body is an Arrow IPC stream of one
    map's columns ``k0, ..., value`` (``application/vnd.apache.arrow.stream``,
    the map named in the schema metadata; :func:`.loading.arrow_part`) or
    msgpack ``[[map, key, value], ...]`` (DATE key columns as day numbers
    since 1970-01-01), of entries this member owns.  It goes through the dataflow like a batch of the
    box's internal stream, so it is logged and replayed; a retried ``(job,
    part)`` adds nothing.  Refused (409) once the box holds data or has taken
    input, (422) for entries of other members or unknown maps.
``POST /segments/{box}/relayout``
    on member 0 (the leader): change the layout while events flow (§6),
    JSON ``{"move": [segment, member or endpoint]}``, ``{"split": segment}``,
    ``{"move_all": member or endpoint}`` or ``{"rebalance": {segment:
    entries}}``.  The leader decides the new layout (:mod:`.layout_request`), announces the epoch it
    takes effect at, and answers once its members have switched and the
    segments moved: ``{"layout": {...}, "moves": [[segment, from, to]],
    "seconds"}``; it also reports the new layout to the Head, which commits
    it so every catalog agrees.  A change asked while others are under way
    is decided from the newest layout decided and queues after them (the
    answer comes once all of them are in place); 409 on another member, 422
    for a change that does not fit the layout.
    ``{"cancel": true}`` cancels the last change announced while its first
    epoch is not fixed (its segments still copying): ``{"cancelled": change,
    "layout"}``; its own request then answers 409; 409 when none can be.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from collections.abc import Callable
from typing import Any

import msgspec
from aiohttp import web
from boreas.m3.cumulus import relayout
from boreas.wire.server import json_error

from ..query import QueryApi
from . import messages as msg
from .layout_request import decide_layout, partition_of_layout
from .loading import ARROW, arrow_part, foreign_entry, foreign_row, part_entries
from .part import PartOperator
from .ports import internal_stream

log = logging.getLogger(__name__)


class SegmentsFailed(Exception):
    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status


class SegmentsApi:
    """The handlers; the node's dataflow holds the operators (``dataflow.operators[box]``)."""

    def __init__(self, dataflow: Any, endpoint: str, report: Callable[[Any], Any] | None = None,
                 relayout_timeout: float = 60.0):
        self.dataflow = dataflow
        self.endpoint = endpoint
        self.report = report  # a change to the Head (the node's ordered report channel), if it has one
        self.relayout_timeout = relayout_timeout
        self._deciding = asyncio.Lock()

    def add_routes(self, router: web.UrlDispatcher) -> None:
        router.add_get("/segments/{box}", self.handle_segments)
        router.add_get("/segments/{box}/stable", self.handle_stable)
        router.add_post("/segments/{box}/load", self.handle_load)
        router.add_post("/segments/{box}/relayout", self.handle_relayout)
        router.add_get("/segments/{box}/members/{member}/query", self.handle_member_query)

    async def handle_relayout(self, request: web.Request) -> web.Response:
        box = request.match_info["box"]
        started = time.monotonic()
        try:
            op = self._part(box)
            if not isinstance(op, PartOperator):
                raise SegmentsFailed(404, f"box {box!r} on node {self.endpoint} cannot change its layout")
            op = op.hosted.get(0, op)  # the leader, if it is here (a guest after a failover, perhaps)
            try:
                body = await request.json()
            except ValueError as exc:
                raise SegmentsFailed(422, f"a layout change is a JSON object: {exc}") from None
            if isinstance(body, dict) and body.get("cancel"):
                return await self._cancel(box, op)
            if op.leader is None:
                raise SegmentsFailed(409, op.relayout_busy() or f"member {op.member} is not the leader")
            if isinstance(body, dict) and "retire" in body and op.partition.joining:
                raise SegmentsFailed(409, f"box {box!r} has nodes joining ({', '.join(op.partition.joining)}); a "
                                          "member retires once no node is joining")
            try:
                base = op.joinable_layout()  # a change asked while others are under way queues after them
                new = decide_layout(base, body, len(op.partition.modulo_nodes), len(op.latest_layout.members))
            except (ValueError, TypeError, KeyError, AttributeError) as exc:
                raise SegmentsFailed(422, f"a layout change is {{\"move\": [segment, node]}}, {{\"split\": "
                                          f"segment}}, {{\"move_all\": node}}, {{\"rebalance\": {{segment: "
                                          f"entries}}[, \"guests\": [member, ...]]}}, {{\"retire\": node}} or "
                                          f"{{\"cancel\": true}}: {exc}") from None
        except SegmentsFailed as exc:
            return json_error(exc.status, str(exc), box=box)
        if new is base:  # nothing to do (joining nodes stay joining)
            return web.json_response({"box": box, "layout": op.latest_layout.to_dict(), "moves": [], "seconds": 0.0,
                                      "changed": False})
        moves = relayout.moves(op.latest_layout, new)  # (as the leader sees it: with copies to members joining)
        change = uuid.uuid4().hex[:12]
        async with self._deciding:  # decided from the newest layout, one request at a time
            if op.latest_layout.version != base.version:
                return json_error(409, f"box {box!r}: another layout change was asked at the same moment; "
                                       "ask again", box=box)
            await self.dataflow.deliver([(internal_stream(box, op.member), [msg.request(change, new.to_dict())],
                                          f"relayout-{change}", 0, "")])
        # Done once every member is done with the change's first epoch: it applied nothing of that epoch
        # before its moving segments were in, so the leader's stable epoch reaching it means switched everywhere.
        first = next((r.first for r in op.parts.changes.relayouts if r.layout.version == new.version), None)
        primary = self.dataflow.operators.get(box)

        def in_place() -> bool:
            return not (primary is not None and primary.hosted.get(op.member) is op
                        and (op.parts.changes.pending is not None or op.layout.version < new.version
                             or (first is not None and op.leader.stable < first)))

        await self._until(lambda: in_place() or change in op.parts.changes.cancelled,
                          time.monotonic() + self.relayout_timeout)
        if not in_place():
            if change in op.parts.changes.cancelled:
                return json_error(409, f"box {box!r}: layout change {change} (layout {new.version}) was cancelled; "
                                       f"the layout stays {op.layout.version}", box=box, layout=op.layout.to_dict())
            return json_error(504, f"box {box!r}: layout {new.version} decided but not in place after "
                                   f"{self.relayout_timeout:.0f} s (a member may be down); it completes when "
                                   "the members are back", box=box)
        if self.report is not None:
            self.report(partition_of_layout(self.dataflow.partitions.get(box), new))
        return web.json_response({"box": box, "layout": new.to_dict(), "moves": [list(m) for m in moves],
                                  "seconds": round(time.monotonic() - started, 3), "changed": True})

    async def _cancel(self, box: str, op: Any) -> web.Response:
        """``{"cancel": true}`` on the leader: drop the last change announced while its first epoch is not
        fixed (its segments still copying); 409 when there is none (none under way, or too late)."""
        if not isinstance(op, PartOperator) or op.leader is None:
            return json_error(409, f"box {box!r}: member {op.member} is not its leader; ask member 0 "
                                   f"({op.layout.members[0]})", box=box)
        change = op.parts.changes.cancellable()
        if change is None:
            return json_error(409, f"box {box!r} has no layout change to cancel: none is under way, or its "
                                   "first epoch is fixed (its segments have copied; it completes)", box=box)
        await self.dataflow.deliver([(internal_stream(box, op.member), [msg.cancel(change, True)],
                                      f"cancel-{change}", 0, "")])
        def gone() -> bool:
            return op.parts.changes.layout_change(change) is None or change in op.parts.changes.cancelled

        await self._until(lambda: gone() or op.parts.changes.cancellable() != change,
                          time.monotonic() + self.relayout_timeout)
        if not gone():  # its first epoch was fixed meanwhile, or the time is up
            return json_error(409, f"box {box!r}: layout change {change} could not be cancelled any more; "
                                   "it completes", box=box)
        return web.json_response({"box": box, "cancelled": change, "layout": op.layout.to_dict(),
                                  "changed": False})

    async def _until(self, done: Callable[[], bool], deadline: float) -> None:
        """Until ``done()`` or ``deadline``: looked at again after each group of batches (and timer firing) the box
        task finishes, which is what changes a partitioned box's layout state."""
        progress = self.dataflow.progress
        async with progress:
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(progress.wait_for(done), max(0.0, deadline - time.monotonic()))

    def _part(self, box: str) -> Any:
        op = self.dataflow.operators.get(box)
        if op is None:
            raise SegmentsFailed(404, f"no box {box!r} on node {self.endpoint}")
        if getattr(op, "layout", None) is None:
            raise SegmentsFailed(404, f"box {box!r} on node {self.endpoint} is not partitioned")
        return op

    def _hosted(self, box: str, member: str | None) -> Any:
        """The operator of ``box`` here, or of one member it hosts (``member``: after a failover, two are here)."""
        op = self._part(box)
        if member is None or member == "":
            return op
        hosted = getattr(op, "hosted", {op.member: op})
        try:
            return hosted[int(member)]
        except (ValueError, KeyError):
            raise SegmentsFailed(404, f"member {member} of box {box!r} is not on node {self.endpoint} (members "
                                      f"here: {', '.join(map(str, sorted(hosted)))})") from None

    async def handle_segments(self, request: web.Request) -> web.Response:
        """One member's segments (``?member=``), or those of every member hosted here."""
        box = request.match_info["box"]
        try:
            op = self._hosted(box, request.query.get("member"))
        except SegmentsFailed as exc:
            return json_error(exc.status, str(exc), box=box)
        one = "member" in request.query
        several = len(getattr(op, "hosted", ())) > 1
        counted = op.runtime.segment_entries() if one and several else op.segment_entries()
        return web.json_response({
            "box": box, "node": self.endpoint, "member": op.member, "own": self._part(box).member,
            "version": op.runtime.version,
            "members": [op.member] if one else sorted(getattr(op, "hosted", {op.member: op})),
            "layout": op.layout.to_dict(),
            "segments": {str(seg): {name: int(n) for name, n in maps.items()} for seg, maps in counted.items()},
            "work_rows": _work_rows(op),
            "coordinating": op.coordinating() if isinstance(op, PartOperator) else {},
        })

    async def handle_member_query(self, request: web.Request) -> web.Response:
        """``GET /query/{box}`` (:mod:`boreas.node.query`) of one member hosted here, named in the path.

        A node hosting a guest member after a failover answers ``/query``
        for its own member; this reads the guest (or any hosted member).
        """
        box = request.match_info["box"]
        try:
            op = self._hosted(box, request.match_info["member"])
        except SegmentsFailed as exc:
            return json_error(exc.status, str(exc), box=box)
        return await QueryApi(_OneBox(box, op), self.endpoint).handle(request)

    async def handle_stable(self, request: web.Request) -> web.Response:
        box = request.match_info["box"]
        try:
            op = self._part(box)
            stable_info = getattr(op, "stable_info", None)
            if stable_info is None:
                raise SegmentsFailed(404, f"m3 box {box!r} on node {self.endpoint} keeps no stable epochs")
            info = stable_info()
            if info is None:
                raise SegmentsFailed(404, f"member {op.member} of box {box!r} is not its leader; ask member 0 "
                                          f"({op.layout.members[0]})")
        except SegmentsFailed as exc:
            return json_error(exc.status, str(exc), box=box)
        return web.json_response({"box": box, "node": self.endpoint, "layout": op.layout.version, **info})

    async def handle_load(self, request: web.Request) -> web.Response:
        box = request.match_info["box"]
        try:
            op = self._part(box)
            if not isinstance(op, PartOperator):
                raise SegmentsFailed(404, f"box {box!r} on node {self.endpoint} takes no bulk load")
            job, part = request.query.get("job", ""), request.query.get("part", "")
            if not job or not part.isdigit():
                raise SegmentsFailed(422, "a bulk load names its job and part: ?job=NAME&part=N")
            body = await request.read()
            if request.content_type == ARROW:
                kinds = {m.name: tuple(k.type for k in m.keys) for m in op.plan.program.maps}
                try:
                    name, table = arrow_part(body, op.box.name, kinds)
                except ValueError as exc:
                    raise SegmentsFailed(422, str(exc)) from None
                row = foreign_row(op.runtime, name, kinds[name], table)
                problem = None if row is None else self._foreign(op, name, part_entries(table.slice(row, 1))[0][0])
                entries, load = range(table.num_rows), body
            else:
                try:
                    entries = msgspec.msgpack.decode(body, type=list[tuple[str, list, float | int]])
                except msgspec.DecodeError as exc:
                    raise SegmentsFailed(422, f"the body is not msgpack [[map, key, value], ...]: {exc}") from None
                problem, load = self._check(op, entries), [list(e) for e in entries]
            if problem:
                raise SegmentsFailed(422, problem)
            if not op.parts.loads.taken(job, int(part)) and (why := op.loadable(job)) is not None:
                raise SegmentsFailed(409, why)
        except SegmentsFailed as exc:
            return json_error(exc.status, str(exc), box=box)
        stream = internal_stream(box, op.member)
        await self.dataflow.deliver([(stream, [msg.load(job, int(part), load)],
                                      f"load-{job}", int(part), "")])
        return web.json_response({"box": box, "member": op.member, "job": job, "part": int(part),
                                  "entries": len(entries)})

    @staticmethod
    def _check(op: PartOperator, entries: list) -> str | None:
        """Why msgpack entries cannot be this member's (unknown map, wrong key width, another member's); None if fine."""
        maps = {m.name: len(m.keys) for m in op.plan.program.maps}
        decode = op.decode_key
        keys: dict[str, list] = {}
        for name, key, _ in entries:
            if name not in maps:
                return f"box {op.box.name!r} has no map {name!r} (maps: {', '.join(maps)})"
            if len(key) != maps[name]:
                return f"map {name!r} has {maps[name]} key columns; an entry has {len(key)}"
            keys.setdefault(name, []).append(decode(name, key))
        entry = foreign_entry(op.runtime, keys)
        return None if entry is None else SegmentsApi._foreign(op, *entry)

    @staticmethod
    def _foreign(op: PartOperator, name: str, key: tuple) -> str:
        """Why the entry of map ``name`` at ``key`` (as the runtime holds it) cannot be loaded here."""
        return (f"entry {name}{list(key)} belongs to another member of box {op.box.name!r} than "
                f"{op.member} ({op.layout.members[op.member]}); send it to its owner")


def _work_rows(op: Any) -> dict[str, int]:
    """Rows a member coordinated for members on this node and on others (a lone member runs as a plain m3
    operator: no coordinator, nothing counted)."""
    if not isinstance(op, PartOperator):
        return {"kept": 0, "sent": 0}
    return {"kept": op.parts.coordinator.rows_kept, "sent": op.parts.coordinator.rows_sent}


class _OneBox:
    """What :class:`~boreas.node.query.QueryApi` reads of a dataflow, holding one member's operator."""

    def __init__(self, box: str, op: Any):
        self.operators = {box: op}
