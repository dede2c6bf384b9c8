"""Tests for node slices (``slices``) and for the order of update items (``replicate``).

Property tests on random catalogs (``support/catalog_pairs.py``) check that

4. node slices hold each placed box once, wire crossing streams up from both
   ends, carry the schemas they name, and replicate like whole catalogs;
5. every prefix of ``update_items(a, b)`` leaves no input, output or table
   naming an undeclared schema (and adds no box or table placed on an
   undeclared node).

They are apart from ``test_replicate.py`` (items and their application)
because they check what a node receives and in which order, not whether a
copy converges.
"""

from __future__ import annotations

from dataclasses import replace

import pytest
from boreas.catalog import plan_submission
from boreas.catalog.documents import Delete, read_document
from boreas.catalog.elements import element_key
from boreas.catalog.index import CatalogIndex
from boreas.catalog.model import Box, Catalog, Field, FieldType, InPort, Input, Node, Schema, Subscription
from boreas.catalog.replicate import DECLARE_ORDER, apply_update, catalog_items, update_items
from boreas.catalog.slices import node_slice, node_slices
from boreas.catalog.tracked import CATALOG_DICTS
from boreas.catalog.validate import stream_schemas
from hypothesis import given, settings
from support.catalog_pairs import catalog_pairs, catalogs, via_xml
from support.property_scale import SETTINGS, examples

N0, N1, N2 = "localhost:15000", "localhost:15001", "localhost:15002"  # the examples' nodes


def _dangling_schemas(catalog: Catalog) -> list[str]:
    return [f"{attr} {key!r} names schema {obj.schema!r}"
            for attr in ("inputs", "outputs", "tables")
            for key, obj in getattr(catalog, attr).items()
            if obj.schema is not None and obj.schema not in catalog.schemas]


def _dangling_nodes(catalog: Catalog) -> set[str]:
    return {f"{attr} {key!r} is placed on {obj.node!r}"
            for attr in ("boxes", "tables")
            for key, obj in getattr(catalog, attr).items()
            if obj.node is not None and obj.node not in catalog.nodes}


# =============================================================================
# 4. Node slices
# =============================================================================


def _producer_nodes(c: Catalog) -> dict[str, str | None]:
    return {s: box.node for box in c.boxes.values() for s in box.outputs}


@settings(max_examples=examples(30), **SETTINGS)
@given(catalogs())
def test_each_placed_box_is_in_exactly_its_nodes_slice(c):
    slices = node_slices(c)
    assert set(slices) >= set(c.nodes)
    for box in c.boxes.values():
        assert box.node is not None
        holders = [n for n, part in slices.items() if box.name in part.boxes]
        assert holders == [box.node], box.name
        assert slices[box.node].boxes[box.name] == box
    for endpoint, part in slices.items():
        assert endpoint in part.nodes
        assert all(b.node == endpoint for b in part.boxes.values())
        assert node_slice(c, endpoint) == part


@pytest.mark.slow  # make test-fast keeps two slice properties (each placed box, replicate like catalogs)
@settings(max_examples=examples(30), **SETTINGS)
@given(catalogs())
def test_crossing_streams_are_wired_at_both_ends(c):
    slices = node_slices(c)
    producer = _producer_nodes(c)
    crossings = {(port.stream, producer[port.stream], box.node)  # (stream, from node, to node)
                 for box in c.boxes.values() for port in box.inputs
                 if port.stream in producer and producer[port.stream] != box.node}
    for stream, up, down in crossings:
        out, inp = slices[up], slices[down]
        assert stream in out.outputs, (stream, up, down)
        assert out.outputs[stream].node == up
        assert out.subscriptions.get(f"{stream}|{down}") == Subscription(stream, down)
        assert stream in inp.inputs, (stream, up, down)
        assert inp.inputs[stream].node == down
        pub = inp.publications.get(f"{stream}|{down}")
        assert pub is not None and pub.client == up, (stream, up, down, pub)
        assert up in inp.nodes and down in out.nodes  # neighbours are known by endpoint
    # Conversely, every node-to-node subscription is such a crossing (or forwards an input).
    for up, part in slices.items():
        for sub in part.subscriptions.values():
            if sub.endpoint in slices:
                assert (sub.stream, up, sub.endpoint) in crossings or sub.stream in c.inputs, sub
                assert slices[sub.endpoint].publications[f"{sub.stream}|{sub.endpoint}"].client == up


@pytest.mark.slow  # make test-fast keeps two slice properties (as above)
@settings(max_examples=examples(30), **SETTINGS)
@given(catalogs())
def test_published_input_streams_reach_every_consumer_node(c):
    slices = node_slices(c)
    published = {p.stream for p in c.publications.values() if p.node}
    for box in c.boxes.values():
        for port in box.inputs:
            if port.stream in published:
                part = slices[box.node]
                assert port.stream in part.inputs
                pub = part.publications.get(f"{port.stream}|{box.node}")
                assert pub is not None, (port.stream, box.node)
                if pub.client in slices:  # forwarded by the node it enters at
                    assert f"{port.stream}|{box.node}" in slices[pub.client].subscriptions


@pytest.mark.slow  # make test-fast keeps two slice properties (as above)
@settings(max_examples=examples(30), **SETTINGS)
@given(catalogs())
def test_slices_carry_the_schemas_they_name(c):
    schemas = stream_schemas(c)
    for endpoint, part in node_slices(c).items():
        named = [d.schema for d in [*part.inputs.values(), *part.outputs.values(),
                                    *part.tables.values()] if d.schema is not None]
        for name in named:
            assert name in part.schemas, (endpoint, name)
        for box in part.boxes.values():
            for stream in [*(p.stream for p in box.inputs), *box.outputs]:
                if stream in schemas:
                    assert part.schemas.get(schemas[stream].name) == schemas[stream], (endpoint, stream)
        for name, schema in part.schemas.items():
            assert schema.name == name


@settings(max_examples=examples(25), **SETTINGS)
@given(catalogs(), catalogs())
def test_slices_replicate_like_catalogs(a, b):
    """The Head brings a node from its old slice to its new one with update XML."""
    sa, sb = node_slices(a), node_slices(b)
    for endpoint in sorted(set(sa) | set(sb)):
        old, new = sa.get(endpoint, Catalog()), sb.get(endpoint, Catalog())
        items = update_items(old, new)
        assert apply_update(old, items) == new, endpoint
        assert apply_update(Catalog(), catalog_items(new)) == new, endpoint
        assert not _unsized_strings(new), endpoint  # update XML needs string sizes
        assert apply_update(old, via_xml(items, version=2)) == new, endpoint
        assert apply_update(Catalog(), via_xml(catalog_items(new))) == new, endpoint


@settings(max_examples=examples(25), **SETTINGS)
@given(catalogs(), catalogs())
def test_an_update_says_the_keys_it_wrote_and_a_node_derives_by_them(a, b):
    """A node derives its index for an update by the keys the update wrote (node/operator_host.py): every key
    whose element is not the very one held before is among them, and the index derived by them is the one
    comparing every element gives (problems and stream schemas)."""
    sa, sb = node_slices(a), node_slices(b)
    for endpoint in sorted(set(sa) | set(sb)):
        old, new = sa.get(endpoint, Catalog()), sb.get(endpoint, Catalog())
        touched: dict[str, set[str]] = {}
        after = apply_update(old, via_xml(update_items(old, new), version=2), touched=touched)
        for kind in CATALOG_DICTS:
            before, now = getattr(old, kind), getattr(after, kind)
            moved = {k for k in before.keys() | now.keys() if before.get(k) is not now.get(k)}
            assert moved <= touched.get(kind, set()), (endpoint, kind)
        index = CatalogIndex.build(old)
        by_keys, whole = index.derive(after, touched), CatalogIndex.build(after)
        assert sorted(d.reason for d in by_keys.problems) == sorted(d.reason for d in whole.problems), endpoint
        if whole.ok:
            assert by_keys.stream_schemas == whole.stream_schemas, endpoint


def _unsized_strings(catalog: Catalog) -> list[str]:
    """Schemas with a string field of unknown size (update XML wants a size)."""
    return [s.name for s in catalog.schemas.values()
            if any(f.type == FieldType.STRING and f.size is None for f in s.fields)]


# Found by test_slices_replicate_like_catalogs: a map box that copies a
# string field (``expression.0 = x``, x string(4)) got an inferred output
# schema whose string field had no size, which update XML refuses, so the
# Head could not send such a slice.  Inference now keeps the size.
_MAP_COPIES_STRING = """<borealis>
  <schema name="S"><field name="x" type="string" size="4"/></schema>
  <input stream="A" schema="S"/>
  <box name="m" type="map"><in stream="A"/><out stream="B"/>
    <parameter name="expression.0" value="x"/><parameter name="output-field-name.0" value="o"/></box>
  <box name="f" type="filter"><in stream="B"/><out stream="C"/>
    <parameter name="expression.0" value="o = 'a'"/></box>
</borealis>"""


def test_slice_with_inferred_string_field_goes_through_update_xml():
    dep = '<deploy><node endpoint=":15000" query="m"/><node endpoint=":15001" query="f"/></deploy>'
    plan = plan_submission(Catalog(), [read_document(_MAP_COPIES_STRING), read_document(dep)])
    assert plan.ok, plan.problems
    assert node_slices(plan.catalog)["localhost:15001"].schemas["m.out0"].fields[0].size == 4
    for part in node_slices(plan.catalog).values():
        assert apply_update(Catalog(), via_xml(catalog_items(part))) == part


# =============================================================================
# 5. Order of update items
# =============================================================================


@settings(max_examples=examples(35), **SETTINGS)
@given(catalog_pairs())
def test_every_prefix_of_an_update_names_only_declared_schemas(pair):
    a, b = pair
    assert not _dangling_schemas(a) and not _dangling_schemas(b)
    # Placements may dangle in an edited catalog; a prefix adds no dangling placement.
    allowed = _dangling_nodes(a) | _dangling_nodes(b)
    current = a
    for index, item in enumerate(update_items(a, b)):
        current = apply_update(current, [item])
        assert not _dangling_schemas(current), (index, item, _dangling_schemas(current))
        assert _dangling_nodes(current) <= allowed, (index, item, _dangling_nodes(current) - allowed)
    assert current == b


# Was: every removal came before every declaration, so an input that stays
# but changes schema named its removed old schema until it was redeclared
# (and a box moved off a removed node named that node).
def test_schema_and_node_are_removed_after_what_named_them_is_redeclared():
    old = Catalog(schemas={"S1": Schema("S1", (Field("x", FieldType.INT),))},
                  inputs={"A": Input("A", "S1")},
                  nodes={N0: Node(N0)},
                  boxes={"b": Box("b", "filter", (InPort("A"),), ("B",), (("expression.0", "x > 1"),),
                                  node=N0)})
    new = Catalog(schemas={"S2": Schema("S2", (Field("x", FieldType.INT),))},
                  inputs={"A": Input("A", "S2")},
                  nodes={N1: Node(N1)},
                  boxes={"b": replace(old.boxes["b"], node=N1)})
    items = update_items(old, new)
    assert items == [new.schemas["S2"], new.nodes[N1], new.inputs["A"], new.boxes["b"],
                     Delete(schema="S1"), Delete(node=N0)]
    current = old
    for item in items:
        current = apply_update(current, [item])
        assert not _dangling_schemas(current) and not _dangling_nodes(current), item
    assert current == new


@pytest.mark.slow  # make test-fast: test_catalog_items_rebuild_the_catalog applies full copies
@settings(max_examples=examples(20), **SETTINGS)
@given(catalogs())
def test_full_copy_declares_in_dependency_order(c):
    kinds = [element_key(i)[0] for i in catalog_items(c)]
    ranks = [DECLARE_ORDER.index(k) for k in kinds]
    assert ranks == sorted(ranks)
