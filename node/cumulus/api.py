"""A node's HTTP API for the partitioned boxes it is a member of (docs/cumulus.md §2.7, §4.2, §7).

``GET /segments/{box}``
    the entries of each segment this member holds, per map: ``{"box",
    "node", "member", "version", "layout": {...}, "segments": {id: {map:
    entries}}}`` (``boreas segments``).
``GET /segments/{box}/stable``
    on member 0 (the leader): the stable epoch, ``{"epoch", "age" (seconds
    since it ended), "current", "positions": [[stream, producer, seq], ...]}``
    (the last input batch of each producer it covers); READ_STABLE reads
    every member at that epoch (``GET /query/{box}?stable=1&epoch=S``).
``POST /segments/{box}/load?job=J&part=K``
    a bulk load of initial map values into this member (a Spark task,
    ``boreas.spark.load_view``): the body is msgpack ``[[map, key, value],
    ...]`` of entries this member owns (DATE key columns as day numbers
    since 1970-01-01).  It goes through the dataflow like a batch of the
    box's internal stream, so it is logged and replayed; a retried ``(job,
    part)`` adds nothing.  Refused (409) once the box holds data or has taken
    input, (422) for entries of other members or unknown maps.
"""

from __future__ import annotations

import logging
from typing import Any

import msgspec
from aiohttp import web
from boreas.wire.server import json_error

from . import messages as msg
from .part import PartOperator, internal_stream

log = logging.getLogger(__name__)


class SegmentsFailed(Exception):
    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status


class SegmentsApi:
    """The handlers; the node's dataflow holds the operators (``dataflow.operators[box]``)."""

    def __init__(self, dataflow: Any, endpoint: str):
        self.dataflow = dataflow
        self.endpoint = endpoint

    def add_routes(self, router: web.UrlDispatcher) -> None:
        router.add_get("/segments/{box}", self.handle_segments)
        router.add_get("/segments/{box}/stable", self.handle_stable)
        router.add_post("/segments/{box}/load", self.handle_load)

    def _part(self, box: str) -> Any:
        op = self.dataflow.operators.get(box)
        if op is None:
            raise SegmentsFailed(404, f"no box {box!r} on node {self.endpoint}")
        if getattr(op, "layout", None) is None:
            raise SegmentsFailed(404, f"box {box!r} on node {self.endpoint} is not partitioned")
        return op

    async def handle_segments(self, request: web.Request) -> web.Response:
        box = request.match_info["box"]
        try:
            op = self._part(box)
        except SegmentsFailed as exc:
            return json_error(exc.status, str(exc), box=box)
        counted = op.segment_entries()
        return web.json_response({
            "box": box, "node": self.endpoint, "member": op.member, "version": op.runtime.version,
            "layout": op.layout.to_dict(),
            "segments": {str(seg): {name: int(n) for name, n in maps.items()} for seg, maps in counted.items()},
        })

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
            try:
                entries = msgspec.msgpack.decode(await request.read(), type=list[tuple[str, list, float | int]])
            except msgspec.DecodeError as exc:
                raise SegmentsFailed(422, f"the body is not msgpack [[map, key, value], ...]: {exc}") from None
            problem = self._check(op, entries)
            if problem:
                raise SegmentsFailed(422, problem)
            if (job, int(part)) not in op.loaded and (why := op.loadable()) is not None:
                raise SegmentsFailed(409, why)
        except SegmentsFailed as exc:
            return json_error(exc.status, str(exc), box=box)
        stream = internal_stream(box, op.member)
        await self.dataflow.deliver([(stream, [msg.load(job, int(part), [list(e) for e in entries])],
                                      f"load-{job}", int(part), "")])
        return web.json_response({"box": box, "member": op.member, "job": job, "part": int(part),
                                  "entries": len(entries)})

    @staticmethod
    def _check(op: PartOperator, entries: list) -> str | None:
        """Why the entries cannot be this member's (unknown map, wrong key width, another member's); None if fine."""
        maps = {m.name: len(m.keys) for m in op.plan.program.maps}
        pack, decode = op.runtime.store.pack, op._decode_key
        for name, key, _ in entries:
            if name not in maps:
                return f"box {op.box.name!r} has no map {name!r} (maps: {', '.join(maps)})"
            if len(key) != maps[name]:
                return f"map {name!r} has {maps[name]} key columns; an entry has {len(key)}"
            if not op.runtime.owns(name, pack(name, decode(name, key))):
                return (f"entry {name}{key} belongs to another member of box {op.box.name!r} than "
                        f"{op.member} ({op.layout.members[op.member]}); send it to its owner")
        return None
