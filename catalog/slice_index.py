"""Nodes' slices kept current change by change: only the nodes a change reaches are sliced again.

The Head used to slice the whole catalog for every node on every commit,
inferring every stream's schema again to do it.  :class:`NodeSlices`
(:mod:`.node_slices`) keeps every node's slice of the current version; given the next version's
:class:`~.index.CatalogIndex` (which records what changed since the
previous one, and which streams' schemas moved) it works out which nodes
the change can reach (:func:`change_reach`), each with the streams the
change touches there, patches those nodes' slices (:func:`patch_slice`:
only those streams sliced again, each question answered from the index's
references by an :class:`IndexedTopology`) and reports the ones whose slice
really changed.  The rest are not looked at.  A node's slice was built whole
again before, so every part of a deployment cost the size of what its
nodes already held.

What reaches a node: an element placed on it (a box, a table, a partition
member, a publish), before or after the change; any stream the change
touches (written or read by a changed box, input, output, publish,
subscribe, table or view, or whose schema moved), for every node that
produces, consumes, or is an entry of that stream, before or after; a
changed query, view or schema, for the nodes of what names it; a region
or replica set, for its nodes.  A changed ``<type>`` or ``<client>`` (rare)
re-slices every node.  ``tests/test_incremental_slices.py`` checks the
result against slicing everything (:func:`.slices.node_slices`).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

from .index import CatalogIndex
from .references import element_refs
from .model import Catalog, Publication, Subscription
from .slice_topology import entries, partition_consumers
from .slices import SliceMaker
from .table_params import ACCESSING

log = logging.getLogger(__name__)


class IndexedTopology:
    """:class:`~.slice_topology.Topology` answered from a (valid) catalog's index, per question."""

    def __init__(self, index: CatalogIndex):
        self.index = index
        self.catalog = index.catalog
        self._refs: dict[tuple[str, str], Iterable[tuple[str, str]]] = {}  # (kind, name) -> its references

    def refs(self, kind: str, name: str) -> Iterable[tuple[str, str]]:
        """The elements naming ``(kind, name)``, remembered (a new stream's readers are asked for about
        six times, each a look-up in two dicts: the index's layered references)."""
        key = (kind, name)
        found = self._refs.get(key)
        if found is None:
            found = self._refs[key] = self.index.refs.get(key, ())
        return found

    def refs_of(self, kind: str, name: str, of: str) -> list[str]:
        return [key for attr, key in self.refs(kind, name) if attr == of]

    def _partition(self, box: str):  # the box's partition, when it is placed by one
        part = self.catalog.partitions.get(box)
        return part if part is not None and part.nodes and box in self.catalog.boxes else None

    def producer_node(self, stream: str) -> str | None:
        for name in self.refs_of("produces", stream, "boxes"):
            part = self._partition(name)
            return part.entry_nodes[0] if part is not None else self.catalog.boxes[name].node
        return None

    def produced(self, stream: str) -> bool:
        return bool(self.index.refs.get(("produces", stream)))

    def consumer_nodes(self, stream: str) -> set[str]:
        found: set[str] = set()
        boxes = self.catalog.boxes
        for attr, name in self.refs("reads", stream):  # (asked for each stream a node's slice sends on)
            if attr != "boxes":
                continue
            box = boxes[name]
            if box.node is not None:
                found.add(box.node)
            part = self._partition(name)
            if part is not None:
                found.update(partition_consumers(self.catalog, stream, part))
        return found

    def entry_nodes(self, stream: str) -> set[str]:
        return {p.node for p in self.publications_of(stream) if p.node}

    def member_entries(self, stream: str) -> tuple[str, ...] | None:
        if stream not in self.catalog.inputs:
            return None
        readers = [name for name in self.refs_of("reads", stream, "boxes") if self._partition(name) is not None]
        if len(readers) > 1:  # the last in the catalog's order, as a scan finds it
            readers = [name for name in self.catalog.partitions if name in set(readers)]
        return self._partition(readers[-1]).entry_nodes if readers else None  # type: ignore[union-attr]

    def holders(self) -> set[str]:
        found = set(self.catalog.nodes)
        found.update(name for kind, name in self.index.refs if kind in ("node", "member") and self.holds(name))
        return found

    def holds(self, node: str) -> bool:
        """Whether ``node`` holds anything (:meth:`holders` for one node)."""
        if node in self.catalog.nodes or self.index.refs.get(("node", node)):
            return True
        return any(self._partition(name) is not None for name in self.refs_of("member", node, "partitions"))

    def inputs_entering(self, node: str) -> set[str]:
        cat = self.catalog
        candidates = {cat.publications[key].stream for key in self.refs_of("node", node, "publications")}
        for name in [*self.boxes_on(node), *self.partitions_with(node)]:
            candidates.update(p.stream for p in cat.boxes[name].inputs)
        return {s for s in candidates if s in cat.inputs and node in entries(self, s)}

    def boxes_on(self, node: str) -> list[str]:
        return self.refs_of("node", node, "boxes")

    def partitions_with(self, node: str) -> list[str]:
        return [name for name in self.refs_of("member", node, "partitions") if name in self.catalog.boxes]

    def tables_on(self, node: str) -> list[str]:
        return self.refs_of("node", node, "tables")

    def queries_naming(self, boxes: set[str], tables: set[str]) -> list[str]:
        found = {q for b in boxes for q in self.refs_of("box", b, "queries")}
        found.update(q for t in tables for q in self.refs_of("table", t, "queries"))
        return sorted(found)

    def publications_of(self, stream: str) -> list[Publication]:
        return [self.catalog.publications[key] for key in self.refs_of("reads", stream, "publications")]

    def subscriptions_of(self, stream: str) -> list[Subscription]:
        subscriptions = self.catalog.subscriptions
        return [subscriptions[key] for attr, key in self.refs("reads", stream) if attr == "subscriptions"]

    # -- what a stream or an element involves, for change_reach -----------------------------------------

    def placement(self, box: str) -> set[str]:
        return set(self.catalog.placement(box))

    def involved(self, stream: str) -> set[str]:
        """Every node whose slice mentions ``stream``: its producers', readers' and entries' nodes.

        One pass over the stream's references (it runs for every stream a change touches, twice: a
        part of a deployment adds tens of thousands): the union of :meth:`consumer_nodes`,
        :meth:`entry_nodes`, :meth:`member_entries`, :meth:`producer_node` and every producer's and
        reader's placement, each a partition's members or its box's node."""
        cat = self.catalog
        producing, reading = self.refs("produces", stream), self.refs("reads", stream)
        if not producing and not reading:
            return set()  # (a stream new in this version, or gone from it: nothing here names it)
        found: set[str] = set()
        first = True
        for attr, name in producing:
            if attr != "boxes":
                continue
            found.update(cat.placement(name))
            if first:  # (producer_node: the first producer's entry member, or its node)
                first = False
                part = self._partition(name)
                node = part.entry_nodes[0] if part is not None else cat.boxes[name].node
                if node:
                    found.add(node)
        for attr, name in reading:
            if attr == "boxes":
                found.update(cat.placement(name))  # (a partition's consumers and entries are among its members)
                node = cat.boxes[name].node
                if node is not None:
                    found.add(node)
            elif attr == "publications":
                node = cat.publications[name].node
                if node:
                    found.add(node)
        return found


#: Catalog dicts whose change re-slices every node (they are rare, and reach every slice that names them).
_EVERYWHERE = ("types", "clients")


def change_reach(before: IndexedTopology, after: IndexedTopology, changed: dict[str, set[str]],
                 moved: Iterable[str]) -> dict[str, set[str]]:
    """The nodes a change may reach, each with the streams it touches there (every other stream of that
    node's slice is sliced as before: it involves the node neither before nor after)."""
    if any(changed.get(kind) for kind in _EVERYWHERE):
        return {node: set() for node in before.holders() | after.holders()}
    streams, nodes = set(moved), set()
    named: dict[str, set[str]] = {}  # stream -> the nodes the changed elements naming it involve (after)
    for kind, keys in changed.items():
        if kind == "boxes":
            _box_reach(before, after, keys, streams, nodes, named)
            continue
        for key in keys:
            for side in (before, after):
                obj = getattr(side.catalog, kind).get(key)
                if obj is None:
                    continue
                for ref, name in element_refs(kind, obj):
                    if ref in ("produces", "reads"):
                        streams.add(name)
                    elif ref in ("node", "member"):
                        nodes.add(name)
                nodes |= _element_nodes(side, kind, key, obj, streams)
                if side is after and kind == "publications" and obj.node:  # type: ignore[attr-defined]
                    named.setdefault(obj.stream, set()).add(obj.node)  # type: ignore[attr-defined]
    reach: dict[str, set[str]] = {node: set() for node in nodes}
    earlier = before.index.refs.get  # (asked once a stream: nothing to remember)
    for stream in streams:
        if earlier(("produces", stream)) or earlier(("reads", stream)):
            involved = before.involved(stream) | after.involved(stream)
        else:  # new: only changed elements name it, so what they involve is all it does (no lookups)
            involved = named.get(stream, ())  # type: ignore[assignment]
        for node in involved:
            reach.setdefault(node, set()).add(stream)
    return reach


def _box_reach(before: IndexedTopology, after: IndexedTopology, keys: Iterable[str], streams: set[str],
               nodes: set[str], named: dict[str, set[str]]) -> None:
    """What :func:`change_reach` takes from changed boxes, in one loop (a deployment's part changes
    thousands): their streams, their nodes, and in ``named`` each stream's nodes by the boxes naming it
    after the change (all :meth:`IndexedTopology.involved` finds for a stream new in it)."""
    for side in (before, after):
        boxes, partitions = side.catalog.boxes, side.catalog.partitions
        for key in keys:
            box = boxes.get(key)
            if box is None:
                continue
            here = set(partitions[key].nodes) if key in partitions else set()
            if box.node is not None:
                here.add(box.node)
            nodes |= here
            box_streams = [*box.outputs, *[p.stream for p in box.inputs]]
            streams.update(box_streams)
            if side is after:
                for stream in box_streams:
                    found = named.get(stream)
                    if found is None:
                        named[stream] = set(here)
                    else:
                        found |= here


def _element_nodes(side: IndexedTopology, kind: str, key: str, obj: object, streams: set[str]) -> set[str]:
    """Nodes an element reaches beyond its references (adding to ``streams`` those it reaches)."""
    cat = side.catalog
    if kind == "partitions":
        box = cat.boxes.get(key)
        if box is not None:
            streams.update(box.outputs)
            streams.update(p.stream for p in box.inputs)
        return set(obj.nodes)  # type: ignore[attr-defined]
    if kind == "queries":
        found = {n for b in obj.boxes for n in side.placement(b)}  # type: ignore[attr-defined]
        return found | {cat.tables[t].node for t in obj.tables if t in cat.tables and cat.tables[t].node}  # type: ignore[attr-defined]
    if kind == "views":
        return {n for b in side.refs_of("view", key, "boxes") for n in side.placement(b)}
    if kind == "schemas":
        for of in ("inputs", "outputs"):
            streams.update(side.refs_of("schema", key, of))
        return {cat.tables[t].node for t in side.refs_of("schema", key, "tables") if cat.tables[t].node}  # type: ignore[misc]
    if kind == "regions":
        if obj.node:  # type: ignore[attr-defined]
            return {obj.node}  # type: ignore[attr-defined]
        return {r.node for r in cat.regions.values() if r.region == obj.region and r.node}  # type: ignore[attr-defined]
    if kind == "replica_sets":
        return set(obj.nodes)  # type: ignore[attr-defined]
    if kind == "nodes":
        return {key}
    return set()


#: Catalog dicts whose change makes a node's slice be built whole again rather than patched (rare ones,
#: and those whose elements a slice holds by more than their streams and their node).
_SLICED_WHOLE = ("types", "clients", "partitions", "tables", "views", "schemas")


def patchable(before: Catalog, after: Catalog, changed: dict[str, set[str]]) -> bool:
    """Whether :func:`patch_slice` can patch slices for this change: not for the rare kinds above, nor
    for a partitioned box or a box that accesses tables (their slices hold more than the box)."""
    if any(changed.get(kind) for kind in _SLICED_WHOLE):
        return False
    for name in changed.get("boxes", ()):
        for side in (before, after):
            box = side.boxes.get(name)
            if box is not None and (box.access or box.type in ACCESSING or name in side.partitions):
                return False
    return True


def patch_slice(maker: SliceMaker, topology: IndexedTopology, node: str, old: Catalog,
                ledger: dict[str, set[str]], changed: dict[str, set[str]], boxes: set[str],
                streams: set[str]) -> Catalog:
    """``node``'s slice of the new catalog, from its slice ``old`` of the previous one (``ledger``: the
    neighbours each of its streams brought in, updated in place) and the change (:func:`patchable`):
    the changed ``boxes`` placed on the node (before or after) placed again, only ``streams`` (the
    node's, by :func:`change_reach`) crossing the border again, and the queries naming such a box placed
    again.  Equal to ``maker.slice(node)``
    (tests/test_incremental_slices.py); what it costs per stream is the change's, and per element held
    only its nodes and clients (:meth:`~.slices.SliceMaker.refinish`)."""
    cat = maker.catalog
    part = old.copy()
    part.version = cat.version
    queries = set(changed.get("queries", ()))
    for name in boxes:
        part.boxes.pop(name, None)
        box = cat.boxes.get(name)
        if box is not None and box.node == node:
            part.boxes[name] = box
        queries.update(topology.refs_of("box", name, "queries"))
    queries.update(q.name for q in old.queries.values() if not boxes.isdisjoint(q.boxes))
    for stream in streams:
        part.inputs.pop(stream, None)
        part.outputs.pop(stream, None)
        ledger.pop(stream, None)
    for held in (part.publications, part.subscriptions):
        for key in [key for key, item in held.items() if item.stream in streams]:
            del held[key]
    arriving, leaving, used = [], [], set()
    refs, held = topology.refs, part.boxes
    # (a part of a deployment places hundreds of boxes here: the streams they write and read are known
    # to be produced or consumed here without asking the index who else does)
    placed = [held[name] for name in boxes if name in held]
    written = {s for box in placed for s in box.outputs}
    read = {p.stream for box in placed for p in box.inputs}
    for stream in sorted(streams):
        produced = stream in written or any(
            attr == "boxes" and name in held for attr, name in refs("produces", stream))
        consumed = stream in read or any(attr == "boxes" and name in held for attr, name in refs("reads", stream))
        if produced or consumed:
            used.add(stream)
        entering = stream in cat.inputs and (consumed or any(
            p.node == node for p in topology.publications_of(stream))) and node in entries(topology, stream)
        if (consumed and not produced) or entering:
            arriving.append(stream)
        if produced or entering:
            leaving.append(stream)
    for stream in arriving:
        maker.arrive(part, node, stream, ledger)
    for stream in leaving:
        maker.leave(part, node, stream, ledger)
    for name in sorted(queries):
        maker.place_query(part, name)
    maker.refinish(part, node, ledger, streams, used, boxes)
    return part
