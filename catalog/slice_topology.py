"""Where a catalog's streams and elements are, by node: what slicing asks (:mod:`.slices`).

A node's slice needs, for each stream it touches, which node produces it,
which nodes consume it, where it enters from publishers, and which
elements sit on the node.  :class:`ScannedTopology` answers by scanning
the whole catalog once (the original way, and the oracle);
:class:`~.slice_index.IndexedTopology` answers each question from a
:class:`~.index.CatalogIndex`, so slicing a few nodes after a change costs
what those nodes hold, not the size of the catalog.
"""

from __future__ import annotations

import zlib
from typing import Protocol

from .model import Catalog, Partition, Publication, Subscription


class Topology(Protocol):
    """The questions :class:`~.slices.SliceMaker` asks of a catalog."""

    def producer_node(self, stream: str) -> str | None:
        """The node whose box writes ``stream`` (a partitioned box: its first entry member); None for an input."""

    def produced(self, stream: str) -> bool:
        """Whether anything (an ``<input>`` or a box) produces ``stream``."""

    def consumer_nodes(self, stream: str) -> set[str]:
        """The nodes ``stream`` is sent to for their boxes (one member of a partition, by the stream's name)."""

    def entry_nodes(self, stream: str) -> set[str]:
        """The nodes an input stream is published into (``<publish node>``)."""

    def member_entries(self, stream: str) -> tuple[str, ...] | None:
        """A partition's entry members, when a partitioned box reads input ``stream`` (None: none does)."""

    def holders(self) -> set[str]:
        """Every node that holds something: declared, placed on, published into, or a partition member."""

    def inputs_entering(self, node: str) -> set[str]:
        """Input streams that enter the network at ``node`` (``node in entries(self, stream)``)."""

    def boxes_on(self, node: str) -> list[str]:
        """Boxes placed on ``node`` (``node=``; partitioned boxes are :meth:`partitions_with`)."""

    def partitions_with(self, node: str) -> list[str]:
        """Partitioned boxes with ``node`` among their members."""

    def tables_on(self, node: str) -> list[str]:
        """Tables placed on ``node``."""

    def queries_naming(self, boxes: set[str], tables: set[str]) -> list[str]:
        """Queries that list one of these boxes or tables."""

    def publications_of(self, stream: str) -> list[Publication]:
        """``<publish>`` declarations of ``stream``."""

    def subscriptions_of(self, stream: str) -> list[Subscription]:
        """``<subscribe>`` declarations of ``stream``."""


def entries(topology: Topology, stream: str) -> set[str]:
    """Where an input stream enters the network: a partition's members, its publish nodes, else its consumers."""
    members = topology.member_entries(stream)
    if members is not None:
        return set(members)
    return topology.entry_nodes(stream) or topology.consumer_nodes(stream)


def partition_consumers(catalog: Catalog, stream: str, partition: Partition) -> tuple[str, ...]:
    """Which members of a partitioned box that reads ``stream`` it is sent to: every entry member for an input
    stream (a publisher picks one), else one, chosen by the stream's name (docs/cumulus.md §2.6)."""
    if stream in catalog.inputs:  # (nodes joined later coordinate input once a layout lists them: §6.4, §6.5)
        return partition.entry_nodes
    nodes = partition.modulo_nodes  # (the same member before and after a change lists coordinators)
    return (nodes[zlib.crc32(stream.encode()) % len(nodes)],)


class ScannedTopology:
    """Every answer computed up front by scanning the whole catalog (costs its size, once per version)."""

    def __init__(self, catalog: Catalog):
        self.catalog = catalog
        self._producer: dict[str, str | None] = dict.fromkeys(catalog.inputs)
        for box in catalog.boxes.values():
            for stream in box.outputs:
                self._producer[stream] = box.node
        self._consumers: dict[str, set[str]] = {}
        for box in catalog.boxes.values():
            if box.node is None:
                continue
            for port in box.inputs:
                self._consumers.setdefault(port.stream, set()).add(box.node)
        self._entries: dict[str, set[str]] = {}
        for pub in catalog.publications.values():
            if pub.node:
                self._entries.setdefault(pub.stream, set()).add(pub.node)
        self._member_entries: dict[str, tuple[str, ...]] = {}
        self._members: set[str] = set()
        for name, partition in catalog.partitions.items():
            box = catalog.boxes.get(name)
            if box is None or not partition.nodes:
                continue
            self._members.update(partition.nodes)
            for stream in box.outputs:
                self._producer[stream] = partition.entry_nodes[0]
            for port in box.inputs:
                if port.stream in catalog.inputs:
                    self._member_entries[port.stream] = partition.entry_nodes
                self._consumers.setdefault(port.stream, set()).update(
                    partition_consumers(catalog, port.stream, partition))

    def producer_node(self, stream: str) -> str | None:
        return self._producer.get(stream)

    def produced(self, stream: str) -> bool:
        return stream in self._producer

    def consumer_nodes(self, stream: str) -> set[str]:
        return self._consumers.get(stream, set())

    def entry_nodes(self, stream: str) -> set[str]:
        return self._entries.get(stream, set())

    def member_entries(self, stream: str) -> tuple[str, ...] | None:
        return self._member_entries.get(stream)

    def holders(self) -> set[str]:
        found = set(self.catalog.nodes)
        found.update(b.node for b in self.catalog.boxes.values() if b.node)
        found.update(t.node for t in self.catalog.tables.values() if t.node)
        for entries in self._entries.values():
            found.update(entries)
        return found | self._members

    def inputs_entering(self, node: str) -> set[str]:
        return {s for s in self.catalog.inputs if node in entries(self, s)}

    def boxes_on(self, node: str) -> list[str]:
        return [b.name for b in self.catalog.boxes.values() if b.node == node]

    def partitions_with(self, node: str) -> list[str]:
        return [name for name, p in self.catalog.partitions.items() if node in p.nodes and name in self.catalog.boxes]

    def tables_on(self, node: str) -> list[str]:
        return [t.name for t in self.catalog.tables.values() if t.node == node]

    def queries_naming(self, boxes: set[str], tables: set[str]) -> list[str]:
        return [q.name for q in self.catalog.queries.values()
                if any(b in boxes for b in q.boxes) or any(t in tables for t in q.tables)]

    def publications_of(self, stream: str) -> list[Publication]:
        return [p for p in self.catalog.publications.values() if p.stream == stream]

    def subscriptions_of(self, stream: str) -> list[Subscription]:
        return [s for s in self.catalog.subscriptions.values() if s.stream == stream]
