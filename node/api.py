"""A node's HTTP interface: the routes it serves and their handlers.

Mutating calls need the cluster token:

* ``POST /update``  -- update XML; 200 ``{"version", "applied"}``, 409 with
  ``rejections`` when it names something not here (nothing applied), 422
  when it is not valid update XML.  ``<move>``, ``<connect>`` and
  ``<disconnect>`` from optimizers change the topology from here
  (:mod:`~boreas.node.mover`, :mod:`~boreas.node.connector`);
* ``POST /handover`` -- a box moving in, with its state;
* ``POST /snapshot`` -- capture the boxes' state for snapshot N (the Head
  asks; 409 without a data directory);
* ``POST /adopt``   -- failover: take over every box of a failed node from
  its shared data directory (:mod:`~boreas.node.adopt`);
* ``GET /query/{box}`` -- READ_SLICE/SUM/MIN/MAX/STABLE on an ``m3``
  box's maps (:mod:`boreas.node.query`), ``GET /query/{box}/maps`` lists them,
  ``GET /segments/{box}`` counts a partitioned box's entries per segment;
* ``GET /catalog``  -- the local catalog as update XML;
* ``GET /status``   -- endpoint, incarnation, version and counters;
  ``GET /metrics`` the same figures for Prometheus (:mod:`.metrics`),
  ``GET /healthz`` and ``GET /readyz`` liveness and readiness
  (:mod:`.readiness`), ``GET /openapi.json`` this list as OpenAPI 3;
* ``GET /data``     -- WebSocket: batches of tuples for the streams that
  enter this node (:mod:`boreas.wire.receiver`); publishers and upstream
  nodes send here.

A mixin of :class:`~boreas.node.service.NodeService`, which owns the state
the handlers read and change (the local catalog, the dataflow, the mover,
the connector, the adopter, the durability) and registers these routes
once, when it is built (:meth:`NodeApi._add_routes`).
"""

from __future__ import annotations

import asyncio
import logging
import time
from pathlib import Path

import msgspec
from aiohttp import web
from boreas.catalog.diagnostics import ValidationFailed
from boreas.catalog.documents import Connect, Disconnect, Move, Update, read_document
from boreas.catalog.replicate import Rejection, UpdateRejected
from boreas.catalog.xmlsafe import DeadlineExceeded
from boreas.wire.health import Health
from boreas.wire.metrics import add_metrics_route
from boreas.wire.move_report import serial_id
from boreas.wire.openapi import add_openapi_route, describe_routes
from boreas.wire.server import json_error

from .adopt_claim import AdoptionRefused
from .api_docs import NODE_DOCS
from .connector import ConnectRefused
from .cumulus.api import SegmentsApi
from .gcpause import bulk_update
from .mover import MoveFailed, companions
from .readiness import node_checks

log = logging.getLogger("boreas.node.service")  # the node's records keep their logger

UPDATE_BUDGET = 10.0  # seconds an update document may take to parse and validate


class NodeApi:

    def _add_routes(self) -> None:
        """Register every route of the node's listener (once, from ``NodeService.__init__``)."""
        endpoint = self.endpoint
        router = self.server.app.router
        router.add_post("/update", self.handle_update)
        router.add_get("/catalog", self.handle_catalog)
        router.add_get("/status", self.handle_status)
        router.add_get("/data", self.handle_data)
        # Data connections live as long as their sender: closed first when the server stops, or its
        # shutdown waits out every handler (senders reconnect and resend what was not acknowledged).
        self.server.app.on_shutdown.append(lambda app: self.receiver.close_all())
        router.add_post("/handover", self.handle_handover)
        router.add_post("/snapshot", self.handle_snapshot)
        router.add_post("/adopt", self.handle_adopt)
        self.queries.add_routes(router)  # GET /query/{box}: the m3 boxes' maps, and GET /query/{box}/maps
        SegmentsApi(self.dataflow, endpoint, report=self._report).add_routes(router)  # /segments/{box}
        describe_routes(self.server.app, NODE_DOCS)  # what each route above takes and answers
        Health(f"node {endpoint}", node_checks(self)).add_routes(self.server.app)  # /healthz, /readyz
        add_metrics_route(self.server.app, self.server.registry)
        add_openapi_route(self.server.app, f"Boreas node {endpoint}", "A node's HTTP API (docs/api.md).")

    async def handle_update(self, request: web.Request) -> web.Response:
        body = await request.read()
        try:  # off the event loop, within a time budget: data keeps flowing meanwhile
            # Named uniquely: a refusal counts only the problems found in this document's elements.
            self.local.counters["updates_read"] += 1
            source = f"update XML #{self.local.counters['updates_read']} from {request.remote}"
            with bulk_update(len(body)):  # (a deployment's part: node/gcpause.py)
                update = await asyncio.to_thread(read_document, body, source,
                                                 deadline=time.monotonic() + UPDATE_BUDGET)
        except DeadlineExceeded as exc:
            self.local.counters["updates_too_slow"] += 1
            return json_error(413, f"update XML took longer than {UPDATE_BUDGET:g} s to validate",
                              diagnostics=[d.as_dict() for d in exc.diagnostics])
        except ValidationFailed as exc:
            self.local.counters["updates_invalid"] += 1
            return json_error(422, "invalid update XML",
                              diagnostics=[d.as_dict() for d in exc.diagnostics])
        if not isinstance(update, Update):
            return json_error(422, "a node accepts update XML (<update>), not application or deployment XML")
        moves = [i for i in update.items if isinstance(i, Move)]
        if moves:
            return await self._moves(update, moves)
        changes = [i for i in update.items if isinstance(i, (Connect, Disconnect))]
        if changes:
            return await self._connects(update, changes)
        moved = self.mover.recently_moved(update.items)
        if moved:  # the Head has not heard of the move yet: a pending request (paper 3.1.2)
            return json_error(409, f"box {moved[0].key!r} moved away from {self.endpoint}",
                              rejections=[r.as_dict() for r in moved])
        async with self.update_lock:
            try:
                candidate = self.local.preview(update)
            except UpdateRejected as exc:
                return json_error(409, str(exc), rejections=[r.as_dict() for r in exc.rejections])
            with bulk_update(len(body)):
                problems = self.dataflow.refusals(candidate, source, touched=self.local.touched)
                if not problems:
                    catalog = self.local.apply(update, candidate)
                    serial = self.local.serial  # (this change's: a move report is matched against it)
                    self.dataflow.reconfigure(catalog)
            if problems:  # all or nothing: a box this node cannot run refuses the whole update
                self.local.refused()
                log.warning("node %s refused an update: %s", self.endpoint, problems[0]["reason"])
                return json_error(422, f"node {self.endpoint} cannot run this update: {problems[0]['reason']}",
                                  diagnostics=problems)
            self.catalog_changed()
            self.reflector.reflect(catalog, update.items)
        return web.json_response({"endpoint": self.endpoint, "version": catalog.version,
                                  "applied": len(update.items), "incarnation": self.incarnation,
                                  "serial": serial})

    async def _moves(self, update: Update, moves: list[Move]) -> web.Response:
        """``<move box node>``: an optimizer (or the Head) asks this node to move a box it holds."""
        if len(moves) != len(update.items) or any(m.box is None for m in moves):
            return json_error(422, "send <move box=... node=...> on its own (a table moves with its boxes: move one of them)")
        missing = [m.box for m in moves if m.box not in self.local.catalog.boxes]
        if missing:
            rejections = [Rejection(i, "box", m.box or "", f"box {m.box!r} is not here")
                          for i, m in enumerate(moves) if m.box in missing]
            return json_error(409, f"box {missing[0]!r} is not on node {self.endpoint}",
                              rejections=[r.as_dict() for r in rejections])
        version = self.local.version
        moved = [[name, m.node] for m in moves for name in companions(self.local.catalog, m.box or "")]
        async with self.update_lock:
            for move in moves:
                with self.metrics.timed("move") as outcome:
                    try:
                        version = await self.mover.move_out(move.box or "", move.node)
                    except MoveFailed as exc:
                        return json_error(502, str(exc))
                    outcome["outcome"] = "done"
        return web.json_response({"endpoint": self.endpoint, "version": version,
                                  "moved": list({name: [name, node] for name, node in moved}.values())})

    async def _connects(self, update: Update, changes: list) -> web.Response:
        """``<connect>`` / ``<disconnect>``: insert or remove a filter box (paper 3.2)."""
        if len(changes) != 1 or len(update.items) != 1:
            return json_error(422, "send one <connect> or <disconnect> on its own")
        change = changes[0]
        if isinstance(change, Disconnect) and not change.stream:
            return json_error(422, "<disconnect> needs stream=: the stream the connect added")
        with self.metrics.timed("connect" if isinstance(change, Connect) else "disconnect") as outcome:
            try:
                if isinstance(change, Connect):
                    done = await self.connector.connect(change)
                else:
                    done = await self.connector.disconnect(change.stream)
            except ConnectRefused as exc:
                return json_error(exc.status, str(exc))
            outcome["outcome"] = "done"
        return web.json_response({"endpoint": self.endpoint, "version": self.local.version, **done})

    async def handle_handover(self, request: web.Request) -> web.Response:
        try:
            written = await self.mover.move_in(await request.read())
        except (msgspec.DecodeError, TypeError, KeyError, AssertionError) as exc:
            return json_error(400, f"not a handover (msgpack [update XML, box state]): {exc!r}")
        except (ValidationFailed, UpdateRejected, ValueError) as exc:
            return json_error(422, f"cannot take the box: {exc}")
        return web.json_response({"endpoint": self.endpoint, "version": written.version,
                                  "incarnation": self.incarnation, "base": written.base, "serial": written.serial,
                                  **({"items": written.items} if written.items is not None else {})})

    async def handle_catalog(self, request: web.Request) -> web.Response:
        text = self.local.as_update_xml(id=serial_id(self.incarnation, self.local.serial))
        return web.Response(text=text, content_type="application/xml")

    async def handle_status(self, request: web.Request) -> web.Response:
        catalog = self.local.catalog
        return web.json_response({
            "endpoint": self.endpoint,
            "incarnation": self.incarnation,
            "version": catalog.version,
            "boxes": sorted(catalog.boxes),
            "counters": dict(self.local.counters),
            "regions": self.reflector.status(),
            "tasks": self.tasks.status(),
            "head_reports": self.head_reports.stats() if self.head_reports else None,
            "recovery": ({**self.durability.status(), "shared": self.shared_dir, "fenced_by": self.fenced,
                          "adopted": self.adopter.adopted} if self.durability else {"durable": False}),
            "http": dict(self.server.counters),
            "data": {"in": dict(self.receiver.counters), "flow": dict(self.dataflow.counters),
                     "links": {e: {**link.counters, "connected": link.connected}
                               for e, link in self.dataflow.out.links.items()},
                     "broken_boxes": self.dataflow.state.broken,
                     "box_counters": {name: c for name, op in self.dataflow.operators.items() if (c := op.counters())},
                     "box_entries": {name: n for name, op in self.dataflow.operators.items()
                                     if (n := op.state_entries()) is not None},
                     # an m3 box's backend: "native" (compiled C) or "python", with why it fell back
                     "box_backends": {name: {"backend": op.backend, "reason": op.backend_reason}
                                      for name, op in self.dataflow.operators.items() if hasattr(op, "backend")},
                     "moved_boxes": {b: {"next": [list(p) for p in i.box_positions()],
                                         "held": [[s, p, n] for s, p, n, _ in i.held_items()]}
                                     for b, i in self.dataflow.state.inputs.items()},
                     "forwards": {s: link.forward_to_box for s, link in self.dataflow.out.forwards.items()},
                     "move_pauses": self.dataflow.state.move_pauses},
        })

    async def handle_data(self, request: web.Request) -> web.StreamResponse:
        await self.recovered.wait()  # no data is taken before the log has been replayed
        return await self.receiver.handle(request)

    async def handle_snapshot(self, request: web.Request) -> web.Response:
        """``POST /snapshot {"id": N}``: capture the boxes' state for snapshot N (the Head asks)."""
        if self.durability is None:
            return json_error(409, f"node {self.endpoint} runs without --data-dir: it keeps no snapshots")
        try:
            snapshot_id = int((await request.json())["id"])
        except (ValueError, KeyError, TypeError):
            return json_error(400, 'expected JSON {"id": snapshot number}')
        await self.recovered.wait()
        taken = await self.durability.snapshot(self.dataflow, snapshot_id)
        self.metrics.snapshot_taken(taken)
        return web.json_response(taken)

    async def handle_adopt(self, request: web.Request) -> web.Response:
        """``POST /adopt {"node", "data_dir", "snapshots"}``: the Head fails a dead node over to this one."""
        try:
            body = await request.json()
            source, directory = str(body["node"]), Path(str(body["data_dir"]))
            snapshots = body.get("snapshots")
        except (ValueError, KeyError, TypeError):
            return json_error(400, 'expected JSON {"node": endpoint, "data_dir": path, "snapshots": url}')
        await self.recovered.wait()
        try:
            report = await self.adopter.adopt(source, directory, snapshots)
        except AdoptionRefused as exc:
            return json_error(409, str(exc))
        except (UpdateRejected, ValidationFailed) as exc:
            return json_error(409, f"cannot declare the boxes of {source} here: {exc}")
        return web.json_response({"endpoint": self.endpoint, "version": self.local.version, **report})

