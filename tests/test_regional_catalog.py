"""The regional catalog (paper 3.1.1): the four move cases, in every arrival order."""

from __future__ import annotations

import itertools

import pytest
from boreas.catalog import plan_submission
from boreas.catalog.documents import Delete, Move, read_document
from boreas.catalog.model import Box, Catalog, InPort, Region, Schema
from boreas.catalog.model import Field as F
from boreas.catalog.model import FieldType as T
from boreas.regional.catalog import RegionalCatalog

A, B, OUTSIDE = "localhost:15000", "localhost:15001", "localhost:15999"
SCHEMA = Schema("PacketTuple", (F("value", T.DOUBLE), F("time", T.INT)))


def box(name: str, stream_in: str = "Packet", stream_out: str = "Result") -> Box:
    return Box(name, "filter", (InPort(stream_in),), (stream_out,), (("expression.0", "true"),))


def region_of(*members: str) -> RegionalCatalog:
    region = RegionalCatalog("default")
    for node in members:
        region.reflect(node, [SCHEMA, Region("default", node, "localhost:16000", "default")], copy=True)
    return region


# Each reflection is (node, items).  A move sends the move element from the source and the
# box's declaration from the target; the region gets them in either order.
def move_messages(name: str, source: str, target: str) -> list[tuple[str, list]]:
    return [(source, [Move(target, box=name)]), (target, [SCHEMA, box(name)])]


@pytest.mark.parametrize("order", [0, 1], ids=["move-first", "declaration-first"])
def test_a_box_moved_within_the_region_ends_on_the_target(order):
    region = region_of(A, B)
    region.reflect(A, [box("b1")])
    messages = move_messages("b1", A, B)
    for node, items in (messages if order == 0 else messages[::-1]):
        region.reflect(node, items)
    assert region.location("b1") == B
    assert list(region.boxes) == ["b1"]


def test_a_box_moved_into_the_region_is_added_from_the_targets_declaration():
    region = region_of(B)  # the source is outside: only the target reflects here
    region.reflect(B, [SCHEMA, box("b1")])
    assert region.location("b1") == B


def test_a_box_moved_out_of_the_region_is_deleted_but_its_schemas_stay():
    region = region_of(A)
    region.reflect(A, [box("b1")])
    region.reflect(A, [Move(OUTSIDE, box="b1")])
    assert region.location("b1") is None
    assert "PacketTuple" in region.schemas


def test_a_late_delete_from_the_source_does_not_remove_the_moved_box():
    region = region_of(A, B)
    region.reflect(A, [box("b1")])
    region.reflect(A, [Move(B, box="b1")])
    region.reflect(B, [box("b1")])
    region.reflect(A, [Delete(box="b1")])  # the source's catalog catching up
    assert region.location("b1") == B


def test_concurrent_moves_of_different_boxes_in_any_interleaving():
    boxes = {"b1": (A, B), "b2": (B, A), "b3": (A, OUTSIDE)}
    messages = [m for name, (src, dst) in boxes.items() for m in move_messages(name, src, dst)
                if m[0] != OUTSIDE]
    for order in itertools.permutations(messages):
        region = region_of(A, B)
        region.reflect(A, [box("b1"), box("b3", "Other", "Third")])
        region.reflect(B, [box("b2", "Result", "Again")])
        for node, items in order:
            region.reflect(node, items)
        assert {n: region.location(n) for n in boxes} == {"b1": B, "b2": A, "b3": None}, order


def test_a_full_copy_replaces_what_the_region_had_from_that_node():
    region = region_of(A)
    region.reflect(A, [box("b1"), box("b2", "Result", "Again")])
    region.reflect(A, [SCHEMA, box("b2", "Result", "Again")], copy=True)
    assert sorted(region.boxes) == ["b2"]


def test_the_regional_catalog_dumps_as_application_xml_that_reads_back():
    region = region_of(A, B)
    region.reflect(A, [box("b1", "Packet", "Mid")])
    region.reflect(B, [box("b2", "Mid", "Result")])
    from boreas.catalog.model import Input, Output
    region.reflect(A, [Input("Packet", "PacketTuple", A)])
    region.reflect(B, [Output("Result", "PacketTuple", B)])
    app = read_document(region.application_xml().encode(), "regional dump")
    dep = read_document(region.deployment_xml().encode(), "regional deployment")
    catalog = plan_submission(Catalog(), [app, dep]).catalog  # valid: it could be submitted as is
    assert {name: b.node for name, b in catalog.boxes.items()} == {"b1": A, "b2": B}
    assert sorted(catalog.inputs) == ["Packet"] and sorted(catalog.outputs) == ["Result"]
