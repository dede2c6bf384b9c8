"""Which of several Heads leads, seen from the Head's event loop; followers redirect what changes anything.

Several Heads may serve one ZooKeeper catalog (docs/architecture.md,
"Leadership and fencing").  Each holds the store's lease
(:mod:`boreas.catalog.store.lease`); the one that leads commits, keeps the
nodes' local catalogs current, feeds global components, takes snapshots and
fails dead nodes over.  The others follow the catalog (their reads are
current to within a watch's delay) and answer every request that would
change something -- any method but GET, and a submission's status, which
the leader keeps -- with ``307 Temporary Redirect`` to the leader's URL
(``Location``, and ``{"leader", "location"}`` in the body for clients that
do not read headers).  While no Head leads (an election is under way) they
answer 503 with ``"leader": null``; clients retry (:mod:`boreas.wire.heads`).

A Head that loses the lead (its ZooKeeper session expired, or it was cut
off from ZooKeeper for 5/6 of its session timeout) stops: ``lost`` is set and
``boreas head`` exits with status 3, so that what supervises it starts it
again as a follower.  Stopping is the one sure way to drop every task the
leader ran; its commits are fenced in the store anyway.

Usage::

    leadership = Leadership(advertised_url)
    await leadership.start(store, session_timeout=10.0)
    if await leadership.settle():            # leads: take up the leader's duties
        ...
    await leadership.elected.wait()          # else, when it does
    leadership.leading, leadership.leader()
    server.app.middlewares.append(leadership.redirect)
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web

from boreas.catalog.store import CatalogStore
from boreas.catalog.store.lease import HeadLease
from boreas.wire.server import json_error

log = logging.getLogger(__name__)

#: Methods a follower answers itself (reads); everything else goes to the leader.
READS = ("GET", "HEAD", "OPTIONS")
#: Reads that only the leader can answer: a submission's status needs what each node acknowledged, which
#: only the leader hears (its record it reads from the store when another Head took the submission).
LEADER_READS = ("/submissions",)


class Leadership:
    """This Head's lease, bridged to the event loop; the redirecting middleware followers serve with."""

    def __init__(self, url: str):
        self.url = url  # this Head's advertised URL: what followers redirect to
        self.lease: HeadLease | None = None
        self.elected = asyncio.Event()  # set once this Head leads: the service then takes up its duties
        self.lost = asyncio.Event()  # set when this Head led and no longer does: it must stop
        self.elected_at: float | None = None  # wall-clock time this Head was elected (bench/ha.py reads it)

    @property
    def leading(self) -> bool:
        return self.lease is not None and self.lease.leading and not self.lost.is_set()

    def leader(self) -> str | None:
        """The leading Head's URL; None while an election is under way."""
        if self.leading:
            return self.url
        return self.lease.leader() if self.lease is not None else None

    async def start(self, store: CatalogStore, session_timeout: float) -> None:
        """Take the store's lease and contend; ``elected`` is set (on the loop) once this Head leads."""
        loop = asyncio.get_running_loop()
        self.lease = await asyncio.to_thread(store.head_lease, self.url, session_timeout)
        self.lease.start(lambda: loop.call_soon_threadsafe(self._elected),
                         lambda: loop.call_soon_threadsafe(self._lost))

    async def settle(self, timeout: float = 5.0) -> bool:
        """Whether this Head leads once it started contending: when no other Head leads, it is the first
        contender and is elected in a moment, so wait for that (up to ``timeout``) before serving."""
        if self.leader() not in (None, self.url):
            return False
        with contextlib.suppress(TimeoutError):  # (asyncio.timeout, not wait_for: that can lose a cancel)
            async with asyncio.timeout(timeout):
                await self.elected.wait()
        return self.elected.is_set()

    def _elected(self) -> None:
        log.info("Head %s leads (epoch %d)", self.url, self.lease.epoch if self.lease else 0)
        self.elected_at = time.time()
        self.elected.set()

    def _lost(self) -> None:
        log.error("Head %s lost the lead: it stops (start it again to follow)", self.url)
        self.lost.set()

    def status(self) -> dict[str, Any]:
        """For ``GET /status``: who leads, since when (epoch), and this Head's part."""
        return {"url": self.url, "leading": self.leading, "leader": self.leader(),
                "epoch": self.lease.epoch if self.lease else 0, "elected_at": self.elected_at}

    @web.middleware
    async def redirect(self, request: web.Request,
                       handler: Callable[[web.Request], Awaitable[web.StreamResponse]]) -> web.StreamResponse:
        """Serve reads; send changes (and submission status) to the leader with 307, or 503 while none leads."""
        if self.leading or (request.method in READS and not request.path.startswith(LEADER_READS)):
            return await handler(request)
        leader = self.leader()
        if leader is None or leader == self.url:
            return json_error(503, "no Head leads the catalog yet (an election is under way); try again "
                                   "in a few seconds", leader=None)
        location = leader + request.rel_url.path_qs
        return web.json_response({"error": f"this Head follows; the leader is {leader}", "leader": leader,
                                  "location": location}, status=307, headers={"Location": location})

    async def close(self) -> None:
        if self.lease is not None:
            lease, self.lease = self.lease, None
            await asyncio.to_thread(lease.close)
