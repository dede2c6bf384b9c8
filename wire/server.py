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
  A path in ``streamed`` (a global component's ``POST /copy``) has no
  whole-body deadline either: its handler reads the body chunk by chunk and
  times each read by ``body_timeout`` itself, so a long body that keeps
  arriving is never cut off while a stalled one still is.
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
import logging
import resource
from collections import Counter
from collections.abc import Awaitable, Callable

from aiohttp import web

from .auth import SAFE_METHODS, check_token
from .connections import ConnectionTable, GuardedConnection, GuardedSite
from .metrics import Families, View, new_registry, request_timer
from .tls import current as current_tls
from .tls import is_loopback

log = logging.getLogger(__name__)

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
        self.counters: Counter[str] = Counter()
        # The open connections, the limits they are held to, and what the limits refused (in counters).
        self.table = ConnectionTable(name, header_timeout, idle_timeout, body_timeout,
                                     max_connections or default_max_connections(), self.counters)
        # The component's one metrics registry: its own, not the process-wide default, so that
        # several components in one process (tests) each export only their own series.
        self.registry = new_registry()
        self.registry.register(View(self._metrics))
        self.app = web.Application(client_max_size=max_body,
                                   middlewares=[request_timer(self.registry), self._guard, self._errors,
                                                self._authenticate])
        # Paths whose handlers time each read of the body themselves (no whole-body deadline).
        self.streamed: set[str] = set()
        self._runner: web.AppRunner | None = None
        self.host: str | None = None
        self.port: int | None = None

    @property
    def connections(self) -> int:
        """Connections open now."""
        return len(self.table)

    @property
    def header_timeout(self) -> float:
        return self.table.header_timeout

    @property
    def idle_timeout(self) -> float:
        return self.table.idle_timeout

    @property
    def body_timeout(self) -> float:
        return self.table.body_timeout

    @property
    def max_connections(self) -> int:
        return self.table.max_connections

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
        conn = self.table.find(request.transport)
        if conn is None:
            return await handler(request)
        conn.request_started()
        body_timer = None
        if request.body_exists and not request.content.is_eof() and request.path not in self.streamed:
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
        site = GuardedSite(self._runner, host, port, self._connection, self.header_timeout,
                            reuse_address=True, ssl_context=ssl_context)
        try:
            await site.start()
        except OSError as exc:
            await self.close()
            raise ListenFailed(host, port, exc) from None
        self.host = host
        self.port = port or site.bound_port
        log.info("%s listening on %s%s", self.name, self.endpoint, " (TLS)" if tls.enabled else "")
        return self.endpoint

    async def close(self) -> None:
        if self._runner is not None:
            runner, self._runner = self._runner, None
            await runner.cleanup()

    def _connection(self, inner: asyncio.Protocol) -> asyncio.Protocol:
        return GuardedConnection(self.table, inner)
