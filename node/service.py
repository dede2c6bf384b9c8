"""A Boreas node: one listening endpoint for update XML (and, later, data).

The node holds its :class:`~boreas.node.local_catalog.LocalCatalog` and
changes it only with the update XML it is sent.  It registers with the Head
and keeps telling it that it is alive; each process start has a fresh
*incarnation*, which is how the Head tells a node that restarted empty from
one that merely missed a heartbeat.  With the ZooKeeper store the node also
holds an ephemeral znode for as long as it lives.

HTTP interface (mutating calls need the cluster token):

* ``POST /update``  -- update XML; 200 ``{"version", "applied"}``, 409 with
  ``rejections`` when it names something not here (nothing applied), 422
  when it is not valid update XML.  ``<move>``, ``<connect>`` and
  ``<disconnect>`` from optimizers change the topology from here
  (:mod:`~boreas.node.mover`, :mod:`~boreas.node.connector`);
* ``POST /handover`` -- a box moving in, with its state;
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

Usage::

    node = NodeService("localhost:15000", head="http://localhost:14000", token="s3cret")
    await node.start()
    ...
    await node.close()
"""

from __future__ import annotations

import asyncio
import gc
import json
import logging
import time
import uuid
from pathlib import Path

import msgspec
from aiohttp import web
from boreas.catalog.diagnostics import ValidationFailed
from boreas.catalog.documents import Connect, Disconnect, Move, Update, read_document
from boreas.catalog.endpoints import split_endpoint
from boreas.catalog.model import Catalog
from boreas.catalog.replicate import Rejection, UpdateRejected, update_items
from boreas.catalog.xmlsafe import DeadlineExceeded
from boreas.m3.boxtype import box_types
from boreas.wire.client import PeerClient, PeerError
from boreas.wire.health import Health
from boreas.wire.metrics import add_metrics_route
from boreas.wire.openapi import add_openapi_route, describe_routes
from boreas.wire.receiver import DataReceiver
from boreas.wire.server import HttpServer, json_error
from boreas.wire.supervisor import Supervisor

from .adopt import Adopter, AdoptionRefused, archive_adopted, claimed_by
from .api_docs import NODE_DOCS
from .connector import ConnectRefused, FilterConnector
from .cumulus.api import SegmentsApi
from .dataflow import Dataflow
from .gcpause import gc_paused
from .head_reports import HeadReports
from .local_catalog import LocalCatalog
from .metrics import NodeMetrics
from .mover import BoxMover, MoveFailed
from .query import QueryApi
from .readiness import node_checks
from .recovery.durability import FLUSH_EVERY, FLUSH_MS, Durability
from .reflect import Reflector

log = logging.getLogger(__name__)

HEARTBEAT_INTERVAL = 1.0
UPDATE_BUDGET = 10.0  # seconds an update document may take to parse and validate


def freeze_startup_heap() -> None:
    """Leave what the node holds once started out of every later garbage collection.

    The modules, the app, the routes and a recovered node's box state live as
    long as the process; a full (generation 2) collection walked all of them
    again each time: ~90,000 objects, 75-87 ms on the 2-core benchmark machine
    (65-100 ms in bench/dataplane.py --probe's nodes), a pause every batch in
    flight waited out.  Frozen, a full collection walks only what came after
    startup (well under a millisecond for an idle node).  Collected first, so
    no garbage is frozen.
    """
    gc.collect()
    gc.freeze()


class NodeService:
    """A node process's state and lifecycle: ``start()``, ``close()``."""

    def __init__(self, endpoint: str, head: str | None, token: str | None,
                 heartbeat: float = HEARTBEAT_INTERVAL, data_dir: Path | None = None,
                 snapshot_url: str | None = None, group_commit: tuple[int, float] = (FLUSH_EVERY, FLUSH_MS),
                 shared_dir: bool = False):
        self.endpoint = endpoint
        self.head = head
        self.incarnation = uuid.uuid4().hex
        self.local = LocalCatalog(endpoint)
        self.heartbeat = heartbeat
        self.server = HttpServer(f"node {endpoint}", token)
        self.peers = PeerClient(token, timeout=5.0)
        self.registered = asyncio.Event()
        self.heartbeat_answered: float | None = None  # when the Head last answered (readiness)
        self.head_sync: dict | None = None  # the Head's word on our sync, from its last answer
        # The box types this node runs: built once here, passed to everything that checks a slice.
        self.box_types = box_types()
        self.dataflow = Dataflow(endpoint, token, sender=f"{endpoint}#{self.incarnation[:12]}",
                                 box_types=self.box_types)
        self.metrics = NodeMetrics(self)  # views of the counters below, read when /metrics is scraped
        self.receiver = DataReceiver(self.metrics.counting(self.dataflow.accept), token)
        # With a data dir the node is durable: it logs what it takes and comes back after a crash.
        self.durability = (Durability(data_dir, snapshot_url, flush_every=group_commit[0], flush_ms=group_commit[1])
                           if data_dir is not None else None)
        self.recovered = asyncio.Event()
        # A data dir on shared storage lets another node adopt this node's boxes if it stays down.
        self.shared_dir = shared_dir and data_dir is not None
        self.fenced: str | None = None  # another node adopted our boxes: we stopped running them
        self.adopter = Adopter(self)
        self._members = None  # ZooKeeperMembers when the Head's store is ZooKeeper
        self.update_lock = asyncio.Lock()  # one update at a time, in arrival order
        self.mover = BoxMover(self)
        # Every background task of the node is owned here: one that dies is logged and restarted.
        self.tasks = Supervisor(f"node {endpoint}")
        self.reflector = Reflector(endpoint, self.peers, self.tasks)
        self.head_reports: HeadReports | None = None  # moves and connects, in order, to the Head
        self.connector = FilterConnector(self)
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
        self.queries = QueryApi(self.dataflow, endpoint)  # GET /query/{box}: the m3 boxes' maps
        self.queries.add_routes(router)  # and GET /query/{box}/maps
        SegmentsApi(self.dataflow, endpoint, report=self._report).add_routes(router)  # /segments/{box}
        describe_routes(self.server.app, NODE_DOCS)  # what each route above takes and answers
        Health(f"node {endpoint}", node_checks(self)).add_routes(self.server.app)  # /healthz, /readyz
        add_metrics_route(self.server.app, self.server.registry)
        add_openapi_route(self.server.app, f"Boreas node {endpoint}", "A node's HTTP API (docs/api.md).")

    async def start(self) -> None:
        host, port = split_endpoint(self.endpoint)
        if self.durability is None:
            await self.dataflow.start()
            self.recovered.set()
        await self.server.start(host, port)
        if self.head:
            self.head_reports = HeadReports(self.head, self.peers, self.endpoint)
            self.tasks.spawn("heartbeat", self._heartbeats)
        if self.shared_dir:
            self.tasks.spawn("fence", self._watch_claim)
        if self.durability is not None:
            await self._recover(self.durability)
        freeze_startup_heap()

    async def _recover(self, durable: Durability) -> None:
        """Come back as the node was: identity, local catalog, box state, then the log since.

        The listener is already up (the Head sees "recovering"), but data
        connections and updates wait until the replay is done.
        """
        started = time.monotonic()
        durable.state = "recovering"
        flow = self.dataflow
        async with self.update_lock:
            await asyncio.to_thread(archive_adopted, durable.dir)  # our boxes run elsewhere now
            await durable.open()
            identity = durable.load_identity()
            if identity is not None:
                flow.sender = identity["sender"]
                flow.state.adopt_identity(identity["boxes"])
            else:
                durable.save_identity(flow.sender, flow.state.box_ids)
            flow.state.on_new_box_id = lambda: durable.save_identity(flow.sender, flow.state.box_ids)
            text = durable.load_catalog()
            if text is not None:
                update = read_document(text, f"{durable.dir}/catalog.xml")
                assert isinstance(update, Update)
                flow.reconfigure(self.local.apply(update))
            captured = durable.latest_snapshot()
            start = durable.log.first_position
            if captured is not None:
                with gc_paused():
                    restored = flow.restore_capture(captured)
                start = captured["position"]
                durable.restored_from = durable.last_snapshot = int(captured["snapshot"])
                log.info("node %s: restored %d boxes from snapshot %d", self.endpoint, len(restored),
                         captured["snapshot"])
            await flow.start(run=False)  # links up: replayed outputs go out (receivers drop what they have)
            durable.replayed = await flow.replay_log(durable.log.read(start))
            for (stream, producer), seq in flow.state.processed.items():
                self.receiver.sequencer.expect(stream, producer, seq + 1)
            flow.journal = durable.log
            flow.run()
        durable.state = "ready"
        durable.recovery_seconds = round(time.monotonic() - started, 3)
        self.recovered.set()
        log.info("node %s recovered in %.2f s: %d batches replayed from log position %d", self.endpoint,
                 durable.recovery_seconds, durable.replayed, start)

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

    async def _watch_claim(self) -> None:
        """Every heartbeat interval, whether or not the Head answers: were our boxes adopted?"""
        while self.fenced is None:
            await asyncio.sleep(self.heartbeat)
            await self._fence_if_adopted()

    async def _fence_if_adopted(self) -> None:
        """Our boxes were adopted (we were taken for dead): stop running them, never both."""
        durable = self.durability
        if durable is None or self.fenced is not None or not self.shared_dir:
            return
        owner = await asyncio.to_thread(claimed_by, durable.dir)
        if owner is None or owner == self.endpoint:
            return
        self.fenced = owner
        durable.state = "adopted"
        log.critical("node %s: its boxes were adopted by %s (it was taken for dead); it stops processing",
                     self.endpoint, owner)
        await self.dataflow.close()

    def catalog_changed(self) -> None:
        """The local catalog changed: keep the durable copy current (a restart starts from it)."""
        if self.durability is not None:
            self.durability.save_catalog(self.local.as_update_xml())

    def _report(self, item: object) -> None:
        """A change this node made itself (a partitioned box's new layout) for the Head to commit."""
        if self.head_reports is not None:
            self.head_reports.report(item)

    async def close(self) -> None:
        await self.server.close()
        if self.head_reports is not None:
            await self.head_reports.close()
        await self.reflector.close()
        await self.tasks.close()
        await self.dataflow.close()
        if self.durability is not None:
            await self.durability.close()
        await self.peers.close()
        if self._members is not None:
            await asyncio.to_thread(self._members.close)

    # -- HTTP ---------------------------------------------------------------

    async def handle_update(self, request: web.Request) -> web.Response:
        body = await request.read()
        try:  # off the event loop, within a time budget: data keeps flowing meanwhile
            # Named uniquely: a refusal counts only the problems found in this document's elements.
            self.local.counters["updates_read"] += 1
            source = f"update XML #{self.local.counters['updates_read']} from {request.remote}"
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
            problems = self.dataflow.refusals(candidate, source)
            if problems:  # all or nothing: a box this node cannot run refuses the whole update
                self.local.refused()
                log.warning("node %s refused an update: %s", self.endpoint, problems[0]["reason"])
                return json_error(422, f"node {self.endpoint} cannot run this update: {problems[0]['reason']}",
                                  diagnostics=problems)
            catalog = self.local.apply(update, candidate)
            self.dataflow.reconfigure(catalog)
            self.catalog_changed()
            self.reflector.reflect(catalog, update.items)
        return web.json_response({"endpoint": self.endpoint, "version": catalog.version,
                                  "applied": len(update.items)})

    async def _moves(self, update: Update, moves: list[Move]) -> web.Response:
        """``<move box node>``: an optimizer (or the Head) asks this node to move a box it holds."""
        if len(moves) != len(update.items) or any(m.box is None for m in moves):
            return json_error(422, "send <move box=... node=...> on its own (tables do not move yet)")
        missing = [m.box for m in moves if m.box not in self.local.catalog.boxes]
        if missing:
            rejections = [Rejection(i, "box", m.box or "", f"box {m.box!r} is not here")
                          for i, m in enumerate(moves) if m.box in missing]
            return json_error(409, f"box {missing[0]!r} is not on node {self.endpoint}",
                              rejections=[r.as_dict() for r in rejections])
        version = self.local.version
        async with self.update_lock:
            for move in moves:
                with self.metrics.timed("move") as outcome:
                    try:
                        version = await self.mover.move_out(move.box or "", move.node)
                    except MoveFailed as exc:
                        return json_error(502, str(exc))
                    outcome["outcome"] = "done"
        return web.json_response({"endpoint": self.endpoint, "version": version,
                                  "moved": [[m.box, m.node] for m in moves]})

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

    def apply_local(self, items: list, reflect: list | None = None, keep_state: tuple[str, ...] = ()) -> int:
        """A change this node makes to its own local catalog (a box moved in or away, a filter).

        Regions are sent ``reflect`` (by default the items themselves);
        boxes in ``keep_state`` keep their state though their declaration changed.
        """
        catalog = self.local.apply(Update("local change", self.local.version, self.endpoint, items=items))
        self.dataflow.reconfigure(catalog, keep_state)
        self.catalog_changed()
        self.reflector.reflect(catalog, items if reflect is None else reflect)
        return catalog.version

    def restore_local(self, earlier: Catalog, keep_state: tuple[str, ...] = ()) -> int:
        """Undo local changes: back to ``earlier`` (as a change of its own, so regions follow)."""
        return self.apply_local(update_items(self.local.catalog, earlier), keep_state=keep_state)

    async def handle_handover(self, request: web.Request) -> web.Response:
        try:
            version = await self.mover.move_in(await request.read())
        except (msgspec.DecodeError, TypeError, KeyError, AssertionError) as exc:
            return json_error(400, f"not a handover (msgpack [update XML, box state]): {exc!r}")
        except (ValidationFailed, UpdateRejected, ValueError) as exc:
            return json_error(422, f"cannot take the box: {exc}")
        return web.json_response({"endpoint": self.endpoint, "version": version})

    async def handle_catalog(self, request: web.Request) -> web.Response:
        return web.Response(text=self.local.as_update_xml(), content_type="application/xml")

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

    # -- membership ---------------------------------------------------------

    async def _heartbeats(self) -> None:
        """Register, then keep telling the Head we are alive; survive Head restarts."""
        assert self.head
        url = f"{self.head}/members"
        announced = False
        while True:
            body = {"endpoint": self.endpoint, "incarnation": self.incarnation,
                    "version": self.local.version,
                    "recovery": self._recovery_summary()}
            try:
                reply = await self.peers.call("POST", url, json_body=body)
            except PeerError as exc:
                if announced:
                    log.warning("node %s: heartbeat to Head failed: %s", self.endpoint, exc)
                announced = False
            else:
                if not announced:
                    log.info("node %s registered with the Head at %s", self.endpoint, self.head)
                announced = True
                self.registered.set()
                self.heartbeat_answered = time.monotonic()
                self.head_sync = {k: reply.get(k) for k in ("in_sync", "desired_version")}
                if self.durability is not None and reply.get("snapshot_complete"):
                    self.durability.completed(int(reply["snapshot_complete"]))
                await self._join_zookeeper(reply.get("membership"))
            await asyncio.sleep(self.heartbeat)

    def _recovery_summary(self) -> dict:
        durable = self.durability
        if durable is None:
            return {"durable": False}
        shared = {"shared": True, "data_dir": str(durable.dir.resolve()), "snapshots": durable.snapshots.url} \
            if self.shared_dir else {"shared": False}
        return {"durable": True, **shared, "state": durable.state, "last_snapshot": durable.last_snapshot,
                "restored_from": durable.restored_from, "replayed_batches": durable.replayed,
                "recovery_seconds": durable.recovery_seconds}

    async def _join_zookeeper(self, url: str | None) -> None:
        if not url or self._members is not None:
            return
        from boreas.catalog.store.membership import ZooKeeperMembers

        data = json.dumps({"incarnation": self.incarnation}).encode()
        try:
            members = await asyncio.to_thread(ZooKeeperMembers, url)
            await asyncio.to_thread(members.join, self.endpoint, data)
        except Exception as exc:  # membership is best effort; heartbeats still work
            log.warning("node %s could not join ZooKeeper membership: %s", self.endpoint, exc)
            return
        self._members = members

