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
from collections.abc import Callable, Iterable
from typing import Any

from boreas.catalog.document_model import Update
from boreas.catalog.model import Catalog, Subscription
from boreas.catalog.replicate import (
    Rejection,
    UpdateRejected,
    apply_update,
    catalog_items,
    update_items,
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
        # How many of the held catalog's boxes write each stream, kept by the keys each update wrote: a
        # <subscribe> is checked against it, not against every box's out streams (issue 37).
        self.writers = StreamWriters()
        # Each applied change as the items that turn the catalog before it into the one after, with that one's
        # version, until taken (:meth:`take_changes`): what a durable node logs (node/recovery/catalog_store.py).
        # None: not kept (a node without --data-dir).
        self.changes: list[tuple[list[Any], int]] | None = None
        # How many changes this incarnation applied (pushes and its own): a move report names the serial its
        # items were applied on and reached, so the Head patches its record of this node only if that record
        # is at exactly that serial (wire/move_report.py).
        self.serial = 0

    @property
    def version(self) -> int:
        return self.catalog.version

    def preview(self, update: Update) -> Catalog:
        """The catalog ``update`` would make, without applying it; raises ``UpdateRejected``."""
        touched: dict[str, set[str]] = {}
        try:
            new = apply_update(self.catalog, update.items,
                               update.version if update.version is not None else self.catalog.version, touched)
            _check_subscriptions(new, update.items, self.writers.of(self.catalog, new, touched.get("boxes", ())))
        except UpdateRejected as exc:
            self.counters["updates_received"] += 1
            self.counters["updates_rejected"] += 1
            log.info("node %s refused update %s from %s: %s", self.endpoint, update.id or "-",
                     update.origin or "?", exc)
            raise
        self.touched = (self.catalog, touched)
        return new

    def writes(self, stream: str) -> bool:
        """Whether a box held here writes ``stream`` (by :attr:`writers`' counts when they follow the held
        catalog): a box moving in must not declare such a stream an ``<input>`` too (node/mover.py)."""
        if self.writers.catalog is self.catalog:
            return self.writers.counts[stream] > 0
        return any(stream in b.outputs for b in self.catalog.boxes.values())

    def refused(self) -> None:
        """An update was refused after :meth:`preview` (a box it declares cannot run here)."""
        self.counters["updates_received"] += 1
        self.counters["updates_rejected"] += 1

    def apply(self, update: Update, new: Catalog | None = None) -> Catalog:
        """Apply one update atomically (``new``: its :meth:`preview`); ``UpdateRejected`` keeps the old one."""
        if new is None:
            new = self.preview(update)
        self.counters["updates_received"] += 1
        wrote = self.touched[1] if self.touched is not None and self.touched[0] is self.catalog else None
        self.writers.follow(self.catalog, new, None if wrote is None else wrote.get("boxes", ()))
        if self.changes is not None:  # (by the keys it wrote: what it touched, not the whole slice)
            self.changes.append((update_items(self.catalog, new, wrote), new.version))
        self.catalog = new
        self.serial += 1
        self.counters["updates_applied"] += 1
        self.counters["items_applied"] += len(update.items)
        return new

    def keep_changes(self) -> None:
        """From now on keep each applied change for :meth:`take_changes`."""
        self.changes = []

    def take_changes(self) -> list[tuple[list[Any], int]]:
        """The changes applied since the last call (each: items and the version after it), oldest first."""
        if self.changes is None:
            return []
        taken, self.changes = self.changes, []
        return taken

    def restore(self, catalog: Catalog) -> Catalog:
        """Hold ``catalog`` (a restart's saved catalog), as no change to keep, but counted: a Head that read
        the catalog before it was restored must not take the restored one for the one it read (same serial)."""
        self.writers.follow(self.catalog, catalog, None)
        self.catalog = catalog
        self.serial += 1
        return catalog

    def as_update_xml(self, id: str | None = None) -> str:
        """What the node holds, as one update document (``GET /catalog``; ``id``: its serial, wire/move_report.py)."""
        return update_document(catalog_items(self.catalog), version=self.catalog.version,
                               origin=self.endpoint, id=id)


def _check_subscriptions(catalog: Catalog, items: list, writes: Callable[[str], bool]) -> None:
    """Each ``<subscribe>`` among ``items`` names a stream ``catalog`` has: an input, or one a box writes."""
    missing = [Rejection(i, "stream", item.stream,
                         f"cannot subscribe to stream {item.stream!r}: it is not on this node")
               for i, item in enumerate(items)
               if isinstance(item, Subscription) and item.stream not in catalog.inputs and not writes(item.stream)]
    if missing:
        raise UpdateRejected(missing)


class StreamWriters:
    """How many boxes of a local catalog write each stream, followed from the keys each update wrote.

    >>> from boreas.catalog.model import Box, InPort
    >>> one, two = Catalog(), Catalog()
    >>> two.boxes["f"] = Box("f", "filter", (InPort("S"),), ("O",), (("expression.0", "x > 1"),))
    >>> writers = StreamWriters()
    >>> writers.of(one, two, {"f"})("O"), writers.of(one, one, ())("O")
    (True, False)
    >>> writers.follow(one, two, {"f"}); writers.of(two, one, {"f"})("O")
    False
    """

    def __init__(self) -> None:
        self.counts: Counter[str] = Counter()
        self.catalog: Catalog | None = None  # the catalog counted

    def of(self, base: Catalog, new: Catalog, touched: Iterable[str]) -> Callable[[str], bool]:
        """Whether a box of ``new`` writes a stream, ``new`` being ``base`` with the boxes ``touched``
        written; counted from ``base``'s counts when they are held, else over every box of ``new``."""
        if self.catalog is not base:
            written = {s for b in new.boxes.values() for s in b.outputs}
            return written.__contains__
        delta = _delta(base, new, touched)
        return lambda stream: self.counts[stream] + delta[stream] > 0

    def follow(self, base: Catalog, new: Catalog, touched: Iterable[str] | None) -> None:
        """``new`` replaces ``base``, having written the boxes ``touched`` (None: not known)."""
        if touched is not None and self.catalog is base:
            delta = _delta(base, new, touched)
            self.counts.update(delta)
            for stream in delta:
                if self.counts[stream] <= 0:
                    del self.counts[stream]
        else:
            self.counts = Counter(s for b in new.boxes.values() for s in b.outputs)
        self.catalog = new


def _delta(base: Catalog, new: Catalog, touched: Iterable[str]) -> Counter[str]:
    """Per stream, how many more boxes write it in ``new`` than in ``base`` (``touched``: the boxes written)."""
    delta: Counter[str] = Counter()
    for name in touched:
        if (old := base.boxes.get(name)) is not None:
            delta.subtract(old.outputs)
        if (box := new.boxes.get(name)) is not None:
            delta.update(box.outputs)
    return delta
