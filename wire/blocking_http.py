"""HTTP/1.1 exchanges over plain sockets, blocking: what a command that makes its requests one after the other needs.

A ``boreas move`` makes three requests in a row and exits; an event loop
(asyncio: about 0.14 s of imports with ssl) and ``http.client`` (0.06 s with
ssl and the email package, which parses headers) cost it more CPU than its
requests (issue 37, "Fast commands").  :class:`Exchanges` sends a request
with a ``Content-Length`` body and reads the answer's status line, headers
and body (``Content-Length``, chunked, or up to the close), keeping one
connection per peer alive between requests.  :mod:`ssl` is imported only
for an ``https://`` URL (TLS on: the process's client context from
:mod:`.tls`, verified against the host dialled), so a command without TLS
never loads it.

The failures are :mod:`.one_shot`'s, in the same words (:func:`describe`):
nothing answered is :class:`~boreas.wire.peer_errors.PeerUnreachable`; a
kept connection the peer closed meanwhile is replaced and the request sent
again once.  ``timeout`` bounds each socket operation (connecting, and each
read), not a whole exchange, as ``http.client``'s does.

>>> head = parse_head(b"HTTP/1.1 307 Temporary Redirect\\r\\nContent-Length: 2\\r\\nConnection: close\\r\\n")
>>> head.status, head.headers["content-length"], head.closes
(307, '2', True)
"""

from __future__ import annotations

import socket
import sys
from collections import Counter
from dataclasses import dataclass
from typing import Any
from urllib.parse import SplitResult, urlsplit

from .peer_errors import CLOSED_NO_CERT, CLOSED_PLAIN, PeerUnreachable, handshake_failed, untrusted_certificate
from .auth import auth_headers
from .tls import clear_token_refusal, warn_clear_token
from .tls import current as current_tls

#: The longest status line and header block read (a peer sending more is not one of ours).
MAX_HEAD = 64 * 1024


class ClosedWithoutAnswer(ConnectionResetError):
    """The peer closed the connection before the status line (``http.client``'s ``RemoteDisconnected``)."""


class BadAnswer(OSError):
    """What came back is not an HTTP/1.x answer."""


#: A kept-alive connection the peer closed meanwhile fails with these before any answer: sent again once.
_STALE = (ConnectionResetError, BrokenPipeError)


@dataclass(frozen=True)
class Head:
    """An answer's status and headers (names lower-cased)."""

    status: int
    headers: dict[str, str]
    closes: bool  # the peer closes the connection after this answer


def parse_head(block: bytes) -> Head:
    """The status line and headers of ``block`` (without the blank line that ends them)."""
    lines = block.decode("latin-1").split("\r\n")
    version, _, rest = lines[0].partition(" ")
    code = rest.partition(" ")[0]
    if not version.startswith("HTTP/1.") or not code.isdigit():
        raise BadAnswer(f"not an HTTP answer: {lines[0][:80]!r}")
    headers: dict[str, str] = {}
    for line in lines[1:]:
        name, sep, value = line.partition(":")
        if sep:
            headers[name.strip().lower()] = value.strip()
    connection = headers.get("connection", "").lower()
    closes = connection == "close" or (version == "HTTP/1.0" and connection != "keep-alive")
    return Head(int(code), headers, closes)


class _Connection:
    """One socket to a peer and what was read past the last answer."""

    def __init__(self, sock: socket.socket):
        self.sock = sock
        self.buffer = b""

    def close(self) -> None:
        self.sock.close()

    def _fill(self) -> bool:
        data = self.sock.recv(65536)
        self.buffer += data
        return bool(data)

    def read_head(self) -> Head:
        while (end := self.buffer.find(b"\r\n\r\n")) < 0:
            if len(self.buffer) > MAX_HEAD:
                raise BadAnswer("the answer's headers are too long")
            if not self._fill():
                if self.buffer:
                    raise BadAnswer("the connection closed in the answer's headers")
                raise ClosedWithoutAnswer("the peer closed the connection without answering")
        block, self.buffer = self.buffer[:end], self.buffer[end + 4:]
        return parse_head(block)

    def read_exactly(self, size: int) -> bytes:
        while len(self.buffer) < size:
            if not self._fill():
                raise BadAnswer("the connection closed in the answer's body")
        data, self.buffer = self.buffer[:size], self.buffer[size:]
        return data

    def read_line(self) -> bytes:
        while (end := self.buffer.find(b"\r\n")) < 0:
            if not self._fill():
                raise BadAnswer("the connection closed in a chunk's size")
        line, self.buffer = self.buffer[:end], self.buffer[end + 2:]
        return line

    def read_body(self, head: Head, method: str) -> bytes:
        if method == "HEAD" or head.status in (204, 304) or 100 <= head.status < 200:
            return b""
        if head.headers.get("transfer-encoding", "").lower() == "chunked":
            chunks = []
            while size := int(self.read_line().split(b";")[0], 16):
                chunks.append(self.read_exactly(size))
                self.read_exactly(2)
            while self.read_line():  # trailers, up to the blank line
                pass
            return b"".join(chunks)
        if "content-length" in head.headers:
            return self.read_exactly(int(head.headers["content-length"]))
        while self._fill():  # up to the close
            pass
        data, self.buffer = self.buffer, b""
        return data


class Exchanges:
    """Blocking HTTP exchanges with kept-alive connections, one per peer (module doc)."""

    def __init__(self, timeout: float, counters: Counter[str]):
        self.timeout = timeout
        self.counters = counters
        self._connections: dict[tuple[str, str], _Connection] = {}  # (scheme, host:port)

    def close(self) -> None:
        connections, self._connections = self._connections, {}
        for connection in connections.values():
            connection.close()

    def exchange(self, method: str, url: str, body: bytes | None, headers: dict[str, str],
                 timeout: float | None) -> tuple[int, bytes]:
        """One request and its answer: status and body; :class:`PeerUnreachable` when nothing answered."""
        parts = urlsplit(url)
        target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        key = (parts.scheme, parts.netloc)
        try:  # (a host or header value no request can carry: nothing is sent)
            lines = [f"{method} {target} HTTP/1.1", f"Host: {host_header(parts)}", "Accept-Encoding: identity",
                     *(f"{name}: {value}" for name, value in headers.items())]
            if body is not None or method in ("POST", "PUT", "PATCH"):
                lines.append(f"Content-Length: {len(body or b'')}")
            request = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + (body or b"")
        except UnicodeError as exc:
            raise self._unreachable(url, exc) from None
        for attempt in (0, 1):
            connection = self._connections.get(key)
            reused = connection is not None
            try:
                if connection is None:
                    connection = self._connections[key] = self._open(key, timeout)
                connection.sock.settimeout(timeout or self.timeout)
                connection.sock.sendall(request)
                head = connection.read_head()
                data = connection.read_body(head, method)
            except _STALE as exc:
                self._drop(key)
                if reused and attempt == 0:
                    continue
                raise self._unreachable(url, exc) from None
            except (OSError, ValueError) as exc:
                self._drop(key)
                raise self._unreachable(url, exc) from None
            if head.closes:
                self._drop(key)
            return head.status, data
        raise AssertionError("unreachable: the second attempt returns or raises")

    def _open(self, key: tuple[str, str], timeout: float | None) -> _Connection:
        scheme, netloc = key
        parts = urlsplit(f"//{netloc}")
        host, port = parts.hostname or "localhost", parts.port or (443 if scheme == "https" else 80)
        # An ASCII name is looked up as bytes: a str one goes through the idna codec (encodings.idna, stringprep,
        # unicodedata: 10-20 ms of imports for a command that makes three requests).
        address = host.encode("ascii") if host.isascii() else host
        sock = socket.create_connection((address, port), timeout=timeout or self.timeout)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if scheme == "https":  # (ssl is imported here, by the context: only a command with TLS on loads it)
            try:
                sock = current_tls().client_context().wrap_socket(sock, server_hostname=host)
            except BaseException:
                sock.close()
                raise
        return _Connection(sock)

    def _drop(self, key: tuple[str, str]) -> None:
        connection = self._connections.pop(key, None)
        if connection is not None:
            connection.close()

    def _unreachable(self, url: str, exc: BaseException) -> PeerUnreachable:
        self.counters["unreachable"] += 1
        return PeerUnreachable(url, describe(exc))


def describe(exc: BaseException) -> str:
    """Why an exchange failed, in the words :class:`~boreas.wire.client.PeerClient` uses; the TLS cases are
    looked at only when :mod:`ssl` was loaded (else no exchange used TLS)."""
    if isinstance(exc, (TimeoutError, socket.timeout)):
        return "timed out"
    ssl: Any = sys.modules.get("ssl")
    if ssl is not None and isinstance(exc, ssl.SSLCertVerificationError):
        return untrusted_certificate(exc.verify_message or exc)
    if isinstance(exc, _STALE) or (ssl is not None and isinstance(exc, ssl.SSLEOFError)):
        tls = current_tls()
        if not tls.enabled:
            return CLOSED_PLAIN
        if not tls.cert:  # TLS 1.3: a server that wants our certificate hangs up after the handshake
            return CLOSED_NO_CERT
    if ssl is not None and isinstance(exc, ssl.SSLError):
        return handshake_failed(str(exc))
    if isinstance(exc, OSError) and exc.strerror:
        return f"cannot connect ({exc.strerror})"
    return str(exc) or type(exc).__name__


def host_header(parts: SplitResult) -> str:
    """The ``Host`` header: the URL's own ``host[:port]``, a non-ASCII name in its IDNA form (as http.client
    sends it), an IPv6 address in brackets."""
    netloc = parts.netloc.rpartition("@")[2]
    if netloc.isascii():
        return netloc
    host = (parts.hostname or "").encode("idna").decode("ascii")
    return f"{host}:{parts.port}" if parts.port is not None else host


def outgoing(url: str, token: str | None, counters: Counter[str], data: Any = None, json_body: Any = None,
             content_type: str | None = None) -> tuple[bytes | None, dict[str, str]]:
    """A request's body and headers as both one-shot transports send them (this module's and
    :mod:`.one_shot`'s): the token refused in clear while TLS is on (:class:`PeerUnreachable`, nothing sent),
    a JSON body encoded, the request counted."""
    tls = current_tls()
    refusal = clear_token_refusal(url, token, tls)
    if refusal is not None:
        raise PeerUnreachable(url, refusal)
    warn_clear_token(url, token, tls)
    headers = auth_headers(token)
    if json_body is not None:
        import json

        data, content_type = json.dumps(json_body), "application/json"
    if isinstance(data, str):
        data = data.encode()
    if content_type:
        headers["Content-Type"] = content_type
    counters["requests"] += 1
    if isinstance(data, bytes):
        counters["bytes_sent"] += len(data)
    return data, headers

