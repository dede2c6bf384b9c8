"""A box's move through the Head's JSON: what ``boreas move`` runs, without the catalog model or lxml.

:meth:`boreas.client.optimizer.Optimizer.move` decides against a decoded
catalog part (``GET /catalog?box=B``: the update reader, lxml and the
catalog model's dataclasses), which costs a command that moves one box
most of its own CPU (issue 37, "Fast commands").  A box that is not
partitioned needs none of that: where it runs is one field of ``GET
/boxes/{name}``'s JSON, the move is one fixed update element, and the
change has shown once that field names the target and every live node is
in sync (one long poll, ``GET /boxes/{name}?node=N&wait=S``: head/box_wait.py;
polling ``GET /nodes`` with an older Head), as
:class:`~boreas.client.optimizer_views.HeadView` waits: three requests in all.  :func:`move_box` does that with the same checks and messages as the
Optimizer (a box the Head does not know: 404, with the Head's "did you
mean"; one already on the target; one deployed nowhere) and answers
``None`` for a partitioned box or a segment (``BOX/SEG``), whose move the
Optimizer's full path makes (its leader moves the data).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from boreas.wire.blocking_peers import Blocking
from boreas.wire.peer_errors import PeerError, PeerRefused

from .errors import OptimizerFailed

#: Seconds between two looks at the Head while waiting for the move to show: at most (as ``HeadView``'s), and
#: the first.
POLL, FIRST_POLL = 0.05, 0.01

#: Seconds the Head is asked to wait at most in one long poll (head/box_wait.py; it caps a wait at 30), and how
#: much longer than its wait its answer may take to arrive.
LONG_POLL, ANSWER_MARGIN = 25.0, 10.0

#: Seconds a node may take to answer the move (a box with large state takes a while to hand over).
UPDATE_TIMEOUT = 60.0

#: What an attribute value's text becomes in XML, as libxml2 writes it (``move_document``'s output).
_ESCAPES = {"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "\n": "&#10;", "\r": "&#13;", "\t": "&#9;"}


@dataclass(frozen=True)
class BoxMoved:
    """A moved box: the node it left, and that node's answer (``moved``: the boxes that went with it)."""

    source: str
    reply: dict[str, Any]


def _attr(value: str) -> str:
    return "".join(_ESCAPES.get(ch, ch) for ch in value)


def move_text(box: str, target: str, origin: str) -> str:
    """``<update origin=O><move node=T box=B/></update>``: what ``optimizer_updates.move_document`` writes
    (a test compares them), built without lxml.

    >>> move_text("b&1", "localhost:15002", "optimizer")
    '<update origin="optimizer"><move node="localhost:15002" box="b&amp;1"/></update>'
    """
    return f'<update origin="{_attr(origin)}"><move node="{_attr(target)}" box="{_attr(box)}"/></update>'


def box_entry(peers: Blocking, head: str, box: str) -> dict[str, Any] | None:
    """The Head's ``GET /boxes/{box}`` (``node``, ``partition``, ``version``); None when it has no such box."""
    try:
        return peers.call("GET", f"{head}/boxes/{quote(box, safe='')}")
    except PeerRefused as exc:
        if exc.status == 404:
            return None
        raise


def move_box(peers: Blocking, head: str, box: str, target: str, timeout: float,
                   origin: str = "optimizer") -> BoxMoved | None:
    """Move box ``box`` (not partitioned) to ``target`` and wait until the Head shows it everywhere.

    None: ``box`` names a segment or a partitioned box (nothing was sent). :class:`OptimizerFailed` as
    :meth:`~boreas.client.optimizer.Optimizer.move` raises it.
    """
    if "/" in box:
        return None
    try:
        entry = peers.call("GET", f"{head}/boxes/{quote(box, safe='')}")
    except PeerRefused as exc:
        if exc.status == 404:
            raise OptimizerFailed(exc.payload.get("error") or f"no box {box!r} in the catalog", 404) from None
        raise OptimizerFailed(str(exc), 503) from None
    except PeerError as exc:
        raise OptimizerFailed(str(exc), 503) from None
    if entry.get("partition") is not None:
        return None
    source = entry.get("node")
    if not source:
        raise OptimizerFailed(f"box {box!r} is not deployed on any node")
    if source == target:
        raise OptimizerFailed(f"box {box!r} is already on {target}")
    try:
        reply = peers.post_update(source, move_text(box, target, origin), timeout=UPDATE_TIMEOUT)
    except PeerRefused as exc:
        raise OptimizerFailed(f"node {source}: {exc.payload.get('error') or exc}", 502,
                              exc.payload.get("diagnostics", [])) from None
    except PeerError as exc:
        raise OptimizerFailed(str(exc), 503) from None
    _shown(peers, head, box, target, timeout)
    return BoxMoved(source, reply)


def _shown(peers: Blocking, head: str, box: str, target: str, timeout: float) -> None:
    """Until the Head's catalog has ``box`` on ``target`` and every live node is in sync (``HeadView.shown``'s
    condition): one long poll, ``GET /boxes/{box}?node=T&wait=S`` (head/box_wait.py), asked again only if it
    answers before that holds (its wait is at most :data:`LONG_POLL` seconds).  A Head that answers without
    ``"lagging"`` does not wait (an older one): then :func:`_polled`."""
    deadline = time.monotonic() + timeout
    url = f"{head}/boxes/{quote(box, safe='')}?node={quote(target, safe='')}"
    while True:
        wait = max(0.0, min(deadline - time.monotonic(), LONG_POLL))
        try:
            entry = peers.call("GET", f"{url}&wait={wait:.3f}", timeout=wait + ANSWER_MARGIN)
        except PeerRefused as exc:
            if exc.status != 404:  # (404: the box is between two catalogs: asked again, as the polls do)
                raise OptimizerFailed(str(exc), 503) from None
            entry = {"placed": False, "lagging": []}
            time.sleep(POLL)
        except PeerError as exc:
            raise OptimizerFailed(str(exc), 503) from None
        if "lagging" not in entry:
            return _polled(peers, head, box, target, deadline, timeout)
        lagging = entry["lagging"]
        if entry["placed"] and not lagging:
            return
        if time.monotonic() >= deadline:
            raise _not_shown(box, target, timeout, lagging)


def _not_shown(box: str, target: str, timeout: float, lagging: list[str]) -> OptimizerFailed:
    return OptimizerFailed(f"box {box!r} moved to {target}, but after {timeout:g}s the Head does not show it "
                           f"everywhere" + (f" ({', '.join(lagging)} not in sync)" if lagging else ""), 504)


def _polled(peers: Blocking, head: str, box: str, target: str, deadline: float, timeout: float) -> None:
    """:func:`_shown` by polling, for a Head that does not wait: ``GET /boxes/{box}`` until it shows on the target,
    then only ``GET /nodes``, first after :data:`FIRST_POLL` seconds, then twice as long each time up to
    :data:`POLL`: the nodes are usually in sync a few tens of milliseconds after the Head committed the move."""
    moved, pause = False, FIRST_POLL
    while True:
        lagging: list[str] = []
        try:
            if not moved:
                entry = box_entry(peers, head, box)
                moved = entry is not None and entry.get("node") == target
            if moved:
                nodes = (peers.call("GET", f"{head}/nodes"))["nodes"]
                lagging = [n["endpoint"] for n in nodes if n["alive"] and not n["in_sync"]]
        except PeerError as exc:
            raise OptimizerFailed(str(exc), 503) from None
        if moved and not lagging:
            return
        if time.monotonic() > deadline:
            raise _not_shown(box, target, timeout, lagging)
        time.sleep(pause)
        pause = min(pause * 2, POLL)
