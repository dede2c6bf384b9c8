"""The blocking calls a command makes (wire/blocking_peers.py) answer as OneShotPeers' do, without an event loop.

Each case is run by both transports against one standard-library HTTP
server on a thread: the same answers, the same failures in the same words
(PeerRefused with the peer's JSON, PeerUnreachable saying why), the token
sent, redirects followed, chunked and read-to-close bodies, a kept-alive
connection the peer closed meanwhile sent again once, and TLS with the
process's client context (ssl loaded only then).  In process, no Head or
node processes.
"""

from __future__ import annotations

import http.server
import json
import socket
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from boreas.wire import blocking_http, blocking_peers, heads, tls
from boreas.wire.blocking_peers import BlockingPeers, LoopPeers
from boreas.wire.one_shot import OneShotPeers
from boreas.wire.peer_errors import PeerError


class _Server:
    """Answers by path: ``/json``, ``/chunked``, ``/close`` (HTTP/1.0, no length), ``/missing`` (404),
    ``/hangup`` (closes without answering), ``/bye`` (answers, then closes unannounced), ``/redirect`` (307 to ``/json``), ``/update`` (echoes a POST)."""

    def __init__(self, context: Any = None) -> None:
        server = self
        self.seen: list[tuple[str, str, str | None]] = []  # method, path, Authorization
        self.connections = 0

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:
                pass

            def setup(self) -> None:
                server.connections += 1
                super().setup()

            def answer(self, status: int, body: object, **headers: str) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for name, value in headers.items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                server.seen.append(("GET", self.path, self.headers.get("Authorization")))
                if self.path == "/json":
                    self.answer(200, {"ok": True})
                elif self.path == "/missing":
                    self.answer(404, {"error": "no box 'b2' in the catalog"})
                elif self.path == "/redirect":
                    self.answer(307, {"location": f"{server.url}/json"})
                elif self.path == "/chunked":
                    self.send_response(200)
                    self.send_header("Transfer-Encoding", "chunked")
                    self.end_headers()
                    for part in (b'{"parts": ', b'[1, 2]', b"}"):
                        self.wfile.write(b"%x\r\n%s\r\n" % (len(part), part))
                    self.wfile.write(b"0\r\n\r\n")
                elif self.path == "/close":
                    self.close_connection = True
                    self.wfile.write(b'HTTP/1.0 200 OK\r\nContent-Type: application/json\r\n\r\n{"closed": 1}')
                elif self.path == "/bye":
                    self.answer(200, {"bye": True})
                    self.close_connection = True
                elif self.path == "/hangup":
                    self.close_connection = True
                else:
                    self.answer(404, {"error": "not here"})

            def do_POST(self) -> None:
                server.seen.append(("POST", self.path, self.headers.get("Authorization")))
                text = self.rfile.read(int(self.headers["Content-Length"])).decode()
                self.answer(200, {"got": text, "type": self.headers.get("Content-Type")})

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        if context is not None:
            self.httpd.socket = context.wrap_socket(self.httpd.socket, server_side=True)
        scheme = "https" if context is not None else "http"
        self.url = f"{scheme}://localhost:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def server() -> Iterator[_Server]:
    made = _Server()
    yield made
    made.close()


def _both(token: str | None, calls: Callable[[Any], Any]) -> list[Any]:
    """``calls(peers)`` with blocking peers, and with OneShotPeers through the same blocking face (LoopPeers):
    each an answer or the error's type and words."""
    def outcome(peers: Any) -> Any:
        try:
            with peers:
                return calls(peers)
        except PeerError as exc:
            return type(exc).__name__, str(exc), getattr(exc, "payload", None)

    return [outcome(BlockingPeers(token, timeout=5.0)), outcome(LoopPeers(token, timeout=5.0))]


def test_answers_and_failures_are_one_shots(server: _Server) -> None:
    cases: dict[str, Callable[[Any], Any]] = {
        "json": lambda p: p.call("GET", f"{server.url}/json"),
        "chunked": lambda p: p.call("GET", f"{server.url}/chunked"),
        "close": lambda p: [p.call("GET", f"{server.url}/close"), p.call("GET", f"{server.url}/json")],
        "missing": lambda p: p.call("GET", f"{server.url}/missing"),
        "redirect": lambda p: p.call("GET", f"{server.url}/redirect"),
        "text": lambda p: p.text(f"{server.url}/json"),
        "update": lambda p: p.post_update(server.url.partition("://")[2], "<update/>"),
        "hangup": lambda p: p.call("GET", f"{server.url}/hangup"),
    }
    for name, calls in cases.items():
        blocking, one_shot = _both("s3cret", calls)
        assert blocking == one_shot, name
    blocking, _ = _both(None, cases["chunked"])
    assert blocking == {"parts": [1, 2]}
    blocking, _ = _both(None, cases["missing"])
    assert blocking[0] == "PeerRefused" and blocking[2] == {"error": "no box 'b2' in the catalog"}
    blocking, _ = _both(None, cases["hangup"])
    assert blocking[0] == "PeerUnreachable" and "closed the connection without answering" in blocking[1]
    assert ("GET", "/json", "Bearer s3cret") in server.seen  # (after the redirect too: the token is still sent)
    assert ("POST", "/update", "Bearer s3cret") in server.seen


def test_a_port_nobody_listens_on_is_unreachable_in_the_same_words() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    blocking, one_shot = _both(None, lambda p: p.call("GET", f"http://127.0.0.1:{port}/json"))
    assert blocking == one_shot
    assert blocking[0] == "PeerUnreachable" and "cannot connect (Connection refused)" in blocking[1]


def test_one_connection_is_kept_and_one_the_peer_closed_is_replaced(server: _Server) -> None:
    with BlockingPeers(None) as peers:
        for _ in range(3):
            assert peers.call("GET", f"{server.url}/json") == {"ok": True}
        assert server.connections == 1
        assert peers.call("GET", f"{server.url}/bye") == {"bye": True}  # then the peer closes it, unannounced
        assert peers.call("GET", f"{server.url}/json") == {"ok": True}  # sent again on a new connection
        assert server.connections == 2
        assert peers.counters["requests"] == 5 and peers.counters["unreachable"] == 0


def test_a_url_naming_several_heads_gets_the_followers_calls(server: _Server) -> None:
    """Several Heads: the follower of wire/heads.py (an event loop) makes the calls; one Head: plain sockets,
    redirects followed as often as the follower follows them."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        dead = sock.getsockname()[1]
    netloc = server.url.partition("://")[2]
    several = blocking_peers.blocking_peers(f"http://127.0.0.1:{dead},{netloc}", None)
    assert isinstance(several, LoopPeers)
    with several as peers:
        assert peers.call("GET", f"http://127.0.0.1:{dead},{netloc}/json") == {"ok": True}
    assert isinstance(blocking_peers.blocking_peers(server.url, None), BlockingPeers)
    assert blocking_peers.MAX_REDIRECTS == heads.MAX_REDIRECTS


def test_tls_with_the_process_client_context_and_no_token_in_clear(tmp_path: Path) -> None:
    ssl = pytest.importorskip("ssl")
    from boreas.cli.cluster_certs import make_certificates

    certs = make_certificates(tmp_path, "localhost")
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(certs.cert, certs.key)
    secure = _Server(context)
    before = tls.current()
    try:
        tls.configure(tls.TlsConfig(ca=str(certs.ca)))
        blocking, one_shot = _both("s3cret", lambda p: p.call("GET", f"{secure.url}/json"))
        assert blocking == one_shot == {"ok": True}
        plain = secure.url.replace("https://", "http://")  # the token is not sent in clear while TLS is on
        blocking, one_shot = _both("s3cret", lambda p: p.call("GET", f"{plain}/json"))
        assert blocking == one_shot and "refusing to send the cluster token" in blocking[1]
        tls.configure(tls.TlsConfig(ca=str(tmp_path / "cluster.pem")))  # not the CA: untrusted, same words
        blocking, one_shot = _both(None, lambda p: p.call("GET", f"{secure.url}/json"))
        assert blocking == one_shot and "certificate is not trusted" in blocking[1]
    finally:
        tls.configure(before)
        secure.close()


def test_a_host_name_past_ascii_is_unreachable_not_a_crash() -> None:
    """A Head URL naming a host past ASCII (``head_url`` takes it): the same failure as the loop's peers, no
    UnicodeEncodeError from writing the request; the ``Host`` header then carries the name's IDNA form."""
    blocking, one_shot = _both(None, lambda p: p.call("GET", "http://пример.invalid:1/json"))
    assert blocking[0] == one_shot[0] == "PeerUnreachable"
    assert blocking_http.host_header(urlsplit("http://bücher.example:8/x")) == "xn--bcher-kva.example:8"
    assert blocking_http.host_header(urlsplit("http://[::1]:8/x")) == "[::1]:8"
