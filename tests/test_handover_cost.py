"""A box moving between nodes costs what it touches, not what the two nodes hold (issue 37, the ``/handover``).

At 40,000 boxes over 4 nodes the first ``boreas move``'s ``/handover`` timed
out under load: the target walked every box it held (checked, bound,
followed and routed each) because the handover's update XML declares the
moved box's streams' schemas, which the target holds already, and any
schema written made the node treat the update as one a box's build may
depend on (node/slice_change.py).  These tests move the last box of a
chain from node n0 to n1 as node/mover.py does -- the source's
:func:`~boreas.node.handover.target_items` applied by the target as
``move_in`` applies them, the source's
:func:`~boreas.node.handover.source_items` as ``apply_local`` does -- at two
slice sizes, and count the boxes each side's check and follow walk and the
whole rewirings: the same at both sizes.  The result is compared with a
dataflow that follows every box (the oracle of tests/test_node_change_cost.py).
In process, no node processes.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from boreas.catalog import Catalog
from boreas.catalog.document_model import Update
from boreas.catalog.documents import read_document
from boreas.catalog.model import Box, Field, FieldType, InPort, Input, Node, Schema
from boreas.catalog.replicate import update_items
from boreas.catalog.slices import node_slice
from boreas.catalog.updates import update_document
from boreas.m3.boxtype import box_types
from boreas.node.box_state import BoxStates
from boreas.node.dataflow import Dataflow
from boreas.node.handover import source_items, target_items
from boreas.node.local_catalog import LocalCatalog
from boreas.node.routes import Routes

NODES = ("n0:15000", "n1:15000")


def _catalog(boxes: int) -> Catalog:
    """One chain of filters per node, as bench/catalog.py makes them: box i on node i % 2 reads box i-2's."""
    catalog = Catalog(version=1)
    catalog.schemas["Reading"] = Schema("Reading", (Field("value", FieldType.DOUBLE),))
    for c, node in enumerate(NODES):
        catalog.nodes[node] = Node(node)
        catalog.inputs[f"in{c}"] = Input(f"in{c}", "Reading")
    for i in range(boxes):
        upstream = f"in{i % 2}" if i < 2 else f"b{i - 2}_t"
        catalog.boxes[f"b{i}"] = Box(f"b{i}", "filter", (InPort(upstream),), (f"b{i}_t",),
                                     (("expression.0", "value > 0.5"),), node=NODES[i % 2])
    return catalog


class _Node:
    """A node's local catalog and dataflow, and an oracle dataflow that follows every box of the same catalogs."""

    def __init__(self, endpoint: str, held: Catalog):
        self.endpoint = endpoint
        self.local = LocalCatalog(endpoint)
        self.flow = Dataflow(endpoint, None, f"{endpoint}#test", box_types=box_types())
        self.oracle = Dataflow(endpoint, None, f"{endpoint}#oracle", box_types=box_types())
        update = read_document(update_document(update_items(Catalog(), held), version=1, origin="head"), "slice")
        candidate = self.local.preview(update)
        assert self.flow.refusals(candidate, "slice", touched=self.local.touched) == []
        self.flow.reconfigure(self.local.apply(update, candidate))
        self.oracle.reconfigure(candidate)

    def take_in(self, items: list) -> None:
        """``BoxMover.move_in``: the handover's update XML previewed, checked (rules off), applied, followed."""
        update = read_document(update_document(items, origin="source"), "handover update XML")
        assert isinstance(update, Update)
        candidate = self.local.preview(update)
        assert self.flow.refusals(candidate, "handover update XML", rules=False, touched=self.local.touched) == []
        self.flow.reconfigure(self.local.apply(update, candidate))

    def change_own(self, items: list) -> None:
        """``NodeService.apply_local``: the node's own change, followed by the keys it wrote."""
        catalog = self.local.apply(Update("local change", self.local.version, self.endpoint, items=items))
        self.flow.reconfigure(catalog, touched=self.local.touched)

    def same_as_oracle(self) -> None:
        """The oracle follows the catalog the node holds now, every box; both run and route the same."""
        self.oracle.reconfigure(self.local.catalog)
        mine, theirs = self.flow, self.oracle
        assert sorted(mine.state.operators) == sorted(theirs.state.operators) == sorted(self.local.catalog.boxes)
        assert {s: sorted((n, p) for _, n, p in c) for s, c in mine.router.consumers.items() if c} == \
            {s: sorted((n, p) for _, n, p in c) for s, c in theirs.router.consumers.items() if c}
        assert mine.router.producer_of == theirs.router.producer_of


@contextmanager
def _counted() -> Iterator[Counter[str]]:
    """Counts, while open, the boxes ``BoxStates.check`` and ``follow`` walk (every box held when not told
    ``only``) and the whole rewirings of a node's routes."""
    counts: Counter[str] = Counter()
    check, follow, wire_whole = BoxStates.check, BoxStates.follow, Routes.wire_whole

    def counted_check(self, boxes, schemas, build=None, only=None):  # type: ignore[no-untyped-def]
        counts["checked"] += len(boxes) if only is None else len(only)
        return check(self, boxes, schemas, *(() if build is None else (build,)), only=only)

    def counted_follow(self, boxes, schemas, keep_state=(), build=None, rebuild=(), only=None):  # type: ignore[no-untyped-def]
        counts["followed"] += len(boxes) if only is None else len(only)
        args = (keep_state,) if build is None else (keep_state, build)
        return follow(self, boxes, schemas, *args, rebuild=rebuild, only=only)

    def counted_wire(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        counts["whole rewirings"] += 1
        return wire_whole(self, *args, **kwargs)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(BoxStates, "check", counted_check)
        patch.setattr(BoxStates, "follow", counted_follow)
        patch.setattr(Routes, "wire_whole", counted_wire)
        yield counts


def _move(boxes: int) -> tuple[Counter[str], Counter[str]]:
    """The last box of n0's chain moved to n1 in a catalog of ``boxes``: the work each side did."""
    async def run() -> tuple[Counter[str], Counter[str]]:
        catalog = _catalog(boxes)
        source, target = (_Node(n, node_slice(catalog, n)) for n in NODES)
        name = f"b{boxes - 2}"
        box = source.local.catalog.boxes[name]
        items = target_items(source.local.catalog, source.flow, [box], *NODES)
        with _counted() as taken:
            target.take_in(items)
        assert target.local.catalog.boxes[name].node == NODES[1]
        target.same_as_oracle()
        own = source_items(source.local.catalog, source.flow, [box], *NODES)
        with _counted() as given:
            source.change_own(own)
        assert name not in source.local.catalog.boxes
        source.same_as_oracle()
        return taken, given
    return asyncio.run(run())


def test_a_handover_walks_as_many_boxes_whatever_the_nodes_hold() -> None:
    small_in, small_out = _move(40)
    large_in, large_out = _move(400)
    assert large_in == small_in, (small_in, large_in)
    assert large_out == small_out, (small_out, large_out)
    assert large_in["whole rewirings"] == 0 and large_in["checked"] <= 2 and large_in["followed"] <= 2
