"""Calls from one component to another: update XML and JSON over HTTP.

One :class:`PeerClient` per component holds a connection pool, puts the
cluster token on every request, bounds every call by a timeout, and counts
what it sent.  Failures come in two kinds a caller must tell apart:
:class:`PeerUnreachable` (nothing answered: the peer is down or the network
is) and :class:`PeerRefused` (the peer answered with an error status, and
its JSON body says why).

Usage::

    async with PeerClient(token="s3cret") as peers:
        reply = await peers.post_update("localhost:15000", "<update>...</update>")
"""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from typing import Any

import aiohttp

from .addressing import endpoint_url
from .auth import auth_headers

XML = "application/xml"


class PeerError(Exception):
    """A call to another component failed."""


class PeerUnreachable(PeerError):
    def __init__(self, target: str, reason: str):
        super().__init__(f"{target} is unreachable: {reason}")
        self.target = target
        self.reason = reason


class PeerRefused(PeerError):
    def __init__(self, target: str, status: int, payload: dict[str, Any]):
        message = payload.get("error") or f"HTTP {status}"
        super().__init__(f"{target} refused the request ({status}): {message}")
        self.target = target
        self.status = status
        self.payload = payload


class PeerClient:
    """HTTP calls to peers with the cluster token; ``counters`` for observability."""

    def __init__(self, token: str | None, timeout: float = 10.0):
        self.token = token
        self.timeout = aiohttp.ClientTimeout(total=timeout, connect=min(timeout, 3.0))
        self.counters: Counter[str] = Counter()
        self._session: aiohttp.ClientSession | None = None

    async def __aenter__(self) -> PeerClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def _open(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession(timeout=self.timeout, headers=auth_headers(self.token))
        return self._session

    async def close(self) -> None:
        if self._session is not None:
            session, self._session = self._session, None
            await session.close()

    async def request(self, method: str, url: str, *, data: Any = None,
                      json_body: Any = None, content_type: str | None = None,
                      timeout: float | None = None) -> tuple[int, bytes]:
        """One call; raises :class:`PeerUnreachable` when nothing answered."""
        headers = {"Content-Type": content_type} if content_type else None
        if isinstance(data, str):
            data = data.encode()
        self.counters["requests"] += 1
        if isinstance(data, bytes):
            self.counters["bytes_sent"] += len(data)
        kwargs: dict[str, Any] = {"data": data, "json": json_body, "headers": headers}
        if timeout is not None:
            kwargs["timeout"] = aiohttp.ClientTimeout(total=timeout)
        try:
            async with self._open().request(method, url, **kwargs) as resp:
                body = await resp.read()
                return resp.status, body
        except (TimeoutError, aiohttp.ClientError, OSError) as exc:
            self.counters["unreachable"] += 1
            raise PeerUnreachable(url, _describe(exc)) from None

    async def call(self, method: str, url: str, **kwargs: Any) -> Any:
        """A call whose answer is JSON; error statuses raise :class:`PeerRefused`."""
        status, body = await self.request(method, url, **kwargs)
        payload = _json(body)
        if status >= 400:
            self.counters["refused"] += 1
            raise PeerRefused(url, status, payload if isinstance(payload, dict) else {})
        return payload

    async def text(self, url: str, timeout: float | None = None) -> str:
        status, body = await self.request("GET", url, timeout=timeout)
        if status >= 400:
            raise PeerRefused(url, status, _json(body) or {})
        return body.decode()

    async def post_update(self, endpoint: str, text: str, timeout: float | None = None) -> Any:
        """Send update XML to a component's ``/update``; its JSON answer is returned."""
        return await self.call("POST", endpoint_url(endpoint, "/update"), data=text,
                               content_type=XML, timeout=timeout)


def _json(body: bytes) -> Any:
    try:
        return json.loads(body) if body else {}
    except ValueError:
        return {"error": body[:200].decode(errors="replace")}


def _describe(exc: BaseException) -> str:
    if isinstance(exc, asyncio.TimeoutError):
        return "timed out"
    if isinstance(exc, aiohttp.ClientConnectorError):
        return f"cannot connect ({exc.os_error.strerror or exc.os_error})"
    return str(exc) or type(exc).__name__
