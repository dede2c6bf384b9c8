"""Feeding one global component: the whole catalog, then every change in commit order.

Paper section 2.3: a global component (a monitoring tool) registers with
``<global endpoint=...>``; the Head sends it the complete global catalog as
a sequence of update XML documents, then each later commit as one update
tagged with the catalog version it produces.  A full copy is marked
``copy="vN" part="i" parts="n"`` so the component knows to start afresh on
part 1 and that it is complete at part n.  If the component cannot be
reached, the feed retries; once it answers again it gets a fresh full copy
(it may have restarted), as it does when it re-registers or asks for one.

Usage::

    feed = GlobalFeed("localhost:25000", peers, current=lambda: follower.catalog)
    task = asyncio.create_task(feed.run())
    feed.changed(8, items)       # after each commit
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter, deque
from collections.abc import Callable
from typing import Any

from boreas.catalog.model import Catalog
from boreas.catalog.replicate import catalog_items
from boreas.catalog.updates import update_document
from boreas.wire.backoff import Backoff
from boreas.wire.client import PeerClient, PeerError

log = logging.getLogger(__name__)

#: Items per document of a full copy: big enough to load fast, small enough to stream.
COPY_CHUNK = 2000
MAX_BACKOFF = 5.0


class GlobalFeed:
    def __init__(self, endpoint: str, peers: PeerClient, current: Callable[[], Catalog],
                 origin: str = "head"):
        self.endpoint = endpoint
        self.peers = peers
        self.current = current
        self.origin = origin
        self.sent_version = -1
        self.failure: str | None = None
        self.counters: Counter[str] = Counter()
        self._queue: deque[tuple[int, list[Any]]] = deque()
        self._need_copy = True
        self._wake = asyncio.Event()
        self._wake.set()

    def changed(self, version: int, items: list[Any]) -> None:
        if not self._need_copy:
            self._queue.append((version, items))
            self._wake.set()

    def full_copy(self) -> None:
        self._need_copy = True
        self._queue.clear()
        self._wake.set()

    async def run(self) -> None:
        backoff = Backoff(cap=MAX_BACKOFF)
        while True:
            await self._wake.wait()
            self._wake.clear()
            try:
                await self._send_pending()
                backoff.reset()
                self.failure = None
            except PeerError as exc:
                self.failure = str(exc)
                self.counters["failures"] += 1
                log.info("global component %s: %s (will retry, then send a full copy)", self.endpoint, exc)
                self.full_copy()
                await backoff.sleep()

    async def _send_pending(self) -> None:
        if self._need_copy:
            catalog = self.current()  # consistent: taken on the loop, between commits
            self._need_copy = False
            self._queue.clear()
            items = catalog_items(catalog)
            chunks = [items[i:i + COPY_CHUNK] for i in range(0, len(items), COPY_CHUNK)] or [[]]
            for index, chunk in enumerate(chunks, start=1):
                text = update_document(chunk, version=catalog.version, origin=self.origin,
                                       copy=f"v{catalog.version}", part=index, parts=len(chunks))
                await self.peers.post_update(self.endpoint, text)
            self.sent_version = catalog.version
            self.counters["full_copies"] += 1
        while self._queue:
            version, items = self._queue[0]
            if version > self.sent_version:
                await self.peers.post_update(self.endpoint,
                                             update_document(items, version=version, origin=self.origin))
                self.sent_version = version
                self.counters["updates_sent"] += 1
            self._queue.popleft()
