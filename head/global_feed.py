"""Feeding one global component: the whole catalog, then every change in commit order.

Paper section 2.3: a global component (a monitoring tool) registers with
``<global endpoint=...>``; the Head sends it the complete global catalog,
then each later commit as one update tagged with the catalog version it
produces.

A full copy is streamed as one request (:mod:`.copy_sender`: the kept
serialization of the version, in chunks the component decodes as they
arrive); changes committed meanwhile are held and follow it once the
component answers that it holds the copy.  A component without that
endpoint (an older Boreas) is sent the copy's parts through the queue, as
before, marked ``copy="vN" part="i" parts="n"`` so that it starts afresh on
part 1 and knows the copy is complete at part n.  Changes are delivered by a
:class:`~boreas.wire.sender.ReliableSender`: documents go one at a time, in order.  If the component cannot be reached, the feed replaces
what is queued with a fresh full copy and retries, so once it answers again
it starts afresh (it may have restarted); the same happens when it
re-registers or asks for a copy, or when it falls :data:`MAX_BACKLOG`
commits behind.  A document the component refuses (4xx) is skipped: a
component that then misses a version asks for a copy itself.  A streamed
copy it refuses (a 4xx other than 408/429), or answers with an older
version than the copy's, is not counted as sent: ``failure`` says why
until a copy lands, and the component asks again on the next change it
receives (one without any copy asks on any change).

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
from boreas.wire.sender import QueueFull, ReliableSender, is_transient
from boreas.wire.supervisor import Supervisor

from .catalog_copy import CatalogCopies, FullCopy
from .copy_sender import CopyNotTaken, send_copy

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
        self.peers = peers
        self.copy_backoff = Backoff(cap=MAX_BACKOFF)  # between attempts to stream a copy
        self.copy_failure: str | None = None  # why the last attempt to stream a copy failed
        self.queued_version = -1  # the newest version queued: changes up to it are in the queue
        self.counters: Counter[str] = Counter()
        self.sender = ReliableSender(endpoint, peers, name=f"global {endpoint}", capacity=MAX_BACKLOG,
                                     backoff=Backoff(cap=MAX_BACKOFF), on_failure=self._failed)

    @property
    def failure(self) -> str | None:
        """Why the last attempt to reach the component failed (a copy or a change), None once it answered."""
        return self.copy_failure or self.sender.failure

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
        """Replace whatever is queued with a copy of the current catalog, streamed as one request
        (:mod:`.copy_sender`) by a supervised task; changes committed meanwhile are held and follow it once
        the component holds the copy.  If the version is not serialized yet, a worker thread builds it (the
        loop never waits, head/catalog_copy.py)."""
        if self.sender.closed or self.held is not None:
            return
        assert self.tasks is not None, "start() the feed first"
        self.held = []
        self.sender.reset([])  # (changes queued before are in the copy)
        self.tasks.spawn(f"global {self.endpoint} copy", self._send_copy)  # (restarted if it crashes)

    async def _send_copy(self) -> None:
        """Stream the newest copy until the component holds it (retried, each time the newest version, while
        it cannot be reached); then release the changes held meanwhile."""
        while True:
            built = await self.copies.read()
            while self.held_over:  # what was held is incomplete: the copy read now is of the newest version
                self.held, self.held_over = [], False
                built = await self.copies.read()
            if self.sender.closed:
                return
            try:
                answered = await send_copy(self.peers, self.endpoint, built.document)
            except CopyNotTaken:  # an older component: the copy in parts, through the queue
                self.copy_failure = None
                log.info("global component %s takes no streamed copy; sending it in parts", self.endpoint)
                self._release(built.copy, list(built.copy.documents))
                return
            except PeerError as exc:
                if is_transient(exc):
                    self.counters["failures"] += 1
                    self.copy_failure = str(exc)
                    log.debug("global component %s: %s (will retry the copy)", self.endpoint, exc)
                    await self.copy_backoff.sleep()
                    continue
                self._refused(f"refused the full copy of version {built.version}: {exc}")
                return
            if answered < built.version:  # it did not install the copy: it is not known to hold it
                self._refused(f"answered version {answered} to the full copy of version {built.version}")
                return
            self.counters["copies_streamed"] += 1
            if self.held_over:  # changes were dropped while it was sent: a newer copy replaces it
                continue
            self.copy_backoff.reset()
            self.copy_failure = None
            self._release(built.copy, [])
            return

    def _refused(self, reason: str) -> None:
        """The component did not take the copy (a 4xx, or it answered an older version): it is not counted
        as sent and ``failure`` says why until a copy lands.  The changes held go to it as they are; a
        component without the copy asks for one on the first it receives (regional/global_component.py),
        which starts a fresh copy here (:meth:`full_copy`)."""
        log.warning("global component %s %s", self.endpoint, reason)
        self.counters["copies_refused"] += 1
        self.copy_failure = reason
        self.copy_backoff.reset()
        held, self.held = self.held or [], None
        self.held_over = False
        for version, items in held:
            self.changed(version, items)

    def _release(self, copy: FullCopy, documents: list[str]) -> None:
        """The copy is sent (or queued as ``documents``): the changes held since follow it."""
        held, self.held = self.held or [], None
        self.held_over = False
        if self.sender.closed:
            return
        self.sender.reset(documents)
        self.queued_version = copy.version
        self.counters["full_copies"] += 1
        for version, items in held:
            self.changed(version, items)  # (those the copy already holds are skipped)

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
