"""A persistent, ordered, acknowledged data connection to one endpoint.

Node → node, node → subscriber and publisher → node traffic all go through
an :class:`OutboundLink`: a WebSocket to the receiver's ``/data`` that
carries batches in order, with a bounded number in flight.  Every batch gets
a sequence number per stream; the link keeps a batch until the receiver
acknowledges it, and after a reconnect re-sends what was not acknowledged.
The receiver drops what it has already seen, so a batch is delivered exactly
once even across connection loss.

Flow control is one bound: ``capacity`` batches may be queued or in flight;
``send`` waits when it is reached, so a slow receiver slows its producers
instead of growing memory.  A link to a client subscriber may instead
``drop_when_down``: once connecting there has failed for ``DOWN_GRACE``
seconds, batches are counted and dropped rather than stalling the node.

A link to a **named** subscriber (``name=``) never drops for being down or
slow: its batches wait until they are acknowledged, up to ``retain_bytes``
and ``retain_for`` seconds without an acknowledgement; past either, they
are dropped and the subscriber is told how much it missed (a ``Goodbye``)
as soon as it is connected, here or, handed over by :meth:`OutboundLink.redirect`,
at its new endpoint.

A receiver that refuses the link at the WebSocket handshake with 401 or 403
(a missing or wrong cluster token: a publisher without ``--token``, a node
of another cluster) is named in :attr:`OutboundLink.last_error`, and the
link keeps trying (the receiver may be restarted with the right token).  A
link made with ``refusal_is_final=True`` (a client's: there is nobody to fix
it while it waits) instead fails for good: :attr:`OutboundLink.failure` is
a :class:`LinkRefused` saying why, and pending and later ``send()`` and
``flush()`` raise it.

A link is composed of three objects, each the one owner of its state:

* a :class:`~boreas.wire.link_queue.LinkQueue`: the batches admitted,
  queued and not yet acknowledged, the capacity, idleness;
* a :class:`~boreas.wire.link_connection.LinkConnection`: the WebSocket
  (connecting, re-sending after a reconnect, the window, acknowledgements,
  refusals at the handshake);
* a :class:`~boreas.wire.link_cutoff.CutOff`: whether a subscriber was cut
  off for being slow or falling behind, and telling it why.

:class:`OutboundLink` itself is what the link does for its senders:
numbering batches, admitting them (waiting for room, borrowing while the
receiver is down, dropping), and handing a stream's batches to another
link.

Usage::

    link = OutboundLink("localhost:15001", token, sender="localhost:15000#ab12")
    await link.start()
    await link.send("Packet", [(1, "tcp"), (2, "udp")])
    await link.flush()
    await link.close()
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import Counter
from typing import Any

from .frames import Batch, make_batch
from .link_connection import LinkConnection, LinkRefused, ReplyCallback
from .link_cutoff import CutOff
from .link_queue import LinkQueue

#: A drop-when-down link drops only after connecting has failed for this long, so a new link
#: (a subscriber just registered, a box just moved) gets time to connect first.
DOWN_GRACE = 2.0


class OutboundLink:
    """One destination's link: its queue, its connection and its cut-off policy (the module docstring)."""

    def __init__(self, endpoint: str, token: str | None, sender: str, *, window: int = 16,
                 capacity: int = 64, drop_when_down: bool = False, on_reply: ReplyCallback | None = None,
                 down_capacity: int = 0, on_slow: str = "block", refusal_is_final: bool = False,
                 digests: bool = False, retain_bytes: int = 0, slow_after: float = 0.0,
                 name: str | None = None, retain_for: float = 0.0):
        self.endpoint = endpoint
        self.sender = sender
        # A named subscriber's link: its batches wait for it while it is down (it resumes,
        # perhaps at another endpoint: :meth:`redirect`), up to ``retain_bytes`` and for ``retain_for`` seconds
        # without an acknowledgement; past that they are dropped and it is told so when it comes back.
        self.name = name
        self.digests = digests  # batches carry a digest of their rows (a publisher's: wire/digests.py)
        self.drop_when_down = drop_when_down
        self.counters: Counter[str] = Counter()
        # While the receiver is down (a node restarting), up to ``down_capacity`` more batches wait
        # in the queue instead of stalling the sender: only the failed node's boxes pause, not its upstream.
        self.queue = LinkQueue(capacity, down_capacity, count_bytes=bool(retain_bytes))
        # A subscriber that disconnects when slow is judged by whether it keeps acknowledging, not by a
        # burst: up to ``retain_bytes`` of batches wait for it, and it is cut off only when they would pass
        # that, or when it acknowledged nothing for ``slow_after`` seconds while batches waited for it.
        self.cutoff = CutOff(self.queue, self.counters, f"{sender} -> {endpoint}", on_slow=on_slow, name=name,
                             retain_bytes=retain_bytes, retain_for=retain_for, slow_after=slow_after)
        self.connection = LinkConnection(endpoint, token, sender, self.queue, self.cutoff, self.counters,
                                         window=window, refusal_is_final=refusal_is_final, on_reply=on_reply)
        self.forward_to_box = ""  # a forwarding link marks its batches for the moved box
        self._redirects: dict[str, OutboundLink] = {}  # streams whose consumer moved to another link
        self.last_sent = time.monotonic()  # when a batch was last queued
        self._seq: Counter[str] = Counter()

    # -- what the parts know -----------------------------------------------------

    @property
    def connected(self) -> bool:
        return self.connection.connected

    @property
    def last_error(self) -> str | None:
        """Why the receiver cannot be reached (None while it can)."""
        return self.connection.last_error

    @property
    def failure(self) -> LinkRefused | None:
        """Set once the link has failed for good."""
        return self.connection.failure

    @property
    def down_for(self) -> float:
        """Seconds connecting has been failing (0 while connected)."""
        return self.connection.down_for()

    @property
    def in_flight(self) -> int:
        return self.queue.in_flight

    # -- lifecycle -------------------------------------------------------------

    async def start(self) -> None:
        self.connection.start()

    async def close(self, flush_timeout: float = 5.0) -> None:
        """Deliver what is queued (for up to ``flush_timeout`` s), then disconnect."""
        with contextlib.suppress(asyncio.TimeoutError):
            await self.flush(flush_timeout)
        await self.abort()

    async def abort(self) -> None:
        await self.cutoff.abort()  # a subscriber being told why it was cut off
        await self.connection.abort()

    # -- sending ---------------------------------------------------------------

    def _dropped(self, rows: list[Any]) -> None:
        self.counters["dropped_batches"] += 1
        self.counters["dropped_rows"] += len(rows)

    def _number(self, stream: str) -> tuple[str, int]:
        seq = self._seq[stream]
        self._seq[stream] = seq + 1
        return self.sender, seq

    async def send(self, stream: str, rows: list[Any], producer: str | None = None,
                   seq: int | None = None, box: str = "", restart: bool = False, final: bool = False) -> int | None:
        """Queue one batch (waits while the link is full); its sequence number, or None if dropped.

        The link numbers the batches of each stream itself, as producer
        ``sender``, unless the caller names the producer and sequence (a
        box's output, or a batch forwarded as it came).  Raises :attr:`failure`
        once the link has failed for good.
        """
        if self.failure is not None:
            raise self.failure
        if self.cutoff.reason is not None:
            self._dropped(rows)
            return None
        redirect = self._redirects.get(stream)
        if redirect is None:
            if not await self._room():
                self._dropped(rows)
                return None
            redirect = self._redirects.get(stream)
            if redirect is not None:  # redirected while this send waited for room: not ours now
                self.queue.pay_back()
        if redirect is not None:
            if producer is None and redirect.sender != self.sender:  # else it continues our numbering
                producer, seq = self._number(stream)
            return await redirect.send(stream, rows, producer, seq, box, restart, final)
        if producer is None:
            producer, seq = self._number(stream)
        assert seq is not None, "a named producer needs a sequence number"
        self.last_sent = time.monotonic()
        batch = make_batch(stream, producer, seq, rows, box or self.forward_to_box, restart, self.digests, final)
        self.queue.admit(batch)
        if self.name is not None and (why := self.cutoff.past_keeping()):
            self.queue.enqueue(batch)
            self.cutoff.fall_behind(why, self.sender, self.connection.ws)
            return None
        if not await self.connection.write_now(batch):
            self.queue.enqueue(batch)
        return seq

    async def flush(self, timeout: float | None = None) -> None:
        """Wait until every queued batch is acknowledged; raises :attr:`failure` if the link failed for good."""
        async with asyncio.timeout(timeout):  # (not wait_for: in Python 3.11 it can lose a cancel)
            await self.queue.idle.wait()
        if self.failure is not None:
            raise self.failure

    async def _room(self) -> bool:
        """Wait for room; False if this link drops instead (down past the grace period)."""
        queue = self.queue
        if not self.drop_when_down:
            if queue.full() and self.connection.down_for() > 0 and queue.borrow():
                self.counters["queued_while_down"] += 1
                return True
            await queue.acquire()
            return True
        while self.connection.down_for() <= DOWN_GRACE:
            if (self.connected and self.cutoff.on_slow != "block"
                    and (queue.full() or self.cutoff.past_retention())):
                self.cutoff.too_slow(self.sender, self.connection.ws)  # a whole buffer behind: never make the node wait
                return False
            if not queue.full():  # room now: no timer (wait_for makes a task and takes turns of the loop)
                await queue.acquire()
                return True
            try:
                await asyncio.wait_for(queue.acquire(), 0.25)
                return True
            except asyncio.TimeoutError:
                continue
        return False

    # -- handing batches over ---------------------------------------------------

    def drain_unsent(self) -> list[Batch]:
        """Take back every batch not yet sent (a link that will not be started after all)."""
        return self.queue.drain_unsent()

    def redirect(self, stream: str, other: OutboundLink) -> int:
        """``stream`` now goes to ``other`` (its consumer moved, or failed over): hand it what waits here.

        Every batch of ``stream`` not yet acknowledged here, sent or not, is
        queued on ``other`` in sequence order, and later sends of the stream
        on this link go there too.  The new receiver drops what it already
        has, so a batch both delivered here and handed over counts once;
        what the old receiver (a failed node) never acknowledged is not
        lost with it.  Returns how many batches moved.
        """
        if other is self:
            return 0
        other.cutoff.inherit(self.cutoff)  # a named subscriber that fell behind while down hears it there
        if other.sender == self.sender:  # the same producer: its numbering continues there
            other._seq[stream] = max(other._seq[stream], self._seq[stream])
        self._redirects[stream] = other
        moved = self.take(stream)
        other.requeue(moved)
        return len(moved)

    def unredirect(self, stream: str) -> None:
        """``stream`` is sent here again."""
        self._redirects.pop(stream, None)

    def requeue(self, batches: list[Batch]) -> None:
        """Queue batches handed over from another link, beyond capacity (they were admitted there)."""
        self.queue.requeue(batches)

    def take(self, stream: str) -> list[Batch]:
        """Take back every batch of ``stream`` not yet acknowledged, sent or not, in sequence order.

        Its consumer is now local, or elsewhere (:meth:`redirect`).
        """
        moved = self.queue.take_stream(stream)
        self.connection.reopen_window()
        self.counters["redirected_batches"] += len(moved)
        return moved

    def pending(self) -> list[Batch]:
        """Every batch not acknowledged yet, sent or still queued, in the order they were sent (left in place).

        A node's snapshot keeps them: they derive from inputs before the
        snapshot, so a restart from it would never produce them again.
        """
        return self.queue.pending()

