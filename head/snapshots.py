"""Consistent snapshots of the durable nodes: the Head is seed 004's snapshot controller.

On a schedule (``boreas head --snapshot-interval``) and on demand
(``POST /snapshots``, ``boreas snapshot``) the coordinator starts snapshot
``N`` (one more than the last it started or found complete) on every live
durable node that holds boxes or takes input streams.  Each node puts a
marker into its input log between two batches, captures its boxes' state
there and writes it in the background (:mod:`boreas.node.recovery`), then
confirms.  When every participant has confirmed, ``N`` is **complete**: the
coordinator records it in the global catalog store (``snapshot`` metadata,
so it survives a Head restart; not a catalog commit, so global components
are not sent a change for it) and tells the nodes with their next heartbeat
reply, whereupon each cuts its log before its marker for ``N``.  A snapshot
that a participant could not take (down, unreachable) is not complete, and
nothing is truncated for it.

Usage::

    coordinator = SnapshotCoordinator(lambda: head.catalog, lambda: head.store, head.membership,
                                      head.peers, interval=5.0)
    coordinator.start()                 # the periodic task, owned by the coordinator
    result = await coordinator.take()   # one now: {"id": 8, "complete": True, "nodes": {...}}
    await coordinator.close()
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import Callable
from typing import Any

from boreas.catalog.model import Catalog
from boreas.catalog.store import CatalogStore
from boreas.catalog.words import counted
from boreas.wire.addressing import endpoint_url
from boreas.wire.client import PeerClient, PeerError

from .membership import Membership

log = logging.getLogger(__name__)

META_KEY = "snapshot"


class SnapshotCoordinator:
    def __init__(self, catalog: Callable[[], Catalog], store: Callable[[], CatalogStore | None],
                 membership: Membership, peers: PeerClient, interval: float = 5.0, timeout: float = 60.0):
        self.catalog = catalog
        self.store = store
        self.membership = membership
        self.peers = peers
        self.interval = interval
        self.timeout = timeout
        self.complete: dict[str, Any] | None = None  # the last complete snapshot, as recorded
        self.last_attempt: dict[str, Any] | None = None
        self._started_id = 0
        self._lock = asyncio.Lock()
        self._task: asyncio.Task | None = None

    @property
    def complete_id(self) -> int:
        return int(self.complete["id"]) if self.complete else 0

    async def load(self) -> None:
        """Read the last complete snapshot from the store (a restarted Head continues from it)."""
        store = self.store()
        assert store is not None
        text = await asyncio.to_thread(store.get_meta, META_KEY)
        if text:
            self.complete = json.loads(text)
            self._started_id = max(self._started_id, self.complete_id)

    def start(self) -> None:
        if self.interval > 0:
            self._task = asyncio.create_task(self._periodic(), name="snapshots")
            self._task.add_done_callback(self._ended)

    def _ended(self, task: asyncio.Task) -> None:
        if not task.cancelled() and task.exception() is not None:
            log.error("the snapshot schedule stopped: %r; restarting it", task.exception())
            self.start()

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def _periodic(self) -> None:
        while True:
            await asyncio.sleep(self.interval)
            if self.participants():
                await self.take()

    def participants(self) -> list[str]:
        """Live durable nodes whose slice has state or input: every one must confirm a snapshot."""
        catalog = self.catalog()
        busy = {b.node for b in catalog.boxes.values()} | {p.node for p in catalog.publications.values()}
        return sorted(e for e in catalog.nodes if e in busy and self.membership.recovery(e).get("durable"))

    async def take(self) -> dict[str, Any]:
        """Take one snapshot now; returns its id, whether it is complete, and each node's answer."""
        async with self._lock:
            nodes = self.participants()
            self._started_id = max(self._started_id, self.complete_id) + 1
            snapshot_id = self._started_id
            started = time.time()
            answers = await asyncio.gather(*(self._ask(e, snapshot_id) for e in nodes))
            replies = dict(zip(nodes, answers))
            failed = {e: r["error"] for e, r in replies.items() if "error" in r}
            result: dict[str, Any] = {"id": snapshot_id, "complete": bool(nodes) and not failed,
                                      "time": started, "seconds": round(time.time() - started, 3),
                                      "nodes": replies}
            if not nodes:
                result["reason"] = "no live durable node holds boxes or inputs"
            elif failed:
                result["reason"] = "; ".join(f"{e}: {why}" for e, why in sorted(failed.items()))
                log.warning("snapshot %d is not complete: %s", snapshot_id, result["reason"])
            else:
                record = {"id": snapshot_id, "time": started,
                          "nodes": {e: r.get("position") for e, r in replies.items()}}
                store = self.store()
                assert store is not None
                await asyncio.to_thread(store.put_meta, META_KEY, json.dumps(record))
                self.complete = record
                log.info("snapshot %d complete on %s", snapshot_id, counted(len(nodes), "node"))
            self.last_attempt = {k: v for k, v in result.items() if k != "nodes"}
            return result

    async def _ask(self, endpoint: str, snapshot_id: int) -> dict[str, Any]:
        try:
            return await self.peers.call("POST", endpoint_url(endpoint, "/snapshot"),
                                              json_body={"id": snapshot_id}, timeout=self.timeout)
        except PeerError as exc:
            return {"error": str(exc)}

    def status(self) -> dict[str, Any]:
        return {"interval": self.interval, "last_complete": self.complete, "last_attempt": self.last_attempt,
                "participants": self.participants()}
