"""The Head's HTTP interface (the paper's RPC), over :class:`~boreas.head.service.HeadService`.

Mutating calls need the cluster token (checked before any handler runs):

* ``POST /submissions`` -- multipart/form-data, one part per application or
  deployment XML file (the part's filename names the file in errors), at
  most :data:`MAX_PARTS` of them.
  202 ``{"id", "version", "state"}``; 422 ``{"diagnostics": [...]}`` when
  anything is invalid, and then nothing was committed; 400 when the body is
  not well-formed multipart (no or wrong boundary, truncated, nested
  multipart parts), 415 when it is not multipart at all.
* ``POST /update`` -- update XML from components: ``<global endpoint>``
  registers a global component (or asks for a fresh full copy),
  ``<delete global=...>`` disconnects it; ``<region name endpoint>``
  registers a regional component; from nodes, ``<move box node>``,
  ``<connect>`` and ``<disconnect>`` report topology changes optimizers made.
* ``POST /members`` -- a node's heartbeat ``{"endpoint", "incarnation", "version"}``.

Documents are parsed and validated on a worker thread, never on the event
loop (a large document must not stall heartbeats and other requests), within
:data:`VALIDATION_BUDGET` seconds: a submission or update whose documents
take longer is refused with 413 and nothing is changed.  At most
``max_problems`` (100) diagnostics are returned, then one line counting the
rest.

Reads are open:

* ``GET /submissions/{id}?after=REVISION&wait=SECONDS`` -- status, per node;
  with ``wait`` the call returns once something changed (long poll);
* ``GET /catalog`` -- the global catalog as one update document;
* ``GET /nodes`` -- every node: alive, in sync, failures, pending requests;
* ``GET /status`` -- catalog version and counters;
* ``GET /boxes/{name}`` -- the box and the node it runs on (optimizers use it); a
  partitioned box runs on no one node (``"node": null``) and has its
  ``"partition"`` layout instead (:func:`partition_json`), else ``"partition": null``;
  with ``?node=N&wait=SECONDS`` it answers once the box is on N and every live node is in sync (long poll:
  :mod:`.box_wait`), adding ``"placed"`` and ``"lagging"``;
* ``GET /streams/{name}`` -- where a stream enters (for publishers: its
  ``<publish>`` nodes, else the nodes that consume it), which node produces
  it (for subscribers), and its schema;
* ``GET /metrics`` (Prometheus, :mod:`.metrics`), ``GET /healthz`` and
  ``GET /readyz`` (:mod:`boreas.wire.health`), ``GET /openapi.json`` (this
  list as OpenAPI 3, shapes in :mod:`.api_docs`).
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

import msgspec
from aiohttp import web
from boreas.catalog.words import unknown
from boreas.catalog.diagnostics import Diagnostic, ValidationFailed
from boreas.catalog.documents import (
    Application,
    Connect,
    Delete,
    Disconnect,
    Document,
    Move,
    Update,
    read_document,
)
from boreas.catalog.endpoints import normalize_endpoint
from boreas.catalog.model import GlobalComponent, Partition, Region
from boreas.catalog.replicate import catalog_items
from boreas.catalog.slices import stream_route
from boreas.catalog.store import StoreError
from boreas.catalog.updates import update_document
from boreas.catalog.xmlsafe import DEFAULT_LIMITS, DeadlineExceeded, capped
from boreas.wire.health import Health
from boreas.wire.metrics import add_metrics_route
from boreas.wire.move_report import MSGPACK, Written, decode_report
from boreas.wire.openapi import add_openapi_route, describe_routes
from boreas.wire.server import json_error

from .api_docs import HEAD_DOCS, UI_DOCS
from .box_wait import box_shown, wait_seconds
from .bulk import bulk_read
from .catalog_part import catalog_part
from .context import HeadContext
from .learning import moves_as_one
from .metrics import HeadMetrics, head_checks
from .request_files import submitted_files

log = logging.getLogger(__name__)

MAX_WAIT = 30.0

#: Seconds the documents of one request may take to parse and validate.
VALIDATION_BUDGET = 10.0


def install_routes(head: HeadContext) -> None:
    api = _Api(head, HeadMetrics(head))
    router = head.server.app.router
    router.add_post("/submissions", api.submit)
    router.add_get("/submissions/{id}", api.submission)
    router.add_post("/update", api.update)
    router.add_post("/members", api.members)
    router.add_get("/catalog", api.catalog)
    router.add_get("/nodes", api.nodes)
    router.add_get("/status", api.status)
    router.add_post("/snapshots", api.snapshot)
    router.add_get("/streams/{name}", api.stream)
    router.add_get("/boxes/{name}", api.box)
    describe_routes(head.server.app, HEAD_DOCS)  # what each route takes and answers
    describe_routes(head.server.app, UI_DOCS)  # and the web UI's (head/ui registers them)
    Health("head", head_checks(head)).add_routes(head.server.app)
    add_metrics_route(head.server.app, head.server.registry)
    add_openapi_route(head.server.app, "Boreas Head", "The Head's HTTP API (docs/api.md).")


def _kind(item: object) -> str:
    """The ``kind`` label of an item of ``POST /update`` (a bounded set: the element's kind)."""
    if isinstance(item, Delete):
        return "global"
    return {GlobalComponent: "global", Region: "region", Move: "move", Connect: "connect",
            Disconnect: "disconnect", Partition: "layout"}.get(type(item), "other")


def _invalid(problems: list[Diagnostic]) -> web.Response:
    problems = capped(problems, "submission", DEFAULT_LIMITS.max_problems)
    n = len(problems)
    return json_error(422, f"invalid: {n} problem{'s' if n != 1 else ''}; nothing was changed",
                      diagnostics=[p.as_dict() for p in problems])


class _Api:
    def __init__(self, head: HeadContext, metrics: HeadMetrics):
        self.head = head
        self.metrics = metrics

    async def _read(self, files: list[tuple[str, bytes]]) -> list[Document] | web.Response:
        """Parse and validate ``files`` on a worker thread, within the time budget."""
        budget = VALIDATION_BUDGET
        deadline = time.monotonic() + budget

        def read_all() -> tuple[list[Document], list[Diagnostic]]:
            with bulk_read(sum(len(data) for _, data in files)):  # (a deployment's part: all live objects)
                return read_each()

        def read_each() -> tuple[list[Document], list[Diagnostic]]:
            docs, problems = [], []
            for name, data in files:
                try:
                    docs.append(read_document(data, name, deadline=deadline))
                except DeadlineExceeded:
                    raise
                except ValidationFailed as exc:
                    problems += exc.diagnostics
            return docs, problems

        try:
            # The deadline stops the reading itself; wait_for is the backstop.
            docs, problems = await asyncio.wait_for(asyncio.to_thread(read_all), budget + 5.0)
        except (DeadlineExceeded, asyncio.TimeoutError) as exc:
            self.head.server.counters["too_slow"] += 1
            diagnostics = exc.diagnostics if isinstance(exc, DeadlineExceeded) else []
            return json_error(413, f"documents took longer than the budget of {budget:g} s to "
                                   "validate; nothing was changed (split them into smaller documents)",
                              diagnostics=[d.as_dict() for d in diagnostics])
        if problems:
            return _invalid(problems)
        return docs

    async def submit(self, request: web.Request) -> web.Response:
        """Validate application and deployment XML and commit it as one catalog version."""
        with self.metrics.timed_submission() as outcome, self.head.taking_submission():
            files = await submitted_files(request)
            if isinstance(files, web.Response):
                return files
            outcome["outcome"] = "invalid"
            docs = await self._read(files)
            if isinstance(docs, web.Response):
                return docs
            replacing = request.query.get("replace", "") in ("1", "true", "yes")
            for doc in docs:  # ?app=NAME (boreas submit --app): the application they declare
                if isinstance(doc, Application) and request.query.get("app"):
                    doc.name = request.query["app"]
            try:
                sub = await self.head.submit(docs, replacing=replacing)
            except ValidationFailed as exc:
                return _invalid(exc.diagnostics)
            except StoreError as exc:
                outcome["outcome"] = "store_error"
                return json_error(503, f"catalog store: {exc}")
            outcome["outcome"] = "committed"
        status = self.head.submissions.status(sub, self.head.syncs, self.head.pending)
        return web.json_response({**status, "revision": self.head.revision}, status=202)

    async def submission(self, request: web.Request) -> web.Response:
        try:  # one this Head took, or (after a failover) one whose record the store keeps
            sub = await self.head.submissions.find(request.match_info["id"], self.head.catalog.nodes)
        except StoreError as exc:
            return json_error(503, f"catalog store: {exc}")
        if sub is None:
            return json_error(404, f"no submission {request.match_info['id']!r}")
        try:
            after = int(request.query.get("after", -1))
            wait = min(float(request.query.get("wait", 0)), MAX_WAIT)
        except ValueError:
            return json_error(400, "after and wait must be numbers")
        if wait > 0:
            await self.head.wait_for_change(after, wait)
        status = self.head.submissions.status(sub, self.head.syncs, self.head.pending)
        return web.json_response({**status, "revision": self.head.revision})

    async def update(self, request: web.Request) -> web.Response:
        body = await request.read()
        written: list[Written] = []  # what each node wrote for the change it reports (wire/move_report.py)
        if request.content_type == MSGPACK:
            try:
                text, written = decode_report(body)
            except (msgspec.DecodeError, TypeError, ValueError) as exc:
                return json_error(400, f"not a move report (msgpack [update XML, [written, ...]]): {exc!r}")
            body = text.encode()
        docs = await self._read([(f"update XML from {request.remote}", body)])
        if isinstance(docs, web.Response):
            return docs
        doc = docs[0]
        if not isinstance(doc, Update):
            return json_error(422, "POST /update takes update XML; submit application and deployment "
                                   "XML to /submissions")
        unsupported = [i for i in doc.items
                       if not isinstance(i, (GlobalComponent, Move)) and not (isinstance(i, Delete) and i.global_)
                       and not (isinstance(i, Region) and i.is_registration)
                       and not isinstance(i, (Connect, Disconnect, Partition))]
        if unsupported:
            return json_error(422, "the Head takes <global>, <delete global=...>, <move>, <connect>, <disconnect>, "
                                   "<partition> (a partitioned box's new layout, from its leader) and <region "
                                   "name endpoint> (a regional component registering) in update XML; "
                                   f"{type(unsupported[0]).__name__} is changed by submitting application "
                                   "or deployment XML")
        done: list[dict[str, Any]] = []
        try:
            for item in moves_as_one(doc.items):
                with self.metrics.timed_learning(_kind(item[0] if isinstance(item, list) else item)):
                    await self._learn(item, done, written)
        except StoreError as exc:
            return json_error(503, f"catalog store: {exc}", done=done)
        return web.json_response({"version": self.head.catalog.version, "done": done})

    async def _learn(self, item: object, done: list[dict[str, Any]], written: list[Written]) -> None:
        """One item of ``POST /update``: a registration, or a change a node made and reports (``written``:
        with a move, connect or disconnect, what each node wrote for it)."""
        if isinstance(item, GlobalComponent):
            await self.head.registrations.register_global(item)
            done.append({"global": item.endpoint, "registered": True})
        elif isinstance(item, Delete):
            removed = await self.head.registrations.unregister_global(item.global_ or "")
            done.append({"global": item.global_, "removed": removed})
        elif isinstance(item, Region):
            await self.head.registrations.register_region(item)
            done.append({"region": item.region, "endpoint": item.endpoint})
        elif isinstance(item, Connect) and item.box.node:
            version = await self.head.learner.connect(item, written)
            done.append({"connect": item.box.name, "node": item.box.node, "version": version})
        elif isinstance(item, Disconnect) and item.stream:
            version = await self.head.learner.disconnect(item.stream, written)
            done.append({"disconnect": item.stream, "version": version})
        elif isinstance(item, list):  # moves a node made as one (moves_as_one)
            version = await self.head.learner.move([m.box for m in item], item[0].node, written)
            done += [{"move": m.box, "node": m.node, "version": version} for m in item]
        elif isinstance(item, Partition):
            version = await self.head.learner.layout(item)
            done.append({"partition": item.box, "layout": item.layout, "version": version})

    async def members(self, request: web.Request) -> web.Response:
        try:
            body = await request.json()
            endpoint = normalize_endpoint(str(body["endpoint"]))
            incarnation = str(body["incarnation"])
            version = int(body.get("version", 0))
            recovery = body.get("recovery")
            if recovery is not None and not isinstance(recovery, dict):
                raise TypeError("recovery must be an object")
        except (ValueError, KeyError, TypeError) as exc:
            return json_error(400, f"bad heartbeat: {exc}")
        self.head.heartbeat(endpoint, incarnation, version, recovery)
        store = self.head.store  # open: the routes serve only after start() opened it
        membership = store.membership_url if store is not None else None  # joined beside heartbeats
        sync = self.head.syncs.get(endpoint)  # the node's readiness: is it in sync, as the Head sees it
        return web.json_response({"membership": membership, "timeout": self.head.membership.timeout,
                                  "snapshot_complete": self.head.snapshots.complete_id or None,
                                  "in_sync": sync.in_sync if sync else None,
                                  "desired_version": sync.desired_version if sync else None})

    async def snapshot(self, request: web.Request) -> web.Response:
        """``POST /snapshots``: take a snapshot now (``boreas snapshot``); 200 when complete, else 503."""
        result = await self.head.snapshots.take()
        return web.json_response(result, status=200 if result["complete"] else 503)

    async def catalog(self, request: web.Request) -> web.Response:
        boxes, streams = request.query.getall("box", []), request.query.getall("stream", [])
        if boxes or streams:  # the part a change is about (head/catalog_part.py): its size, not the catalog's
            part = catalog_part(self.head.index, boxes, streams)
            text = update_document(catalog_items(part), version=part.version, origin=self.head.origin)
            return web.Response(text=text, content_type="application/xml", charset="utf-8")
        # Serialized once per catalog version (head/catalog_copy.py), not per request, off the event loop.
        with self.head.foreground.aside(request):  # (the build must not wait for this request: head/yielding.py)
            built = await self.head.copies.read()
        return web.Response(body=built.document, content_type="application/xml", charset="utf-8")

    async def nodes(self, request: web.Request) -> web.Response:
        head = self.head
        now = time.monotonic()
        rows = []
        for endpoint in sorted(set(head.syncs) | set(head.membership.known())):
            sync = head.syncs.get(endpoint)
            rows.append({
                "endpoint": endpoint,
                **head.membership.describe(endpoint, now),
                "in_catalog": endpoint in head.catalog.nodes,
                "boxes": len(sync.desired.boxes) if sync else 0,
                "desired_version": sync.desired_version if sync else None,
                "acked_version": sync.acked_version if sync else None,
                "in_sync": sync.in_sync if sync else False,
                "failure": sync.failure if sync else None,
                "pending": [r.describe() for r in head.pending.for_node(endpoint)],
                "counters": dict(sync.counters) if sync else {},
                "failover": head.failover.state.get(endpoint),
            })
        return web.json_response({"version": head.catalog.version, "nodes": rows,
                                  "snapshot_complete": head.snapshots.complete})

    async def status(self, request: web.Request) -> web.Response:
        head = self.head
        return web.json_response({
            "catalog": head.store_url, "version": head.catalog.version, "revision": head.revision,
            "nodes": len(head.syncs), "globals": sorted(head.feeds), "pending_requests": len(head.pending),
            "http": dict(head.server.counters), "peers": dict(head.peers.counters),
            "snapshots": head.snapshots.status(),
            "failover": head.failover.status(),
            "leadership": head.leadership.status(),
            "catalog_full_reads": head.catalog_full_reads,
        })

    async def stream(self, request: web.Request) -> web.Response:
        name = request.match_info["name"]
        found = stream_route(self.head.catalog, name, self.head.box_types)
        if found is None:
            catalog = self.head.catalog
            streams = {*catalog.inputs, *catalog.outputs, *(s for b in catalog.boxes.values() for s in b.outputs)}
            return json_error(404, unknown("stream", name, streams, f"in the catalog (version {catalog.version})"))
        return web.json_response(found)

    async def box(self, request: web.Request) -> web.Response:
        name = request.match_info["name"]
        shown: dict[str, Any] = {}  # ?node=N&wait=S: once the box is on N and every live node in sync (box_wait.py)
        if "wait" in request.query and name in self.head.catalog.boxes:
            try:
                wait = wait_seconds(request.query["wait"], MAX_WAIT)
                shown = await box_shown(self.head, name, normalize_endpoint(request.query["node"]), wait)
            except (KeyError, ValueError):
                return json_error(400, "wait takes a number of seconds, with node=ENDPOINT")
        box = self.head.catalog.boxes.get(name)
        if box is None:
            return json_error(404, unknown("box", name, self.head.catalog.boxes,
                                           f"in the catalog (version {self.head.catalog.version})"))
        part = self.head.catalog.partitions.get(name)
        return web.json_response({"box": name, "type": box.type, "node": None if part else box.node,
                                  "partition": partition_json(part) if part else None,
                                  "version": self.head.catalog.version, **shown})


def partition_json(part: Partition) -> dict[str, Any]:
    """A partitioned box's layout as ``GET /boxes/{name}`` answers it.

    The first six keys are ``boreas.m3.cumulus.Layout.to_dict()``'s, so
    ``Layout.from_dict`` reads the answer (a replicated map's column is ``"*"``); then the partition's epoch,
    incarnation and key.
    """
    return {
        "box": part.box,
        "members": list(part.layout_nodes),
        "segments": [[s.id, s.lo, s.hi, s.member] for s in sorted(part.segments, key=lambda s: (s.lo, s.id))],
        "maps": {**{name: position for name, _, position in part.maps}, **dict.fromkeys(part.replicate, "*")},
        "layout": part.layout,
        "first_epoch": 0,
        "epoch_ms": part.epoch_ms,
        "id": part.id,
        "key": part.key,
        "joining": list(part.joining),
    }
