"""Where one publisher's stream enters: its links to the entry nodes, followed while it publishes.

Why an owner of its own: the entry of a stream can change under a
publisher in three ways, and each must move the batches in flight without
losing or reordering them:

- a partitioned box's coordinator hands this producer to another member
  (an ``Ack.moved`` hint: docs/cumulus.md §6.5);
- an entry node is unreachable for :data:`REROUTE_AFTER` (it failed over):
  the Head is asked where the stream enters now;
- the entry node refuses batches as not entering there any more
  (``Refused(retry=True)``): they are held (:mod:`.held`), the Head is
  asked, and they go to the new entry first, in order; refused for good
  only if the Head names no other node.

One :class:`Route` per :class:`~boreas.client.publisher.Publisher` owns the
links, the hint, the held batches and the task that follows them; the
publisher owns what it sends and counts what the nodes answer.

Usage::

    route = Route(head, stream, token, producer, member, connect=publisher_link, reply=publisher_replied)
    await route.start(entries)                 # one link per entry node; the following task runs
    route.links[0]                             # the ordered link batches go on
    route.moved(endpoint) / route.hold(batch, reason)   # an acknowledgement's hint, a retryable refusal
    await route.stop()
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable

from boreas.wire.client import PeerClient
from boreas.wire.frames import Batch, Frame, Refused
from boreas.wire.links import OutboundLink

from .entries import pick_entries
from .head_api import stream_route
from .held import Held

log = logging.getLogger(__name__)

#: An entry node unreachable this long: ask the Head again where the stream enters (it may have
#: failed over to another node, which then takes what the old one never acknowledged).
REROUTE_AFTER = 2.0

#: ``connect(endpoint, first)``: a started link to an entry node (``first``: the one whose replies are counted).
Connect = Callable[[str, bool], Awaitable[OutboundLink]]


class Route:
    """The links of one producer's stream and the task following where it enters (module doc)."""

    def __init__(self, head: str, stream: str, token: str | None, producer: str, member: int | None,
                 connect: Connect, reply: Callable[[Batch, Frame], None]):
        self.head = head
        self.stream = stream
        self.token = token
        self.producer = producer
        self.member = member  # a partitioned box's member to feed (pick_entries), if the publisher is pinned
        self.entries: list[str] = []
        self.links: list[OutboundLink] = []
        self.held = Held()  # batches the entry refused as not entering there: re-sent where the Head says
        self._connect = connect
        self._reply = reply  # the publisher's answer to a batch (a held batch refused for good goes there)
        self._moved: str | None = None  # a node the stream's coordinator handed this producer to (an Ack's hint)
        self._move = asyncio.Event()
        self._task: asyncio.Task | None = None

    @property
    def following(self) -> bool:
        return self._task is not None

    async def start(self, entries: list[str]) -> None:
        """Connect to ``entries`` (the first carries the ordered batches) and start following the route."""
        self.entries = list(entries)
        for endpoint in self.entries:
            self.links.append(await self._connect(endpoint, endpoint == self.entries[0]))
        self._task = asyncio.create_task(self._follow(), name=f"publisher {self.producer} route")
        self._task.add_done_callback(self._ended)

    def moved(self, endpoint: str) -> None:
        """An acknowledgement said the stream's coordinator handed this producer to ``endpoint``."""
        if self._moved != endpoint:
            self._moved = endpoint
            self._move.set()

    def hold(self, batch: Batch, reason: str) -> None:
        """The entry node refused ``batch`` as not entering there (it may enter elsewhere now)."""
        self.held.hold(batch, reason)
        self._move.set()

    async def stop(self) -> None:
        """Stop following (the links stay: the publisher aborts them)."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    def _ended(self, task: asyncio.Task) -> None:
        if not task.cancelled() and task.exception() is not None:  # never silently: failover is lost
            log.error("publisher %s stopped following %s's route", self.producer, self.stream,
                      exc_info=task.exception())

    async def _follow(self) -> None:
        """Follow a coordinator's hint, re-send held batches, and while an entry node is unreachable, ask the Head
        where the stream enters now (failover)."""
        while True:
            with contextlib.suppress(TimeoutError):  # (asyncio.timeout: wait_for of 3.11 can swallow a cancel)
                async with asyncio.timeout(REROUTE_AFTER / 2):
                    await self._move.wait()
            if self._move.is_set():
                self._move.clear()
                moved, self._moved = self._moved, None
                if moved is not None and len(self.links) == 1 and moved != self.links[0].endpoint:
                    await self._reroute([moved])
                if not self.held:
                    continue
            if self.held:
                await self._resend_held()
                continue
            if not any(link.down_for > REROUTE_AFTER for link in self.links):
                continue
            try:
                route = await self._ask_head()
            except Exception as exc:  # the Head may be down too: keep trying
                log.debug("publisher %s: cannot ask the Head for %s's route: %s", self.producer, self.stream, exc)
                continue
            await self._reroute(pick_entries(route, self.producer, self.member))

    async def _ask_head(self) -> dict:
        async with PeerClient(self.token) as peers:
            return await stream_route(peers, self.head, self.stream)

    async def _resend_held(self) -> None:
        """Ask the Head where the stream enters now and re-send the held batches there; refuse them for good if it
        names no other node.  Left held if the Head does not answer (asked again soon)."""
        try:
            route = await self._ask_head()
        except Exception as exc:  # the Head may be down or failing over: keep them, ask again
            log.debug("publisher %s: cannot ask the Head for %s's route: %s", self.producer, self.stream, exc)
            return
        entries = pick_entries(route, self.producer, self.member)
        if entries and entries[0] != self.links[0].endpoint:
            await self._reroute(entries[:1])
        reason = self.held.reason
        for batch in self.held.take():  # (still held: nowhere else to send them)
            self._reply(batch, Refused(batch.stream, batch.producer, batch.seq, reason, retry=False))

    async def _reroute(self, entries: list[str]) -> None:
        current = [link.endpoint for link in self.links]
        new = [e for e in entries if e not in current]
        for index, link in enumerate(list(self.links)):
            if link.endpoint in entries or len(new) != 1:
                continue
            replacement = await self._connect(new.pop(), index == 0)
            if index == 0 and self.held:  # (before what the old link still holds: they come first in order)
                replacement.requeue(self.held.take())
            moved = link.redirect(self.stream, replacement)
            self.links[index] = replacement
            self.entries = [one.endpoint for one in self.links]
            await link.abort()
            log.warning("publisher %s: stream %s now enters at %s instead of %s (%d unacknowledged batches "
                        "handed over)", self.producer, self.stream, replacement.endpoint, link.endpoint, moved)
