"""A global component: a full copy of the global catalog, kept current by the Head.

Paper section 2.3.  The component listens at its endpoint for update XML,
registers with the Head (``<global endpoint=...>``), and is sent the whole
catalog (a full copy, streamed to ``POST /copy`` and decoded as it arrives:
:mod:`.copy_stream`; or in parts to ``POST /update`` by an older Head), then
every commit in order.  It never
applies an update twice or out of order: an update for a version it already
has is ignored, and a gap (a version missing), or any update before it holds
a copy (the Head's was refused or lost), makes it ask the Head for a fresh
full copy.  A copy older than the catalog held is not installed.  ``close()`` disconnects (``<delete global=...>``).  ``GET /metrics``,
``GET /healthz`` and ``GET /readyz`` (registered, a full copy at the Head's
version) are served beside ``POST /update`` (:mod:`.metrics`).  The Head's update XML is
trusted and decoded without the XSD gate, and a full copy's parts are applied
once, when the last is in (:mod:`.full_copy`).

Asking for a copy goes through a :class:`~boreas.wire.sender.ReliableSender`
to the Head with room for one request: it is retried while the Head is
down, and a gap found while an ask is still queued does not ask again.

Usage::

    component = GlobalComponent("http://localhost:14000", token, on_change=print)
    await component.start("localhost", 0)
    await component.ready.wait()         # the full copy is in
    component.catalog                   # a Catalog equal to the Head's
    await component.close()
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from collections.abc import Callable
from typing import Any

from aiohttp import web
from boreas.catalog.collector import collector_paused
from boreas.catalog.diagnostics import ValidationFailed
from boreas.catalog.documents import Delete, Update
from boreas.catalog.model import Catalog
from boreas.catalog.model import GlobalComponent as GlobalElement
from boreas.catalog.replicate import UpdateRejected, apply_update
from boreas.catalog.updates import update_document
from boreas.wire.addressing import advertised
from boreas.wire.client import PeerClient, PeerError
from boreas.wire.health import Health
from boreas.wire.metrics import View, add_metrics_route
from boreas.wire.sender import QueueFull, ReliableSender
from boreas.wire.server import HttpServer, json_error

from .copy_stream import CopyStream
from .full_copy import CopyAssembly, read_head_update
from .metrics import global_checks, read_global

log = logging.getLogger(__name__)

#: on_copy(catalog) after a full copy; on_change(version, items, catalog) after each change.
CopyCallback = Callable[[Catalog], None]
ChangeCallback = Callable[[int, list[Any], Catalog], None]


class GlobalComponent:
    def __init__(self, head: str, token: str | None, on_copy: CopyCallback | None = None,
                 on_change: ChangeCallback | None = None):
        self.head = head
        self.catalog = Catalog()
        self.ready = asyncio.Event()
        self.counters: Counter[str] = Counter()
        self.on_copy = on_copy
        self.on_change = on_change
        self.server = HttpServer("global component", token)
        self.server.app.router.add_post("/update", self._handle_update)
        self.server.app.router.add_post("/copy", self._handle_copy)
        self.server.streamed.add("/copy")  # (each read is timed in _handle_copy, not the whole body)
        Health("global component", global_checks(self)).add_routes(self.server.app)
        self.server.registry.register(View(lambda f: read_global(self, f)))
        add_metrics_route(self.server.app, self.server.registry)
        self.peers = PeerClient(token)
        self.asks = ReliableSender(head, self.peers, name="global component: copy requests", capacity=1)
        self.copy_parts = CopyAssembly()
        self.endpoint: str | None = None
        self.registered = False  # the Head took our registration (readiness)

    async def start(self, host: str = "localhost", port: int = 0, advertise: str | None = None) -> str:
        """Listen on ``host:port`` and register as ``advertise`` (default: the address bound; a host alone gets the
        port bound)."""
        self.endpoint = advertised(advertise, await self.server.start(host, port))
        await self.register()
        self.asks.start()
        return self.endpoint

    async def register(self) -> None:
        """Join (or ask for a fresh full copy)."""
        assert self.endpoint
        await self._send_head(update_document([GlobalElement(self.endpoint)]))
        self.registered = True

    async def close(self, disconnect: bool = True) -> None:
        self.asks.abort()
        if disconnect and self.endpoint:
            try:
                await self._send_head(update_document([Delete(global_=self.endpoint)]))
            except PeerError as exc:
                log.warning("could not tell the Head that %s leaves: %s", self.endpoint, exc)
        await self.server.close()
        await self.peers.close()

    async def _send_head(self, text: str) -> None:
        await self.peers.call("POST", f"{self.head}/update", data=text, content_type="application/xml")

    async def _handle_update(self, request: web.Request) -> web.Response:
        try:
            doc = read_head_update(await request.read())
        except ValidationFailed as exc:
            return json_error(422, "invalid update XML", diagnostics=[d.as_dict() for d in exc.diagnostics])
        if not isinstance(doc, Update) or doc.version is None:
            return json_error(422, "expected update XML with a version")
        self.counters["updates_received"] += 1
        try:
            if doc.copy is not None:
                self._copy_part(doc)
            else:
                self._change(doc)
        except UpdateRejected as exc:
            log.warning("global component: update %s does not apply (%s); asking for a full copy",
                        doc.version, exc)
            self._ask_copy()
        return web.json_response({"version": self.catalog.version})

    async def _handle_copy(self, request: web.Request) -> web.Response:
        """``POST /copy``: a full copy streamed by the Head (head/copy_sender.py), decoded as its chunks
        arrive (:mod:`.copy_stream`); the catalog is replaced once the copy is whole and decodes.

        The body has no overall deadline (a big copy at load may take minutes, and one cut off would be
        resent whole, forever): each read must bring a chunk within the server's ``body_timeout`` (408
        otherwise).  The collector is paused only while a chunk is decoded, never across a wait on the
        network, so a stalled copy does not leave it off for the whole process."""
        stream = CopyStream()
        timeout = self.server.body_timeout
        try:
            while True:
                try:
                    chunk = await asyncio.wait_for(request.content.readany(), timeout)
                except asyncio.TimeoutError:
                    self.counters["copy_read_timeouts"] += 1
                    return json_error(408, f"no part of the full copy arrived within {timeout:g} s")
                if not chunk:
                    break
                with collector_paused():  # everything decoded is kept: no pass need walk it (full_copy.py)
                    stream.feed(chunk)
            with collector_paused():
                copy = stream.close()
        except ValidationFailed as exc:
            return json_error(422, "invalid full copy", diagnostics=[d.as_dict() for d in exc.diagnostics])
        except UpdateRejected as exc:
            return json_error(422, f"the full copy does not apply: {exc}")
        self.counters["copies_streamed"] += 1
        self._install_copy(copy)
        return web.json_response({"version": self.catalog.version})

    def _copy_part(self, doc: Update) -> None:
        copy = self.copy_parts.take(doc)
        if copy is not None:
            self._install_copy(copy)

    def _install_copy(self, copy: Catalog) -> None:
        """Hold ``copy`` unless it is older than what is held (a copy delayed behind a newer one, or a
        resend): then the newer catalog is kept, and the version answered says so."""
        if copy.version < self.catalog.version:
            log.warning("global component: a full copy of version %d is older than the %d held; kept %d",
                        copy.version, self.catalog.version, self.catalog.version)
            self.counters["copies_stale"] += 1
            return
        self.catalog = copy
        self.counters["full_copies"] += 1
        self.ready.set()
        if self.on_copy:
            self.on_copy(self.catalog)

    def _change(self, doc: Update) -> None:
        assert doc.version is not None
        if not self.ready.is_set():  # no copy yet (the Head's was refused, or lost): ask, once at a time
            log.warning("global component: update %d before any full copy; asking for one", doc.version)
            self._ask_copy()
            return
        if doc.version <= self.catalog.version:
            return  # already applied
        if doc.version != self.catalog.version + 1:
            log.warning("global component: missed versions %d..%d; asking for a full copy",
                        self.catalog.version + 1, doc.version - 1)
            self._ask_copy()
            return
        self.catalog = apply_update(self.catalog, doc.items, doc.version)
        self.counters["changes_applied"] += 1
        if self.on_change:
            self.on_change(doc.version, doc.items, self.catalog)

    def _ask_copy(self) -> None:
        """Re-register, which makes the Head send a fresh full copy; one ask at a time."""
        if self.endpoint is None or self.asks.closed:
            return
        try:
            self.asks.send(update_document([GlobalElement(self.endpoint)]))
        except QueueFull:
            pass  # an ask is already on its way: the copy it brings is newer than this gap
