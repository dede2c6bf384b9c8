"""Calls to peers over the standard library's ``http.client``: for a command that makes a few and exits.

:class:`~boreas.wire.client.PeerClient` keeps an aiohttp pool, which a
component that runs for hours wants; importing aiohttp alone takes about a
quarter of a second, which a ``boreas move`` or ``boreas nodes`` would pay on
every call for three or four requests.  :class:`OneShotPeers` makes the same
calls (``request``, ``call``, ``text``, ``post_update``) with the same
token, the same TLS settings (:mod:`.tls`: the process's client context, the
token never sent in clear while TLS is on) and the same two failures
(:mod:`.peer_errors`), on one kept-alive connection per peer.

Each exchange runs on a worker thread, so the event loop stays free while
it waits: the leading-Head follower (:mod:`.heads`) can check a Head that
does not answer, and give it up (its socket is shut down under the thread).
A connection busy with one exchange is not shared: a second exchange with
the same peer meanwhile (that check) gets a connection of its own.  It is
still for a process that makes a few calls (a CLI command in
``asyncio.run``), not for a component's event loop.  ``timeout`` bounds each
socket operation (connecting, and each read), not a whole call.

Usage::

    peers = OneShotPeers(token="s3cret")
    nodes = (await peers.call("GET", "http://localhost:14000/nodes"))["nodes"]
    await peers.close()
"""

from __future__ import annotations

import asyncio
import http.client
import socket
from typing import Any
from urllib.parse import urlsplit

from .blocking_http import describe, outgoing
from .peer_calls import PeerCalls
from .peer_errors import PeerUnreachable
from .tls import current as current_tls

#: A kept-alive connection the peer closed meanwhile fails with these before any answer: sent again once.
_STALE = (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError)


class OneShotPeers(PeerCalls):
    """:class:`PeerCalls` over the standard library's ``http.client``, blocking, without aiohttp (module doc)."""

    def __init__(self, token: str | None, timeout: float = 10.0):
        super().__init__(token)
        self.timeout = timeout
        self._connections: dict[tuple[str, str], http.client.HTTPConnection] = {}  # (scheme, host:port)
        self._busy: set[tuple[str, str]] = set()  # kept connections an exchange is using now

    async def close(self) -> None:
        connections, self._connections = self._connections, {}
        for connection in connections.values():
            connection.close()

    async def send(self, method: str, url: str, *, data: Any = None, json_body: Any = None,
                   content_type: str | None = None, timeout: float | None = None) -> tuple[int, bytes]:
        """One exchange; raises :class:`PeerUnreachable` when nothing answered."""
        data, headers = outgoing(url, self.token, self.counters, data, json_body, content_type)
        parts = urlsplit(url)
        target = parts.path + (f"?{parts.query}" if parts.query else "") or "/"
        key = (parts.scheme, parts.netloc)
        kept = key not in self._busy  # else another exchange is using the kept connection: one of its own
        connection = self._connection(key, timeout) if kept else self._open(key, timeout)
        if kept:
            self._busy.add(key)
        try:
            return await asyncio.to_thread(self._exchange, url, key, connection, kept, method, target, data,
                                           headers, timeout)
        except asyncio.CancelledError:  # given up (wire/heads.py): end the thread's wait now, keep it no more
            _shut(connection)
            if self._connections.get(key) is connection:
                del self._connections[key]  # (the thread closes it)
            raise
        finally:
            if kept:
                self._busy.discard(key)
            else:
                connection.close()

    def _exchange(self, url: str, key: tuple[str, str], connection: http.client.HTTPConnection, kept: bool,
                  method: str, target: str, data: Any, headers: dict[str, str],
                  timeout: float | None) -> tuple[int, bytes]:
        """One exchange on ``connection`` (on a worker thread); a kept one the peer closed meanwhile is
        replaced and the request sent again once."""
        for attempt in (0, 1):
            reused = kept and connection.sock is not None
            try:
                connection.request(method, target, body=data, headers=headers)
                response = connection.getresponse()
                body = response.read()
            except _STALE as exc:
                self._drop(key, connection)
                if reused and attempt == 0:
                    connection = self._connection(key, timeout)
                    continue
                raise self._unreachable(url, exc) from None
            except (OSError, http.client.HTTPException) as exc:
                self._drop(key, connection)
                raise self._unreachable(url, exc) from None
            if response.will_close:
                self._drop(key, connection)
            return response.status, body
        raise AssertionError("unreachable: the second attempt returns or raises")

    def _connection(self, key: tuple[str, str], timeout: float | None) -> http.client.HTTPConnection:
        """The kept connection to ``key``'s peer (made if there is none)."""
        connection = self._connections.get(key)
        if connection is None:
            connection = self._connections[key] = self._open(key, timeout)
        connection.timeout = timeout or self.timeout
        if connection.sock is not None:
            connection.sock.settimeout(connection.timeout)
        return connection

    def _open(self, key: tuple[str, str], timeout: float | None) -> http.client.HTTPConnection:
        scheme, netloc = key
        if scheme == "https":
            return http.client.HTTPSConnection(netloc, timeout=timeout or self.timeout,
                                               context=current_tls().client_context())
        return http.client.HTTPConnection(netloc, timeout=timeout or self.timeout)

    def _drop(self, key: tuple[str, str], connection: http.client.HTTPConnection) -> None:
        """Close ``connection``, and forget it if it is the one kept for ``key``."""
        if self._connections.get(key) is connection:
            del self._connections[key]
        connection.close()

    def _unreachable(self, url: str, exc: BaseException) -> PeerUnreachable:
        self.counters["unreachable"] += 1
        return PeerUnreachable(url, describe(exc))


def _shut(connection: http.client.HTTPConnection) -> None:
    """Shut ``connection``'s socket down, so that a thread waiting on it returns at once."""
    sock = connection.sock
    if sock is not None:
        try:
            sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass


#: what the optimizer and its views are given: either transport
Peers = PeerCalls
