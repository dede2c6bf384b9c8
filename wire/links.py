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

The connection itself (connecting, re-sending after a reconnect, the
window, acknowledgements, refusals at the handshake) is in
:mod:`.link_connection`, a mixin of :class:`OutboundLink`.  This module is
what the link does for its senders: numbering batches, the capacity (waiting
for room, borrowing while the receiver is down, dropping, slow clients), and
handing a stream's batches to another link.

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
import logging
import time
from collections import Counter, OrderedDict
from collections.abc import Callable
from typing import Any

import aiohttp

from .client import open_session
from .frames import Batch, Frame, Goodbye, encode, make_batch, rows_in
from .link_connection import LinkConnection, LinkRefused

log = logging.getLogger(__name__)

ReplyCallback = Callable[[Batch, Frame], None]

#: A drop-when-down link drops only after connecting has failed for this long, so a new link
#: (a subscriber just registered, a box just moved) gets time to connect first.
DOWN_GRACE = 2.0

#: What a link to a client does when its buffer is full because the client reads too slowly:
#: wait (back-pressure on everything the node sends), drop the batch, or say goodbye and drop
#: what was buffered (the client sees why).  Links between nodes always wait.
ON_SLOW = ("block", "drop", "disconnect")
SLOW_CLOSE = 4008  # WebSocket close code after a Goodbye for slowness


class OutboundLink(LinkConnection):
    def __init__(self, endpoint: str, token: str | None, sender: str, *, window: int = 16,
                 capacity: int = 64, drop_when_down: bool = False, on_reply: ReplyCallback | None = None,
                 down_capacity: int = 0, on_slow: str = "block", refusal_is_final: bool = False,
                 digests: bool = False, retain_bytes: int = 0, slow_after: float = 0.0,
                 name: str | None = None, retain_for: float = 0.0):
        self.endpoint = endpoint
        # A named subscriber's link: its batches wait for it while it is down (it resumes,
        # perhaps at another endpoint: :meth:`redirect`), up to ``retain_bytes`` and for ``retain_for`` seconds
        # without an acknowledgement; past that they are dropped and it is told so when it comes back.
        self.name = name
        self.retain_for = retain_for
        self.digests = digests  # batches carry a digest of their rows (a publisher's: wire/digests.py)
        # A subscriber that disconnects when slow is judged by whether it keeps acknowledging, not by a
        # burst: up to ``retain_bytes`` of batches wait for it, and it is cut off only when they would pass
        # that, or when it acknowledged nothing for ``slow_after`` seconds while batches waited for it.
        self.retain_bytes = retain_bytes
        self.slow_after = slow_after
        self.buffered_bytes = 0  # rows' bytes queued or in flight (counted when ``retain_bytes`` is set)
        self.cut_off: str | None = None  # why this subscriber was cut off: nothing more is sent to it
        self.told = False  # the subscriber was sent ``cut_off`` (a named one is told when it comes back)
        self._last_progress = time.monotonic()  # the receiver's last acknowledgement (or the first batch after idle)
        self.sender = sender
        self.window = window
        self.drop_when_down = drop_when_down
        self.on_reply = on_reply
        self.counters: Counter[str] = Counter()
        self.connected = False
        self.last_error: str | None = None
        self.refusal_is_final = refusal_is_final
        self.failure: LinkRefused | None = None  # set once the link has failed for good
        self._down_since: float | None = None  # a connect attempt failed then, none succeeded since
        self._token = token
        self._capacity = asyncio.Semaphore(capacity)
        # While the receiver is down (a node restarting), up to ``down_capacity`` more batches wait
        # here instead of stalling the sender: only the failed node's boxes pause, not its upstream.
        self.down_capacity = down_capacity
        if on_slow not in ON_SLOW:
            raise ValueError(f"on_slow must be one of {', '.join(ON_SLOW)}, not {on_slow!r}")
        self.on_slow = on_slow
        self._ws: aiohttp.ClientWebSocketResponse | None = None  # the current connection
        self._goodbyes: set[asyncio.Task] = set()
        self._borrowed = 0  # batches queued beyond capacity while down; acks pay them back first
        self._queued: asyncio.Queue[Batch] = asyncio.Queue()
        self._unacked: OrderedDict[tuple[str, str, int], Batch] = OrderedDict()
        self.forward_to_box = ""  # a forwarding link marks its batches for the moved box
        self._redirects: dict[str, OutboundLink] = {}  # streams whose consumer moved to another link
        self._window_open: asyncio.Event | None = None  # the current connection's send window
        self._live: aiohttp.ClientWebSocketResponse | None = None  # connected, re-sends done: send() may write
        self.last_sent = time.monotonic()  # when a batch was last queued
        self._seq: Counter[str] = Counter()
        self._idle = asyncio.Event()
        self._idle.set()
        self._task: asyncio.Task | None = None
        self._session: aiohttp.ClientSession | None = None

    # -- lifecycle -------------------------------------------------------------

    async def start(self) -> None:
        self._session = open_session(self._token)
        self._task = asyncio.create_task(self._run(), name=f"link to {self.endpoint}")

    async def close(self, flush_timeout: float = 5.0) -> None:
        """Deliver what is queued (for up to ``flush_timeout`` s), then disconnect."""
        with contextlib.suppress(asyncio.TimeoutError):
            await self.flush(flush_timeout)
        await self.abort()

    async def abort(self) -> None:
        for goodbye in list(self._goodbyes):  # a subscriber being told why it was cut off
            goodbye.cancel()
        await asyncio.gather(*self._goodbyes, return_exceptions=True)
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        if self._session is not None:
            await self._session.close()
            self._session = None

    # -- sending ---------------------------------------------------------------

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
        if self.cut_off is not None:
            self.counters["dropped_batches"] += 1
            self.counters["dropped_rows"] += len(rows)
            return None
        redirect = self._redirects.get(stream)
        if redirect is None:
            if not await self._room():
                self.counters["dropped_batches"] += 1
                self.counters["dropped_rows"] += len(rows)
                return None
            redirect = self._redirects.get(stream)
            if redirect is not None:  # redirected while this send waited for room: not ours now
                self._pay_back()
        if redirect is not None:
            if producer is None and redirect.sender != self.sender:  # else it continues our numbering
                producer, seq = self.sender, self._seq[stream]
                self._seq[stream] = seq + 1
            return await redirect.send(stream, rows, producer, seq, box, restart, final)
        if producer is None:
            producer, seq = self.sender, self._seq[stream]
            self._seq[stream] = seq + 1
        assert seq is not None, "a named producer needs a sequence number"
        if self.name is not None and self._idle.is_set():  # waiting starts now, not at the last acknowledgement
            self._last_progress = time.monotonic()
        self._idle.clear()
        self.last_sent = time.monotonic()
        batch = make_batch(stream, producer, seq, rows, box or self.forward_to_box, restart, self.digests, final)
        if self.retain_bytes:
            self.buffered_bytes += len(batch.rows)
        if self.name is not None and (why := self._past_keeping()):
            self._queued.put_nowait(batch)
            self._fall_behind(why)
            return None
        if not await self._write_now(batch):
            self._queued.put_nowait(batch)
        return seq

    async def flush(self, timeout: float | None = None) -> None:
        """Wait until every queued batch is acknowledged; raises :attr:`failure` if the link failed for good."""
        await asyncio.wait_for(self._idle.wait(), timeout)
        if self.failure is not None:
            raise self.failure

    async def _room(self) -> bool:
        """Wait for room; False if this link drops instead (down past the grace period)."""
        if not self.drop_when_down:
            if self._capacity.locked() and self._borrowed < self.down_capacity and self._down_for() > 0:
                self._borrowed += 1
                self.counters["queued_while_down"] += 1
                return True
            await self._capacity.acquire()
            return True
        while self._down_for() <= DOWN_GRACE:
            if self.connected and self.on_slow != "block" and (self._capacity.locked() or self._past_retention()):
                self._too_slow()  # the client is a whole buffer behind: never make the node wait
                return False
            if not self._capacity.locked():  # room now: no timer (wait_for makes a task and takes turns of the loop)
                await self._capacity.acquire()
                return True
            try:
                await asyncio.wait_for(self._capacity.acquire(), 0.25)
                return True
            except asyncio.TimeoutError:
                continue
        return False

    def _past_retention(self) -> bool:
        return bool(self.retain_bytes) and self.buffered_bytes > self.retain_bytes

    def stalled_for(self) -> float:
        """Seconds batches have waited for the receiver with no acknowledgement (0 while it keeps up)."""
        if not self._unacked:
            return 0.0
        return time.monotonic() - self._last_progress

    def _past_keeping(self) -> str:
        """Why a named subscriber's batches can no longer be kept for it ("" while they can)."""
        if self._past_retention():
            return f"more than {self.retain_bytes / 1048576:g} MiB waited for it"
        waited = 0.0 if self._idle.is_set() else time.monotonic() - self._last_progress
        if self.retain_for and waited > self.retain_for:
            return f"batches waited {waited:.0f} s for an acknowledgement, more than {self.retain_for:g} s"
        return ""

    def _drop_pending(self) -> tuple[int, int]:
        """Drop every batch not acknowledged, sent or not: (batches, rows) dropped."""
        dropped = self.drain_unsent() + list(self._unacked.values())
        for _ in self._unacked:
            self._pay_back()
        self._unacked.clear()
        self._idle.set()
        self.buffered_bytes = 0
        rows = sum(rows_in(batch) for batch in dropped)
        self.counters["dropped_batches"] += len(dropped)
        self.counters["dropped_rows"] += rows
        return len(dropped), rows

    def _fall_behind(self, why: str) -> None:
        """A named subscriber fell past what is kept for it: drop it all, and tell it (now, or when it is back)."""
        batches, rows = self._drop_pending()
        self.cut_off = (f"subscriber {self.name!r} fell past what {self.sender} keeps for it ({why}): {batches} "
                        f"batches ({rows} rows) it had not acknowledged were dropped")
        self.counters["retention_drops"] += 1
        log.warning("link %s -> %s: %s", self.sender, self.endpoint, self.cut_off)
        if self._ws is not None and not self._ws.closed:
            self._say_goodbye(self._ws)

    async def _tell_cut_off(self, ws: aiohttp.ClientWebSocketResponse) -> None:
        """Tell the subscriber why it was cut off (:attr:`cut_off`), and close the connection."""
        self.told = True
        with contextlib.suppress(Exception):
            await ws.send_bytes(encode(Goodbye(self.cut_off or "")))
            await ws.close(code=SLOW_CLOSE, message=b"cut off")

    def _say_goodbye(self, ws: aiohttp.ClientWebSocketResponse) -> None:
        """:meth:`_tell_cut_off` from a task of its own (the caller may not wait)."""
        self.told = True
        task = asyncio.get_running_loop().create_task(self._tell_cut_off(ws))
        self._goodbyes.add(task)
        task.add_done_callback(self._goodbyes.discard)

    def _too_slow(self, why: str = "") -> None:
        self.counters["slow_drops"] += 1
        if self.on_slow != "disconnect" or self._ws is None or self._ws.closed or self.cut_off is not None:
            return
        ws = self._ws
        count, rows = self._drop_pending()
        why = why or (f"{count} batches waiting, past the buffer's limit of "
                      f"{self.retain_bytes / 1048576:.0f} MiB" if self.retain_bytes else
                      f"{count} batches waiting, the buffer's limit")
        reason = (f"{self.sender} cut this subscriber off: it read too slowly ({why}); {count} batches "
                  f"({rows} rows) that waited for it are dropped, and nothing more of the stream is sent here")
        self.cut_off = reason
        self.counters["slow_disconnects"] += 1
        log.warning("link %s -> %s: the subscriber reads too slowly (%s); cutting it off, %d batches (%d rows) "
                    "dropped", self.sender, self.endpoint, why, count, rows)
        self._say_goodbye(ws)

    @property
    def down_for(self) -> float:
        """Seconds connecting has been failing (0 while connected)."""
        return self._down_for()

    def _down_for(self) -> float:
        """Seconds since connecting started failing (0 while connected or still first connecting)."""
        return 0.0 if self._down_since is None or self.connected else time.monotonic() - self._down_since

    def drain_unsent(self) -> list[Batch]:
        """Take back every batch not yet sent (a link that will not be started after all)."""
        batches = []
        while not self._queued.empty():
            batches.append(self._queued.get_nowait())
            self._pay_back()
        if not self._unacked:
            self._idle.set()
        return batches

    def redirect(self, stream: str, other: "OutboundLink") -> int:
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
        if self.name is not None and getattr(other, "name", None) is not None and self.cut_off is not None and not self.told:
            other.cut_off = self.cut_off  # a named subscriber that fell behind while down hears it where it is now
            self.told = True
        self._redirects[stream] = other
        if getattr(other, "sender", None) == self.sender:  # the same producer: its numbering continues there
            other._seq[stream] = max(other._seq[stream], self._seq[stream])
        moved = [b for b in self._unacked.values() if b.stream == stream]
        for batch in moved:
            del self._unacked[(batch.stream, batch.producer, batch.seq)]
        keep = []
        while not self._queued.empty():
            batch = self._queued.get_nowait()
            (moved if batch.stream == stream else keep).append(batch)
        for batch in keep:
            self._queued.put_nowait(batch)
        for _ in moved:
            self._pay_back()
        if self.retain_bytes:
            self.buffered_bytes -= sum(len(batch.rows) for batch in moved)
        if self._window_open is not None and len(self._unacked) < self.window:
            self._window_open.set()
        moved.sort(key=lambda b: (b.producer, b.seq))
        other.requeue(moved)
        if not self._unacked and self._queued.empty():
            self._idle.set()
        self.counters["redirected_batches"] += len(moved)
        return len(moved)

    def unredirect(self, stream: str) -> None:
        """``stream`` is sent here again."""
        self._redirects.pop(stream, None)

    def requeue(self, batches: list[Batch]) -> None:
        """Queue batches handed over from another link, beyond capacity (they were admitted there)."""
        for batch in batches:
            self._borrowed += 1
            self._idle.clear()
            self._queued.put_nowait(batch)
            if self.retain_bytes:
                self.buffered_bytes += len(batch.rows)

    def take(self, stream: str) -> list[Batch]:
        """Take back every batch of ``stream`` not yet acknowledged (its consumer is now local)."""
        sink = _Sink()
        self.redirect(stream, sink)  # type: ignore[arg-type]
        self._redirects.pop(stream, None)
        return sink.batches

    def _pay_back(self) -> None:
        if self._borrowed:
            self._borrowed -= 1
        else:
            self._capacity.release()

    @property
    def in_flight(self) -> int:
        return self._queued.qsize() + len(self._unacked)

    def pending(self) -> list[Batch]:
        """Every batch not acknowledged yet, sent or still queued, in the order they were sent (left in place).

        A node's snapshot keeps them: they derive from inputs before the
        snapshot, so a restart from it would never produce them again.
        """
        queued = []
        while not self._queued.empty():  # no await in between: the queue is the same afterwards
            queued.append(self._queued.get_nowait())
        for batch in queued:
            self._queued.put_nowait(batch)
        return [*self._unacked.values(), *queued]


class _Sink:
    """Collects batches a link hands over (:meth:`OutboundLink.take`)."""

    def __init__(self) -> None:
        self.batches: list[Batch] = []

    def requeue(self, batches: list[Batch]) -> None:
        self.batches += batches
