"""Waiting for a change to show everywhere: the Head's catalog satisfies a condition and every live node is in sync.

Shared by the commands that change the topology and then wait for it
(``boreas move``, ``insert-filter``, ``remove-filter``: :mod:`.optimize`;
``boreas move BOX/SEG``, ``split``, ``rebalance``, ``retire``: :mod:`.relayout`).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

from boreas.catalog.documents import read_document
from boreas.catalog.model import Catalog
from boreas.catalog.replicate import apply_update
from boreas.wire.client import PeerClient

from .common import CommandFailed


async def head_catalog(peers: PeerClient, head: str) -> Catalog:
    """The Head's catalog as it is now (``GET /catalog``)."""
    doc = read_document((await peers.text(f"{head}/catalog")).encode(), "the Head's catalog")
    return apply_update(Catalog(), doc.items, doc.version or 0)


async def settled(peers: PeerClient, head: str, done: Callable[[Catalog], bool], what: str,
                  timeout: float) -> None:
    """Wait until the Head's catalog satisfies ``done`` and every live node is in sync with it."""
    deadline = time.monotonic() + timeout
    while True:
        catalog = await head_catalog(peers, head)
        nodes = (await peers.call("GET", f"{head}/nodes"))["nodes"]
        lagging = [n["endpoint"] for n in nodes if n["alive"] and not n["in_sync"]]
        if done(catalog) and not lagging:
            return
        if time.monotonic() > deadline:
            raise CommandFailed(f"{what}, but after {timeout:g}s the Head does not show it everywhere"
                                + (f" ({', '.join(lagging)} not in sync)" if lagging else ""))
        await asyncio.sleep(0.05)
