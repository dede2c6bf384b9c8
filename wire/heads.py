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
  leader after the last one died;
* a Head that has not answered within :data:`ANSWER_WITHIN` seconds (3 by
  default; ``$BOREAS_HEAD_ANSWER_WITHIN`` sets it) is checked, not dropped:
  the call is left running while the Head answers a ``GET /status`` of its
  own or another Head names it the leader (a long submission, a status
  long-poll, a leader busy committing), and given up for the next Head
  otherwise (at once when another Head names a different leader).  A
  frozen Head (``SIGSTOP``: its kernel still accepts connections, nothing
  answers) therefore costs a client this deadline once the other Heads have
  elected a new leader, not the client's whole timeout; before that
  election the other Heads would only redirect back to it.  The check
  repeats every :data:`ANSWER_WITHIN` seconds for as long as the call runs.  A call given up may still be carried out by the frozen Head if it
  resumes before its session expires (as with any call whose answer was
  lost); once its session expired its commits are fenced.

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
import contextlib
import logging
import os
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
#: Seconds a Head may take to answer before it is checked (module doc); ``$BOREAS_HEAD_ANSWER_WITHIN`` sets it.
ANSWER_WITHIN = 3.0

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

    def __init__(self, follow_for: float = FOLLOW_FOR, answer_within: float | None = None):
        self.follow_for = follow_for
        self.answer_within = answer_within if answer_within is not None else answer_within_from_env()
        self.leaders: dict[str, str] = {}  # "a:1,b:2" -> "b:2"

    async def request(self, send: Send, method: str, url: str, **kwargs: Any) -> tuple[int, bytes]:
        candidates = head_candidates(url)
        if len(candidates) <= 1:
            status, body, _ = await self._follow(send, method, url, kwargs, [])
            return status, body
        key = _netloc(url)
        deadline = time.monotonic() + self.follow_for
        while True:
            failure: PeerUnreachable | None = None
            preferred = self.leaders.get(key)
            for target in sorted(candidates, key=lambda c: _netloc(c) != preferred):
                try:
                    status, body, answered = await self._follow(send, method, target, kwargs, candidates)
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

    def answered(self, url: str) -> str | None:
        """The Head (``host:port``) that answered the last call to the Heads ``url`` names, when it names
        several: which one leads, as far as this client knows (``boreas submit`` says so)."""
        return self.leaders.get(_netloc(url))

    async def _follow(self, send: Send, method: str, url: str, kwargs: dict[str, Any],
                      heads: list[str]) -> tuple[int, bytes, str]:
        """One call and the redirects it gets: status, body and the URL that answered.  With several
        ``heads``, each exchange is watched (:meth:`_watched`)."""
        for _ in range(MAX_REDIRECTS + 1):
            if len(heads) > 1:
                status, body = await self._watched(send, method, url, kwargs, heads)
            else:
                status, body = await send(method, url, **kwargs)
            if status not in (307, 308):
                return status, body, url
            location = _location(body)
            if location is None:
                return status, body, url
            log.debug("%s %s: redirected to %s", method, url, location)
            url = location
        return status, body, url

    async def _watched(self, send: Send, method: str, url: str, kwargs: dict[str, Any],
                       heads: list[str]) -> tuple[int, bytes]:
        """One exchange with the Head at ``url``, given up (:class:`PeerUnreachable`) when it has not
        answered within :attr:`answer_within` and, checked then (and every as long again), it neither
        answers a status request nor is named the leader by another of ``heads``."""
        call = asyncio.ensure_future(send(method, url, **kwargs))
        try:
            while True:
                done, _ = await asyncio.wait({call}, timeout=self.answer_within)
                if done:
                    return call.result()
                if not await self._alive(send, url, heads) and not call.done():
                    log.warning("the Head at %s has not answered %s %s within %g s, nor its status, and no "
                                "other Head names it the leader: trying the next Head",
                                _netloc(url), method, urlsplit(url).path, self.answer_within)
                    raise PeerUnreachable(url, f"no answer within {self.answer_within:g} s, and no Head "
                                               f"names it the leader (is it frozen?)")
        finally:
            if not call.done():
                call.cancel()
                with contextlib.suppress(asyncio.CancelledError, PeerUnreachable):
                    await call

    async def _alive(self, send: Send, url: str, heads: list[str]) -> bool:
        """Whether the Head at ``url`` is worth waiting for: it answers ``GET /status`` within
        :attr:`answer_within`, or another Head names it the leader.  Decided at the first answer that
        settles it: another Head naming a different leader settles it at once (that leader takes the call)."""
        netloc = _netloc(url)
        own_url = urlunsplit(urlsplit(url)._replace(path="/status", query="", fragment=""))
        other_urls = [urlunsplit(urlsplit(own_url)._replace(netloc=_netloc(h))) for h in heads
                      if _netloc(h) != netloc]

        async def asked(target: str) -> dict[str, Any] | None:
            try:
                status, body = await asyncio.wait_for(send("GET", target, timeout=self.answer_within),
                                                      self.answer_within)
            except (PeerUnreachable, asyncio.TimeoutError):
                return None
            payload = json_body(body)
            return payload if status == 200 and isinstance(payload, dict) else None

        own = asyncio.ensure_future(asked(own_url))
        others = [asyncio.ensure_future(asked(target)) for target in other_urls]
        pending: set[asyncio.Future[dict[str, Any] | None]] = {own, *others}
        try:
            while pending:
                done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
                for answer in done:
                    payload = answer.result()
                    if answer is own:
                        if payload is not None:
                            return True
                        continue
                    leader = ((payload or {}).get("leadership") or {}).get("leader")
                    if isinstance(leader, str):
                        return _netloc(leader) == netloc
            return False
        finally:
            for answer in pending:
                answer.cancel()
            await asyncio.gather(own, *others, return_exceptions=True)


def answer_within_from_env() -> float:
    """:data:`ANSWER_WITHIN`, or ``$BOREAS_HEAD_ANSWER_WITHIN`` (seconds) when set; a bad value is refused."""
    text = os.environ.get("BOREAS_HEAD_ANSWER_WITHIN")
    if not text:
        return ANSWER_WITHIN
    try:
        value = float(text)
    except ValueError:
        raise ValueError(f"$BOREAS_HEAD_ANSWER_WITHIN={text!r}: not a number of seconds") from None
    if value <= 0:
        raise ValueError(f"$BOREAS_HEAD_ANSWER_WITHIN={text!r}: must be more than 0 seconds")
    return value


def _location(body: bytes) -> str | None:
    payload = json_body(body)
    location = payload.get("location") if isinstance(payload, dict) else None
    return location if isinstance(location, str) and "://" in location else None


def _no_leader(body: bytes) -> bool:
    payload = json_body(body)
    return isinstance(payload, dict) and "leader" in payload and payload["leader"] is None
