"""What a client asks of its peers, over whichever HTTP library carries the bytes.

Two transports move a request: :class:`~boreas.wire.client.PeerClient`
(aiohttp: a pool the long-lived components keep) and
:class:`~boreas.wire.one_shot.OneShotPeers` (the standard library's
``http.client``: a command that makes a request or two need not import
aiohttp).  Each implements :meth:`PeerCalls.send` (one HTTP exchange: status
and body, or :class:`~boreas.wire.peer_errors.PeerUnreachable`) and ``close``;
:meth:`PeerCalls.request` makes a call of it, following the leading Head
(:mod:`.heads`: redirects, and a URL naming several Heads); what a call means -- a JSON answer, an error status as
:class:`~boreas.wire.peer_errors.PeerRefused`, update XML to ``/update`` --
is said once, here, so the two cannot drift apart.
"""

from __future__ import annotations

import abc
from collections import Counter
from typing import Any

from .addressing import endpoint_url
from .heads import HeadFollower
from .peer_errors import XML, PeerRefused, json_answer, json_body


class PeerCalls(abc.ABC):
    """HTTP calls to peers with the cluster token; ``counters`` for observability."""

    def __init__(self, token: str | None):
        self.token = token
        self.counters: Counter[str] = Counter()
        self.heads = HeadFollower()  # which of several Heads answered last: asked first next time

    async def __aenter__(self) -> PeerCalls:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    @abc.abstractmethod
    async def close(self) -> None:
        """Release the connections kept."""

    @abc.abstractmethod
    async def send(self, method: str, url: str, *, data: Any = None, json_body: Any = None,
                   content_type: str | None = None, timeout: float | None = None) -> tuple[int, bytes]:
        """One HTTP exchange, redirects not followed: its status and body; :class:`PeerUnreachable`
        when nothing answered."""

    async def request(self, method: str, url: str, **kwargs: Any) -> tuple[int, bytes]:
        """One call: its status and body, after following the leading Head (:mod:`.heads`);
        :class:`PeerUnreachable` when nothing answered."""
        return await self.heads.request(self.send, method, url, **kwargs)

    async def call(self, method: str, url: str, **kwargs: Any) -> Any:
        """A call whose answer is JSON; error statuses raise :class:`PeerRefused`."""
        status, body = await self.request(method, url, **kwargs)
        if status >= 400:
            self.counters["refused"] += 1
        return json_answer(url, status, body)

    async def text(self, url: str, timeout: float | None = None) -> str:
        status, body = await self.request("GET", url, timeout=timeout)
        if status >= 400:
            raise PeerRefused(url, status, json_body(body) or {})
        return body.decode()

    async def post_update(self, endpoint: str, text: str, timeout: float | None = None) -> Any:
        """Send update XML to a component's ``/update``; its JSON answer is returned."""
        return await self.call("POST", endpoint_url(endpoint, "/update"), data=text, content_type=XML,
                               timeout=timeout)
