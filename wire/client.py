"""Calls from one component to another: update XML and JSON over HTTP.

One :class:`PeerClient` per component holds a connection pool, puts the
cluster token on every request, bounds every call by a timeout, and counts
what it sent.  Failures come in two kinds a caller must tell apart:
:class:`PeerUnreachable` (nothing answered: the peer is down or the network
is) and :class:`PeerRefused` (the peer answered with an error status, and
its JSON body says why).  With TLS on (:mod:`.tls`) the pool connects with
the process's client context, and a request that would carry the token over
plain HTTP is refused (:class:`PeerUnreachable`, naming why) before it is sent.

Usage::

    async with PeerClient(token="s3cret") as peers:
        reply = await peers.post_update("localhost:15000", "<update>...</update>")
"""

from __future__ import annotations

import asyncio
import errno
from typing import Any

import aiohttp

from .auth import auth_headers
from .peer_calls import PeerCalls
from .peer_errors import (  # defined apart so that light commands name them without aiohttp
    CLOSED_NO_CERT,
    CLOSED_PLAIN,
    XML,
    PeerError,
    PeerRefused,
    PeerUnreachable,
    handshake_failed,
    untrusted_certificate,
)
from .tls import clear_token_refusal, warn_clear_token
from .tls import current as current_tls

__all__ = ["XML", "PeerClient", "PeerError", "PeerRefused", "PeerUnreachable", "describe_tls_failure",
           "open_session"]


class PeerClient(PeerCalls):
    """:class:`PeerCalls` over a pool of aiohttp connections (the long-lived components')."""

    def __init__(self, token: str | None, timeout: float = 10.0):
        super().__init__(token)
        self.timeout = aiohttp.ClientTimeout(total=timeout, connect=min(timeout, 3.0))
        self._session: aiohttp.ClientSession | None = None

    def _open(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            self._session = open_session(self.token, self.timeout)
        return self._session

    async def close(self) -> None:
        if self._session is not None:
            session, self._session = self._session, None
            await session.close()

    async def send(self, method: str, url: str, *, data: Any = None,
                   json_body: Any = None, content_type: str | None = None,
                   timeout: float | None = None) -> tuple[int, bytes]:
        """One call; raises :class:`PeerUnreachable` when nothing answered."""
        headers = {"Content-Type": content_type} if content_type else None
        tls = current_tls()
        refusal = clear_token_refusal(url, self.token, tls)
        if refusal is not None:
            raise PeerUnreachable(url, refusal)
        warn_clear_token(url, self.token, tls)
        if isinstance(data, str):
            data = data.encode()
        self.counters["requests"] += 1
        if isinstance(data, bytes):
            self.counters["bytes_sent"] += len(data)
        kwargs: dict[str, Any] = {"data": data, "json": json_body, "headers": headers, "allow_redirects": False}
        if timeout is not None:
            kwargs["timeout"] = aiohttp.ClientTimeout(total=timeout)
        try:
            async with self._open().request(method, url, **kwargs) as resp:
                body = await resp.read()
                return resp.status, body
        except (TimeoutError, aiohttp.ClientError, OSError) as exc:
            self.counters["unreachable"] += 1
            raise PeerUnreachable(url, _describe(exc)) from None


def open_session(token: str | None, timeout: aiohttp.ClientTimeout | None = None) -> aiohttp.ClientSession:
    """A connection pool that sends ``token`` and, with TLS on, connects with the process's client context."""
    tls = current_tls()
    connector = aiohttp.TCPConnector(ssl=tls.client_context()) if tls.enabled else None
    kwargs: dict[str, Any] = {"timeout": timeout} if timeout is not None else {}
    return aiohttp.ClientSession(headers=auth_headers(token), connector=connector, **kwargs)


def _describe(exc: BaseException) -> str:
    if isinstance(exc, asyncio.TimeoutError):
        return "timed out"
    tls = describe_tls_failure(exc)
    if tls is not None:
        return tls
    if isinstance(exc, aiohttp.ServerDisconnectedError) or (_reset(exc) and current_tls().enabled):
        tls = current_tls()
        if not tls.enabled:
            return CLOSED_PLAIN
        if not tls.cert:  # TLS 1.3: a server that wants our certificate hangs up after the handshake
            return CLOSED_NO_CERT
    if isinstance(exc, aiohttp.ClientConnectorError):
        return f"cannot connect ({exc.os_error.strerror or exc.os_error})"
    return str(exc) or type(exc).__name__


def _reset(exc: BaseException) -> bool:
    """The peer reset the connection: with TLS 1.3, how a server that wants our certificate may also hang
    up (an alert or a reset, whichever the timing gives)."""
    return isinstance(exc, aiohttp.ClientOSError) and exc.errno == errno.ECONNRESET


def describe_tls_failure(exc: BaseException) -> str | None:
    """What a failed TLS connection means, in words that say what to do; None: not a TLS failure.

    A certificate that does not chain to our CA (another cluster's, or a CA
    not given), a handshake with a server that speaks plain HTTP, and a
    server that wants our certificate each get their own sentence.
    """
    if isinstance(exc, aiohttp.ClientConnectorCertificateError):
        return untrusted_certificate(getattr(exc.certificate_error, "verify_message", None)
                                     or exc.certificate_error)
    if isinstance(exc, aiohttp.ClientConnectorSSLError):
        return handshake_failed(str(exc.os_error))
    return None
