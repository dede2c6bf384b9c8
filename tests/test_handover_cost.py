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
slice sizes, and count the boxes each side's check and follow walk, the
whole rewirings, and the source's walks over all its boxes and
subscriptions (none: node/handover.py asks the node's index what reads a
stream): the same at both sizes.  The result is compared with a
dataflow that follows every box (the oracle of tests/test_node_change_cost.py).
In process, no node processes.
"""

from __future__ import annotations

import asyncio
import types
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager

import msgspec
import pytest
from boreas.catalog import Catalog
from boreas.catalog.document_model import Update
from boreas.catalog.documents import read_document
from boreas.catalog.model import Box, Field, FieldType, InPort, Input, Node, Schema, Subscription
from boreas.catalog.replicate import update_items
from boreas.catalog.slices import node_slice
from boreas.catalog.updates import update_document
from boreas.m3.boxtype import box_types
from boreas.node.box_state import BoxStates
from boreas.node.dataflow import Dataflow
from boreas.catalog import index_derivation
from boreas.node import operator_host
from boreas.node.handover import detach, source_items, target_items
from boreas.node.journal import payload
from boreas.node.mover import BoxMover
from boreas.node.recovery import records
from boreas.node.local_catalog import LocalCatalog
from boreas.node.routes import Routes
from boreas.wire.frames import Batch, Refused

NODES = ("n0:15000", "n1:15000")


class _Walks(dict):
    """A Catalog dict that counts the walks over all of it (``values``, ``items``, iteration)."""

    walks = 0

    def values(self):  # type: ignore[no-untyped-def]
        _Walks.walks += 1
        return super().values()

    def items(self):  # type: ignore[no-untyped-def]
        _Walks.walks += 1
        return super().items()

    def __iter__(self):  # type: ignore[no-untyped-def]
        _Walks.walks += 1
        return super().__iter__()


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
    catalog.boxes["x"] = Box("x", "filter", (InPort(f"b{boxes - 6}_t"),), ("x_t",), (("expression.0", "value < 0.5"),),
                             node=NODES[1])  # (n1 reads a box of n0's chain)
    for stream in [*(f"b{i}_t" for i in range(boxes - 6, boxes, 2)), "x_t"]:  # (the moved boxes' and others')
        sub = Subscription(stream, "client:9")
        catalog.subscriptions[sub.key] = sub
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

    async def take_in(self, items: list, handovers: list) -> None:
        """``POST /handover``: :meth:`BoxMover.move_in` of the source's items and the boxes' states."""
        node = types.SimpleNamespace(endpoint=self.endpoint, local=self.local, dataflow=self.flow,
                                     update_lock=asyncio.Lock(), durability=None,
                                     reflector=types.SimpleNamespace(reflect=lambda *_: None),
                                     tasks=types.SimpleNamespace(closed=True), catalog_changed=lambda: None)
        body = msgspec.msgpack.encode([update_document(items, origin="source"), [h.encode() for h in handovers]])
        await BoxMover(node).move_in(body)  # type: ignore[arg-type]

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
    whole_check, whole_schemas = index_derivation.check_topology, operator_host.stream_schemas

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

    def counted(name, whole):  # type: ignore[no-untyped-def]
        def call(*args, **kwargs):  # type: ignore[no-untyped-def]
            counts[name] += 1
            return whole(*args, **kwargs)
        return call

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(index_derivation, "check_topology", counted("whole checks", whole_check))
        patch.setattr(operator_host, "stream_schemas", counted("whole typings", whole_schemas))
        patch.setattr(BoxStates, "check", counted_check)
        patch.setattr(BoxStates, "follow", counted_follow)
        patch.setattr(Routes, "wire_whole", counted_wire)
        yield counts


async def _hand_over(source: _Node, target: _Node, name: str) -> tuple[Counter[str], Counter[str]]:
    """Box ``name`` moved from ``source`` to ``target`` as node/mover.py moves it; the work each side did."""
    held = source.local.catalog
    box = held.boxes[name]
    # What a walk over every box and subscription finds (a copy: the node's index is not of it).
    expected = (target_items(held.copy(), source.flow, [box], source.endpoint, target.endpoint),
                source_items(held.copy(), source.flow, [box], source.endpoint, target.endpoint))
    held.boxes, held.subscriptions = _Walks(held.boxes), _Walks(held.subscriptions)
    _Walks.walks = 0
    with _counted() as given:
        items = target_items(held, source.flow, [box], source.endpoint, target.endpoint)
        own = source_items(held, source.flow, [box], source.endpoint, target.endpoint)
        handovers = await detach(source.flow, [name], target.endpoint)
    given["catalog walks"] = _Walks.walks
    assert (items, own) == expected
    assert Subscription(f"{name}_t", "client:9") in items and any(
        getattr(i, "stream", None) == f"{name}_t" and getattr(i, "endpoint", None) == "client:9" for i in own)
    with _counted() as taken:
        await target.take_in(items, handovers)
    assert target.local.catalog.boxes[name].node == target.endpoint
    target.same_as_oracle()
    with _counted() as applied:
        source.change_own(own)
    given.update({f"apply {k}": v for k, v in applied.items()})
    assert name not in source.local.catalog.boxes
    source.same_as_oracle()
    return taken, given


def _move(boxes: int) -> list[Counter[str]]:
    """The last box of n0's chain moved to n1 in a catalog of ``boxes``, and back: the work each side did."""
    async def run() -> list[Counter[str]]:
        catalog = _catalog(boxes)
        first, second = (_Node(n, node_slice(catalog, n)) for n in NODES)
        name, upstream = f"b{boxes - 2}", f"b{boxes - 4}_t"
        there = await _hand_over(first, second, name)
        assert upstream in second.local.catalog.inputs  # (n1 writes no box's stream the box reads)
        back = await _hand_over(second, first, name)
        # Back on the node that writes its upstream stream: read from there, not declared an input too.
        assert upstream not in first.local.catalog.inputs and first.flow.host.index.ok
        assert [p for p in first.local.catalog.publications.values() if p.stream == upstream] == []
        # x, which n1 holds, moved to n0, which writes the stream x reads: read from there too, and what n1
        # still forwards to it is taken (no input declared: decoded by the stream's schema here).
        joins = await _hand_over(second, first, "x")
        assert f"b{boxes - 6}_t" not in first.local.catalog.inputs and first.flow.host.index.ok
        forwarded = Batch(f"b{boxes - 6}_t", "b-producer", 0, msgspec.Raw(payload([(0.7,)])), box="x")
        assert not isinstance(await first.flow.intake.accept(forwarded), Refused)
        # ... and what was taken so is replayed from the log by a restarted node (a fresh dataflow on the same
        # catalog): a batch acknowledged live is never skipped as "no longer enters here".
        restarted = Dataflow(first.endpoint, None, f"{first.endpoint}#restarted", box_types=box_types())
        restarted.reconfigure(first.local.catalog)
        taken = records.Taken(f"b{boxes - 6}_t", "b-producer", 0, "x", payload([(0.7,)]), 0.0)
        assert await restarted.replayer.replay_log([(0, records.encode(taken))]) == 1
        return [*there, *back, *joins]
    return asyncio.run(run())


def test_a_handover_walks_as_many_boxes_whatever_the_nodes_hold() -> None:
    small, large = _move(40), _move(400)
    assert large == small, (small, large)
    for taken in large[0::2]:  # (each target: the box taken in checked, built and routed alone)
        assert taken["whole rewirings"] == taken["whole checks"] == taken["whole typings"] == 0
        assert taken["checked"] <= 2 and taken["followed"] <= 2
    for given in large[1::2]:  # (each source: its items found by its index, not a walk over every box)
        assert given["catalog walks"] == given["whole rewirings"] == given["whole checks"] == 0


def test_a_map_box_whose_out_schema_the_target_lacks_walks_as_many_boxes_whatever_the_nodes_hold() -> None:
    """A map's out stream has a schema of its own (named after the box), which the target does not hold: the
    handover declares it, and a new schema is no change to the boxes the target built before (a review found
    the target checked and followed every box it held for it)."""
    def moved(boxes: int) -> Counter[str]:
        async def run() -> Counter[str]:
            catalog = _catalog(boxes)
            name = f"b{boxes - 2}"
            catalog.boxes[name] = Box(name, "map", catalog.boxes[name].inputs, (f"{name}_t",),
                                      (("expression.0", "value * 2"), ("output-field-name.0", "value")),
                                      node=NODES[0])
            first, second = (_Node(n, node_slice(catalog, n)) for n in NODES)
            taken, _ = await _hand_over(first, second, name)
            return taken
        return asyncio.run(run())
    small, large = moved(40), moved(400)
    assert large == small, (small, large)
    assert large["whole rewirings"] == large["whole checks"] == large["whole typings"] == 0
    assert large["checked"] <= 2 and large["followed"] <= 2


def test_a_box_taken_out_is_unrouted_by_the_streams_it_reads_and_writes() -> None:
    """``Routes.remove`` of a plain box looks at its own streams' routes only, and leaves what a whole
    wiring of the boxes left gives."""
    catalog = _catalog(60)
    schemas = {s: catalog.schemas["Reading"] for b in catalog.boxes.values()
               for s in (*b.outputs, *(p.stream for p in b.inputs))}
    states = BoxStates()
    assert states.follow(dict(catalog.boxes), schemas) == {}
    routes = Routes()
    routes.produce_whole(states, {})
    routes.wire_whole(states, {}, {})
    routes.consumers, routes.producer_of = _Walks(routes.consumers), _Walks(routes.producer_of)
    _Walks.walks = 0
    routes.remove("b30", plain=True)
    assert _Walks.walks == 0
    del catalog.boxes["b30"]
    assert states.follow(dict(catalog.boxes), schemas) == {}
    whole = Routes()
    whole.produce_whole(states, {})
    whole.wire_whole(states, {}, {})
    assert {s: c for s, c in routes.consumers.items() if c} == {s: c for s, c in whole.consumers.items() if c}
    assert dict(routes.producer_of) == whole.producer_of
