"""Following the leading Head: a Head URL may name several Heads, and followers redirect.

Several Heads may serve one catalog (docs/architecture.md, "Leadership and
fencing"); one leads, the others answer what would change something with
``307`` and the leader's URL.  A client names them all in one URL,
``http://head-1:14000,head-2:14000/...`` (what ``--head a,b`` and
``$BOREAS_HEAD=a,b`` become, :func:`~boreas.wire.addressing.head_url`), and
every call through :class:`~boreas.wire.peer_calls.PeerCalls` is made by
:class:`HeadFollower`, once for every component (CLI commands, nodes, the
client library, regional and global components):

* a ``307``/``308`` is followed to its ``location`` (at most
  :data:`MAX_REDIRECTS` times), the token still sent (aiohttp would drop it
  on a redirect to another host; ours are not followed by the library);
* with several Heads, the one that answered last is asked first; one that
  does not answer, or answers 503 with ``"leader": null`` (no Head leads
  yet), is passed over for the next, and the round is tried again for up to
  :data:`FOLLOW_FOR` seconds: long enough for the Heads to elect a new
  leader after the last one died.

A URL naming one Head works as before: redirects are followed, and a Head
that does not answer is :class:`~boreas.wire.peer_errors.PeerUnreachable` at
once.

>>> head_candidates("http://a:1,b:2/submissions?x=1")
['http://a:1/submissions?x=1', 'http://b:2/submissions?x=1']
>>> head_candidates("http://a:1/status")
['http://a:1/status']
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from .peer_errors import PeerUnreachable, json_body

log = logging.getLogger(__name__)

#: Seconds a call to several Heads keeps trying them while none answers as leader.
FOLLOW_FOR = 30.0
#: Redirects followed for one call (a follower names the leader: one is enough, unless it just changed).
MAX_REDIRECTS = 3
#: Seconds between rounds over the Heads while none answers.
ROUND_PAUSE = 0.2

Send = Callable[..., Awaitable[tuple[int, bytes]]]


def head_candidates(url: str) -> list[str]:
    """``url`` once per Head its host part names (``a:1,b:2``), in the order given."""
    parts = urlsplit(url)
    return [urlunsplit(parts._replace(netloc=host)) for host in parts.netloc.split(",") if host]


def _netloc(url: str) -> str:
    return urlsplit(url).netloc


class HeadFollower:
    """Makes one call over ``send`` (one HTTP exchange), following redirects and trying each Head named.

    ``leaders`` remembers, per list of Heads, the one that answered last: the
    next call asks it first.  One per :class:`~boreas.wire.peer_calls.PeerCalls`.
    """

    def __init__(self, follow_for: float = FOLLOW_FOR):
        self.follow_for = follow_for
        self.leaders: dict[str, str] = {}  # "a:1,b:2" -> "b:2"

    async def request(self, send: Send, method: str, url: str, **kwargs: Any) -> tuple[int, bytes]:
        candidates = head_candidates(url)
        if len(candidates) <= 1:
            status, body, _ = await self._follow(send, method, url, kwargs)
            return status, body
        key = _netloc(url)
        deadline = time.monotonic() + self.follow_for
        while True:
            failure: PeerUnreachable | None = None
            preferred = self.leaders.get(key)
            for target in sorted(candidates, key=lambda c: _netloc(c) != preferred):
                try:
                    status, body, answered = await self._follow(send, method, target, kwargs)
                except PeerUnreachable as exc:
                    failure = exc
                    continue
                if status == 503 and _no_leader(body):
                    failure = PeerUnreachable(target, "no Head leads yet (an election is under way)")
                    continue
                self.leaders[key] = _netloc(answered)
                return status, body
            if time.monotonic() >= deadline:
                assert failure is not None
                raise PeerUnreachable(url, f"none of the Heads {key} answered as leader within "
                                           f"{self.follow_for:g} s; the last: {failure.reason}")
            await asyncio.sleep(ROUND_PAUSE)

    async def _follow(self, send: Send, method: str, url: str, kwargs: dict[str, Any]) -> tuple[int, bytes, str]:
        """One call and the redirects it gets: status, body and the URL that answered."""
        for _ in range(MAX_REDIRECTS + 1):
            status, body = await send(method, url, **kwargs)
            if status not in (307, 308):
                return status, body, url
            location = _location(body)
            if location is None:
                return status, body, url
            log.debug("%s %s: redirected to %s", method, url, location)
            url = location
        return status, body, url


def _location(body: bytes) -> str | None:
    payload = json_body(body)
    location = payload.get("location") if isinstance(payload, dict) else None
    return location if isinstance(location, str) and "://" in location else None


def _no_leader(body: bytes) -> bool:
    payload = json_body(body)
    return isinstance(payload, dict) and "leader" in payload and payload["leader"] is None
