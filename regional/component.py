"""A regional component: a process that keeps its region's catalog from node reflections.

Paper section 2.2.  The component listens for update XML, registers its
endpoint with the Head under its region name (``<region name endpoint>``,
no node), and from then on every node the deployment puts in that region
(``<region node=...>``) reflects its local catalog here: a full copy, then
every change.  Nothing is read from the Head after registering.

It can also act as an optimizer for its region (paper section 3), through
:class:`boreas.client.optimizer.Optimizer` deciding on the regional catalog
(:meth:`RegionalComponent.optimizer`): it moves boxes, inserts and removes
filters by addressing the nodes its catalog says hold them, and waits until
the reflections show the change.

HTTP interface:

* ``POST /update`` -- reflections from nodes (update XML, ``origin`` = node);
* ``GET /catalog`` -- the regional catalog as application XML;
* ``GET /deploy`` -- where its boxes run, as deployment XML;
* ``GET /status`` -- members, box locations, counters;
* ``GET /metrics``, ``GET /healthz``, ``GET /readyz`` -- the same figures for
  Prometheus, liveness, readiness (registered, members' catalogs reflected):
  :mod:`.metrics`.

Usage::

    region = RegionalComponent("http://localhost:14000", token, name="default")
    await region.start("localhost", 16000)
    region.catalog.location("box1")
    await region.move("box1", "localhost:15001")
    await region.optimizer().insert_filter("box1", "time % 3 <> 0", name="drop")
    await region.close()
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from aiohttp import web
from boreas.catalog.deployment_model import Region
from boreas.catalog.diagnostics import ValidationFailed
from boreas.catalog.documents import Update, read_document
from boreas.catalog.updates import update_document
from boreas.client.optimizer import CatalogView, Optimizer
from boreas.wire.addressing import advertised
from boreas.wire.client import PeerClient
from boreas.wire.health import Health
from boreas.wire.metrics import View, add_metrics_route
from boreas.wire.server import HttpServer, json_error

from .catalog import RegionalCatalog
from .metrics import read_region, region_checks

log = logging.getLogger(__name__)


class RegionalComponent:
    def __init__(self, head: str | None, token: str | None, name: str = "default"):
        self.head = head
        self.name = name
        self.catalog = RegionalCatalog(name)
        self.server = HttpServer(f"region {name}", token)
        self.peers = PeerClient(token)
        self.changed = asyncio.Condition()
        self.endpoint: str | None = None
        self.registered = False  # the Head took our registration (readiness)
        router = self.server.app.router
        router.add_post("/update", self._handle_update)
        router.add_get("/catalog", self._handle_catalog)
        router.add_get("/deploy", self._handle_deploy)
        router.add_get("/status", self._handle_status)
        Health(f"region {name}", region_checks(self)).add_routes(self.server.app)
        self.server.registry.register(View(lambda f: read_region(self, f)))
        add_metrics_route(self.server.app, self.server.registry)

    async def start(self, host: str = "localhost", port: int = 0, advertise: str | None = None) -> str:
        """Listen on ``host:port`` and register as ``advertise`` (default: the address bound; a host alone gets the
        port bound)."""
        self.endpoint = advertised(advertise, await self.server.start(host, port))
        self.catalog.names.add(self.endpoint)
        if self.head:
            await self.register()
        return self.endpoint

    async def register(self) -> None:
        """Tell the Head where this region's component listens; its nodes then reflect here."""
        registration = Region(self.name, "", self.endpoint, self.name)
        await self.peers.call("POST", f"{self.head}/update", data=update_document([registration]),
                              content_type="application/xml")
        self.registered = True

    async def close(self) -> None:
        await self.server.close()
        await self.peers.close()

    # -- reflections -----------------------------------------------------------

    async def _handle_update(self, request: web.Request) -> web.Response:
        try:
            doc = read_document(await request.read(), f"reflection from {request.remote}")
        except ValidationFailed as exc:
            return json_error(422, "invalid update XML", diagnostics=[d.as_dict() for d in exc.diagnostics])
        if not isinstance(doc, Update) or not doc.origin:
            return json_error(422, "a region takes update XML reflected by a node (<update origin=NODE>)")
        self.catalog.reflect(doc.origin, doc.items, doc.version, copy=doc.copy is not None)
        async with self.changed:
            self.changed.notify_all()
        return web.json_response({"region": self.name, "members": sorted(self.catalog.members)})

    async def _handle_catalog(self, request: web.Request) -> web.Response:
        return web.Response(text=self.catalog.application_xml(), content_type="application/xml")

    async def _handle_deploy(self, request: web.Request) -> web.Response:
        return web.Response(text=self.catalog.deployment_xml(), content_type="application/xml")

    async def _handle_status(self, request: web.Request) -> web.Response:
        return web.json_response({
            "region": self.name, "endpoint": self.endpoint, "members": sorted(self.catalog.members),
            "boxes": {name: box.node for name, box in sorted(self.catalog.boxes.items())},
            "versions": self.catalog.versions, "counters": dict(self.catalog.counters),
            "http": dict(self.server.counters),
        })

    async def wait_until(self, predicate: Callable[[], bool], timeout: float, what: str) -> None:
        """Wait until reflections make ``predicate()`` true; ``OptimizerFailed`` (504) after ``timeout``."""
        await self._view().shown(lambda _: predicate(), what, timeout)

    def _view(self) -> CatalogView:
        """The regional catalog as an optimizer reads it, and waits on its reflections."""
        return CatalogView(self.catalog.as_catalog, self.changed, f"region {self.name}")

    # -- acting as an optimizer for the region ----------------------------------

    def optimizer(self, timeout: float = 30.0) -> Optimizer:
        """An :class:`~boreas.client.optimizer.Optimizer` deciding on this region's catalog: it addresses the
        nodes the catalog says hold the boxes, and waits until their reflections show each change."""
        return Optimizer(self.head, self.peers.token, timeout, peers=self.peers, view=self._view(),
                         origin=self.endpoint or "optimizer")

    async def move(self, box: str, target: str, timeout: float = 30.0) -> str:
        """Move ``box`` (in this region) to ``target``; returns the node it left."""
        return (await self.optimizer(timeout).move(box, target)).source or ""
