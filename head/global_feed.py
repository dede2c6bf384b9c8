"""Feeding one global component: the whole catalog, then every change in commit order.

Paper section 2.3: a global component (a monitoring tool) registers with
``<global endpoint=...>``; the Head sends it the complete global catalog as
a sequence of update XML documents, then each later commit as one update
tagged with the catalog version it produces.  A full copy is marked
``copy="vN" part="i" parts="n"`` so the component knows to start afresh on
part 1 and that it is complete at part n.

Delivery is a :class:`~boreas.wire.sender.ReliableSender`: documents go one
at a time, in order.  If the component cannot be reached, the feed replaces
what is queued with a fresh full copy and retries, so once it answers again
it starts afresh (it may have restarted); the same happens when it
re-registers or asks for a copy, or when it falls :data:`MAX_BACKLOG`
commits behind.  A document the component refuses (4xx) is skipped: a
component that then misses a version asks for a copy itself.

Usage::

    feed = GlobalFeed("localhost:25000", peers, copies)   # copies: the Head's CatalogCopies
    feed.start(supervisor)       # queues the first full copy
    feed.changed(8, items)       # after each commit
    feed.abort()                 # the component left

The Head holds one feed per global component the catalog lists, in a
:class:`GlobalFeeds`: the leader matches them to each catalog it installs
and hands every commit to each.
"""

from __future__ import annotations

import logging
from collections import Counter
from typing import Any

from boreas.catalog.model import Catalog
from boreas.catalog.replicate import update_items
from boreas.catalog.updates import update_document
from boreas.wire.backoff import Backoff
from boreas.wire.client import PeerClient, PeerError
from boreas.wire.sender import QueueFull, ReliableSender
from boreas.wire.supervisor import Supervisor

from .catalog_copy import CatalogCopies, FullCopy

log = logging.getLogger(__name__)

MAX_BACKOFF = 5.0
#: A component this many documents behind gets one full copy instead.
MAX_BACKLOG = 1000


class GlobalFeed:
    def __init__(self, endpoint: str, peers: PeerClient, copies: CatalogCopies, origin: str = "head"):
        self.endpoint = endpoint
        self.copies = copies  # the current catalog's full copy, built once per version and shared
        self.held: list[tuple[int, list[Any]]] | None = None  # changes committed while a copy is being built
        self.held_over = False  # more than MAX_BACKLOG were committed meanwhile: dropped, the newest copy is sent
        self.tasks: Supervisor | None = None
        self.origin = origin
        self.queued_version = -1  # the newest version queued: changes up to it are in the queue
        self.counters: Counter[str] = Counter()
        self.sender = ReliableSender(endpoint, peers, name=f"global {endpoint}", capacity=MAX_BACKLOG,
                                     backoff=Backoff(cap=MAX_BACKOFF), on_failure=self._failed)

    @property
    def failure(self) -> str | None:
        return self.sender.failure

    def start(self, supervisor: Supervisor | None = None) -> None:
        self.tasks = supervisor or Supervisor(f"global {self.endpoint}")
        self.full_copy()
        self.sender.start(supervisor)

    def changed(self, version: int, items: list[Any]) -> None:
        """Catalog ``version`` was committed with ``items``; a version already queued is skipped."""
        if version <= self.queued_version or self.sender.closed:
            return
        if self.held is not None:  # they follow the copy being built
            if len(self.held) < MAX_BACKLOG:
                self.held.append((version, items))
            else:  # bounded as the queue is: a copy of a newer version replaces them
                self.held_over = True
            return
        try:
            self.sender.send(update_document(items, version=version, origin=self.origin))
        except QueueFull:
            log.warning("global component %s is %d updates behind; it gets a full copy instead",
                        self.endpoint, self.sender.queued)
            self.full_copy()
            return
        self.queued_version = version
        self.counters["updates_queued"] += 1

    def full_copy(self) -> None:
        """Replace whatever is queued with a copy of the current catalog.  If that version is not serialized
        yet, a worker thread builds it (the loop never waits, head/catalog_copy.py) and the copy replaces the
        queue once built; changes committed meanwhile are held and follow it."""
        if self.sender.closed or self.held is not None:
            return
        built = self.copies.ready()
        if built is not None:
            self._reset(built.copy)
            return
        assert self.tasks is not None, "start() the feed first"
        self.held = []
        self.tasks.spawn(f"global {self.endpoint} copy", self._copy_when_built)

    async def _copy_when_built(self) -> None:
        built = await self.copies.read()
        while self.held_over:  # what was held is incomplete: the copy read now is of the newest version
            self.held, self.held_over = [], False
            built = await self.copies.read()
        held, self.held = self.held or [], None
        if self.sender.closed:
            return
        self._reset(built.copy)
        for version, items in held:
            self.changed(version, items)  # (those the copy already holds are skipped)

    def _reset(self, copy: FullCopy) -> None:
        self.sender.reset(list(copy.documents))
        self.queued_version = copy.version
        self.counters["full_copies"] += 1

    def abort(self) -> None:
        self.sender.abort()
        if self.tasks is not None:
            self.tasks.cancel(f"global {self.endpoint} copy")

    def _failed(self, exc: PeerError) -> None:
        self.counters["failures"] += 1
        log.debug("global component %s: %s (will retry with a full copy)", self.endpoint, exc)
        self.full_copy()


class GlobalFeeds:
    """The leader's feeds, one per global component of the catalog: the one owner of which are running.

    A follower Head holds none (it starts them with :meth:`match` once it
    leads); each feed's sender runs as a task of the Head's supervisor,
    named ``global ENDPOINT``.
    """

    def __init__(self, peers: PeerClient, copies: CatalogCopies, tasks: Supervisor, origin: str = "head"):
        self.peers = peers
        self.copies = copies
        self.tasks = tasks
        self.origin = origin
        self.feeds: dict[str, GlobalFeed] = {}

    def match(self, catalog: Catalog) -> None:
        """Start or stop feeds so that exactly ``catalog``'s global components are fed."""
        for endpoint in catalog.globals:
            if endpoint not in self.feeds:
                feed = GlobalFeed(endpoint, self.peers, self.copies, self.origin)
                self.feeds[endpoint] = feed
                feed.start(self.tasks)
        for endpoint in set(self.feeds) - set(catalog.globals):
            self.feeds.pop(endpoint).abort()
            log.info("global component %s disconnected", endpoint)

    def committed(self, before: Catalog, after: Catalog, touched: dict[str, set[str]] | None = None) -> None:
        """Hand each feed the commit from ``before`` to ``after``, compared where it wrote (``touched``; the
        whole catalog when None, after a gap read whole)."""
        if not self.feeds:
            return
        items = update_items(before, after, touched)
        for feed in self.feeds.values():
            feed.changed(after.version, items)

    def full_copy(self, endpoint: str) -> bool:
        """Send a fed component a fresh full copy (it registered again); False if it is not fed."""
        feed = self.feeds.get(endpoint)
        if feed is None:
            return False
        feed.full_copy()
        return True

    def abort(self) -> None:
        """Stop every feed at once (the Head closes)."""
        for feed in self.feeds.values():
            feed.abort()
