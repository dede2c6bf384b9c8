"""Reflecting a node's local catalog changes to the regions it belongs to (paper section 2.2).

Every change to the local catalog -- update XML from the Head, a box moved
in or out, a filter inserted or removed -- is sent on to the regional
component of each region that includes the node, as update XML whose
``origin`` is the node.  Reflection is forward store: the node never waits
for a region (a region that is down gets its updates later, in order), and
a region the node has just joined, or one it lost track of (too far
behind), is sent a full copy of the local catalog instead, so a regional
catalog is built from reflections alone.

The node learns its regions from its own local catalog: the ``<region>``
elements the Head puts in its slice carry the regional component's
endpoint.

Each region is fed by its own :class:`~boreas.wire.sender.ReliableSender`
(ordered, retrying while the region is down, skipping what it refuses), all
owned by the reflector's :class:`~boreas.wire.supervisor.Supervisor`
(``tasks``: the node's own supervisor, passed in).

Usage::

    reflector = Reflector("localhost:15000", peers, Supervisor("node localhost:15000"))
    reflector.reflect(catalog, update.items)   # after each applied change
    await reflector.flush(timeout=1.0)          # before a handover, to keep moves in order
    await reflector.close()
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections import Counter
from typing import Any

from boreas.catalog.model import Catalog
from boreas.catalog.replicate import catalog_items
from boreas.catalog.updates import update_document
from boreas.wire.backoff import Backoff
from boreas.wire.client import PeerClient
from boreas.wire.sender import QueueFull, ReliableSender
from boreas.wire.supervisor import Supervisor

log = logging.getLogger(__name__)

#: A region this many updates behind gets one full copy instead.
MAX_BACKLOG = 1000
#: How long closing waits for regions (and the Head) to take what is queued.
CLOSE_TIMEOUT = 1.0


def region_endpoints(catalog: Catalog) -> set[str]:
    """Where this node reflects to: the endpoints of the regions its local catalog lists."""
    return {r.endpoint for r in catalog.regions.values() if r.node and r.endpoint}


class Reflector:
    def __init__(self, endpoint: str, peers: PeerClient, tasks: Supervisor):
        self.endpoint = endpoint
        self.peers = peers
        self.counters: Counter[str] = Counter()
        self.tasks = tasks  # the node's supervisor: each region's sender task runs under it
        self._regions: dict[str, ReliableSender] = {}
        self.closed = False

    @property
    def regions(self) -> list[str]:
        return sorted(self._regions)

    def reflect(self, catalog: Catalog, items: list[Any]) -> None:
        """``catalog`` is the local catalog after a change made of ``items``; send it on.

        Regions new in ``catalog`` get a full copy, then the change too
        (regional catalogs apply a change twice harmlessly, and a ``<move>``
        is not in any copy); regions no longer in it are forgotten.
        """
        if self.closed:
            return  # the node is stopping: a restarted node sends its regions a full copy
        wanted = region_endpoints(catalog)
        for endpoint in set(self._regions) - wanted:
            self._drop(endpoint)
        if not wanted:
            return  # (in no region: the change is not written as text at all, a node in none pays nothing)
        text = update_document(items, version=catalog.version, origin=self.endpoint) if items else None
        for endpoint in sorted(wanted):
            region = self._regions.get(endpoint)
            if region is None:
                region = self._start(endpoint)
                region.send(self._copy(catalog))
            if text is None:
                continue
            try:
                region.send(text)
            except QueueFull:
                log.warning("node %s: region %s is %d updates behind; it gets a full copy instead",
                            self.endpoint, endpoint, region.queued)
                region.reset([self._copy(catalog)])

    def refresh(self, catalog: Catalog) -> None:
        """Send every region a full copy of ``catalog`` (after a change was undone)."""
        if self.closed:
            return
        for endpoint, region in self._regions.items():
            try:
                region.send(self._copy(catalog))
            except QueueFull:
                region.reset([self._copy(catalog)])

    async def flush(self, timeout: float) -> bool:
        """Wait until every region has what was reflected so far; False if one did not in time."""
        if not self._regions:
            return True
        done = await asyncio.gather(*(r.flush(timeout) for r in self._regions.values()))
        return all(done)

    async def close(self) -> None:
        """Give regions a moment to take what is queued, then stop."""
        self.closed = True
        await asyncio.gather(*(r.close(CLOSE_TIMEOUT) for r in self._regions.values()))
        self._regions.clear()

    def status(self) -> dict[str, int]:
        return {e: r.queued for e, r in self._regions.items()}

    def stats(self) -> dict[str, dict[str, Any]]:
        """Per region: queued, sent, retries, refused, the last failure."""
        return {e: r.stats() for e, r in self._regions.items()}

    # -- internals ------------------------------------------------------------

    def _copy(self, catalog: Catalog) -> str:
        self.counters["full_copies"] += 1
        return update_document(catalog_items(catalog), version=catalog.version, origin=self.endpoint,
                               copy=uuid.uuid4().hex[:12], part=1, parts=1)

    def _start(self, endpoint: str) -> ReliableSender:
        region = ReliableSender(endpoint, self.peers, name=f"node {self.endpoint}: reflect to {endpoint}",
                                capacity=MAX_BACKLOG, timeout=5.0, backoff=Backoff(first=0.05, cap=2.0))
        region.start(self.tasks)
        self._regions[endpoint] = region
        log.info("node %s reflects to region %s", self.endpoint, endpoint)
        return region

    def _drop(self, endpoint: str) -> None:
        self._regions.pop(endpoint).abort()
        log.info("node %s no longer reflects to region %s", self.endpoint, endpoint)
