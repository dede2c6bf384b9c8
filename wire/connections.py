"""Connections of an HTTP server, each inside our limits: a table of them and the protocol that wraps aiohttp's.

aiohttp has no per-connection header, idle or body timeout and no connection
limit, so :class:`~boreas.wire.server.HttpServer` wraps the protocol aiohttp
makes for each accepted connection in a :class:`GuardedConnection` (through
:class:`GuardedSite`), and keeps the open ones in a :class:`ConnectionTable`:
the one owner of which connections are open, what the limits are, and the
counters of what the limits refused.  The server's middleware finds a
request's connection in the table to tell it a request started and ended.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import cast

from aiohttp import web

log = logging.getLogger(__name__)

#: Seconds a connection closed with an error response keeps reading (and discarding) before closing.
LINGER = 1.0


def raw_response(status: int, reason: str, message: str) -> bytes:
    body = json.dumps({"error": message}).encode()
    return (f"HTTP/1.1 {status} {reason}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n").encode() + body



@dataclass
class ConnectionTable:
    """The open connections of one server, its limits, and the counters of what they refused."""

    name: str
    header_timeout: float
    idle_timeout: float
    body_timeout: float
    max_connections: int
    counters: Counter[str] = field(default_factory=Counter)
    open: dict[asyncio.BaseTransport, GuardedConnection] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.open)

    def admit(self, transport: asyncio.BaseTransport, conn: GuardedConnection) -> bool:
        """Take a new connection in, or say no: the table is full."""
        if len(self.open) >= self.max_connections:
            return False
        self.open[transport] = conn
        return True

    def forget(self, transport: asyncio.BaseTransport | None) -> None:
        """The connection is gone, or closing: it no longer holds a slot."""
        if transport is not None:
            self.open.pop(transport, None)

    def find(self, transport: asyncio.BaseTransport | None) -> GuardedConnection | None:
        return self.open.get(transport) if transport is not None else None


class GuardedConnection(asyncio.Protocol):
    """One accepted connection: aiohttp's protocol inside, our limits and timers around it.

    Between requests a timer runs: ``idle_timeout`` while no byte of a next
    request has come, ``header_timeout`` from its first byte (and from the
    connection's start) until aiohttp hands the request to the middleware.
    """

    def __init__(self, table: ConnectionTable, inner: asyncio.Protocol):
        self.table = table
        self.inner = inner
        self.transport: asyncio.Transport | None = None
        self.refused = False
        self.busy = 0  # requests in progress
        self.partial = False  # bytes of a next request have arrived
        self.timed_out = False
        self.timer: asyncio.TimerHandle | None = None
        self.draining = False  # the timer waits for a response to be taken
        self.done_at = 0.0  # when the last request's handler finished
        self.lingering = False  # answered and half-closed: what still arrives is discarded

    # -- asyncio.Protocol, forwarded to aiohttp --------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # A stream transport (uvloop's does not subclass asyncio.Transport, so no isinstance check)
        self.transport = cast(asyncio.Transport, transport)
        table = self.table
        if not table.admit(self.transport, self):
            self.refused = True
            table.counters["refused_connections"] += 1
            if table.counters["refused_connections"] % 1000 == 1:  # not a line per connection
                log.warning("%s: refusing connections: %d open, the limit (%d refused so far)",
                            table.name, len(table), table.counters["refused_connections"])
            transport.write(raw_response(503, "Service Unavailable",
                                          f"{table.name}: too many connections "
                                          f"(limit {table.max_connections}); try again later"))
            transport.close()
            return
        self._arm(table.header_timeout)
        self.inner.connection_made(transport)

    def connection_lost(self, exc: Exception | None) -> None:
        if self.refused:
            return
        self._disarm()
        self.table.forget(self.transport)
        self.inner.connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if self.refused or self.lingering:
            return
        if not self.busy and not self.partial and data:
            self.partial = True
            self.draining = False
            self._arm(self.table.header_timeout)  # the header must now come promptly
        self.inner.data_received(data)

    def eof_received(self) -> bool | None:
        return None if self.refused else self.inner.eof_received()

    def pause_writing(self) -> None:
        if not self.refused:
            self.inner.pause_writing()

    def resume_writing(self) -> None:
        if not self.refused:
            self.inner.resume_writing()

    # -- called by the server's middleware ------------------------------------------

    def request_started(self) -> None:
        self.busy += 1
        self.partial = False
        self.draining = False
        self._disarm()

    def request_done(self) -> None:
        self.busy -= 1
        if not self.busy and not self.timed_out:
            # aiohttp writes the response after this: the client has body_timeout to
            # take it, and the connection may then sit idle for idle_timeout.
            self.draining = True
            self.done_at = asyncio.get_running_loop().time()
            self._arm(min(self.table.idle_timeout, self.table.body_timeout))

    def body_late(self, content: object) -> None:
        if getattr(content, "is_eof", lambda: True)():
            return
        self.table.counters["body_timeouts"] += 1
        self._close(408, "Request Timeout",
                    f"request body not received within {self.table.body_timeout:g} s")

    # -- timers -----------------------------------------------------------------

    def _arm(self, delay: float) -> None:
        self._disarm()
        if self.transport is not None and not self.transport.is_closing():
            self.timer = asyncio.get_running_loop().call_later(delay, self._expired)

    def _disarm(self) -> None:
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None

    def _expired(self) -> None:
        self.timer = None
        if self.busy or self.transport is None or self.transport.is_closing():
            return
        table = self.table
        if self.draining:
            elapsed = asyncio.get_running_loop().time() - self.done_at
            if self.transport.get_write_buffer_size():  # the response is still going out
                if elapsed < table.body_timeout:
                    self._arm(table.body_timeout - elapsed)
                    return
                table.counters["body_timeouts"] += 1  # the client does not take its response
                self.timed_out = True
                self.transport.abort()
                return
            self.draining = False
            if elapsed < table.idle_timeout:
                self._arm(table.idle_timeout - elapsed)
                return
        if self.partial:
            table.counters["header_timeouts"] += 1
            self._close(408, "Request Timeout",
                        f"request header not received within {table.header_timeout:g} s")
        else:
            table.counters["idle_closed"] += 1
            self.timed_out = True
            self.transport.close()

    def _close(self, status: int, reason: str, message: str) -> None:
        self.timed_out = True
        self._disarm()
        transport = self.transport
        if transport is None or transport.is_closing():
            return
        log.debug("%s: closing connection from %s: %s", self.table.name,
                 transport.get_extra_info("peername"), message)
        transport.write(raw_response(status, reason, message))
        # A lingering close (as nginx does): end our side, keep reading and discarding for a
        # moment, then close.  Closing at once with the client's bytes unread makes the kernel
        # answer with a reset, which can overtake the response -- the client would never see why.
        if transport.can_write_eof():
            transport.write_eof()
            self.lingering = True
            self.table.forget(transport)  # closing: it no longer holds a slot
            asyncio.get_running_loop().call_later(LINGER, transport.close)
        else:
            transport.close()


class GuardedSite(web.TCPSite):
    """A TCPSite whose connections are wrapped in :class:`GuardedConnection`."""

    __slots__ = ("_wrap", "_handshake_timeout")

    def __init__(self, runner: web.AppRunner, host: str, port: int,
                 wrap: Callable[[asyncio.Protocol], asyncio.Protocol], handshake_timeout: float,
                 **kwargs: object):
        super().__init__(runner, host, port, **kwargs)  # type: ignore[arg-type]
        self._wrap = wrap
        self._handshake_timeout = handshake_timeout

    async def start(self) -> None:
        await web.BaseSite.start(self)  # registers the site with its runner
        factory = self._runner.server
        assert factory is not None
        self._server = await asyncio.get_running_loop().create_server(
            lambda: self._wrap(factory()), self._host, self._port, backlog=self._backlog,
            reuse_address=self._reuse_address, ssl=self._ssl_context,
            # a TLS handshake is part of a request's header: as slow a client is as unwelcome
            ssl_handshake_timeout=self._handshake_timeout if self._ssl_context else None)

    @property
    def bound_port(self) -> int:
        """The port the site listens on: what port 0 bound (the server's endpoint names it)."""
        server = self._server  # aiohttp keeps the asyncio server here; no public accessor
        assert server is not None and server.sockets
        return int(server.sockets[0].getsockname()[1])
