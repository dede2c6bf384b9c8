"""The receiving end of data connections: ``/data`` on nodes and subscribers.

One WebSocket per sender carries its batches in order.  The receiver drops a
batch whose (stream, producer, sequence) it has already taken, and
acknowledges it again, so re-sends after a reconnect and retried Spark tasks
never deliver a tuple twice.  Everything else goes to the owner's
``accept`` callback, which decodes the rows with the stream's row type and
may wait (a full input queue): the next frame is not read until it returns,
which is what pushes back on the sender.

Usage::

    receiver = DataReceiver(accept=node.accept_batch, token=token)
    server.app.router.add_get("/data", receiver.handle)
"""

from __future__ import annotations

import logging
from collections import Counter, OrderedDict
from collections.abc import Awaitable, Callable

import aiohttp
import msgspec
from aiohttp import web

from .auth import check_token
from .frames import Ack, Batch, Hello, Refused, decode, encode
from .server import json_error

log = logging.getLogger(__name__)

#: accept(batch) -> reply; it is called once per new batch, in arrival order.
Accept = Callable[[Batch], Awaitable[Ack | Refused]]


class SeenSequences:
    """The highest sequence taken per (stream, producer), for the most recent producers.

    >>> seen = SeenSequences()
    >>> seen.is_new("S", "p", 0), seen.is_new("S", "p", 0), seen.is_new("S", "p", 1)
    (True, False, True)
    """

    def __init__(self, max_producers: int = 100_000):
        self.max_producers = max_producers
        self._last: OrderedDict[tuple[str, str], int] = OrderedDict()

    def is_new(self, stream: str, producer: str, seq: int) -> bool:
        key = (stream, producer)
        last = self._last.get(key)
        if last is not None and seq <= last:
            return False
        self._last[key] = seq
        self._last.move_to_end(key)
        if len(self._last) > self.max_producers:
            self._last.popitem(last=False)
        return True

    def forget(self, stream: str, producer: str, seq: int) -> None:
        """Un-see a batch the owner could not take, so its re-send is taken."""
        key = (stream, producer)
        if self._last.get(key) == seq:
            if seq == 0:
                del self._last[key]
            else:
                self._last[key] = seq - 1

    def state(self) -> list[list]:
        return [[s, p, q] for (s, p), q in self._last.items()]

    def restore(self, state: list[list]) -> None:
        for stream, producer, seq in state:
            self._last[(stream, producer)] = max(seq, self._last.get((stream, producer), -1))


class DataReceiver:
    def __init__(self, accept: Accept, token: str | None, max_frame: int = 64 * 1024 * 1024):
        self.accept = accept
        self.token = token
        self.max_frame = max_frame
        self.seen = SeenSequences()
        self.counters: Counter[str] = Counter()
        self.sockets: set[web.WebSocketResponse] = set()  # open connections

    async def close_all(self) -> None:
        """Close every open data connection (senders reconnect and re-send what was not acknowledged)."""
        for ws in list(self.sockets):
            await ws.close()

    async def handle(self, request: web.Request) -> web.StreamResponse:
        if self.token is not None and not check_token(request.headers.get("Authorization"), self.token):
            self.counters["unauthenticated"] += 1
            return json_error(401, "missing or wrong cluster token (Authorization: Bearer ...)")
        ws = web.WebSocketResponse(max_msg_size=self.max_frame, heartbeat=10.0)
        await ws.prepare(request)
        sender = request.remote or "?"
        self.counters["connections"] += 1
        self.sockets.add(ws)
        try:
            await self._serve(ws, sender)
        finally:
            self.sockets.discard(ws)
        return ws

    async def _serve(self, ws: web.WebSocketResponse, sender: str) -> None:
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
            if not isinstance(frame, Batch):
                continue
            reply = await self._take(frame)
            if ws.closed:
                break  # the sender will re-send; the batch is marked seen, so that is dropped
            await ws.send_bytes(encode(reply))

    async def _take(self, batch: Batch) -> Ack | Refused:
        if not self.seen.is_new(batch.stream, batch.producer, batch.seq):
            self.counters["duplicate_batches"] += 1
            return Ack(batch.stream, batch.producer, batch.seq, 0, duplicate=True)
        try:
            reply = await self.accept(batch)
        except BaseException:
            self.seen.forget(batch.stream, batch.producer, batch.seq)
            raise
        if isinstance(reply, Refused):
            self.seen.forget(batch.stream, batch.producer, batch.seq)
            self.counters["refused_batches"] += 1
        else:
            self.counters["batches"] += 1
            self.counters["rows"] += reply.accepted
            self.counters["refused_rows"] += len(reply.errors)
        return reply
