"""Failover: the Head moves the boxes of a node that stays down to a live node.

A node that has not been heard from for ``--failover-after`` seconds
(default 30; 0 disables) and still holds boxes in the global catalog is
failed over, if its state is reachable: a durable node started with
``--shared-dir`` reports, with every heartbeat, the shared directory its
data lives in, and the Head records that place in the global catalog store
(``failover/<endpoint>`` metadata), so it knows it even after a restart of
its own.  The Head then picks the least loaded live durable node (fewest
boxes; ties by name), asks it to adopt the failed node's boxes
(``POST /adopt``, :mod:`boreas.node.adopt`), and commits the new location
the way it commits a move (``head.learner.adoption``): every slice is recomputed,
upstream nodes are re-pointed and hand their unacknowledged batches to the
new node, and the failed node, if it returns, finds its boxes gone.

Where the state is unreachable (the node is memory-only, or its directory
is not shared, or no live durable node can take it), the Head says so in
``GET /status`` and ``boreas nodes`` and leaves the boxes where they are:
they resume when the node comes back.

Usage::

    failover = Failover(lambda: head.catalog, lambda: head.store, head.membership, head.peers,
                        learn=head.learner.adoption, after=30.0, tasks=head.tasks)
    failover.heard("localhost:15001", recovery_report)   # from each heartbeat; records it in head.tasks
    await failover.check()                              # the Head's supervisor calls this every second
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

from boreas.catalog.index import CatalogIndex
from boreas.catalog.model import Catalog
from boreas.catalog.slice_index import IndexedTopology
from boreas.catalog.store import CatalogStore
from boreas.wire.addressing import endpoint_url
from boreas.wire.client import PeerClient, PeerError
from boreas.wire.supervisor import Supervisor

from .membership import Membership

log = logging.getLogger(__name__)

META_PREFIX = "failover/"
#: Adopting replays the failed node's log since its last snapshot: allow for a long one.
ADOPT_TIMEOUT = 120.0
RETRY_AFTER = 5.0


class Failover:
    def __init__(self, catalog: Callable[[], Catalog], store: Callable[[], CatalogStore | None],
                 membership: Membership, peers: PeerClient,
                 learn: Callable[[str, str], Awaitable[int]], after: float = 30.0, *, tasks: Supervisor,
                 holds: Callable[[str], bool] | None = None, candidates: Callable[[], Iterable[str]] | None = None):
        self.catalog = catalog
        # Whether a node holds boxes, and the nodes that may (a superset): by default walks of the catalog;
        # the Head passes its index's and its syncs', so a check each second costs the nodes, not the
        # boxes (a walk of 100,000 boxes each second held the event loop for 50-100 ms: issue 37).
        self.holds = holds or (lambda endpoint: endpoint in _holders(self.catalog()))
        self.candidates = candidates or (lambda: _holders(self.catalog()))
        self.store = store
        self.membership = membership
        self.peers = peers
        self.learn = learn
        self.after = after
        # The Head's supervisor runs the writes that record where a node keeps its data: a task
        # nobody holds can be collected before it ends, and its failure would go unseen.
        self.tasks = tasks
        self.started = time.monotonic()
        self.places: dict[str, dict[str, Any]] = {}  # endpoint -> {"data_dir", "snapshots"}
        self.state: dict[str, dict[str, Any]] = {}  # endpoint -> what failover did or why it could not
        self._retry_at: dict[str, float] = {}
        self._lock = asyncio.Lock()
        self._recording = asyncio.Lock()  # one record write at a time (heard())
        self._records = 0  # record writes started (names their tasks)

    def taking_over(self) -> None:
        """This Head now leads: a node it never heard counts as down from now, not from its start.

        What the last leader knew of where nodes keep their data, and which node it chose for a
        failover it may not have finished, is in the store's metadata (:meth:`place`, :meth:`_target`).
        """
        self.started = time.monotonic()
        self._retry_at.clear()

    def heard(self, endpoint: str, recovery: dict[str, Any] | None) -> None:
        """A heartbeat's recovery report: remember (and persist) where a shared node's data lives."""
        if not recovery or not recovery.get("shared"):
            return
        place = {"data_dir": recovery.get("data_dir"), "snapshots": recovery.get("snapshots")}
        if self.places.get(endpoint) != place:
            self.places[endpoint] = place
            store = self.store()
            if store is not None and not self.tasks.closed:  # (closed: the Head is stopping)
                # Off the event loop: a ZooKeeper write must not stall heartbeats.  One write at a
                # time, in the order heard, so a newer place is never overwritten by an older one.
                self._records += 1
                self.tasks.spawn(f"failover record #{self._records} ({endpoint})",
                                 lambda: self._record(store, endpoint, place), restart=False)

    async def _record(self, store: CatalogStore, endpoint: str, place: dict[str, Any]) -> None:
        """Persist ``place`` so a restarted Head knows it; a failure is a warning: the heartbeat's copy serves."""
        async with self._recording:
            try:
                await asyncio.to_thread(store.put_meta, META_PREFIX + endpoint, json.dumps(place))
            except Exception as exc:
                log.warning("could not record where node %s keeps its data: %r (failover uses the heartbeat's "
                            "copy)", endpoint, exc)

    def place(self, endpoint: str) -> dict[str, Any] | None:
        found = self.places.get(endpoint)
        if found is None and (store := self.store()) is not None:
            text = store.get_meta(META_PREFIX + endpoint)
            if text:
                found = self.places[endpoint] = json.loads(text)
        return found

    def down_for(self, endpoint: str, now: float) -> float:
        """Seconds the node has been down (counting from the Head's start if it never heard it)."""
        if self.membership.alive(endpoint, now):
            return 0.0
        described = self.membership.describe(endpoint, now)
        since = described.get("seconds_since_heartbeat")
        down = now - self.started if since is None else float(since)  # type: ignore[arg-type]
        return min(down, now - self.started)

    async def check(self, now: float | None = None) -> None:
        """Fail over every node that has been down too long and holds boxes (one at a time)."""
        if self.after <= 0:
            return
        async with self._lock:
            now = time.monotonic() if now is None else now
            catalog = self.catalog()
            for endpoint in sorted(set(self.candidates())):
                if self.membership.alive(endpoint, now):
                    if self.state.get(endpoint, {}).get("state") != "failed over":
                        self.state.pop(endpoint, None)
                    continue
                if self.down_for(endpoint, now) < self.after or now < self._retry_at.get(endpoint, 0.0):
                    continue
                if self.holds(endpoint):  # (asked of a node down long enough only)
                    await self._fail_over(endpoint, catalog, now)

    async def _fail_over(self, endpoint: str, catalog: Catalog, now: float) -> None:
        boxes = sorted(name for name in catalog.boxes if endpoint in catalog.placement(name))
        place = await asyncio.to_thread(self.place, endpoint)
        if not place or not place.get("data_dir"):
            self._cannot(endpoint, boxes, now, "its state is unreachable: it runs without a data directory on "
                         "shared storage (boreas node --data-dir DIR --shared-dir); its boxes stay until it is back")
            return
        target = await asyncio.to_thread(self._target, catalog, endpoint, now)
        if target is None:
            self._cannot(endpoint, boxes, now, "no live durable node can adopt its boxes")
            return
        log.warning("node %s has been down for %.0f s: failing its boxes %s over to %s", endpoint,
                    self.down_for(endpoint, now), boxes, target)
        self.state[endpoint] = {"state": "adopting", "to": target, "boxes": boxes, "since": time.time()}
        try:
            report = await self.peers.call("POST", endpoint_url(target, "/adopt"), timeout=ADOPT_TIMEOUT,
                                           json_body={"node": endpoint, **place})
        except PeerError as exc:
            self._cannot(endpoint, boxes, now, f"node {target} could not adopt its boxes: {exc}")
            return
        version = await self.learn(endpoint, target)
        self.state[endpoint] = {"state": "failed over", "to": target, "boxes": boxes, "version": version,
                                "time": time.time(), "replayed_batches": report.get("replayed_batches"),
                                "from_snapshot": report.get("snapshot")}
        log.warning("node %s failed over to %s (catalog version %d)", endpoint, target, version)

    def _target(self, catalog: Catalog, endpoint: str, now: float) -> str | None:
        """The node to adopt ``endpoint``'s boxes: the one an earlier leader chose, if it is still live (it
        may have adopted them already, and adopting is idempotent there, not across two nodes), else
        :meth:`choose`'s, recorded before it is asked (``failover/<endpoint>/to``, on a worker thread)."""
        store = self.store()
        key = f"{META_PREFIX}{endpoint}/to"
        chosen = store.get_meta(key) if store is not None else None
        if chosen and chosen != endpoint and self.membership.alive(chosen, now):
            return chosen
        target = self.choose(catalog, endpoint, now)
        if target is not None and store is not None:
            store.put_meta(key, target)
        return target

    def _cannot(self, endpoint: str, boxes: list[str], now: float, reason: str) -> None:
        if self.state.get(endpoint, {}).get("reason") != reason:
            log.warning("cannot fail node %s over: %s", endpoint, reason)
        self.state[endpoint] = {"state": "not failed over", "boxes": boxes, "reason": reason}
        self._retry_at[endpoint] = now + RETRY_AFTER

    def choose(self, catalog: Catalog, failed: str, now: float | None = None) -> str | None:
        """The least loaded live durable node (fewest boxes, then name), not the failed one.

        Registered nodes count even when no deployment names them yet: spares.
        A node that hosts a member of a partitioned box the failed node is a
        member of is preferred (docs/cumulus.md §6.3): it takes the failed
        member as a guest next to its own, so no new node joins the box.

        >>> from boreas.catalog.model import Box, Node
        >>> m = Membership(timeout=3.0)
        >>> for e in ("a:1", "b:2", "c:3"):
        ...     _ = m.heartbeat(e, "i", recovery={"durable": True})
        >>> catalog = Catalog(nodes={e: Node(e) for e in ("a:1", "b:2", "c:3")},
        ...                   boxes={"x": Box("x", "filter", (), ("O",), node="a:1")})
        >>> from boreas.wire.supervisor import Supervisor
        >>> failover = Failover(lambda: catalog, lambda: None, m, None, None, tasks=Supervisor("head"))
        >>> failover.choose(catalog, "b:2")
        'c:3'
        >>> from boreas.catalog.model import Partition
        >>> catalog.partitions["v"] = Partition("v", ("a:1", "b:2"))
        >>> failover.choose(catalog, "b:2")
        'a:1'
        """
        known = set(catalog.nodes) | set(self.membership.known())  # a registered spare node counts
        now = time.monotonic() if now is None else now
        load = {e: 0 for e in known if e != failed and self.membership.alive(e, now)
                and (self.membership.describe(e, now).get("recovery") or {}).get("durable")}
        for name in catalog.boxes:
            for endpoint in catalog.placement(name):
                if endpoint in load:
                    load[endpoint] += 1
        peers = {e for part in catalog.partitions.values() if failed in part.nodes for e in part.nodes}
        preferred = [e for e in load if e in peers]
        candidates = preferred or list(load)
        return min(candidates, key=lambda e: (load[e], e)) if candidates else None

    def status(self) -> dict[str, Any]:
        return {"after": self.after, "nodes": self.state}


def index_holds(index: CatalogIndex, endpoint: str) -> bool:
    """Whether a box is placed on ``endpoint`` (or it is a partition member), by the catalog's index."""
    topology = IndexedTopology(index)
    return bool(topology.boxes_on(endpoint) or topology.partitions_with(endpoint))


def _holders(catalog: Catalog) -> set[str]:
    """Every node a box is placed on (partition members too): a walk of the catalog."""
    return {e for name in catalog.boxes for e in catalog.placement(name)}

