"""The Head's web UI: a live view of the network in the browser, at ``GET /``.

Static files (``static/``: one HTML page, plain JavaScript drawing SVG, a
style sheet) are package data, served from the package; nothing is fetched
from the network at run time.  The page keeps its copy of the catalog
current as a global component does, over a WebSocket (:mod:`.feed`),
polls the Head for rates and counters (:mod:`.stats`), for the nodes'
state (``GET /nodes``, ``GET /status``) and reads ``m3`` views and moves
boxes through :mod:`.actions`.  See docs/ui.md.

Routes:

* ``GET /`` -- the page; ``GET /ui/static/{file}`` -- its script and style sheet;
* ``GET /ui/feed`` -- WebSocket: the catalog, then every change in commit order;
* ``GET /ui/feed?summary=1`` -- the same, but the first message carries no elements: a page showing a
  large catalog draws one graph at a time and asks for it (:mod:`.index`);
* ``GET /ui/overview`` -- nodes and queries with their box counts; ``GET /ui/search?q=TEXT`` -- boxes,
  streams, queries and nodes by name; ``GET /ui/graph?query=Q`` (or ``node=``, ``box=``, ``stream=``)
  -- the elements of one graph, as the feed sends them;
* ``GET /ui/stats`` -- rates, counters, state sizes and recent errors, from the last poll;
* ``GET /ui/query/{box}``, ``GET /ui/query/{box}/maps`` -- reads of an ``m3`` box's maps and views;
* ``POST /ui/move`` -- move a box or a segment; ``POST /ui/connect``, ``POST /ui/disconnect`` --
  insert a filter before a box's in port, and remove it (the cluster token, like every POST).

Usage (in ``HeadService``)::

    self.ui = install_ui(self)            # after install_routes(self)
    self.ui.changed(before, after, touched)  # after each commit is processed
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from importlib import resources

from aiohttp import web
from boreas.catalog.model import Catalog
from boreas.wire.client import PeerClient
from boreas.wire.server import json_error

from ..context import HeadContext
from .actions import Actions
from .feed import UiFeed
from .index import ScopeError, UiIndex
from .stats import NodeStats

__all__ = ["WebUi", "install_ui"]

log = logging.getLogger(__name__)

#: The static files the page is made of, and their content types.
STATIC = {
    "index.html": "text/html",
    "app.js": "text/javascript",
    "overview.js": "text/javascript",
    "style.css": "text/css",
}


class WebUi:
    """The UI's parts: the live feed, the nodes' figures, the actions."""

    def __init__(self, head: HeadContext):
        self.head = head
        self.peers = PeerClient(head.server.token, timeout=10.0)  # its own pool: the Head's counters stay its own
        self.feed = UiFeed(lambda: head.catalog)
        self.stats = NodeStats(head, self.peers)
        self.actions = Actions(head, self.peers)
        self._index: UiIndex | None = None  # built on the first overview, search or graph asked for

    def changed(self, before: Catalog, after: Catalog, touched: Mapping[str, Iterable[str]] | None = None) -> None:
        """The Head processed commit ``after.version``: tell the browsers, follow it in the index.
        ``touched`` (Catalog dict -> keys the commit wrote; None: compare everything) keeps both to
        what the commit changed, not the size of the catalog."""
        self.feed.changed(before, after, touched)
        if self._index is not None:
            if self._index.version == before.version:
                self._index.changed(before, after, touched)
            else:  # a commit it did not see: build it afresh when next asked
                self._index = None

    def index(self) -> UiIndex:
        """The index of the Head's current catalog."""
        if self._index is None or self._index.catalog is not self.head.catalog:
            if self._index is not None:
                log.info("ui index: rebuilt at version %s (it was at %s)", self.head.catalog.version,
                         self._index.version)
            self._index = UiIndex(self.head.catalog)
        return self._index

    async def overview(self, request: web.Request) -> web.Response:
        return web.json_response(self.index().overview())

    async def search(self, request: web.Request) -> web.Response:
        return web.json_response(self.index().search(request.query.get("q", "")))

    async def graph(self, request: web.Request) -> web.Response:
        scope = {k: request.query[k] for k in ("query", "node", "box", "stream") if k in request.query}
        if len(scope) != 1:
            return json_error(400, "name one of query, node, box or stream")
        try:
            return web.json_response(self.index().graph(**scope))
        except ScopeError as exc:
            return json_error(404, str(exc))

    async def page(self, request: web.Request) -> web.Response:
        return self._file("index.html")

    async def static(self, request: web.Request) -> web.Response:
        name = request.match_info["name"]
        if name not in STATIC:
            return json_error(404, f"no file {name!r}")
        return self._file(name)

    @staticmethod
    def _file(name: str) -> web.Response:
        body = resources.files(__name__).joinpath("static", name).read_bytes()
        return web.Response(body=body, content_type=STATIC[name], charset="utf-8",
                            headers={"Cache-Control": "no-cache"})

    async def stats_view(self, request: web.Request) -> web.Response:
        return web.json_response(self.stats.view())

    async def _shutdown(self, app: web.Application) -> None:
        await self.feed.close()

    async def _cleanup(self, app: web.Application) -> None:
        await self.stats.close()
        await self.peers.close()


def install_ui(head: HeadContext) -> WebUi:
    """Add the UI's routes to the Head's HTTP server; the :class:`WebUi` to notify of commits."""
    ui = WebUi(head)
    app = head.server.app
    router = app.router
    router.add_get("/", ui.page)
    router.add_get("/ui/static/{name}", ui.static)
    router.add_get("/ui/feed", ui.feed.handle)
    router.add_get("/ui/stats", ui.stats_view)
    router.add_get("/ui/overview", ui.overview)
    router.add_get("/ui/search", ui.search)
    router.add_get("/ui/graph", ui.graph)
    router.add_get("/ui/query/{box}/maps", ui.actions.maps)
    router.add_get("/ui/query/{box}", ui.actions.query)
    router.add_post("/ui/move", ui.actions.move)
    router.add_post("/ui/connect", ui.actions.connect)
    router.add_post("/ui/disconnect", ui.actions.disconnect)
    app.on_shutdown.append(ui._shutdown)
    app.on_cleanup.append(ui._cleanup)
    return ui
