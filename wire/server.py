"""An HTTP listener for a Boreas component: routes, token check, body limit, lifecycle.

Every component (Head, node, regional or global component) serves HTTP on
its endpoint.  This wraps aiohttp with what they all need: mutating requests
must carry the cluster token (401 otherwise, before any handler runs),
request bodies are capped (413), errors are JSON, and ``start``/``close``
bind and release the socket.  Port 0 binds a free port; ``endpoint`` then
tells the real one.

Usage::

    server = HttpServer("node", token="s3cret")
    server.app.router.add_post("/update", handle_update)
    await server.start("localhost", 15000)
    ...
    await server.close()
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Awaitable, Callable

from aiohttp import web

from .auth import SAFE_METHODS, check_token

log = logging.getLogger(__name__)

#: Largest request body accepted: the size limit of an XML document.
MAX_BODY = 16 * 1024 * 1024

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def json_error(status: int, message: str, **extra: object) -> web.Response:
    return web.json_response({"error": message, **extra}, status=status)


class HttpServer:
    """One listening HTTP endpoint; ``counters`` counts requests and refusals."""

    def __init__(self, name: str, token: str | None, max_body: int = MAX_BODY):
        self.name = name
        self.token = token
        self.max_body = max_body
        self.counters: Counter[str] = Counter()
        self.app = web.Application(client_max_size=max_body,
                                   middlewares=[self._errors, self._authenticate])
        self._runner: web.AppRunner | None = None
        self.host: str | None = None
        self.port: int | None = None

    @property
    def endpoint(self) -> str:
        if self.port is None:
            raise RuntimeError(f"{self.name} server is not started")
        return f"{self.host}:{self.port}"

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
        self._runner = web.AppRunner(self.app, access_log=None, handle_signals=False, shutdown_timeout=2.0)
        await self._runner.setup()
        site = web.TCPSite(self._runner, host, port, reuse_address=True)
        await site.start()
        self.host = host
        self.port = port or _bound_port(site)
        log.info("%s listening on %s", self.name, self.endpoint)
        return self.endpoint

    async def close(self) -> None:
        if self._runner is not None:
            runner, self._runner = self._runner, None
            await runner.cleanup()


def _bound_port(site: web.TCPSite) -> int:
    server = site._server  # aiohttp keeps the asyncio server here; no public accessor
    assert server is not None and server.sockets
    return int(server.sockets[0].getsockname()[1])
