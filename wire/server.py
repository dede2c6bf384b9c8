"""An HTTP listener for a Boreas component: routes, token check, limits, lifecycle.

Every component (Head, node, regional or global component, subscriber)
serves HTTP on its endpoint.  This wraps aiohttp with what they all need:
mutating requests must carry the cluster token (401 otherwise, before any
handler runs), request bodies are capped (413), errors are JSON, and
``start``/``close`` bind and release the socket.  Port 0 binds a free port;
``endpoint`` then tells the real one.

One slow or idle client must not hold the server: every limit below is a
constructor argument, and ``counters`` counts each refusal.

* ``header_timeout`` (default :data:`HEADER_TIMEOUT`, 10 s): a request's
  header must be complete this long after its first byte (or after the
  connection opened).  Otherwise the connection is closed (with a 408 if part
  of a header had arrived); counted as ``header_timeouts``.
* ``idle_timeout`` (default :data:`IDLE_TIMEOUT`, 75 s): a keep-alive
  connection with no request in progress is closed after this long.
* ``body_timeout`` (default :data:`BODY_TIMEOUT`, 60 s): a request's whole
  body must have arrived this long after its header (16 MiB then needs
  about 280 KB/s), and a response must have been taken by the client this
  long after its handler finished.  Otherwise 408 and the connection is
  closed; counted as ``body_timeouts``.  A WebSocket (``/data``) has no
  body: once upgraded it lives as long as its handler, with no timeout here.
* ``max_connections`` (default 1024, or half the process's open-file limit
  if that is lower): connections beyond it are answered 503 at once and
  closed; counted as ``refused_connections``.  ``connections`` tells how
  many are open.

With TLS on in the process (:mod:`boreas.wire.tls`) the server listens with
its certificate (and, with ``--tls-client-auth``, requires the client's);
a token-checking server on an address other than loopback without TLS
warns at start that tokens reach it in clear.

Each server also owns its component's Prometheus registry (``registry``,
:mod:`boreas.wire.metrics`): every request's duration is timed into it by
route and status, and the counters above are read into it when
``/metrics`` is scraped; the component adds views of its own figures.

Usage::

    server = HttpServer("node", token="s3cret")
    server.app.router.add_post("/update", handle_update)
    await server.start("localhost", 15000)
    ...
    await server.close()
"""

from __future__ import annotations

import asyncio
import errno
import json
import logging
import resource
from collections import Counter
from collections.abc import Awaitable, Callable
from typing import cast

from aiohttp import web

from .auth import SAFE_METHODS, check_token
from .metrics import Families, View, new_registry, request_timer
from .tls import current as current_tls
from .tls import is_loopback

log = logging.getLogger(__name__)

#: Seconds a connection closed with an error response keeps reading (and discarding) before closing.
LINGER = 1.0

#: Largest request body accepted: the size limit of an XML document.
MAX_BODY = 16 * 1024 * 1024

#: Seconds from a request's first byte (or the connection's start) to the end of its header.
HEADER_TIMEOUT = 10.0

#: Seconds a keep-alive connection may sit with no request.
IDLE_TIMEOUT = 75.0

#: Seconds from a request's header to the end of its body (and for a response to be taken).
BODY_TIMEOUT = 60.0

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def default_max_connections() -> int:
    """1024, or half the open-file limit if that is lower (so accept() never runs out)."""
    try:
        soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    except (OSError, ValueError):
        return 1024
    if soft == resource.RLIM_INFINITY or soft <= 0:
        return 1024
    return max(16, min(1024, soft // 2))


def _raw_response(status: int, reason: str, message: str) -> bytes:
    body = json.dumps({"error": message}).encode()
    return (f"HTTP/1.1 {status} {reason}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n").encode() + body


def json_error(status: int, message: str, **extra: object) -> web.Response:
    return web.json_response({"error": message, **extra}, status=status)


class ListenFailed(OSError):
    """The server cannot listen on its address (the port is taken, the host is not this machine's, ...).

    An ``OSError`` (with the original ``errno``) whose message names the
    address and says why, in one line: what ``boreas head``/``node``/``region``
    print instead of the asyncio traceback.
    """

    def __init__(self, host: str, port: int, cause: OSError):
        reason = cause.strerror or str(cause)
        if cause.errno == errno.EADDRINUSE:
            reason = "the port is in use (another process listens on it: stop it or pick another port)"
        elif cause.errno == errno.EADDRNOTAVAIL:
            reason = "the address is not one of this machine's"
        super().__init__(cause.errno, f"cannot listen on {host}:{port}: {reason}")
        self.host, self.port = host, port

    def __str__(self) -> str:
        return str(self.strerror)


class HttpServer:
    """One listening HTTP endpoint; ``counters`` counts requests and refusals."""

    def __init__(self, name: str, token: str | None, max_body: int = MAX_BODY, *,
                 header_timeout: float = HEADER_TIMEOUT, idle_timeout: float = IDLE_TIMEOUT,
                 body_timeout: float = BODY_TIMEOUT, max_connections: int | None = None):
        self.name = name
        self.token = token
        self.max_body = max_body
        self.header_timeout = header_timeout
        self.idle_timeout = idle_timeout
        self.body_timeout = body_timeout
        self.max_connections = max_connections or default_max_connections()
        self.counters: Counter[str] = Counter()
        # The component's one metrics registry: its own, not the process-wide default, so that
        # several components in one process (tests) each export only their own series.
        self.registry = new_registry()
        self.registry.register(View(self._metrics))
        self.app = web.Application(client_max_size=max_body,
                                   middlewares=[request_timer(self.registry), self._guard, self._errors,
                                                self._authenticate])
        self._runner: web.AppRunner | None = None
        self._connections: dict[asyncio.BaseTransport, _Connection] = {}
        self.host: str | None = None
        self.port: int | None = None

    @property
    def connections(self) -> int:
        """Connections open now."""
        return len(self._connections)

    @property
    def endpoint(self) -> str:
        if self.port is None:
            raise RuntimeError(f"{self.name} server is not started")
        return f"{self.host}:{self.port}"

    def _metrics(self, f: Families) -> None:
        """``counters`` and ``connections`` as Prometheus samples (read when scraped)."""
        c = self.counters
        f.counter("boreas_http_requests_total", "HTTP requests that reached the handlers.", c["requests"])
        f.gauge("boreas_http_connections", "HTTP connections open now.", self.connections)
        f.counter("boreas_http_idle_connections_closed_total", "Keep-alive connections closed for idling.",
                  c["idle_closed"])
        for reason in ("too_large", "unauthenticated", "too_slow", "refused_connections", "header_timeouts",
                       "body_timeouts"):
            f.counter("boreas_http_refused_total", "Requests or connections refused, by reason (the limits "
                      "of boreas.wire.server).", c[reason], reason=reason)

    @web.middleware
    async def _guard(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        """Tell the connection a request is in progress; time its body."""
        conn = self._connections.get(request.transport) if request.transport else None
        if conn is None:
            return await handler(request)
        conn.request_started()
        body_timer = None
        if request.body_exists and not request.content.is_eof():
            body_timer = asyncio.get_running_loop().call_later(
                self.body_timeout, conn.body_late, request.content)
        try:
            return await handler(request)
        except Exception:
            if conn.timed_out:  # the connection was closed under the handler: that is why
                return web.Response(status=408)
            raise
        finally:
            if body_timer is not None:
                body_timer.cancel()
            conn.request_done()

    @web.middleware
    async def _errors(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        self.counters["requests"] += 1
        try:
            return await handler(request)
        except web.HTTPRequestEntityTooLarge:
            self.counters["too_large"] += 1
            return json_error(413, f"request body is larger than the limit of {self.max_body} bytes")
        except web.HTTPException as exc:
            if exc.status >= 400 and exc.content_type != "application/json":
                return json_error(exc.status, exc.reason)
            raise

    @web.middleware
    async def _authenticate(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        if request.method not in SAFE_METHODS and self.token is not None:
            if not check_token(request.headers.get("Authorization"), self.token):
                self.counters["unauthenticated"] += 1
                log.warning("%s: refused %s %s from %s: missing or wrong token", self.name,
                            request.method, request.path, request.remote)
                return json_error(401, "missing or wrong cluster token (Authorization: Bearer ...)")
        return await handler(request)

    async def start(self, host: str, port: int) -> str:
        """Bind and serve; returns the endpoint actually bound."""
        tls = current_tls()
        ssl_context = tls.server_context() if tls.enabled else None  # no certificate: TlsError, nothing bound
        if not tls.enabled and self.token is not None and not is_loopback(host):
            log.warning("%s: listening on %s without TLS: the cluster token reaches it in clear (turn TLS on: "
                        "docs/security.md)", self.name, host)
        self._runner = web.AppRunner(self.app, access_log=None, handle_signals=False, shutdown_timeout=2.0,
                                     keepalive_timeout=self.idle_timeout)
        await self._runner.setup()
        site = _GuardedSite(self._runner, host, port, self._connection, self.header_timeout,
                            reuse_address=True, ssl_context=ssl_context)
        try:
            await site.start()
        except OSError as exc:
            await self.close()
            raise ListenFailed(host, port, exc) from None
        self.host = host
        self.port = port or _bound_port(site)
        log.info("%s listening on %s%s", self.name, self.endpoint, " (TLS)" if tls.enabled else "")
        return self.endpoint

    async def close(self) -> None:
        if self._runner is not None:
            runner, self._runner = self._runner, None
            await runner.cleanup()

    def _connection(self, inner: asyncio.Protocol) -> asyncio.Protocol:
        return _Connection(self, inner)


class _Connection(asyncio.Protocol):
    """One accepted connection: aiohttp's protocol inside, our limits and timers around it.

    Between requests a timer runs: ``idle_timeout`` while no byte of a next
    request has come, ``header_timeout`` from its first byte (and from the
    connection's start) until aiohttp hands the request to the middleware.
    """

    def __init__(self, server: HttpServer, inner: asyncio.Protocol):
        self.server = server
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
        server = self.server
        if len(server._connections) >= server.max_connections:
            self.refused = True
            server.counters["refused_connections"] += 1
            if server.counters["refused_connections"] % 1000 == 1:  # not a line per connection
                log.warning("%s: refusing connections: %d open, the limit (%d refused so far)",
                            server.name, len(server._connections), server.counters["refused_connections"])
            transport.write(_raw_response(503, "Service Unavailable",
                                          f"{server.name}: too many connections "
                                          f"(limit {server.max_connections}); try again later"))
            transport.close()
            return
        server._connections[transport] = self
        self._arm(server.header_timeout)
        self.inner.connection_made(transport)

    def connection_lost(self, exc: Exception | None) -> None:
        if self.refused:
            return
        self._disarm()
        self.server._connections.pop(self.transport, None)  # type: ignore[arg-type]
        self.inner.connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if self.refused or self.lingering:
            return
        if not self.busy and not self.partial and data:
            self.partial = True
            self.draining = False
            self._arm(self.server.header_timeout)  # the header must now come promptly
        self.inner.data_received(data)

    def eof_received(self) -> bool | None:
        return None if self.refused else self.inner.eof_received()

    def pause_writing(self) -> None:
        if not self.refused:
            self.inner.pause_writing()

    def resume_writing(self) -> None:
        if not self.refused:
            self.inner.resume_writing()

    # -- called by HttpServer._guard ------------------------------------------

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
            self._arm(min(self.server.idle_timeout, self.server.body_timeout))

    def body_late(self, content: object) -> None:
        if getattr(content, "is_eof", lambda: True)():
            return
        self.server.counters["body_timeouts"] += 1
        self._close(408, "Request Timeout",
                    f"request body not received within {self.server.body_timeout:g} s")

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
        server = self.server
        if self.draining:
            elapsed = asyncio.get_running_loop().time() - self.done_at
            if self.transport.get_write_buffer_size():  # the response is still going out
                if elapsed < server.body_timeout:
                    self._arm(server.body_timeout - elapsed)
                    return
                server.counters["body_timeouts"] += 1  # the client does not take its response
                self.timed_out = True
                self.transport.abort()
                return
            self.draining = False
            if elapsed < server.idle_timeout:
                self._arm(server.idle_timeout - elapsed)
                return
        if self.partial:
            server.counters["header_timeouts"] += 1
            self._close(408, "Request Timeout",
                        f"request header not received within {server.header_timeout:g} s")
        else:
            server.counters["idle_closed"] += 1
            self.timed_out = True
            self.transport.close()

    def _close(self, status: int, reason: str, message: str) -> None:
        self.timed_out = True
        self._disarm()
        transport = self.transport
        if transport is None or transport.is_closing():
            return
        log.debug("%s: closing connection from %s: %s", self.server.name,
                 transport.get_extra_info("peername"), message)
        transport.write(_raw_response(status, reason, message))
        # A lingering close (as nginx does): end our side, keep reading and discarding for a
        # moment, then close.  Closing at once with the client's bytes unread makes the kernel
        # answer with a reset, which can overtake the response -- the client would never see why.
        if transport.can_write_eof():
            transport.write_eof()
            self.lingering = True
            self.server._connections.pop(transport, None)  # closing: it no longer holds a slot
            asyncio.get_running_loop().call_later(LINGER, transport.close)
        else:
            transport.close()


class _GuardedSite(web.TCPSite):
    """A TCPSite whose connections are wrapped in :class:`_Connection`."""

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


def _bound_port(site: web.TCPSite) -> int:
    server = site._server  # aiohttp keeps the asyncio server here; no public accessor
    assert server is not None and server.sockets
    return int(server.sockets[0].getsockname()[1])
