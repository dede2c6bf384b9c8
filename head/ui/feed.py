"""The browser's live catalog: a WebSocket that sends the whole catalog, then every change in commit order.

It is the Head's global-component feed (:mod:`boreas.head.global_feed`) for
browsers: the same two phases, but JSON over a WebSocket instead of update
XML POSTed to a component.  Items are the catalog's store elements
(:data:`boreas.catalog.elements.KIND_TO_DICT`): ``kind`` (``box``,
``partition``, ``node``, ``region``, ``publish``, ``subscribe``, ...),
``key`` (the key the store uses) and ``value`` (the model object as JSON,
``null`` for a deleted element).  Messages:

* ``{"type": "copy", "version": V, "items": [...]}`` -- the catalog at
  version ``V``; start afresh.  Sent first, and again whenever the client
  fell :data:`MAX_BACKLOG` messages behind.
  With ``?summary=1`` its ``items`` is empty and ``summary`` true: the page
  holds only what it draws, asks the Head for it (:mod:`.index`) and again
  after any copy message.
* ``{"type": "change", "version": V, "items": [...]}`` -- what commit ``V``
  changed; applying it to the catalog at ``V - 1`` gives the catalog at
  ``V``.  A commit the client would see twice (its version is not above the
  client's) is skipped.

:meth:`UiFeed.changed` is called by the Head after each commit it
processes, on its loop, in version order (``HeadService._advance``); with
no browser connected it does nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import logging
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from aiohttp import WSMsgType, web
from boreas.catalog.elements import KIND_TO_DICT
from boreas.catalog.model import Catalog

log = logging.getLogger(__name__)

#: Messages queued for one browser; one that falls further behind gets a fresh copy instead.
MAX_BACKLOG = 256
#: Seconds between WebSocket pings (a browser that vanished is noticed within two).
HEARTBEAT = 20.0


def jsonable(value: Any) -> Any:
    """A model object (a frozen dataclass) as JSON-ready dicts and lists; ``origin`` is left out.

    >>> from boreas.catalog.model import Box, InPort
    >>> jsonable(Box("b", "filter", (InPort("S"),), ("T",), params=(("expression.0", "x > 1"),)))["inputs"]
    [{'stream': 'S', 'view': None, 'attrs': []}]
    """
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: jsonable(getattr(value, f.name)) for f in dataclasses.fields(value) if f.name != "origin"}
    if isinstance(value, (tuple, list)):
        return [jsonable(v) for v in value]
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    return str(value)  # enums (StrEnum is a str already), anything else: its text


def catalog_json(catalog: Catalog) -> list[dict[str, Any]]:
    """Every element of ``catalog`` as ``{"kind", "key", "value"}``."""
    return [{"kind": kind, "key": key, "value": jsonable(obj)}
            for kind, (attr, _) in KIND_TO_DICT.items()
            for key, obj in getattr(catalog, attr).items()]


def changes_json(before: Catalog, after: Catalog,
                 touched: Mapping[str, Iterable[str]] | None = None) -> list[dict[str, Any]]:
    """The elements that differ between two catalogs: new or changed ones with their value, removed ones with null.

    ``touched`` (Catalog dict -> keys a commit wrote) limits the compare to those keys: a commit's
    changes cost what it wrote.  Without it every key is compared.

    >>> from boreas.catalog.model import Node
    >>> old, new = Catalog(), Catalog(nodes={"n:1": Node("n:1")})
    >>> changes_json(old, new), changes_json(new, old)
    ([{'kind': 'node', 'key': 'n:1', 'value': {'endpoint': 'n:1'}}], [{'kind': 'node', 'key': 'n:1', 'value': None}])
    >>> changes_json(old, new, {"nodes": set()})
    []
    """
    items: list[dict[str, Any]] = []
    for kind, (attr, _) in KIND_TO_DICT.items():
        old, new = getattr(before, attr), getattr(after, attr)
        if old is new:
            continue
        if touched is not None:
            for key in sorted(set(touched.get(attr, ()))):
                if key in new and old.get(key) != new[key]:
                    items.append({"kind": kind, "key": key, "value": jsonable(new[key])})
                elif key in old and key not in new:
                    items.append({"kind": kind, "key": key, "value": None})
            continue
        for key, obj in new.items():
            if old.get(key) != obj:
                items.append({"kind": kind, "key": key, "value": jsonable(obj)})
        for key in old.keys() - new.keys():
            items.append({"kind": kind, "key": key, "value": None})
    return items


class _Browser:
    """One connected WebSocket: its queue of messages (text), in order."""

    def __init__(self, ws: web.WebSocketResponse, summary: bool = False):
        self.ws = ws
        self.summary = summary  # its copies carry no elements (a large catalog: it asks for what it draws)
        self.queue: asyncio.Queue[str] = asyncio.Queue()
        self.version = -1  # the newest catalog version queued for it


class UiFeed:
    """Every browser connected to ``GET /ui/feed``; ``current`` gives the Head's catalog."""

    def __init__(self, current: Callable[[], Catalog]):
        self.current = current
        self.browsers: set[_Browser] = set()
        self.counters: Counter[str] = Counter()

    # -- called by the Head -------------------------------------------------

    def changed(self, before: Catalog, after: Catalog, touched: Mapping[str, Iterable[str]] | None = None) -> None:
        """Commit ``after.version`` was processed: queue what it changed (where ``touched`` says) for every browser."""
        if not self.browsers:
            return
        items = changes_json(before, after, touched)
        text = json.dumps({"type": "change", "version": after.version, "items": items})
        for browser in list(self.browsers):
            if after.version <= browser.version:
                continue
            if browser.queue.qsize() >= MAX_BACKLOG:
                self._copy(browser)  # it is far behind: one copy of the current catalog replaces the queue
                continue
            browser.queue.put_nowait(text)
            browser.version = after.version
            self.counters["changes_sent"] += 1

    def _copy(self, browser: _Browser) -> None:
        while not browser.queue.empty():
            browser.queue.get_nowait()
        catalog = self.current()  # taken on the loop: consistent with the changes queued after it
        if browser.summary:
            message = {"type": "copy", "version": catalog.version, "summary": True, "items": []}
        else:
            message = {"type": "copy", "version": catalog.version, "items": catalog_json(catalog)}
        browser.queue.put_nowait(json.dumps(message))
        browser.version = catalog.version
        self.counters["copies_sent"] += 1

    # -- the WebSocket ------------------------------------------------------

    async def handle(self, request: web.Request) -> web.StreamResponse:
        """``GET /ui/feed``: the catalog, then its changes, until the browser goes."""
        ws = web.WebSocketResponse(heartbeat=HEARTBEAT, max_msg_size=1 << 16)
        await ws.prepare(request)
        browser = _Browser(ws, summary=request.query.get("summary") == "1")
        self._copy(browser)
        self.browsers.add(browser)
        self.counters["connections"] += 1
        sender = asyncio.create_task(self._send(browser), name="ui feed sender")
        try:
            async for message in ws:  # the browser sends nothing; this notices when it leaves
                if message.type == WSMsgType.TEXT and message.data == "copy":
                    self._copy(browser)
        finally:
            self.browsers.discard(browser)
            sender.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await sender  # _send logs its own failures; only the cancel is expected here
        return ws

    async def _send(self, browser: _Browser) -> None:
        try:
            while True:
                text = await browser.queue.get()
                await browser.ws.send_str(text)
        except (ConnectionError, RuntimeError) as exc:  # closed under us: the reader ends the handler
            log.debug("ui feed: browser gone: %s", exc)
        except Exception:  # a bug: say so, and end this browser's feed (it reconnects for a fresh copy)
            log.exception("ui feed: sending to a browser failed")
            self.counters["send_failures"] += 1
        with contextlib.suppress(Exception):
            await browser.ws.close()

    async def close(self) -> None:
        """Close every browser's WebSocket (the Head is stopping)."""
        for browser in list(self.browsers):
            with contextlib.suppress(Exception):
                await browser.ws.close(code=1001, message=b"Head stopping")

