"""Merging a submission's deployment: where its boxes and tables run, and who talks to them.

The half of :mod:`.merge` about placement: ``<node query=...>`` and ``<box
node=...>`` claims (collected while the documents are read, resolved once
at the end, so a box claimed by two nodes is refused whole), ``<partition>``,
``<move>``, and the deployment's clients, regions, replica sets,
publications and subscriptions.  A :class:`Placement` works on the same
tracked copy the :class:`~.merge.Merger` does and reports its problems
through the merger's ``fail``; it owns the claims and the partitioned
boxes of the submission.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import replace

from .diagnostics import Origin
from .document_model import Deployment, Move, NodeAssignment
from .evolve import evolve
from .model import Box, Catalog, Node, Partition
from .partition_resubmit import resubmitted
from .tracked import TRACKED


class Placement:
    """Claims and deployment items of one submission, applied to ``catalog`` (the merger's copy)."""

    def __init__(self, catalog: Catalog, base: Catalog, fail: Callable[[Origin, str], None],
                 base_unplaced: Callable[[], Iterable[str]] | None = None):
        self.catalog = catalog
        self.base = base
        self.fail = fail
        self.base_unplaced = base_unplaced  # the boxes of ``base`` on no node (an index's references)
        # box or table -> [(endpoint, origin, the element that claims it)] from <node query=...> or a
        # <box node=...> in this submission
        self.claims: dict[str, list[tuple[str, Origin, str]]] = {}
        self.partitioned: set[str] = set()  # boxes a <partition> of this submission names

    def claim(self, name: str, endpoint: str, origin: Origin, via: str) -> None:
        """``via`` (an element of this submission) puts box or table ``name`` on ``endpoint``."""
        self.claims.setdefault(name, []).append((endpoint, origin, via))

    def deployment(self, dep: Deployment) -> None:
        for assignment in dep.nodes:
            self.place(assignment)
        for client in dep.clients:
            self.catalog.clients[client.endpoint] = client
        for region in dep.regions:
            if region.node and region.node not in self.catalog.nodes:
                self.fail(region.origin, f"region includes unknown node {region.node!r} "
                                         f"(declare it with <node endpoint=...>)")
            self.catalog.regions[region.key] = region
        for rs in dep.replica_sets:
            for name in rs.queries:
                self.members(name, rs.origin)
            for endpoint in rs.nodes:
                self.catalog.nodes.setdefault(endpoint, Node(endpoint, rs.origin))
            self.catalog.replica_sets[rs.name] = rs
        for pub in dep.publications:
            self.catalog.publications[pub.key] = pub
        named: dict[tuple[str, str], object] = {}
        for sub in dep.subscriptions:
            if sub.name:  # unique per stream: one with the name of an existing one replaces it
                if (sub.stream, sub.name) in named:
                    self.fail(sub.origin, f"two subscriptions to {sub.stream!r} named {sub.name!r} in one change")
                named[(sub.stream, sub.name)] = sub
                for key in [k for k, s in self.catalog.subscriptions.items()
                            if s.stream == sub.stream and s.name == sub.name and k != sub.key]:
                    del self.catalog.subscriptions[key]
            self.catalog.subscriptions[sub.key] = sub
        for unsub in dep.unsubscriptions:
            keys = [k for k, s in self.catalog.subscriptions.items()
                    if s.stream == unsub.stream and unsub.endpoint in (None, s.endpoint)]
            if not keys:
                self.fail(unsub.origin, f"cannot unsubscribe from {unsub.stream!r}: no such subscription")
            for key in keys:
                del self.catalog.subscriptions[key]
        for part in dep.partitions:
            self.partition(part)
        for move in dep.moves:
            self.move(move)

    def place(self, assignment: NodeAssignment) -> None:
        self.catalog.nodes.setdefault(assignment.endpoint, Node(assignment.endpoint, assignment.origin))
        via = f"<node endpoint='{assignment.endpoint}' query='{' '.join(assignment.names)}'>"
        for name in assignment.names:
            for member in self.members(name, assignment.origin):
                self.claim(member, assignment.endpoint, assignment.origin, via)

    def partition(self, part: Partition) -> None:
        """``<partition>``: its members are declared nodes; a partition already committed changes only
        its members and epoch (docs/cumulus.md §2.4).  The rules about the partition on its own and
        its box are :mod:`.validate`'s."""
        for endpoint in part.nodes:
            self.catalog.nodes.setdefault(endpoint, Node(endpoint, part.origin))
        if part.box in self.partitioned:
            self.fail(part.origin, f"box {part.box!r} has more than one <partition> in this submission")
            return
        self.partitioned.add(part.box)
        before = self.catalog.partitions.get(part.box)
        if before is not None and before.planned:
            kept = resubmitted(before, part, self.fail)
            if kept is None:
                return
            part = kept
        self.catalog.partitions[part.box] = part

    def members(self, name: str, origin: Origin) -> list[str]:
        """Boxes and tables a deployment name stands for: a query, or one box or table."""
        query = self.catalog.queries.get(name)
        if query is not None:
            return [*query.boxes, *query.tables]
        if name in self.catalog.boxes or name in self.catalog.tables:
            return [name]
        self.fail(origin, f"no query, box or table named {name!r} to deploy")
        return []

    def move(self, move: Move) -> None:
        if move.node not in self.catalog.nodes:
            self.fail(move.origin, f"cannot move to unknown node {move.node!r}")
            return
        part = self.catalog.partitions.get(move.box or "")
        if part is not None:
            elsewhere = [s.id for s in part.segments if part.nodes[s.member] != move.node] or [0]
            self.fail(move.origin, f"box {move.box!r} is partitioned; move its segments "
                                   f"(boreas move {move.box}/{elsewhere[0]} NODE)")
            return
        name = move.box or move.table
        items = self.catalog.boxes if move.box else self.catalog.tables
        item = items.get(name)
        if item is None:
            self.fail(move.origin, f"cannot move {'box' if move.box else 'table'} {name!r}: no such element")
            return
        items[name] = replace(item, node=move.node)

    def _maybe_unplaced(self) -> Iterable[Box]:
        """The boxes that may be on no node: every box, or, with ``base_unplaced`` and a merge's tracked copy,
        the base's unplaced ones and those this submission wrote (in name order): the cost of those."""
        boxes = self.catalog.boxes
        if self.base_unplaced is None or not isinstance(boxes, TRACKED):
            return list(boxes.values())
        names = set(self.base_unplaced()) | boxes.touched
        return [boxes[name] for name in sorted(names) if name in boxes]

    def resolve_placements(self, deploying: bool) -> None:
        """Give each claimed box its node; with a deployment, every box must have one."""
        conflicted: set[str] = set()
        for name, claims in self.claims.items():
            endpoints = sorted({e for e, _, _ in claims})
            items = self.catalog.boxes if name in self.catalog.boxes else self.catalog.tables
            noun = "box" if items is self.catalog.boxes else "table"
            item = items.get(name)
            if item is None:
                continue
            if noun == "box" and name in self.catalog.partitions:
                conflicted.add(name)
                self.fail(claims[0][1], f"box {name!r} is placed by <partition> and by {claims[0][2]}; a "
                                        f"partitioned box is placed by its <partition> only")
                continue
            if len(endpoints) > 1:
                conflicted.add(name)
                self.fail(claims[-1][1], f"{noun} {name!r} is placed on more than one node: "
                                         f"{', '.join(endpoints)}")
                continue
            before = self.base.boxes.get(name) if noun == "box" else self.base.tables.get(name)
            if before is not None and before.node and before.node != endpoints[0]:
                self.fail(claims[0][1], f"{noun} {name!r} is already on node {before.node!r}; "
                                        f"use <move> to relocate it")
                continue
            items[name] = evolve(item, node=endpoints[0])
        for name in self.partitioned:
            box = self.catalog.boxes.get(name)
            if box is not None and box.node and name not in conflicted:
                part = self.catalog.partitions[name]
                self.fail(part.origin, f"box {name!r} runs on node {box.node!r}; a running box cannot be "
                                       f"partitioned yet (delete it, then declare it again with its <partition>)")
        if deploying:
            for box in self._maybe_unplaced():
                if box.node is None and box.name not in conflicted and box.name not in self.catalog.partitions:
                    self.fail(box.origin, f"box {box.name!r} is not placed on any node "
                                          f"(add it, or its query, to a <node query=...>)")
