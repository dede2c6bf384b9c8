"""A regional catalog: the local catalogs of one region's nodes, merged from their reflections.

Paper section 2.2 and 3.1.1.  The nodes of a region reflect every change
to their local catalogs here, as update XML whose ``origin`` is the node;
a node that joins the region sends a full copy first.  Reflections from
different nodes arrive in any order relative to each other, so box
locations follow the paper's rules rather than plain replication:

* a box declaration from node N adds the box on N when the region does
  not know the box, replaces it when the region has it on N (a modify),
  and is ignored when the region has it elsewhere (the box is moving and
  the region already knows: the move element came first);
* a ``<move box node=T>`` from the source puts the box on T when T is in
  the region and deletes it from the region otherwise (moved out); a move
  of a box the region does not know is remembered, and the declaration
  coming from T adds it;
* a ``<delete box>`` from N removes the box only if the region has it on N.

So all four move cases come out right in either arrival order, and
concurrent moves of different boxes do not interfere.  Schemas are never
removed.  Streams need no rules: they are the boxes' ins and outs.

>>> from boreas.catalog.model import Box, InPort
>>> region = RegionalCatalog("default")
>>> b = Box("f", "filter", (InPort("In"),), ("Out",), (("expression.0", "true"),))
>>> region.reflect("a:1", [b]); region.location("f")
'a:1'
>>> region.reflect("b:2", [b]); region.location("f")   # the target's declaration came first
'a:1'
>>> region.reflect("a:1", [Move("b:2", box="f")]); region.location("f")
'b:2'
"""

from __future__ import annotations

import logging
from collections import Counter
from dataclasses import replace
from typing import Any

from boreas.catalog.document_model import Delete, Move
from boreas.catalog.export import export_application, export_deployment
from boreas.catalog.model import (
    Box,
    Catalog,
    Input,
    Node,
    Output,
    Region,
    Schema,
    Table,
)

log = logging.getLogger(__name__)


class RegionalCatalog:
    def __init__(self, *names: str):
        self.names = {n for n in names if n}  # what the region is called: its name, its endpoint
        self.members: set[str] = set()
        self.schemas: dict[str, Schema] = {}
        self.boxes: dict[str, Box] = {}
        self.tables: dict[str, Table] = {}
        self.stream_schemas: dict[str, str] = {}  # stream -> schema name, from <input>/<output>
        self.moved_to: dict[str, str] = {}  # box -> target, a move seen before its box
        self.versions: dict[str, int] = {}  # node -> last local catalog version reflected
        self.counters: Counter[str] = Counter()

    def location(self, box: str) -> str | None:
        found = self.boxes.get(box)
        return found.node if found else None

    def reflect(self, node: str, items: list[Any], version: int | None = None, copy: bool = False) -> None:
        """Take one reflection from ``node``; ``copy`` when it is the node's whole local catalog."""
        self.counters["copies" if copy else "updates"] += 1
        self.members.add(node)
        if version is not None:
            self.versions[node] = max(version, self.versions.get(node, 0))
        if copy:
            declared = {i.name for i in items if isinstance(i, (Box, Table))}
            for collection in (self.boxes, self.tables):
                for name in [n for n, b in collection.items() if b.node == node and n not in declared]:
                    del collection[name]
        for item in items:
            self._item(node, item)

    def _item(self, node: str, item: Any) -> None:
        match item:
            case Schema():
                self.schemas.setdefault(item.name, item)
            case Input() | Output():
                self.stream_schemas[item.stream] = item.schema
            case Box():
                self._declare(self.boxes, node, item)
            case Table():
                self._declare(self.tables, node, item)
            case Region() if item.node and item.region in self.names | {item.endpoint}:
                self.members.add(item.node)
            case Move():
                self._move(item)
            case Delete():
                self._delete(node, item)

    def _declare(self, collection: dict, node: str, item: Box | Table) -> None:
        current = collection.get(item.name)
        if current is not None and current.node != node:
            self.counters["declarations_ignored"] += 1  # a move in flight, already known here
            return
        collection[item.name] = replace(item, node=node)
        self.moved_to.pop(item.name, None)

    def _move(self, move: Move) -> None:
        collection = self.boxes if move.box else self.tables
        name = move.box or move.table or ""
        current = collection.get(name)
        self.counters["moves"] += 1
        if current is None:
            if move.node in self.members:
                self.moved_to[name] = move.node
            return
        if move.node in self.members:
            collection[name] = replace(current, node=move.node)
        else:
            del collection[name]  # moved out of the region
            log.info("region %s: %s moved out of the region to %s", "/".join(sorted(self.names)), name,
                     move.node)

    def _delete(self, node: str, delete: Delete) -> None:
        for collection, name in ((self.boxes, delete.box), (self.tables, delete.table)):
            if name and name in collection and collection[name].node == node:
                del collection[name]
        if delete.region:
            region, _, member = delete.region.partition("|")
            if region in self.names and member:
                self.members.discard(member)

    # -- what the region looks like ------------------------------------------

    def as_catalog(self) -> Catalog:
        """The region's topology: its boxes and tables on their nodes, with the streams that cross it."""
        catalog = Catalog(schemas=dict(self.schemas), boxes=dict(self.boxes), tables=dict(self.tables))
        catalog.nodes = {n: Node(n) for n in sorted(self.members)}
        produced = {s for b in self.boxes.values() for s in b.outputs}
        consumed = {p.stream for b in self.boxes.values() for p in b.inputs}
        for stream in sorted(consumed - produced):
            if stream in self.stream_schemas:
                catalog.inputs[stream] = Input(stream, self.stream_schemas[stream])
        for stream in sorted(produced - consumed):
            if stream in self.stream_schemas:
                catalog.outputs[stream] = Output(stream, self.stream_schemas[stream])
        return catalog

    def application_xml(self) -> str:
        return export_application(self.as_catalog())

    def deployment_xml(self) -> str:
        return export_deployment(self.as_catalog())
