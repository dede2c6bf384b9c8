"""The receiving end of data connections: ``/data`` on nodes and subscribers.

One WebSocket per sender carries its batches in order.  The receiver passes
each batch through a :class:`~boreas.wire.sequencing.Sequencer`: a batch
already taken is dropped and acknowledged again (re-sends after a reconnect,
retried Spark tasks), a batch ahead of its producer's sequence is held until
the gap fills (a moved box's batches arriving over two connections), and the
rest goes to the owner's ``accept`` callback in sequence order.  ``accept``
decodes the rows with the stream's row type and may wait (a full input
queue): the next frame is not read until it returns, which is what pushes
back on the sender.

An owner that makes batches durable before it may acknowledge them (a node
with an input log) returns :class:`Deferred`: the acknowledgement waits for
``ready`` while the receiver goes on reading frames, and acknowledgements
still leave in arrival order.  So a sender with a window of several batches
keeps the log's group commit busy instead of waiting one commit per batch.

Usage::

    receiver = DataReceiver(accept=node.accept_batch, token=token)
    server.app.router.add_get("/data", receiver.handle)
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import aiohttp
import msgspec
from aiohttp import web

from .auth import check_token
from .digests import DigestBook
from .frames import Ack, Batch, Goodbye, Hello, Refused, Replies, decode, encode
from .sequencing import DUPLICATE, HOLD, Sequencer
from .server import json_error

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Deferred:
    """A reply to send once ``ready`` is done (the batch is durable); ``ready`` raising means no reply."""

    reply: Ack | Refused
    ready: Awaitable[object]

    def drop(self) -> None:
        """The connection closed before the reply could go: nothing will await ``ready`` (the batch's log
        write goes on without it; the sender re-sends, and the copy is dropped as a duplicate), so a
        coroutine is closed rather than left to be collected never awaited (a RuntimeWarning each time)."""
        close = getattr(self.ready, "close", None)
        if close is not None:
            close()


def _drop_all(replies: asyncio.Queue) -> None:
    """Drop every deferred reply still queued on a closed connection (:meth:`Deferred.drop`)."""
    while not replies.empty():
        reply = replies.get_nowait()
        if isinstance(reply, Deferred):
            reply.drop()


_NONE = object()  # no reply queued just now

#: accept(batch) -> reply; it is called once per new batch, in arrival order.
Accept = Callable[[Batch], Awaitable[Ack | Refused | Deferred]]


class DataReceiver:
    def __init__(self, accept: Accept, token: str | None, max_frame: int = 64 * 1024 * 1024,
                 on_goodbye: Callable[[str], None] | None = None, digests: DigestBook | None = None,
                 heartbeat: float = 10.0, screen: Callable[[Batch], Refused | None] | None = None):
        self.accept = accept
        # The owner's refusal of a batch it cannot take at all now (its stream does not enter here), given before
        # the batch takes its place in the producer's order: no gap holds the producer's later batches
        self.screen = screen
        self.token = token
        self.max_frame = max_frame
        self.sequencer = Sequencer()
        # What the owner took of publishers' batches (it records them, in the order it processes them, and keeps
        # them across restarts): a re-used sequence number with other rows is refused.  None: nothing screened.
        self.digests = digests
        self.on_goodbye = on_goodbye
        self.heartbeat = heartbeat  # seconds between WebSocket pings: a sender gone silent is dropped after two
        self.counters: Counter[str] = Counter()
        self.sockets: set[web.WebSocketResponse] = set()  # open connections
        self._gap_watch: asyncio.Task | None = None

    async def close_all(self) -> None:
        """Close every open data connection (senders reconnect and re-send what was not acknowledged).

        The gap watch is stopped too, and awaited: it belongs to this receiver, and a
        watch left running would deliver held batches to an owner that is shutting down.
        The next connection starts it again.
        """
        for ws in list(self.sockets):
            await ws.close()
        if self._gap_watch is not None:
            self._gap_watch.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._gap_watch
            self._gap_watch = None

    async def handle(self, request: web.Request) -> web.StreamResponse:
        if self.token is not None and not check_token(request.headers.get("Authorization"), self.token):
            self.counters["unauthenticated"] += 1
            return json_error(401, "missing or wrong cluster token (Authorization: Bearer ...)")
        ws = web.WebSocketResponse(max_msg_size=self.max_frame, heartbeat=self.heartbeat)
        await ws.prepare(request)
        sender = request.remote or "?"
        self.counters["connections"] += 1
        self.sockets.add(ws)
        if self._gap_watch is None or self._gap_watch.done():
            self._gap_watch = asyncio.get_running_loop().create_task(self._watch_gaps())
        try:
            await self._serve(ws, sender)
        finally:
            self.sockets.discard(ws)
        return ws

    async def _serve(self, ws: web.WebSocketResponse, sender: str) -> None:
        replies: asyncio.Queue[Ack | Refused | Deferred | None] = asyncio.Queue()
        writer = asyncio.get_running_loop().create_task(self._write_replies(ws, replies, sender))
        try:
            await self._read(ws, sender, replies, writer)
        finally:
            replies.put_nowait(None)
            with contextlib.suppress(asyncio.CancelledError, ConnectionError, aiohttp.ClientError):
                await writer
            writer.cancel()
            _drop_all(replies)  # (what the writer left when the connection closed first)

    async def _write_replies(self, ws: web.WebSocketResponse, replies: asyncio.Queue, sender: str) -> None:
        """Send each reply in arrival order, a deferred one once its batch is durable.

        Replies already queued go together as one :class:`Replies` frame (one
        socket write): the reader takes every frame waiting on the connection
        before this task runs again, so under load their answers are sent at
        once, and alone (an idle connection) a reply goes as it is, at once.
        """
        ready: list[Ack | Refused] = []
        while True:
            if not ready:
                reply = await replies.get()
                # One turn of the loop before answering: the node's box task, woken by the same batch,
                # sends its outputs first (latency: waking the sender with its answer may cost this
                # process its core), and answers to frames read meanwhile join this one.
                await asyncio.sleep(0)
            else:
                reply = replies.get_nowait() if not replies.empty() else _NONE
            if reply is _NONE:  # nothing more queued: send what is ready
                if not await self._send_replies(ws, ready):
                    return
                ready = []
                continue
            if reply is None:
                await self._send_replies(ws, ready)
                return
            if isinstance(reply, Deferred):
                if not await self._send_replies(ws, ready):  # what is ready does not wait for the disk
                    reply.drop()
                    return
                ready = []
                try:
                    await reply.ready
                except Exception as exc:  # not durable: no ack, the sender re-sends after reconnecting
                    log.error("batch from %s could not be made durable (%s); closing the connection", sender, exc)
                    await ws.close(code=aiohttp.WSCloseCode.INTERNAL_ERROR, message=b"not durable")
                    return
                reply = reply.reply
            ready.append(reply)

    async def _send_replies(self, ws: web.WebSocketResponse, ready: list[Ack | Refused]) -> bool:
        """One frame for ``ready`` (none if it is empty); False once the connection is closed."""
        if ws.closed:
            return False  # the sender will re-send; batches already taken are then dropped as duplicates
        if ready:
            await ws.send_bytes(encode(ready[0] if len(ready) == 1 else Replies(ready)))
            if len(ready) > 1:
                self.counters["coalesced_replies"] += len(ready)
        return True

    async def _read(self, ws: web.WebSocketResponse, sender: str, replies: asyncio.Queue,
                    writer: asyncio.Task) -> None:
        async for msg in ws:
            if msg.type != aiohttp.WSMsgType.BINARY:
                continue
            try:
                frame = decode(msg.data)
            except (msgspec.DecodeError, msgspec.ValidationError) as exc:
                self.counters["bad_frames"] += 1
                log.warning("bad frame from %s: %s; closing", sender, exc)
                await ws.close(code=aiohttp.WSCloseCode.UNSUPPORTED_DATA, message=b"bad frame")
                break
            if isinstance(frame, Hello):
                sender = frame.sender
                continue
            if isinstance(frame, Goodbye):  # the sender closes on purpose: say why to whom it may concern
                self.counters["goodbyes"] += 1
                log.warning("%s closed the data connection: %s", sender, frame.reason)
                if self.on_goodbye is not None:
                    self.on_goodbye(frame.reason)
                break
            if not isinstance(frame, Batch):
                continue
            reply = await self._take(frame)
            if ws.closed or writer.done():
                break  # the sender will re-send; the batch is marked seen, so that is dropped
            replies.put_nowait(reply)

    async def _take(self, batch: Batch) -> Ack | Refused | Deferred:
        if batch.box:  # forwarded to a moved box, which orders and de-duplicates its own inputs
            return await self._deliver(batch)
        if batch.digest and self.digests is not None and (conflict := self.digests.screen(batch.stream, batch.producer, batch.seq,
                                                             batch.digest)) is not None:
            self.counters["conflicting_batches"] += 1
            log.warning("stream %s: refused batch %d from %s: %s", batch.stream, batch.seq, batch.producer, conflict)
            return Refused(batch.stream, batch.producer, batch.seq, conflict)
        if self.screen is not None and (refused := self.screen(batch)) is not None:
            self.counters["refused_batches"] += 1
            return refused
        if batch.restart:
            for held in self.sequencer.restart(batch.stream, batch.producer, batch.seq):
                await self._deliver(held)
        admission = self.sequencer.admit(batch.stream, batch.producer, batch.seq, batch)
        if admission is DUPLICATE:
            self.counters["duplicate_batches"] += 1
            return Ack(batch.stream, batch.producer, batch.seq, 0, duplicate=True)
        if admission is HOLD:
            self.counters["held_batches"] += 1
            reply: Ack | Refused | Deferred = Ack(batch.stream, batch.producer, batch.seq, 0, held=True)
        else:
            reply = await self._deliver(batch)
        for held in self.sequencer.release(batch.stream, batch.producer):
            await self._deliver(held)  # its sender was told "held"; refusals are counted here
        return reply

    async def _watch_gaps(self) -> None:
        """Skip gaps that did not fill even when no further batch of that producer arrives."""
        while self.sockets or self.sequencer.overdue(float("inf")):
            await asyncio.sleep(1.0)
            for key in self.sequencer.overdue():
                log.warning("stream %s from %s: a gap did not fill; skipping it", *key)
                for held in self.sequencer.release(*key):
                    await self._deliver(held)

    async def _deliver(self, batch: Batch) -> Ack | Refused | Deferred:
        try:
            reply = await self.accept(batch)
        except BaseException:
            if not batch.box:
                self.sequencer.forget(batch.stream, batch.producer, batch.seq)
            raise
        if isinstance(reply, Refused):
            if not batch.box and reply.retry:  # a final refusal consumes its number: nothing re-sends it
                self.sequencer.forget(batch.stream, batch.producer, batch.seq)
            self.counters["refused_batches"] += 1
        else:
            ack = reply.reply if isinstance(reply, Deferred) else reply
            assert isinstance(ack, Ack)
            self.counters["batches"] += 1
            self.counters["rows"] += ack.accepted
            self.counters["refused_rows"] += len(ack.errors)
        return reply
