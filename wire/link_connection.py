"""The connection under an :class:`~boreas.wire.links.OutboundLink`: connecting, sending, acknowledgements.

A :class:`LinkConnection` is the part of a link that owns the WebSocket:
whether it is up, why not (``last_error``), since when it is down, whether
the link failed for good (``failure``), and the send window.  The link owns
one; the batches are the link's :class:`~boreas.wire.link_queue.LinkQueue`,
which this reads from and reports acknowledgements to, and a subscriber cut
off (:class:`~boreas.wire.link_cutoff.CutOff`) is told why here when it
connects.  One task connects to the receiver's ``/data`` (again and again,
with backoff), says ``Hello``, re-sends every batch not acknowledged before
the last disconnect, then a pump writes queued batches while fewer than
``window`` are unacknowledged; each acknowledgement frees a slot of the
window and of the capacity.  ``send()`` writes a batch itself when nothing
waits before it (:meth:`LinkConnection._write_now`).

A handshake refused with 401 or 403 is a :class:`LinkRefused`: named in
``last_error`` while the link keeps trying, or the link's failure for good
when it was made with ``refusal_is_final``.  With TLS on the link dials
``wss://``; a certificate it cannot trust (or a handshake the receiver
refuses) is named in ``last_error`` and logged once, and the link keeps
trying: the receiver may be restarted with the right certificate.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import Counter
from collections.abc import Callable

import aiohttp

from .addressing import endpoint_url
from .backoff import Backoff
from .client import describe_tls_failure, open_session
from .frames import Ack, Batch, Frame, Hello, Refused, Replies, decode, encode
from .link_cutoff import CutOff
from .link_queue import LinkQueue
from .tls import current as current_tls
from .tls import warn_clear_token

log = logging.getLogger("boreas.wire.links")  # the link's records keep their logger

#: Handshake statuses that mean "not with these credentials": retrying the same request cannot help.
REFUSED_STATUSES = {401: "missing or wrong cluster token", 403: "forbidden"}


class LinkRefused(Exception):
    """The receiver refused the data connection at the handshake (401/403); ``status`` says which."""

    def __init__(self, endpoint: str, status: int, token_given: bool):
        if status == 401:
            reason = "wrong cluster token (another cluster's?)" if token_given else "no cluster token was sent"
        else:
            reason = REFUSED_STATUSES.get(status, f"HTTP {status}")
        super().__init__(f"{endpoint} refused the data connection ({status}): {reason}")
        self.endpoint = endpoint
        self.status = status


ReplyCallback = Callable[[Batch, Frame], None]

#: Bytes of a WebSocket frame's header at most (2, an 8-byte length, a 4-byte mask).
FRAME_HEADER = 14


def _writes_without_waiting(ws: aiohttp.ClientWebSocketResponse, size: int) -> bool:
    """Whether ``send_bytes`` of ``size`` bytes cannot wait for the transport to drain.

    aiohttp's writer waits only once the bytes written since its last check
    exceed its limit (256 KiB) and the transport is paused; below the limit it
    writes and returns without waiting.  Its counters are private: if they
    are not there (another aiohttp), the answer is no, and the pump writes.
    """
    writer = getattr(ws, "_writer", None)
    written, limit = getattr(writer, "_output_size", None), getattr(writer, "_limit", None)
    return isinstance(written, int) and isinstance(limit, int) and written + size + FRAME_HEADER <= limit



class LinkConnection:
    """A link's WebSocket to its receiver, reconnected until stopped (the module docstring says what it owns)."""

    def __init__(self, endpoint: str, token: str | None, sender: str, queue: LinkQueue, cutoff: CutOff,
                 counters: Counter[str], *, window: int = 16, refusal_is_final: bool = False,
                 on_reply: ReplyCallback | None = None) -> None:
        self.endpoint = endpoint
        self.sender = sender
        self.queue = queue
        self.cutoff = cutoff
        self.counters = counters
        self.window = window
        self.refusal_is_final = refusal_is_final
        self.on_reply = on_reply
        self.connected = False
        self.last_error: str | None = None
        self.failure: LinkRefused | None = None  # set once the link has failed for good
        self.ws: aiohttp.ClientWebSocketResponse | None = None  # the current connection
        self.live: aiohttp.ClientWebSocketResponse | None = None  # connected, re-sends done: send() may write
        self._token = token
        self._down_since: float | None = None  # a connect attempt failed then, none succeeded since
        self._window_open: asyncio.Event | None = None  # the current connection's send window
        self._task: asyncio.Task | None = None
        self._session: aiohttp.ClientSession | None = None

    def start(self) -> None:
        self._session = open_session(self._token)
        self._task = asyncio.create_task(self._run(), name=f"link to {self.endpoint}")

    async def abort(self) -> None:
        """Disconnect and stop reconnecting."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        if self._session is not None:
            await self._session.close()
            self._session = None

    def down_for(self) -> float:
        """Seconds since connecting started failing (0 while connected or still first connecting)."""
        return 0.0 if self._down_since is None or self.connected else time.monotonic() - self._down_since

    def reopen_window(self) -> None:
        """Batches left the window without an acknowledgement (handed to another link): the pump may go on."""
        if self._window_open is not None and len(self.queue.unacked) < self.window:
            self._window_open.set()

    async def write_now(self, batch: Batch) -> bool:
        """Write ``batch`` on the connection from the caller's task if nothing is ahead of it; False: queue it.

        The pump task would write it one turn of the event loop later: on a
        busy machine that turn is a chance for the process to lose its core
        before the batch leaves (latency), and a task wake-up per batch.
        Order holds: nothing is queued, so the pump has written everything
        before it (it writes a batch in the step that takes it from the
        queue, and an uncompressed frame reaches the transport before
        ``send_bytes`` first awaits).  The window holds too: the last slot is
        left to the pump, which may have looked at the window before these
        writes and be waiting for its next batch.  And the caller never waits
        for the receiver's socket: a frame after which ``send_bytes`` could
        wait for the transport to drain goes through the pump, so a client
        that stops reading still stalls only its own link (the box task
        writing here must go on until that link's buffer fills and its
        ``on_slow`` policy applies).
        """
        ws = self.live
        if ws is None or ws.closed or not self.queue.queued.empty() or len(self.queue.unacked) >= self.window - 1:
            return False
        frame = encode(batch)
        if not _writes_without_waiting(ws, len(frame)):
            return False
        self.queue.sent(batch)
        try:
            await ws.send_bytes(frame)
        except (ConnectionError, aiohttp.ClientError) as exc:  # kept unacknowledged: re-sent after reconnecting
            log.debug("link %s -> %s: write failed (%s); the batch waits for the reconnect", self.sender,
                      self.endpoint, exc)
            return True
        self.counters["batches_sent"] += 1
        self.counters["bytes_sent"] += len(frame)
        return True

    async def _run(self) -> None:
        backoff = Backoff(first=0.05, cap=2.0)
        url = endpoint_url(self.endpoint, "/data").replace("http", "ws", 1)  # ws:// or, with TLS, wss://
        warn_clear_token(url, self._token, current_tls())
        while True:
            try:
                assert self._session is not None
                async with self._session.ws_connect(url, heartbeat=10.0, max_msg_size=64 * 1024 * 1024) as ws:
                    self.connected, self.ws = True, ws
                    self._down_since = None
                    self.last_error = None
                    backoff.reset()
                    self.counters["connects"] += 1
                    await ws.send_bytes(encode(Hello(self.sender)))
                    if self.cutoff.reason is not None:  # a named subscriber that fell behind while it was down
                        await self.cutoff.tell(ws)
                        return
                    await self._converse(ws)
            except asyncio.CancelledError:
                raise
            except aiohttp.WSServerHandshakeError as exc:
                if exc.status not in REFUSED_STATUSES:
                    self._connect_failed(exc)
                else:
                    refused = LinkRefused(self.endpoint, exc.status, token_given=bool(self._token))
                    if self.refusal_is_final:
                        self._fail(refused)
                        return
                    if self.last_error != str(refused):
                        log.warning("link %s -> %s: %s; retrying", self.sender, self.endpoint, refused)
                    self._connect_failed(refused)
            except (aiohttp.ClientError, OSError, asyncio.TimeoutError, ConnectionError) as exc:
                self._connect_failed(exc)
            finally:
                self.connected, self.ws = False, None
            self.counters["disconnects"] += 1
            if self.cutoff.reason is not None and self.cutoff.told:  # a subscriber cut off: told, not resumed
                return
            log.debug("link %s -> %s down (%s); reconnecting", self.sender, self.endpoint, self.last_error)
            await backoff.sleep()

    def _connect_failed(self, exc: BaseException) -> None:
        tls = describe_tls_failure(exc)
        if tls is not None and self.last_error != tls:
            log.warning("link %s -> %s: %s; retrying", self.sender, self.endpoint, tls)
        self.last_error = tls or str(exc) or type(exc).__name__
        if self._down_since is None:
            self._down_since = time.monotonic()

    def _fail(self, failure: LinkRefused) -> None:
        """Fail for good: wake every ``flush()`` and every ``send()`` waiting for room; they raise ``failure``."""
        self.failure = failure
        self._connect_failed(failure)
        log.info("link %s -> %s failed for good: %s", self.sender, self.endpoint, failure)
        self.queue.open_up()

    async def _converse(self, ws: aiohttp.ClientWebSocketResponse) -> None:
        queue = self.queue
        queue.progressed()
        for batch in list(queue.unacked.values()):  # not acknowledged before the last disconnect
            await ws.send_bytes(encode(batch))
            self.counters["resent_batches"] += 1
        window_open = self._window_open = asyncio.Event()
        window_open.set()

        async def pump() -> None:
            while True:
                await window_open.wait()
                batch = await queue.queued.get()
                queue.sent(batch)
                if len(queue.unacked) >= self.window:
                    window_open.clear()
                frame = encode(batch)
                await ws.send_bytes(frame)
                self.counters["batches_sent"] += 1
                self.counters["bytes_sent"] += len(frame)

        async def watch_acknowledgements() -> None:
            """A subscriber that stops acknowledging is slow, however little waits for it."""
            while True:
                await asyncio.sleep(min(1.0, self.cutoff.slow_after / 4))
                if queue.stalled_for() > self.cutoff.slow_after:
                    self.cutoff.too_slow(self.sender, self.ws, f"no acknowledgement for {queue.stalled_for():.0f} s "
                                         f"while {len(queue.unacked)} batches waited for one")

        sender = asyncio.create_task(pump())
        watch = None
        if self.cutoff.slow_after:
            watch = asyncio.create_task(watch_acknowledgements())
        self.live = ws
        try:
            async for msg in ws:
                if msg.type != aiohttp.WSMsgType.BINARY:
                    continue
                frame = decode(msg.data)
                if isinstance(frame, Replies):  # answers that were ready together, in order
                    for reply in frame.replies:
                        self._acknowledged(reply)
                else:
                    self._acknowledged(frame)
                if len(queue.unacked) < self.window:
                    window_open.set()
                if sender.done():
                    sender.result()
            if ws.exception() is not None:
                raise ConnectionError(str(ws.exception()))
            raise ConnectionError(f"closed by {self.endpoint} ({ws.close_code})")
        finally:
            self.live = None
            if watch is not None:
                watch.cancel()
                await asyncio.gather(watch, return_exceptions=True)
            sender.cancel()
            with contextlib.suppress(asyncio.CancelledError, ConnectionError, aiohttp.ClientError):
                await sender

    def _acknowledged(self, frame: Frame) -> None:
        if not isinstance(frame, (Ack, Refused)):
            return
        batch = self.queue.acknowledged((frame.stream, frame.producer, frame.seq))
        if batch is None:
            return  # an ack for a batch re-sent after a reconnect, or handed to another link
        self.counters["acks"] += 1
        if isinstance(frame, Refused):
            self.counters["refused_batches"] += 1
            log.warning("%s refused batch %s/%d: %s", self.endpoint, frame.stream, frame.seq, frame.reason)
        elif frame.errors:
            self.counters["refused_rows"] += len(frame.errors)
        if self.on_reply is not None:
            self.on_reply(batch, frame)
        self.queue.settle()
