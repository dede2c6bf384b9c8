"""A node's local catalog: its slice of the topology, changed only by update XML.

Paper section 2: the local catalog is the node's only source of truth; the
node never reads the global catalog.  An update is applied whole or not at
all (:func:`boreas.catalog.replicate.apply_update`), and besides naming
things the node holds, a ``<subscribe>`` must name a stream the node has (it
is the node that will send that stream to the subscriber).  A refused item
tells the sender what is missing, which is how the Head learns that a box is
no longer here (paper section 3.1.2).

>>> from boreas.catalog.documents import read_document
>>> local = LocalCatalog("localhost:15000")
>>> local.apply(read_document('<update version="3"><node endpoint=":15000"/></update>')).version
3
>>> local.apply(read_document('<update version="4"><delete box="gone"/></update>'))
Traceback (most recent call last):
...
boreas.catalog.replicate.UpdateRejected: item 0: box 'gone' is not here
"""

from __future__ import annotations

import logging
from collections import Counter

from boreas.catalog.document_model import Update
from boreas.catalog.model import Catalog, Subscription
from boreas.catalog.replicate import (
    Rejection,
    UpdateRejected,
    apply_update,
    catalog_items,
)
from boreas.catalog.updates import update_document

log = logging.getLogger(__name__)


class LocalCatalog:
    """The slice one node holds; ``counters`` count what it was sent."""

    def __init__(self, endpoint: str):
        self.endpoint = endpoint
        self.catalog = Catalog()
        self.counters: Counter[str] = Counter()
        # The last preview's base and what it wrote there (Catalog dict -> keys): the node's index derives the
        # candidate by it (node/operator_host.py), instead of comparing every element the node holds.
        self.touched: tuple[Catalog, dict[str, set[str]]] | None = None

    @property
    def version(self) -> int:
        return self.catalog.version

    def preview(self, update: Update) -> Catalog:
        """The catalog ``update`` would make, without applying it; raises ``UpdateRejected``."""
        touched: dict[str, set[str]] = {}
        try:
            new = apply_update(self.catalog, update.items,
                               update.version if update.version is not None else self.catalog.version, touched)
            _check_subscriptions(new, update.items)
        except UpdateRejected as exc:
            self.counters["updates_received"] += 1
            self.counters["updates_rejected"] += 1
            log.info("node %s refused update %s from %s: %s", self.endpoint, update.id or "-",
                     update.origin or "?", exc)
            raise
        self.touched = (self.catalog, touched)
        return new

    def refused(self) -> None:
        """An update was refused after :meth:`preview` (a box it declares cannot run here)."""
        self.counters["updates_received"] += 1
        self.counters["updates_rejected"] += 1

    def apply(self, update: Update, new: Catalog | None = None) -> Catalog:
        """Apply one update atomically (``new``: its :meth:`preview`); ``UpdateRejected`` keeps the old one."""
        if new is None:
            new = self.preview(update)
        self.counters["updates_received"] += 1
        self.catalog = new
        self.counters["updates_applied"] += 1
        self.counters["items_applied"] += len(update.items)
        return new

    def as_update_xml(self) -> str:
        """What the node holds, as one update document (``GET /catalog``)."""
        return update_document(catalog_items(self.catalog), version=self.catalog.version,
                               origin=self.endpoint)


def _check_subscriptions(catalog: Catalog, items: list) -> None:
    subscribing = [(i, item) for i, item in enumerate(items) if isinstance(item, Subscription)]
    if not subscribing:  # (what the node holds is gathered only for a subscription: it costs the slice)
        return
    held = set(catalog.inputs) | {s for b in catalog.boxes.values() for s in b.outputs}
    missing = [Rejection(i, "stream", item.stream,
                         f"cannot subscribe to stream {item.stream!r}: it is not on this node")
               for i, item in subscribing if item.stream not in held]
    if missing:
        raise UpdateRejected(missing)
