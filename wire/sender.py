"""Reliable Sender: update XML to one destination, one at a time, in order

:Status: used by the Head's global feeds, node reflections and node reports to the Head

Components keep each other current by POSTing update XML to ``/update``.
Each such stream of documents must arrive in order, survive the receiver
being down for a while, and never get stuck on one document the receiver
will not take.  :class:`ReliableSender` is that stream, for one destination:

- ``send(text)`` queues a document and returns at once (forward store);
- one worker task delivers the queue head, then the next: never two at once,
  never out of order;
- a transient failure -- nothing answered (:class:`PeerUnreachable`), a 5xx,
  408 or 429 -- retries *the same* document after a growing delay
  (:class:`~boreas.wire.backoff.Backoff`), and calls ``on_failure(exc)``
  first: a user whose backlog can be summarised (the Head's feed of a global
  component: a fresh full copy) replaces the queue there with :meth:`reset`;
- a refusal (any other 4xx, :class:`PeerRefused`) is final for that
  document: it is counted, handed to ``on_refused(text, exc)`` (by default
  logged) and skipped; retrying it would fail the same way forever;
- the queue is bounded: ``send`` on a full queue raises :class:`QueueFull`
  and queues nothing, so the caller decides (:meth:`reset` to a summary,
  or drop and log) instead of the sender growing without limit;
- ``flush(timeout)`` waits until what was queued before it is done (sent or
  refused); ``close(timeout)`` stops taking documents, delivers what is
  queued within ``timeout`` and stops; ``abort()`` stops at once and drops
  the queue;
- ``sent``, ``retries``, ``refused``, ``queued`` and ``failure`` (the last
  transient failure, None once a document got through) are for status pages.

The worker runs under a :class:`~boreas.wire.supervisor.Supervisor` (the
caller's, or one of its own), so a bug in it is logged and it is restarted.

Example usage with a :class:`~boreas.wire.client.PeerClient`:

.. code-block:: python

    sender = ReliableSender("localhost:16000", peers, name="reflect to region")
    sender.start()
    sender.send(update_document(items, origin=endpoint))
    await sender.flush(timeout=1.0)   # True once the region has it
    await sender.close(timeout=2.0)   # deliver what is queued, then stop

Doctest, against a stand-in for ``PeerClient`` that is down once, then
refuses one document:

>>> import asyncio, logging
>>> from boreas.wire.client import PeerRefused, PeerUnreachable
>>> logging.disable(logging.CRITICAL)
>>> class Peer:
...     def __init__(self):
...         self.got, self.down = [], 1
...     async def call(self, method, url, data=None, **kwargs):
...         if self.down:
...             self.down -= 1
...             raise PeerUnreachable(url, "connection refused")
...         if data == "bad":
...             raise PeerRefused(url, 422, {"error": "invalid"})
...         self.got.append(data)
...         return {}
>>> async def demo():
...     peer = Peer()
...     sender = ReliableSender("localhost:9", peer, backoff=Backoff(0.001, 0.01))
...     sender.start()
...     for text in ["a", "bad", "b"]:
...         sender.send(text)
...     delivered = await sender.close(timeout=5)
...     return delivered, peer.got, sender.stats()
>>> asyncio.run(demo())  # doctest: +NORMALIZE_WHITESPACE
(True, ['a', 'b'], {'target': 'http://localhost:9/update', 'queued': 0, 'sent': 2, 'retries': 1,
 'refused': 1, 'failure': None})
>>> logging.disable(logging.NOTSET)
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Callable
from typing import Any

from .addressing import endpoint_url
from .backoff import Backoff
from .client import XML, PeerClient, PeerError, PeerRefused
from .supervisor import Supervisor
from .move_report import MSGPACK

log = logging.getLogger(__name__)

#: Answers that mean "not now" rather than "not this": the same document is retried.
TRANSIENT_STATUSES = frozenset({408, 429})

RefusedCallback = Callable[[str | bytes, PeerRefused], Any]
FailureCallback = Callable[[PeerError], Any]


class QueueFull(RuntimeError):
    """``send`` found the queue at capacity; nothing was queued."""


class SenderClosed(RuntimeError):
    """``send`` after ``close()`` or ``abort()``."""


def update_url(target: str) -> str:
    """``/update`` of an endpoint (``host:port``) or of a base URL (the Head's ``http://...``).

    >>> update_url("localhost:15000"), update_url("http://localhost:14000/")
    ('http://localhost:15000/update', 'http://localhost:14000/update')
    """
    return f"{target.rstrip('/')}/update" if "://" in target else endpoint_url(target, "/update")


def is_transient(exc: PeerError) -> bool:
    """Worth retrying the same document: nothing answered, or the answer says "later"."""
    return not isinstance(exc, PeerRefused) or exc.status >= 500 or exc.status in TRANSIENT_STATUSES


class ReliableSender:
    """One ordered, retrying stream of update XML documents to ``target``; see the module docstring."""

    #: Seconds ``close`` waits for a target whose last attempt failed.
    DOWN_GRACE = 0.5

    def __init__(self, target: str, peers: PeerClient, name: str | None = None, capacity: int = 1000,
                 timeout: float | None = None, backoff: Backoff | None = None,
                 on_refused: RefusedCallback | None = None, on_failure: FailureCallback | None = None):
        self.target = target
        self.url = update_url(target)
        self.peers = peers
        self.name = name or f"send to {target}"
        self.capacity = capacity
        self.timeout = timeout  # per request; None: the PeerClient's
        self.backoff = backoff or Backoff(first=0.05, cap=5.0)
        self.on_refused = on_refused
        self.on_failure = on_failure
        self.sent = 0
        self.retries = 0
        self.refused = 0
        self.failure: str | None = None
        self._queue: deque[str | bytes] = deque()  # update XML, or a move report (wire/move_report.py)
        self._enqueued = 0  # documents ever queued; _done of them are sent, refused or dropped
        self._done = 0
        self._generation = 0  # bumped by reset(): the document in flight is no longer the head
        self._wake = asyncio.Event()
        self._progress = asyncio.Event()  # set (and replaced) whenever _done grows
        self._closed = False
        self._supervisor: Supervisor | None = None
        self._own_supervisor = False

    @property
    def queued(self) -> int:
        return len(self._queue)

    @property
    def closed(self) -> bool:
        return self._closed

    def stats(self) -> dict[str, Any]:
        return {"target": self.url, "queued": self.queued, "sent": self.sent, "retries": self.retries,
                "refused": self.refused, "failure": self.failure}

    # -- lifecycle --------------------------------------------------------------

    def start(self, supervisor: Supervisor | None = None) -> None:
        """Start delivering (documents sent before are kept); the worker runs under ``supervisor``."""
        if self._supervisor is not None:
            return
        self._own_supervisor = supervisor is None
        self._supervisor = supervisor or Supervisor(self.name)
        self._supervisor.spawn(self.name, self._run)

    async def close(self, timeout: float = 5.0) -> bool:
        """Take no more documents, deliver the queue within ``timeout``, stop; False if some were left.

        Once an attempt fails (``failure`` is set: the target is down or
        answers "later"), at most :attr:`DOWN_GRACE` more seconds: a
        component that is stopping must not hold its shutdown (and its port)
        for a peer that is not there.
        """
        self._closed = True
        delivered = await self._deliver_before_close(timeout) if self._supervisor is not None else not self._queue
        if not delivered:
            log.warning("%s: closing with %d update(s) not delivered (%s)", self.name, self.queued,
                        self.failure or "no answer in time")
        await self._stop()
        self._drop_queue()
        return delivered

    async def _deliver_before_close(self, timeout: float) -> bool:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        graced = False
        while True:
            if self.failure is not None and not graced:
                deadline, graced = min(deadline, loop.time() + self.DOWN_GRACE), True
            remaining = deadline - loop.time()
            if await self.flush(max(0.0, min(remaining, 0.1))) or remaining <= 0:
                return not self._queue

    def abort(self) -> None:
        """Stop at once and drop the queue (the worker is cancelled, not awaited)."""
        self._closed = True
        self._drop_queue()
        if self._supervisor is not None:
            self._supervisor.cancel(self.name)

    # -- queueing -----------------------------------------------------------------

    def send(self, text: str | bytes) -> None:
        """Queue ``text`` after everything queued before; raises :class:`QueueFull` at capacity.  Bytes are a
        move report (:mod:`.move_report`), sent as msgpack."""
        if self._closed:
            raise SenderClosed(f"{self.name}: closed")
        if len(self._queue) >= self.capacity:
            raise QueueFull(f"{self.name}: {len(self._queue)} updates queued (capacity {self.capacity})")
        self._queue.append(text)
        self._enqueued += 1
        self._wake.set()

    def reset(self, texts: list[str]) -> None:
        """Replace the whole queue with ``texts`` (e.g. a fresh full copy); the old ones count as done.

        A document in flight may still arrive; the new queue follows it.
        Capacity is not checked: a summary is what replaces a full queue.
        """
        if self._closed:
            raise SenderClosed(f"{self.name}: closed")
        self._drop_queue()
        self._queue.extend(texts)
        self._enqueued += len(texts)
        self._wake.set()

    async def flush(self, timeout: float) -> bool:
        """Wait until every document queued before this call is sent or refused; False on timeout."""
        target = self._enqueued
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while self._done < target:
            remaining = deadline - loop.time()
            if remaining <= 0:
                return False
            try:
                async with asyncio.timeout(remaining):  # (not wait_for: it can lose a cancel)
                    await self._progress.wait()
            except TimeoutError:
                return self._done >= target
        return True

    # -- the worker ----------------------------------------------------------------

    async def _run(self) -> None:
        while True:
            if not self._queue:
                self._wake.clear()
                await self._wake.wait()
                continue
            generation, text = self._generation, self._queue[0]
            try:
                await self.peers.call("POST", self.url, data=text, timeout=self.timeout,
                                      content_type=XML if isinstance(text, str) else MSGPACK)
            except PeerError as exc:
                if is_transient(exc):
                    await self._retry_later(exc)
                    continue
                self.refused += 1
                self._refused(text, exc)  # type: ignore[arg-type]
            except Exception:
                self.refused += 1
                log.exception("%s: sending an update failed unexpectedly; skipping it", self.name)
            else:
                self.sent += 1
                self.failure = None
                self.backoff.reset()
            self._finished(generation)

    async def _retry_later(self, exc: PeerError) -> None:
        self.retries += 1
        first = self.failure is None
        self.failure = str(exc)
        (log.info if first else log.debug)("%s: %s (will retry)", self.name, exc)
        if self.on_failure is not None:
            try:
                self.on_failure(exc)
            except Exception:
                log.exception("%s: on_failure raised", self.name)
        await self.backoff.sleep()

    def _refused(self, text: str | bytes, exc: PeerRefused) -> None:
        if self.on_refused is None:
            log.warning("%s: refused, skipping it: %s", self.name, exc)
            return
        try:
            self.on_refused(text, exc)
        except Exception:
            log.exception("%s: on_refused raised", self.name)

    def _finished(self, generation: int) -> None:
        if generation == self._generation and self._queue:
            self._queue.popleft()
            self._advance(1)

    def _drop_queue(self) -> None:
        dropped = len(self._queue)
        self._queue.clear()
        self._generation += 1
        self._advance(dropped)

    def _advance(self, count: int) -> None:
        self._done += count
        self._progress.set()
        self._progress = asyncio.Event()

    async def _stop(self) -> None:
        if self._supervisor is None:
            return
        if self._own_supervisor:
            await self._supervisor.close()
        else:
            await self._supervisor.stop(self.name)
