"""Calls to peers without an event loop: what a CLI command that makes its requests one after the other uses.

:class:`BlockingPeers` makes :class:`~boreas.wire.peer_calls.PeerCalls`'
calls (``request``, ``call``, ``text``, ``post_update``) blocking, over
:mod:`.blocking_http` (plain sockets; :mod:`ssl` only with TLS on), with the
same token, the same TLS rules (:mod:`.tls`: the token never sent in clear
while TLS is on) and the same failures (:mod:`.peer_errors`); redirects from
a Head that does not lead are followed as :mod:`.heads` follows them (at most
:data:`~boreas.wire.heads.MAX_REDIRECTS`, the token still sent).  It imports
neither asyncio nor ``http.client`` (issue 37: a ``boreas move``'s
imports).

A Head URL naming several Heads needs :mod:`.heads`' follower, which
watches a slow Head while the call runs (and so an event loop):
:func:`blocking_peers` then gives :class:`LoopPeers`, the same blocking
calls made by :class:`~boreas.wire.one_shot.OneShotPeers` on a loop of its
own, and only then are asyncio and ``http.client`` loaded.

Usage::

    with blocking_peers("http://localhost:14000", token="s3cret") as peers:
        nodes = peers.call("GET", "http://localhost:14000/nodes")["nodes"]
"""

from __future__ import annotations

from collections import Counter
from typing import Any, Protocol

from .addressing import endpoint_url
from .blocking_http import Exchanges, outgoing
from .peer_errors import XML, PeerRefused, json_answer, json_body

#: Redirects followed for one call (:data:`boreas.wire.heads.MAX_REDIRECTS`; a test checks they agree).
MAX_REDIRECTS = 3


class Blocking(Protocol):
    """The blocking calls a command makes (:class:`BlockingPeers`, :class:`LoopPeers`)."""

    counters: Counter[str]

    def call(self, method: str, url: str, **kwargs: Any) -> Any: ...

    def text(self, url: str, timeout: float | None = None) -> str: ...

    def post_update(self, endpoint: str, text: str, timeout: float | None = None) -> Any: ...

    def close(self) -> None: ...


class _Calls:
    """What a call means over ``request`` (one exchange, redirects followed): said once for both kinds."""

    counters: Counter[str]

    def request(self, method: str, url: str, **kwargs: Any) -> tuple[int, bytes]:
        raise NotImplementedError

    def close(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> _Calls:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def call(self, method: str, url: str, **kwargs: Any) -> Any:
        """A call whose answer is JSON; error statuses raise :class:`PeerRefused`."""
        status, body = self.request(method, url, **kwargs)
        if status >= 400:
            self.counters["refused"] += 1
        return json_answer(url, status, body)

    def text(self, url: str, timeout: float | None = None) -> str:
        status, body = self.request("GET", url, timeout=timeout)
        if status >= 400:
            raise PeerRefused(url, status, json_body(body) or {})
        return body.decode()

    def post_update(self, endpoint: str, text: str, timeout: float | None = None) -> Any:
        """Send update XML to a component's ``/update``; its JSON answer is returned."""
        return self.call("POST", endpoint_url(endpoint, "/update"), data=text, content_type=XML, timeout=timeout)


class BlockingPeers(_Calls):
    """Blocking calls over plain sockets, for a URL naming one Head (module doc)."""

    def __init__(self, token: str | None, timeout: float = 10.0):
        self.token = token
        self.timeout = timeout
        self.counters: Counter[str] = Counter()
        self._exchanges = Exchanges(timeout, self.counters)

    def close(self) -> None:
        self._exchanges.close()

    def send(self, method: str, url: str, *, data: Any = None, json_body: Any = None,
             content_type: str | None = None, timeout: float | None = None) -> tuple[int, bytes]:
        """One exchange, redirects not followed; raises :class:`PeerUnreachable` when nothing answered."""
        data, headers = outgoing(url, self.token, self.counters, data, json_body, content_type)
        return self._exchanges.exchange(method, url, data, headers, timeout)

    def request(self, method: str, url: str, **kwargs: Any) -> tuple[int, bytes]:
        """One call and the redirects it gets (``307``/``308`` with a JSON ``location``, as Heads answer)."""
        for _ in range(MAX_REDIRECTS + 1):
            status, body = self.send(method, url, **kwargs)
            location = _location(body) if status in (307, 308) else None
            if location is None:
                return status, body
            url = location
        return status, body


class LoopPeers(_Calls):
    """:class:`~boreas.wire.one_shot.OneShotPeers` on an event loop of its own, called blocking: for a URL
    naming several Heads, whose follower (:mod:`.heads`) watches a call while it runs."""

    def __init__(self, token: str | None, timeout: float = 10.0):
        import asyncio

        from .one_shot import OneShotPeers

        self._loop = asyncio.new_event_loop()
        self._peers = OneShotPeers(token, timeout)
        self.counters = self._peers.counters

    def request(self, method: str, url: str, **kwargs: Any) -> tuple[int, bytes]:
        return self._loop.run_until_complete(self._peers.request(method, url, **kwargs))

    def close(self) -> None:
        try:
            self._loop.run_until_complete(self._peers.close())
        finally:
            self._loop.close()


def blocking_peers(head: str, token: str | None, timeout: float = 10.0) -> BlockingPeers | LoopPeers:
    """The blocking calls for a command on ``head``: over plain sockets, unless it names several Heads."""
    netloc = head.partition("://")[2].partition("/")[0]
    return LoopPeers(token, timeout) if "," in netloc else BlockingPeers(token, timeout)


def _location(body: bytes) -> str | None:
    payload = json_body(body)
    location = payload.get("location") if isinstance(payload, dict) else None
    return location if isinstance(location, str) and "://" in location else None
