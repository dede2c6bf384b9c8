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

Usage::

    reflector = Reflector("localhost:15000", peers)
    reflector.reflect(catalog, update.items)   # after each applied change
    await reflector.flush(timeout=1.0)          # before a handover, to keep moves in order
    await reflector.close()
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from boreas.catalog.model import Catalog
from boreas.catalog.replicate import catalog_items
from boreas.catalog.updates import update_document
from boreas.wire.backoff import Backoff
from boreas.wire.client import PeerClient, PeerError, PeerRefused

log = logging.getLogger(__name__)

#: A region this many updates behind gets one full copy instead.
MAX_BACKLOG = 1000


def region_endpoints(catalog: Catalog) -> set[str]:
    """Where this node reflects to: the endpoints of the regions its local catalog lists."""
    return {r.endpoint for r in catalog.regions.values() if r.node and r.endpoint}


@dataclass
class _Region:
    endpoint: str
    queue: list[str] = field(default_factory=list)
    wake: asyncio.Event = field(default_factory=asyncio.Event)
    idle: asyncio.Event = field(default_factory=asyncio.Event)
    task: asyncio.Task | None = None


class Reflector:
    def __init__(self, endpoint: str, peers: PeerClient):
        self.endpoint = endpoint
        self.peers = peers
        self.counters: Counter[str] = Counter()
        self._regions: dict[str, _Region] = {}

    @property
    def regions(self) -> list[str]:
        return sorted(self._regions)

    def reflect(self, catalog: Catalog, items: list[Any]) -> None:
        """``catalog`` is the local catalog after a change made of ``items``; send it on.

        Regions new in ``catalog`` get a full copy, then the change too
        (regional catalogs apply a change twice harmlessly, and a ``<move>``
        is not in any copy); regions no longer in it are forgotten.
        """
        wanted = region_endpoints(catalog)
        for endpoint in set(self._regions) - wanted:
            self._drop(endpoint)
        text = update_document(items, version=catalog.version, origin=self.endpoint) if items else None
        for endpoint in sorted(wanted):
            region = self._regions.get(endpoint)
            if region is None:
                region = self._start(endpoint)
                region.queue.append(self._copy(catalog))
                if text is not None:
                    region.queue.append(text)
            elif len(region.queue) >= MAX_BACKLOG:
                log.warning("node %s: region %s is %d updates behind; it gets a full copy instead",
                            self.endpoint, endpoint, len(region.queue))
                region.queue[:] = [self._copy(catalog)]
            elif text is not None:
                region.queue.append(text)
            else:
                continue
            region.idle.clear()
            region.wake.set()

    async def flush(self, timeout: float) -> bool:
        """Wait until every region has what was reflected so far; False if one did not in time."""
        waits = [r.idle.wait() for r in self._regions.values()]
        if not waits:
            return True
        try:
            await asyncio.wait_for(asyncio.gather(*waits), timeout)
            return True
        except asyncio.TimeoutError:
            return False

    async def close(self) -> None:
        for endpoint in list(self._regions):
            self._drop(endpoint)

    def status(self) -> dict[str, int]:
        return {e: len(r.queue) for e, r in self._regions.items()}

    # -- internals ------------------------------------------------------------

    def _copy(self, catalog: Catalog) -> str:
        self.counters["full_copies"] += 1
        return update_document(catalog_items(catalog), version=catalog.version, origin=self.endpoint,
                               copy=uuid.uuid4().hex[:12], part=1, parts=1)

    def _start(self, endpoint: str) -> _Region:
        region = _Region(endpoint)
        region.task = asyncio.get_running_loop().create_task(self._send(region), name=f"reflect to {endpoint}")
        self._regions[endpoint] = region
        log.info("node %s reflects to region %s", self.endpoint, endpoint)
        return region

    def _drop(self, endpoint: str) -> None:
        region = self._regions.pop(endpoint)
        region.idle.set()
        if region.task is not None:
            region.task.cancel()
        log.info("node %s no longer reflects to region %s", self.endpoint, endpoint)

    async def _send(self, region: _Region) -> None:
        backoff = Backoff(first=0.05, cap=2.0)
        with contextlib.suppress(asyncio.CancelledError):
            while True:
                if not region.queue:
                    region.idle.set()
                    region.wake.clear()
                    await region.wake.wait()
                    continue
                text = region.queue[0]
                try:
                    await self.peers.post_update(region.endpoint, text, timeout=5.0)
                    self.counters["reflected"] += 1
                except PeerRefused as exc:  # it answered: retrying the same text would not help
                    self.counters["refused"] += 1
                    log.warning("node %s: region %s refused a reflection: %s", self.endpoint,
                                region.endpoint, exc)
                except PeerError as exc:
                    self.counters["failures"] += 1
                    log.debug("node %s: reflection to %s failed (%s); retrying", self.endpoint,
                              region.endpoint, exc)
                    await backoff.sleep()
                    continue
                backoff.reset()
                if region.queue and region.queue[0] is text:
                    region.queue.pop(0)
