"""A node applies an update by what it changed, and ends where following every box would (issue 37).

A node given update XML checks, builds and routes only the boxes the update
wrote (node/slice_change.py, :meth:`BoxStates.follow`'s ``only``,
node/routes.py) and checks a ``<subscribe>`` against counts of the streams
its boxes write (``LocalCatalog.writers``).  The oracle is the node as it
was: a second dataflow given the same candidates with no keys, so it
compares and routes every box.  After random sequences of submissions,
deletions, moves, connects and disconnects in the global catalog
(tests/support/catalog_edits.py), each sent to node n0 as the update XML
of its slice's change, both refuse the same updates with the same problems,
and hold the same boxes, operators kept or built, routes (each stream's
consumers in the same order), producers, schemas, decoders and the
operators their walks visit; the counts are those of counting again; each
stream's consumers are, in order, those a whole rewiring of the boxes the
node holds gives; and a dataflow built afresh on the last slice routes the
same consumers (as sets: a fresh one meets its boxes in its catalog's order,
which a box moved out and back, or a layered mapping, need not keep).
"""

from __future__ import annotations

import asyncio
from collections import Counter
from dataclasses import replace
from typing import Any

import pytest
from boreas.catalog import Catalog
from boreas.catalog.documents import read_document
from boreas.catalog.model import Box, Field, FieldType, InPort, Input, Schema
from boreas.catalog.replicate import UpdateRejected, update_items
from boreas.catalog.slices import node_slice
from boreas.catalog.updates import update_document
from boreas.m3.boxtype import box_types
from boreas.node.dataflow import Dataflow
from boreas.node.local_catalog import LocalCatalog
from boreas.node.routes import Routes
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.catalog_edits import BOX_EDITS, DEPLOY_EDITS, EDITS, Edit, chain

NODE = "n0"


def _flow() -> Dataflow:
    return Dataflow(NODE, None, f"{NODE}#test", box_types=box_types())


def _routes(flow: Dataflow, ordered: bool = True) -> dict[str, Any]:
    """Each stream's consumers as (box, port), each one the node's current operator of that box."""
    for consumers in flow.router.consumers.values():
        assert all(op is flow.operators[name] for op, name, _ in consumers)
    routes = {s: [(name, port) for _, name, port in c] for s, c in flow.router.consumers.items() if c}
    return routes if ordered else {s: sorted(c) for s, c in routes.items()}


def _state(flow: Dataflow) -> tuple:
    host = flow.host
    return (flow.state.boxes, sorted(flow.state.operators), dict(flow.state.broken), _routes(flow),
            flow.router.producer_of, dict(host.schemas), {s: r.schema for s, r in host.row_types.items()},
            list(host.special), host.internal, sorted(host.coordinators))


class Nodes:
    """The node under test (keys) and the oracle (every box compared), fed the same updates."""

    def __init__(self) -> None:
        self.local = LocalCatalog(NODE)
        self.flow, self.oracle = _flow(), _flow()
        self.held = Catalog()
        self.applied = self.refused = 0

    def send(self, slice_: Catalog, version: int, own: bool = False) -> None:
        """The change to ``slice_`` as update XML from the Head, or (``own``) as a change the node makes
        itself (``NodeService.apply_local``: a box moved, a filter inserted; applied unchecked)."""
        items = update_items(self.held, slice_)
        if not items:
            return
        source = f"update #{version}"
        update = read_document(update_document(items, version=version, origin="head"), source)
        try:
            candidate = self.local.preview(update)
        except UpdateRejected:
            self.refused += 1
            return
        if own:  # (a node makes only changes it can run: a candidate whose boxes cannot be built is not one)
            if self.oracle.refusals(candidate, source):
                self.refused += 1
                return
            self.flow.reconfigure(self.local.apply(update, candidate), touched=self.local.touched)
        else:
            problems = self.flow.refusals(candidate, source, touched=self.local.touched)
            assert problems == self.oracle.refusals(candidate, source)
            if problems:
                self.local.refused()
                self.refused += 1
                return
            self.flow.reconfigure(self.local.apply(update, candidate))
        self.oracle.reconfigure(candidate)
        self.held = slice_
        self.applied += 1
        assert _state(self.flow) == _state(self.oracle)
        assert +self.local.writers.counts == Counter(s for b in self.local.catalog.boxes.values() for s in b.outputs)

    def check_fresh(self) -> None:
        """A whole rewiring of the boxes the node holds routes the same consumers in the same order; a node
        built on the slice alone routes the same consumers, unless a box kept here cannot be built afresh (a
        box whose input's declaration went: both ways keep it)."""
        whole = Routes()
        whole.produce_whole(self.flow.state, self.flow.host.internal)
        whole.wire_whole(self.flow.state, self.flow.host.internal, self.flow.router.bridges)
        assert {s: [(name, port) for _, name, port in c] for s, c in whole.consumers.items() if c} == \
            _routes(self.flow)
        assert whole.producer_of == self.flow.router.producer_of
        fresh = _flow()
        fresh.reconfigure(self.local.catalog)
        if fresh.state.broken:
            return
        assert _routes(fresh, ordered=False) == _routes(self.flow, ordered=False)
        assert fresh.router.producer_of == self.flow.router.producer_of


def _follow(edits: list[Edit], own: list[bool] | None = None, start: Catalog | None = None) -> Nodes:
    async def run() -> Nodes:  # (a dataflow opens and closes its links as tasks of the running loop)
        nodes, catalog = Nodes(), start if start is not None else chain()
        nodes.send(node_slice(catalog, NODE), 1)
        for version, edit in enumerate(edits, start=2):
            catalog = catalog.copy()
            edit(catalog)
            nodes.send(node_slice(catalog, NODE), version, own=bool(own and own[(version - 2) % len(own)]))
        nodes.check_fresh()
        return nodes
    return asyncio.run(run())


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.one_of(BOX_EDITS, BOX_EDITS, DEPLOY_EDITS), min_size=1, max_size=14))
def test_a_node_following_an_updates_keys_ends_where_following_every_box_does(edits: list[Edit]) -> None:
    _follow(edits)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.one_of(BOX_EDITS, BOX_EDITS, DEPLOY_EDITS), min_size=1, max_size=12),
       st.lists(st.booleans(), min_size=1, max_size=12))
def test_and_so_do_changes_the_node_makes_itself(edits: list[Edit], own: list[bool]) -> None:
    """Moves and connects the node makes itself are applied unchecked and followed by the keys they wrote."""
    _follow(edits, own)


@pytest.mark.slow
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(EDITS, min_size=1, max_size=14))
def test_and_for_every_kind_of_edit(edits: list[Edit]) -> None:
    _follow(edits)


def test_a_chain_grown_and_cut_one_box_at_a_time_applies_each_update() -> None:
    """Not only refusals: a valid sequence is applied, each step by its keys (the property's sequences are
    often invalid catalogs, refused whole)."""
    def add(name: str, stream: str, out: str) -> Edit:
        box = Box(name, "filter", (InPort(stream),), (out,), (("expression.0", "a > 1"),), node=NODE)
        return lambda c: c.boxes.__setitem__(name, box)

    def place(name: str, node: str) -> Edit:
        return lambda c: c.boxes.__setitem__(name, replace(c.boxes[name], node=node))

    def rewire(name: str, stream: str) -> Edit:
        return lambda c: c.boxes.__setitem__(name, c.boxes[name].rewired(0, stream))

    edits = [add("c0", "s1", "t0"), add("c1", "t0", "t1"), add("c2", "s1", "t2"), place("c1", "n1"),
             place("c1", NODE), rewire("c2", "t1"), lambda c: c.boxes.pop("c2"), add("c2", "t1", "t3"),
             rewire("c1", "s1"), lambda c: c.boxes.pop("c0")]
    for own in ([False], [True], [True, False]):
        nodes = _follow(edits, own)
        assert (nodes.applied, nodes.refused) == (len(edits) + 1, 0)


def test_an_inputs_new_schema_rebuilds_the_boxes_reading_it() -> None:
    """An ``<input>`` given another schema, its readers' declarations unchanged: the boxes reading it are
    built with the new one (they read rows of its layout), by the keys and by the whole walk alike."""
    swapped = Schema("R", (Field("b", FieldType.DOUBLE), Field("a", FieldType.INT)))

    start = chain()
    start.schemas["R"] = swapped
    for stream, schema in (("r", "R"), ("q", "S")):  # (n0 reads both schemas throughout: the update writes
        start.inputs[f"{stream}0"] = Input(f"{stream}0", schema)  # its <input> and <output> alone)
        start.boxes[f"b{stream}"] = Box(f"b{stream}", "filter", (InPort(f"{stream}0"),), (f"{stream}1",),
                                        (("expression.0", "a > 1"),), node=NODE)

    def reschema(c: Catalog) -> None:
        c.inputs["s0"] = replace(c.inputs["s0"], schema="R")

    nodes = _follow([reschema], start=start)
    assert (nodes.applied, nodes.refused) == (2, 0)
    for flow in (nodes.flow, nodes.oracle):
        assert flow.host.schemas["s0"].fields == swapped.fields
        assert flow.operators["b0"].inputs[0].fields == swapped.fields
        # (b, a) rows: b0 keeps a > 1, which is the second column now
        assert flow.operators["b0"].process(0, [(2.0, 1), (0.5, 5)], 0.0) == [(0, [(0.5, 5)])]


def test_a_box_moved_out_and_back_is_routed_as_a_whole_rewiring_of_the_boxes_held_routes_it() -> None:
    """The routes' order is that of the boxes held, not of the catalog: past 512 boxes the catalog's mapping is
    layered and keeps a box written again in its old place, so a node built afresh on the slice routes a
    stream's consumers in another order (node/routes.py: the limit, documented); check_fresh holds the live
    order to a whole rewiring of the same dataflow."""
    start = chain()
    for name in list(start.boxes):
        start.boxes[name] = replace(start.boxes[name], node=NODE)
    for name in ["y", "x", *(f"f{i}" for i in range(600))]:
        start.boxes[name] = Box(name, "filter", (InPort("s1" if len(name) == 1 else "s2"),), (f"{name}_out",),
                                (("expression.0", "a > 1"),), node=NODE)

    def place(node: str) -> Edit:
        return lambda c: c.boxes.__setitem__("x", replace(c.boxes["x"], node=node))

    nodes = _follow([place("n1"), place(NODE)], start=start)
    assert (nodes.applied, nodes.refused) == (3, 0)
    assert [name for name, _ in _routes(nodes.flow)["s1"]] == ["b1", "y", "x"]
    assert list(nodes.local.catalog.boxes).index("x") < list(nodes.local.catalog.boxes).index("y")
