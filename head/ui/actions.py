"""What the web UI asks the Head to do for it: read an ``m3`` box's views, move a box.

``GET /ui/query/{box}?map=NAME&key=V&key=_&agg=slice|sum|min|max&stable=1``
    a read through the query API, as ``boreas query`` does it
    (:class:`boreas.client.query.QueryClient`: asks the Head where the box
    runs, reads that node, or every member of a partitioned box and merges
    their answers).  ``{"box", "node", "map", "version", "agg", "keys",
    "rows": [{"key", "value"}], "truncated"}``; at most :data:`MAX_ROWS` rows.
``GET /ui/query/{box}/maps``
    the box's maps and views (``GET /query/{box}/maps`` of its node).
``POST /ui/move`` ``{"box": B, "node": N}``
    as ``boreas move B N``: a box is moved by the node it runs on (``<move>``
    update XML, as an optimizer sends it), a segment ``B/S`` of a
    partitioned box, or the whole box, by its leader
    (``POST /segments/{box}/relayout``).  Answers once the node did; the
    new placement reaches the browsers through the feed when the Head
    commits it.  Needs the cluster token like every POST (the Head's HTTP
    server refuses it with 401 before this handler runs).

``POST /ui/connect`` ``{"box": SINK, "port": N, "expression": E, "name": F, "upstream": false}``
    as ``boreas connect``: a filter box ``F`` (``expression.0`` = ``E``)
    inserted before in port ``N`` of ``SINK``, on the sink's node (or, with
    ``upstream``, on the node that sends the stream).  It writes the stream
    ``F``, which ``SINK`` then reads.  The node validates the box and
    answers; nothing is half-applied.
``POST /ui/disconnect`` ``{"stream": S}``
    as ``boreas disconnect S``: remove the box a connect inserted, named by
    the stream it writes; its sink reads the original stream again.

Errors are JSON ``{"error"}``: 404 for an unknown box, 409 for a move that
makes no sense (already there, not a member), 422 for a bad request, 502
when the node refused and 503 when it could not be reached.
"""

from __future__ import annotations

import asyncio
from typing import Any

from aiohttp import web
from boreas.catalog.document_model import Disconnect, Move
from boreas.catalog.endpoints import normalize_endpoint
from boreas.catalog.updates import update_document
from boreas.client.query import QueryClient, QueryFailed
from boreas.wire.addressing import endpoint_url
from boreas.wire.client import PeerClient, PeerError, PeerRefused, PeerUnreachable
from boreas.wire.server import json_error
from lxml import etree

from ..context import HeadContext

#: Rows a UI query returns (the browser shows a table).
MAX_ROWS = 500
#: Seconds a UI query may take.
QUERY_TIMEOUT = 15.0
#: Seconds a move may take (a box with large state takes a while).
MOVE_TIMEOUT = 60.0


def _jsonable(value: Any) -> Any:
    if isinstance(value, (tuple, list)):
        return [_jsonable(v) for v in value]
    if hasattr(value, "isoformat"):
        return value.isoformat()
    return value


class Actions:
    def __init__(self, head: HeadContext, peers: PeerClient):
        self.head = head
        self.peers = peers

    def _head_url(self) -> str:
        server = self.head.server
        host = server.host if server.host not in (None, "", "0.0.0.0", "::") else "127.0.0.1"
        return f"http://{host}:{server.port}"

    async def maps(self, request: web.Request) -> web.Response:
        box = request.match_info["box"]
        async with QueryClient(self._head_url(), self.head.server.token) as client:
            try:
                answer = await asyncio.wait_for(client.maps(box), QUERY_TIMEOUT)
            except QueryFailed as exc:
                return json_error(exc.status or 404, str(exc))
            except (PeerError, TimeoutError) as exc:
                return json_error(503, str(exc) or "timed out")
        return web.json_response(answer)

    async def query(self, request: web.Request) -> web.Response:
        box, q = request.match_info["box"], request.query
        keys = [None if k in ("_", "") else k for k in q.getall("key", [])]
        stable = q.get("stable", "").lower() in ("1", "true", "yes", "on")
        async with QueryClient(self._head_url(), self.head.server.token) as client:
            try:
                result = await asyncio.wait_for(
                    client.query(box, q.get("map") or None, keys, q.get("agg", "slice"), stable), QUERY_TIMEOUT)
            except QueryFailed as exc:
                return json_error(exc.status or 422, str(exc))
            except (PeerError, TimeoutError) as exc:
                return json_error(503, str(exc) or "timed out")
        rows = [{"key": _jsonable(k), "value": _jsonable(v)} for k, v in result.rows[:MAX_ROWS]]
        return web.json_response({
            "box": result.box, "node": result.node, "map": result.map, "version": result.version,
            "agg": result.agg, "keys": [list(c) for c in result.keys], "rows": rows,
            "truncated": len(result.rows) > MAX_ROWS, "members": list(result.members),
            "epoch": result.epoch,
        })

    async def move(self, request: web.Request) -> web.Response:
        try:
            body = await request.json()
            name, target = str(body["box"]), normalize_endpoint(str(body["node"]))
        except (ValueError, KeyError, TypeError) as exc:
            return json_error(422, f'send JSON {{"box": ..., "node": ...}}: {exc}')
        catalog = self.head.catalog
        box_name, _, segment = name.partition("/")
        if box_name not in catalog.boxes:
            return json_error(404, f"no box {box_name!r} in the catalog (version {catalog.version})")
        part = catalog.partitions.get(box_name)
        try:
            if part is not None:
                if target not in part.nodes:
                    return json_error(409, f"{target} is not a member of partitioned box {box_name!r} "
                                           f"(members: {', '.join(part.nodes)})")
                if segment and not segment.isdigit():
                    return json_error(422, f"{name!r} does not name a segment: write BOX/SEGMENT")
                change = {"move": [int(segment), target]} if segment else {"move_all": target}
                reply = await self.peers.call("POST", endpoint_url(part.nodes[0], f"/segments/{box_name}/relayout"),
                                              json_body=change, timeout=MOVE_TIMEOUT)
                return web.json_response({"box": name, "node": target, "layout": reply.get("layout"),
                                          "moves": reply.get("moves"), "seconds": reply.get("seconds")})
            if segment:
                return json_error(422, f"box {box_name!r} is not partitioned: it has no segments")
            source = catalog.boxes[box_name].node
            if not source:
                return json_error(409, f"box {box_name!r} is not deployed on any node")
            if source == target:
                return json_error(409, f"box {box_name!r} is already on {target}")
            reply = await self.peers.post_update(source, update_document([Move(target, box=box_name)],
                                                                         origin="optimizer"), timeout=MOVE_TIMEOUT)
        except PeerRefused as exc:
            return json_error(502, f"{exc.target}: {exc.payload.get('error') or exc}")
        except PeerUnreachable as exc:
            return json_error(503, str(exc))
        return web.json_response({"box": name, "from": source, "node": target, "reply": reply})

    async def connect(self, request: web.Request) -> web.Response:
        try:
            body = await request.json()
            sink, port, expression = str(body["box"]), int(body.get("port", 0)), str(body["expression"])
            name, upstream = str(body.get("name") or f"{sink}_filter"), bool(body.get("upstream", False))
        except (ValueError, KeyError, TypeError) as exc:
            return json_error(422, f'send JSON {{"box": ..., "port": N, "expression": ..., "name": ...}}: {exc}')
        catalog = self.head.catalog
        box = catalog.boxes.get(sink)
        if box is None:
            return json_error(404, f"no box {sink!r} in the catalog (version {catalog.version})")
        if not box.node:
            return json_error(409, f"box {sink!r} is not deployed on any node")
        if not 0 <= port < len(box.inputs):
            return json_error(422, f"box {sink!r} has in ports 0-{len(box.inputs) - 1}, not {port}")
        if name in catalog.boxes or name in catalog.inputs or any(name in b.outputs for b in catalog.boxes.values()):
            return json_error(409, f"{name!r} is taken: name the filter (and the stream it writes) otherwise")
        update = etree.Element("update", origin="optimizer")
        connect = etree.SubElement(update, "connect", box=sink, port=str(port))
        if upstream:
            connect.set("upstream", "1")
        inserted = etree.SubElement(connect, "box", name=name, type="filter")
        etree.SubElement(inserted, "in", stream=box.inputs[port].stream)
        etree.SubElement(inserted, "out", stream=name)
        etree.SubElement(inserted, "parameter", name="expression.0", value=expression)
        try:
            reply = await self.peers.post_update(box.node, etree.tostring(update, encoding="unicode"),
                                                 timeout=MOVE_TIMEOUT)
        except PeerRefused as exc:
            return json_error(502, f"{exc.target}: {exc.payload.get('error') or exc}",
                              diagnostics=exc.payload.get("diagnostics", []))
        except PeerUnreachable as exc:
            return json_error(503, str(exc))
        return web.json_response({"box": name, "before": sink, "port": port, "stream": name, "reply": reply})

    async def disconnect(self, request: web.Request) -> web.Response:
        try:
            stream = str((await request.json())["stream"])
        except (ValueError, KeyError, TypeError) as exc:
            return json_error(422, f'send JSON {{"stream": ...}}: {exc}')
        catalog = self.head.catalog
        sinks = [b for b in catalog.boxes.values() if any(p.stream == stream for p in b.inputs)]
        producer = next((b for b in catalog.boxes.values() if stream in b.outputs), None)
        if len(sinks) != 1 or producer is None or not sinks[0].node:
            return json_error(409, f"stream {stream!r} is not a stream a connect added (one box writes it, "
                                   "one box reads it)")
        try:
            reply = await self.peers.post_update(sinks[0].node, update_document([Disconnect(stream)],
                                                                                origin="optimizer"),
                                                 timeout=MOVE_TIMEOUT)
        except PeerRefused as exc:
            return json_error(502, f"{exc.target}: {exc.payload.get('error') or exc}")
        except PeerUnreachable as exc:
            return json_error(503, str(exc))
        return web.json_response({"stream": stream, "removed": producer.name, "reply": reply})
