"""Where an optimizer reads the topology, and how it knows that a change it made has shown.

An optimizer decides against a catalog and, once the node answered, waits
until the change shows where it reads.  Which catalog depends on who runs it:

* :class:`HeadView` -- a program outside the cluster (``boreas move``, a
  user's optimizer): the Head's catalog, over HTTP; a change has shown when
  the Head's catalog has it and every live node is in sync with it.  A
  caller that names the boxes and streams it looks at reads only that part
  (``GET /catalog?box=B&stream=S``, head/catalog_part.py), so a move in a
  100,000-box catalog reads a few elements, not 25 MB, on every look;
* :class:`CatalogView` -- a component holding a catalog in memory: the
  Head's web UI (its own catalog; it does not wait, the browsers follow the
  change through the feed) or a regional component (its regional catalog,
  kept by node reflections; it waits until the reflections show the change).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from typing import Protocol
from urllib.parse import urlencode

from boreas.catalog.documents import read_document
from boreas.catalog.model import Catalog
from boreas.catalog.replicate import apply_update
from boreas.wire.one_shot import Peers
from boreas.wire.peer_errors import PeerError

from .errors import OptimizerFailed

#: Seconds between two looks at the Head's catalog while waiting for a change to show.
HEAD_POLL = 0.05

Done = Callable[[Catalog], bool]


class TopologyView(Protocol):
    where: str  # what errors call this topology ("the catalog", "region west")

    async def catalog(self, boxes: Sequence[str] = (), streams: Sequence[str] = ()) -> Catalog:
        """The topology as it is now: at least the named boxes and every box writing or reading a named
        stream, with their nodes (with no names: all of it)."""
        ...

    async def shown(self, done: Done, what: str, timeout: float, boxes: Sequence[str] = (),
                    streams: Sequence[str] = ()) -> None:
        """Return once ``done(catalog)`` holds here (``done`` looks at the named boxes and streams only);
        :class:`OptimizerFailed` (504) after ``timeout``."""
        ...


class HeadView:
    """The Head's catalog, read over HTTP (``GET /catalog``, ``GET /nodes``)."""

    def __init__(self, peers: Peers, head: str):
        self.where = "the catalog"  # what errors call it
        self.peers = peers
        self.head = head

    async def catalog(self, boxes: Sequence[str] = (), streams: Sequence[str] = ()) -> Catalog:
        query = urlencode([("box", b) for b in boxes] + [("stream", s) for s in streams])
        try:
            text = await self.peers.text(f"{self.head}/catalog" + (f"?{query}" if query else ""))
            doc = read_document(text.encode(), "the Head's catalog",
                                check_schema=False)  # (the Head validated all of it: no xmlschema here)
        except PeerError as exc:
            raise OptimizerFailed(str(exc), 503) from None
        return apply_update(Catalog(), doc.items, doc.version or 0)

    async def shown(self, done: Done, what: str, timeout: float, boxes: Sequence[str] = (),
                    streams: Sequence[str] = ()) -> None:
        """Also every live node in sync: a caller that returns may count on any node having the change.

        The Head is another process and tells nobody when its nodes are in sync, so this asks it again
        every :data:`HEAD_POLL` seconds.
        """
        deadline = time.monotonic() + timeout
        while True:
            catalog = await self.catalog(boxes, streams)
            try:
                nodes = (await self.peers.call("GET", f"{self.head}/nodes"))["nodes"]
            except PeerError as exc:
                raise OptimizerFailed(str(exc), 503) from None
            lagging = [n["endpoint"] for n in nodes if n["alive"] and not n["in_sync"]]
            if done(catalog) and not lagging:
                return
            if time.monotonic() > deadline:
                raise OptimizerFailed(f"{what}, but after {timeout:g}s the Head does not show it everywhere"
                                      + (f" ({', '.join(lagging)} not in sync)" if lagging else ""), 504)
            await asyncio.sleep(HEAD_POLL)


class CatalogView:
    """A catalog its owner keeps in memory: ``read()`` gives it as it is now.

    ``changed`` is the owner's condition, notified after every change to
    the catalog; without it :meth:`shown` returns at once (the caller
    follows changes by other means).  ``name`` names the catalog in errors.
    """

    def __init__(self, read: Callable[[], Catalog], changed: asyncio.Condition | None = None, name: str = ""):
        self.read = read
        self.changed = changed
        self.name = name
        self.where = name or "the catalog"  # what errors call it ("no box 'x' in region west")

    async def catalog(self, boxes: Sequence[str] = (), streams: Sequence[str] = ()) -> Catalog:
        return self.read()  # (in memory: the whole of it costs nothing to hand over)

    async def shown(self, done: Done, what: str, timeout: float, boxes: Sequence[str] = (),
                    streams: Sequence[str] = ()) -> None:
        if self.changed is None:
            return
        deadline = time.monotonic() + timeout
        async with self.changed:
            while not done(self.read()):
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise OptimizerFailed(f"{self.name + ': ' if self.name else ''}{what} not seen after "
                                          f"{timeout:g}s", 504)
                try:
                    async with asyncio.timeout(remaining):  # (not wait_for: it can lose a cancel)
                        await self.changed.wait()
                except TimeoutError:
                    pass
