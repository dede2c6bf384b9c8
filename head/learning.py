"""Learning from the nodes: committing changes they made themselves, then bringing them to their slices.

The nodes move boxes (paper section 3.1.2), insert and remove filter boxes
(3.2.1, 3.2.2) and switch a partitioned box's layout (docs/cumulus.md
§6.2) on their own, and report it to the Head; failover (:mod:`.failover`)
reports a node's boxes adopted by another.  Each report is committed to
the global catalog like any change, but what the Head believed the nodes
involved hold is stale: their syncs are paused while the change commits,
and once the Head's slices reflect it those nodes are read again and
brought to their slices.  Reports are learned one at a time.

Usage::

    learner = Learner(head)                 # the HeadService: see LearnerHead
    version = await learner.move(["box1"], "localhost:15002")
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import replace
from typing import Protocol

from boreas.catalog.document_model import Connect, Move
from boreas.catalog.elements import KIND_TO_DICT
from boreas.catalog.index import CatalogIndex
from boreas.catalog.model import Box, Catalog, Node, Partition
from boreas.catalog.store import Change
from boreas.catalog.xmlcodec import to_text
from boreas.wire.move_report import Written

from .node_sync import NodeSync
from .pending import PendingRequests

log = logging.getLogger(__name__)


class LearnerHead(Protocol):
    """What learning uses of the Head (:class:`~boreas.head.service.HeadService`), which owns all of it."""

    catalog: Catalog
    index: CatalogIndex  # the catalog's, checked (catalog/index.py)
    syncs: dict[str, NodeSync]
    pending: PendingRequests

    def sync_for(self, endpoint: str) -> NodeSync: ...

    async def commit(self, build: Callable[[Catalog], list[Change] | None]) -> int | None: ...

    async def caught_up(self, version: int, timeout: float = 10.0) -> None: ...

    def notify(self) -> None: ...


class Learner:
    """Commits what the nodes (and failover) report they changed; the Head keeps one (``head.learner``)."""

    def __init__(self, head: LearnerHead):
        self.head = head
        self._one_at_a_time = asyncio.Lock()  # reports are learned one at a time

    async def move(self, boxes: list[str], target: str, written: list[Written] | None = None) -> int:
        """A node reports that ``boxes`` now run on ``target`` (paper section 3.1.2), moved as one (a
        ``<table>``'s boxes, docs/operators.md "Table boxes"): committed as one change, with the table.

        The nodes moved the boxes themselves, so what the Head believed they hold
        is stale: each wrote the moved boxes' streams' elements from the
        source's catalog as it was (e.g. the source forwarding inputs to the
        target), which the commit cannot know.  The report carries those items
        (``written``, wire/move_report.py): once the new locations are committed,
        a node whose record here is at the serial its items were applied on is
        patched with them (:meth:`~.node_sync.NodeSync.patch`); any other node
        involved (no record, another serial, nodes not in sync before, a commit
        between) is read again.  Then each is brought to its slice, which also
        delivers any pending request for the boxes on their new node.
        """
        async with self._one_at_a_time:
            return await self._move(boxes, target, _by_node(written))

    async def _move(self, boxes: list[str], target: str, written: dict[str, Written]) -> int:
        # (a node that reports writing for the move is involved, if the Head knows it: its record changes)
        involved = {target} | (set(written) & set(self.head.syncs)) | {
            s.endpoint for s in self.head.syncs.values() if s.held is None or any(box in s.held.boxes for box in boxes)}

        def build(catalog: Catalog) -> list[Change] | None:
            return move_changes(catalog, boxes, target, involved)

        def moved(version: int) -> None:
            for box in boxes:
                for request in self.head.pending.moved(box, target, version):
                    log.info("pending request for box %r refused by %s: forwarding to %s", box, request.node, target)

        # (not assumed from the commit: the source and the target write the moved boxes' streams' inputs,
        # outputs, publications and subscriptions from the source's catalog as it was, node/handover.py;
        # patched with what each reports it wrote, else read again)
        return await self._learn(involved, build, moved, assume=False, written=written)

    async def layout(self, reported: Partition) -> int:
        """The leader of a partitioned box reports the layout its members switched to (docs/cumulus.md §6.2).

        Committed if it is newer than the catalog's for the same incarnation
        of the partition (a stale or repeated report changes nothing); the
        members' slices then carry the layout they already run.
        """
        async with self._one_at_a_time:
            involved = set(reported.nodes)

            def build(catalog: Catalog) -> list[Change] | None:
                current = catalog.partitions.get(reported.box)
                if current is None or current.id != reported.id or reported.layout <= current.layout:
                    log.info("layout %d of box %r reported: not newer than the catalog's; ignored",
                             reported.layout, reported.box)
                    return None
                members = reported.layout_nodes  # joining nodes made members, or the last retired (§6.4)
                if current.nodes[:len(members)] != members or not _retires(current, reported):
                    log.warning("layout %d of box %r reported with other members than the catalog's; ignored",
                                reported.layout, reported.box)
                    return None
                nodes = current.nodes if len(members) >= len(current.layout_nodes) else members
                updated = replace(current, nodes=nodes, segments=reported.segments, layout=reported.layout,
                                  members=None if len(members) == len(nodes) else len(members),
                                  coordinator_list=reported.coordinator_list or current.coordinator_list)
                return [Change("partition", reported.box, to_text(updated))]

            # (the members switched layout at run time only: their catalogs still hold the old <partition>,
            # which the push of the new slices replaces)
            return await self._learn(involved, build, nodes_wrote=False)

    async def adoption(self, source: str, target: str) -> int:
        """``target`` adopted every box of failed node ``source`` (:mod:`boreas.head.failover`).

        Committed like a move: what was placed on ``source`` (boxes, tables,
        the streams published there) is placed on ``target``; every slice is
        recomputed, so upstream nodes are re-pointed and hand their
        unacknowledged batches to ``target``.  A partition member on
        ``source`` is now hosted by ``target`` (docs/cumulus.md §6.3): the
        ``<partition>`` names ``target`` for it (the same member number,
        so publishers of its producers pick it there), and the other
        members' slices send its internal stream there.
        """
        async with self._one_at_a_time:
            involved = {source, target} | {s.endpoint for s in self.head.syncs.values() if s.held is None}

            def build(catalog: Catalog) -> list[Change] | None:
                changes = []
                for kind in ("box", "table", "publish", "input", "output"):
                    for key, item in getattr(catalog, KIND_TO_DICT[kind][0]).items():
                        if getattr(item, "node", None) == source:
                            changes.append(Change(kind, key, to_text(replace(item, node=target))))
                for name, part in catalog.partitions.items():
                    if source in part.nodes:
                        nodes = tuple(target if n == source else n for n in part.nodes)
                        changes.append(Change("partition", name, to_text(replace(part, nodes=nodes))))
                        involved.update(part.nodes)
                if changes and target not in catalog.nodes:
                    changes.append(Change("node", target, to_text(Node(target))))
                return changes or None

            # (read again: the adopter took the catalog the source saved, which may be older than its slice)
            return await self._learn(involved, build, assume=False)

    async def connect(self, connect: Connect, written: list[Written] | None = None) -> int:
        """A node reports a filter box it inserted (paper 3.2.1); commit it to the global catalog.  A node
        that reports what it wrote (``written``: on one node, the sink's) is patched with it, the others
        from the slice (:meth:`_learn`)."""
        box = connect.box

        def build(catalog: Catalog) -> list[Change] | None:
            return connect_changes(catalog, connect, involved)

        current = self.head.catalog.boxes.get(connect.sink or "")
        involved = {n for n in (box.node, current.node if current else None) if n}
        async with self._one_at_a_time:
            return await self._learn(involved, build, written=_by_node(written))

    async def disconnect(self, stream: str, written: list[Written] | None = None) -> int:
        """A node reports a filter box it removed (paper 3.2.2): its sink reads the filter's in stream
        (``written``: as :meth:`connect`'s)."""
        def build(catalog: Catalog) -> list[Change] | None:
            return disconnect_changes(catalog, stream, involved, self.head.index)

        producers, readers = stream_boxes(self.head.catalog, stream, self.head.index)
        involved = {b.node for b in (*producers, *readers) if b.node}
        async with self._one_at_a_time:
            return await self._learn(involved, build, written=_by_node(written))

    async def _learn(self, involved: set[str], build: Callable[[Catalog], list[Change] | None],
                     then: Callable[[int], None] | None = None, assume: bool = True, nodes_wrote: bool = True,
                     written: dict[str, Written] | None = None) -> int:
        """Commit a change nodes made themselves; their syncs wait, then are brought to their slices.

        ``build`` may add nodes to ``involved`` (it sees the catalog it
        changes); ``then(version)`` runs before the nodes are synced again.
        What the nodes hold is then patched by what the commit touched
        (:meth:`~.node_sync.NodeSync.assume`) only when that is what they hold
        (:func:`assumable`); else (or ``assume`` False) they are read again.
        ``nodes_wrote`` False: the nodes' catalogs did not change (a layout
        report), so what they hold is as before and the push sends the
        commit.  ``written``: what nodes reported they wrote (a move, a
        connect or disconnect on one node); each such node is patched with
        it (:meth:`~.node_sync.NodeSync.patch`) under the same conditions,
        not assumed: exact, and its serial known for the next report.
        """
        paused = set(involved)
        for endpoint in paused:
            self.head.sync_for(endpoint).pause()
        # In sync when paused: each holds its slice of this version (a push in flight is not in sync).  A node
        # whose record is unknown (a failed push) is read again whatever comes: it does not hold the others back.
        settled = all(s.in_sync for s in map(self.head.sync_for, paused) if s.held is not None)
        base = self.head.catalog.version
        touched: dict[str, set[str]] | None = None  # what the commit changed: the nodes' held is patched by it

        def recorded(catalog: Catalog) -> list[Change] | None:
            nonlocal touched
            changes = build(catalog)
            # (the last build counts: a lost race builds on a later catalog, whose commits the paused
            # nodes were not sent; nothing to commit: read the nodes whole)
            touched = touched_by(changes) if changes and catalog.version == base else None
            return changes

        version = base  # (until committed: a failed commit reads the nodes whole)
        try:
            version = await self.head.commit(recorded) or self.head.catalog.version
            await self.head.caught_up(version)
            if then is not None:
                then(version)
        except BaseException:
            touched = None  # not known to be committed: read the nodes whole
            raise
        finally:
            exact = settled and assumable(self.head, paused | involved, touched, version)
            if not (assume and exact):
                touched = None
            elif not nodes_wrote:
                touched = {}
            for endpoint in paused | involved:
                report = (written or {}).get(endpoint) if exact else None
                self.head.sync_for(endpoint).resume(touched=touched, written=report)
        self.head.notify()
        return version


def assumable(head: LearnerHead, involved: set[str], touched: dict[str, set[str]] | None, version: int) -> bool:
    """Whether the involved nodes hold exactly the new slices for what ``touched`` names, as the nodes
    in sync before the report made the change themselves: not if a Head commit came after ``version``
    (the paused nodes were not sent it, and the patch would take it as held), nor if a touched box has a
    pending request (an update the node refused, e.g. a modify to a box that was moving: the box runs
    as it was before that update, not as the catalog has it now).  False: the nodes are read again."""
    if touched is None or head.catalog.version != version:
        return False
    boxes = touched.get("boxes", set())
    return not any(r.box in boxes for e in involved for r in head.pending.for_node(e))


def _by_node(written: list[Written] | None) -> dict[str, Written]:
    return {w.node: w for w in written or ()}


def touched_by(changes: list[Change]) -> dict[str, set[str]]:
    """The Catalog dicts and keys ``changes`` put or remove.

    >>> touched_by([Change("box", "b1", None), Change("node", "n:1", "<node endpoint='n:1'/>")])
    {'boxes': {'b1'}, 'nodes': {'n:1'}}
    """
    touched: dict[str, set[str]] = {}
    for change in changes:
        touched.setdefault(KIND_TO_DICT[change.kind][0], set()).add(change.key)
    return touched


# -- the changes each report commits (one function each: the Head's path, and bench/control_plane_head.py's) --


def move_changes(catalog: Catalog, boxes: list[str], target: str, involved: set[str]) -> list[Change] | None:
    """``boxes`` placed on ``target`` (with the tables they access, and ``target``'s ``<node>`` if new);
    the nodes they leave are added to ``involved``.  None: nothing to do."""
    changes = []
    for box in boxes:
        current = catalog.boxes.get(box)
        if current is None or current.node == target:
            continue
        if box in catalog.partitions:  # placed by its partition: its segments move, never the box
            log.warning("node reported box %r moved to %s, but the box is partitioned: ignored", box, target)
            continue
        involved.add(current.node or target)
        changes.append(Change("box", box, to_text(replace(current, node=target))))
        for name in current.access:  # a table placed on the box's node goes with its boxes
            table = catalog.tables.get(name)
            if table is not None and table.node not in (None, target):
                changes.append(Change("table", name, to_text(replace(table, node=target))))
    if changes and target not in catalog.nodes:
        changes.append(Change("node", target, to_text(Node(target))))
    return list({(c.kind, c.key): c for c in changes}.values()) or None


def connect_changes(catalog: Catalog, connect: Connect, involved: set[str]) -> list[Change] | None:
    """The filter ``connect`` inserted, and its sink reading the filter's out stream; None if it does not
    fit the catalog (logged)."""
    box = connect.box
    sink = catalog.boxes.get(connect.sink or "")
    if sink is None or box.name in catalog.boxes or not 0 <= connect.port < len(sink.inputs):
        log.warning("a connect of %r before %r does not fit the global catalog; ignored", box.name, connect.sink)
        return None
    involved.update(n for n in (sink.node, box.node) if n)
    return [Change("box", box.name, to_text(box)),
            Change("box", sink.name, to_text(sink.rewired(connect.port, box.outputs[0])))]


def disconnect_changes(catalog: Catalog, stream: str, involved: set[str],
                       index: CatalogIndex | None = None) -> list[Change] | None:
    """The filter producing ``stream`` removed, its one sink reading the filter's in stream again; None if
    it does not fit the catalog (logged).  The producer and readers are found by ``index`` when it is the
    index of ``catalog`` (the Head's, unless a lost race brought the catalog forward), not by a walk over
    every box."""
    producers, readers = stream_boxes(catalog, stream, index)
    producer = producers[0] if producers else None
    sinks = [(b, i) for b in readers for i, p in enumerate(b.inputs) if p.stream == stream]
    if producer is None or len(producer.inputs) != 1 or len(sinks) != 1:
        log.warning("a disconnect of stream %r does not fit the global catalog; ignored", stream)
        return None
    sink, port = sinks[0]
    involved.update(n for n in (sink.node, producer.node) if n)
    return [Change("box", producer.name, None),
            Change("box", sink.name, to_text(sink.rewired(port, producer.inputs[0].stream)))]


def stream_boxes(catalog: Catalog, stream: str, index: CatalogIndex | None) -> tuple[list[Box], list[Box]]:
    """The boxes producing and reading ``stream``: by ``index`` if it is ``catalog``'s, else by a walk."""
    if index is not None and index.catalog is catalog:
        return index.stream_boxes(stream)
    boxes = sorted(catalog.boxes.items())
    return ([b for _, b in boxes if stream in b.outputs],
            [b for _, b in boxes if any(p.stream == stream for p in b.inputs)])


def moves_as_one(items: list[object]) -> list[object]:
    """A node's report with its ``<move box>`` items to one node gathered into one list (learnt as one commit:
    a table's boxes move together); other items as they are, in their order.

    >>> done = moves_as_one([Move("n:2", box="a"), Move("n:3", table="T"), Move("n:2", box="s")])
    >>> [[m.box for m in x] if isinstance(x, list) else x.table for x in done]
    [['a', 's'], 'T']
    """
    out: list[object] = []
    groups: dict[str, list[Move]] = {}
    for item in items:
        if isinstance(item, Move) and item.box:
            if item.node not in groups:
                groups[item.node] = []
                out.append(groups[item.node])
            groups[item.node].append(item)
        else:
            out.append(item)
    return out


def _retires(current: Partition, reported: Partition) -> bool:
    """Whether a reported layout with fewer members than the catalog's only retires its last members: none
    joining, none of them one publishers pick from, none holding a segment (docs/cumulus.md §6.4)."""
    n, before = len(reported.layout_nodes), len(current.layout_nodes)
    if n >= before:
        return True
    picked = reported.entry_nodes if reported.coordinator_list else current.entry_nodes
    return (not current.joining and n >= len(picked)
            and all(s.member < n for s in reported.segments))
