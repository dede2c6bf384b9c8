"""The Head's slices of the catalog, one per node, advanced version by version (the one owner of them).

:class:`NodeSlices` holds every node's slice of the version last given and
moves to the next: the nodes a change reaches are patched
(:mod:`.slice_index`), the rest not looked at; a patch that fails slices
that node whole, logged, and an advance that raises leaves the previous
version whole, so no node's slice goes stale.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

from .index import CatalogIndex
from .model import Catalog
from .slice_index import IndexedTopology, change_reach, patch_slice, patchable
from .slices import SliceMaker

log = logging.getLogger(__name__)


def _by_node(before: Catalog, after: Catalog, boxes: Iterable[str]) -> dict[str, set[str]]:
    """The changed boxes by the node they are placed on, before or after (a box is patched only there)."""
    found: dict[str, set[str]] = {}
    for name in boxes:
        for side in (before, after):
            box = side.boxes.get(name)
            if box is not None and box.node is not None:
                found.setdefault(box.node, set()).add(name)
    return found


class NodeSlices:
    """Every node's slice of the catalog version last given; the one owner of the Head's slices.

    Usage::

        slices = NodeSlices()
        changed = slices.advance(index)   # node -> its new slice (None: it holds nothing now)
    """

    def __init__(self) -> None:
        self.index: CatalogIndex | None = None
        self.slices: dict[str, Catalog] = {}
        self.ledgers: dict[str, dict[str, set[str]]] = {}  # node -> stream -> the neighbours it brought in

    def advance(self, index: CatalogIndex, whole: bool = False) -> dict[str, Catalog | None]:
        """Move to ``index``'s catalog; the nodes whose slice changed, with the new slice.  ``whole``: slice
        every node whole, not only those the change reaches (after an advance that raised)."""
        after = IndexedTopology(index)
        previous = self.index
        reach: dict[str, set[str]] | None = None  # node -> the streams to slice again (None: slice whole)
        placed: dict[str, set[str]] = {}
        if previous is None or index.parent is not previous.catalog or index.whole or whole:
            nodes = set(self.slices) | after.holders()
        else:
            reach = change_reach(IndexedTopology(previous), after, index.changed, index.moved)
            nodes = set(reach)
            if not patchable(previous.catalog, index.catalog, index.changed):
                reach = None
            placed = _by_node(previous.catalog, index.catalog, index.changed.get("boxes", ()))
        # (nothing here is written until every node is sliced: an exception leaves the previous version
        # whole, and the next advance, whose index is not a child of it, slices whole, so no slice goes stale)
        maker = SliceMaker(index.catalog, index.stream_schemas, index.registry, after)
        slices: dict[str, Catalog | None] = {}
        ledgers: dict[str, dict[str, set[str]] | None] = {}
        for node in sorted(nodes):
            old, ledger = self.slices.get(node), self.ledgers.get(node)
            if not after.holds(node):
                new = None
            elif reach is None or old is None or ledger is None:
                ledger = {}
                new = maker.slice(node, ledger)
            else:
                new, ledger = self._patched(maker, after, node, old, ledger, index, placed.get(node, set()),
                                            reach[node])
            ledgers[node] = None if new is None else ledger
            if new != old:
                slices[node] = new
        for node, ledger in ledgers.items():
            if ledger is None:
                self.ledgers.pop(node, None)
            else:
                self.ledgers[node] = ledger
        for node, new in slices.items():
            if new is None:
                self.slices.pop(node, None)
            else:
                self.slices[node] = new
        self.index = index
        return slices

    @staticmethod
    def _patched(maker: SliceMaker, after: IndexedTopology, node: str, old: Catalog, ledger: dict[str, set[str]],
                 index: CatalogIndex, boxes: set[str], streams: set[str]) -> tuple[Catalog, dict[str, set[str]]]:
        """``node``'s slice patched from ``old`` and its ledger; sliced whole, logged, if the patch fails (a
        defect in patching must not leave the node's slice behind the catalog, nor stop the others')."""
        try:
            patched = dict(ledger)  # (a patch pops a stream's set before it adds to one: none is shared-edited)
            return patch_slice(maker, after, node, old, patched, index.changed, boxes, streams), patched
        except Exception:
            log.exception("catalog version %d: patching %s's slice failed; slicing it whole",
                          index.catalog.version, node)
            whole: dict[str, set[str]] = {}
            return maker.slice(node, whole), whole
