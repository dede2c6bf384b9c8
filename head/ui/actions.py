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

The three changes go through :class:`boreas.client.optimizer.Optimizer`,
deciding on the Head's own catalog, so they are refused for the same
reasons as from the command line.  Errors are JSON ``{"error"}`` with the
optimizer's status: 404 for an unknown box, 409 for a change that makes no
sense (already there, not a member, a name taken), 422 for a bad request,
502 when the node refused (with its ``diagnostics``) and 503 when it could
not be reached.
"""

from __future__ import annotations

import asyncio
from typing import Any

from aiohttp import web
from boreas.catalog.endpoints import normalize_endpoint
from boreas.client.optimizer import CatalogView, Optimizer, OptimizerFailed
from boreas.client.query import QueryClient, QueryFailed
from boreas.wire.addressing import endpoint_url
from boreas.wire.client import PeerClient, PeerError
from boreas.wire.server import json_error

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
        return endpoint_url(f"{host}:{server.port}")  # https with TLS on

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

    def _optimizer(self) -> Optimizer:
        """Changes decided on the Head's own catalog; answered once the node did (the feed shows the commit)."""
        return Optimizer(self._head_url(), self.head.server.token, MOVE_TIMEOUT, peers=self.peers,
                         view=CatalogView(lambda: self.head.catalog))

    async def move(self, request: web.Request) -> web.Response:
        try:
            body = await request.json()
            name, target = str(body["box"]), normalize_endpoint(str(body["node"]))
        except (ValueError, KeyError, TypeError) as exc:
            return json_error(422, f'send JSON {{"box": ..., "node": ...}}: {exc}')
        try:
            moved = await self._optimizer().move(name, target)
        except OptimizerFailed as exc:
            return _failed(exc)
        if moved.relayout is not None:
            reply = moved.relayout
            return web.json_response({"box": name, "node": target, "layout": reply.get("layout"),
                                      "moves": reply.get("moves"), "seconds": reply.get("seconds")})
        return web.json_response({"box": name, "from": moved.source, "node": target, "reply": moved.reply})

    async def connect(self, request: web.Request) -> web.Response:
        try:
            body = await request.json()
            sink, port, expression = str(body["box"]), int(body.get("port", 0)), str(body["expression"])
            name, upstream = str(body.get("name") or f"{sink}_filter"), bool(body.get("upstream", False))
        except (ValueError, KeyError, TypeError) as exc:
            return json_error(422, f'send JSON {{"box": ..., "port": N, "expression": ..., "name": ...}}: {exc}')
        try:
            reply = await self._optimizer().insert_filter(sink, expression, port, name, upstream)
        except OptimizerFailed as exc:
            return _failed(exc)
        return web.json_response({"box": name, "before": sink, "port": port, "stream": name, "reply": reply})

    async def disconnect(self, request: web.Request) -> web.Response:
        try:
            stream = str((await request.json())["stream"])
        except (ValueError, KeyError, TypeError) as exc:
            return json_error(422, f'send JSON {{"stream": ...}}: {exc}')
        try:
            reply = await self._optimizer().disconnect(stream)
        except OptimizerFailed as exc:
            return _failed(exc)
        return web.json_response({"stream": stream, "removed": reply.get("removed"), "reply": reply})


def _failed(exc: OptimizerFailed) -> web.Response:
    if exc.diagnostics:
        return json_error(exc.status, str(exc), diagnostics=exc.diagnostics)
    return json_error(exc.status, str(exc))
