"""Example-based replication tests: the sensor chain over localhost:15000-15002.

``examples/xml/sensor_chain*.xml`` (three nodes) pins concrete behaviour of
slices, full copies, modifies, moves and removal order that the properties of
``test_replicate.py`` and ``test_replicate_slices.py`` state in general.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from boreas.catalog import plan_submission, read_file
from boreas.catalog.documents import Delete, Modify, Unsubscribe, read_document
from boreas.catalog.model import Catalog
from boreas.catalog.replicate import UpdateRejected, apply_update, catalog_items, update_items
from boreas.catalog.slices import node_slice, node_slices
from boreas.catalog.updates import update_document
from support.catalog_pairs import item_key, via_xml

ROOT = Path(__file__).parents[1]
EXAMPLES = ROOT / "examples" / "xml"
N0, N1, N2 = "localhost:15000", "localhost:15001", "localhost:15002"  # the examples' nodes


# =============================================================================
# Examples: the sensor chain over localhost:15000-15002
# =============================================================================


@pytest.fixture(scope="module")
def chain() -> Catalog:
    docs = [read_file(EXAMPLES / "sensor_chain.xml"), read_file(EXAMPLES / "sensor_chain_deploy.xml"),
            read_file(EXAMPLES / "sensor_chain_region_deploy.xml")]
    plan = plan_submission(Catalog(), docs)
    assert plan.ok
    return plan.catalog


def test_sensor_chain_slices(chain):
    slices = node_slices(chain)
    assert sorted(slices) == [N0, N1, N2]
    got = {n: (sorted(p.boxes), sorted(p.inputs), sorted(p.outputs), sorted(p.queries),
               sorted(p.publications), sorted(p.subscriptions), sorted(p.clients), sorted(p.regions))
           for n, p in slices.items()}
    assert got == {
        N0: (["valid"], ["Reading"], ["Valid"], ["cleanup"],
             [f"Reading|{N0}"], [f"Valid|{N1}"], [], [f"localhost:30000|{N0}"]),
        N1: (["to_fahrenheit"], ["Valid"], ["Converted"], ["convert"],
             [f"Valid|{N1}"], [f"Converted|{N2}"], [], [f"localhost:30000|{N1}"]),
        N2: (["per_sensor"], ["Converted"], ["Average"], ["summarise"],
             [f"Converted|{N2}"], [], [], []),
    }
    # Publishers send Reading into the first node; nodes forward to each other.
    assert slices[N0].publications[f"Reading|{N0}"].client is None
    assert slices[N1].publications[f"Valid|{N1}"].client == N0
    assert slices[N2].publications[f"Converted|{N2}"].client == N1
    assert sorted(slices[N0].schemas) == ["ReadingTuple"]
    assert "AverageTuple" in slices[N2].schemas and "ReadingTuple" not in slices[N2].schemas
    assert sorted(slices[N1].nodes) == [N0, N1, N2]  # its neighbours, by endpoint


def test_sensor_chain_full_copy_through_xml(chain):
    text = update_document(catalog_items(chain), version=1, origin="head")
    assert text.index("<schema ") < text.index("<input ") < text.index("<box ") < text.index("<query ")
    assert apply_update(Catalog(), read_document(text).items) == chain
    assert update_items(chain, chain) == []


def test_sensor_chain_parameter_change_is_a_modify(chain):
    new = chain.copy()
    box = new.boxes["per_sensor"]
    new.boxes["per_sensor"] = replace(box, params=tuple(
        (k, "120" if k == "window-size" else v) for k, v in box.params))
    assert update_items(chain, new) == [Modify((("window-size", "120"),), box="per_sensor")]
    # The node's slice changes the same way, and nothing else does.
    before, after = node_slices(chain), node_slices(new)
    assert update_items(before[N2], after[N2]) == [Modify((("window-size", "120"),), box="per_sensor")]
    assert update_items(before[N0], after[N0]) == update_items(before[N1], after[N1]) == []
    text = update_document(update_items(chain, new))
    assert '<modify box="per_sensor"><parameter name="window-size" value="120"/></modify>' in text
    assert apply_update(chain, read_document(text).items) == new


def test_sensor_chain_dropped_parameter_is_a_redeclaration(chain):
    new = chain.copy()
    box = new.boxes["per_sensor"]
    new.boxes["per_sensor"] = replace(box, params=tuple(p for p in box.params if p[0] != "group-by"))
    assert update_items(chain, new) == [new.boxes["per_sensor"]]  # <modify> cannot drop one
    assert apply_update(chain, update_items(chain, new)) == new


def test_sensor_chain_move_changes_three_slices(chain):
    """to_fahrenheit moves from 15001 to 15002: 15001 is left empty, 15002 takes over."""
    new = chain.copy()
    new.boxes["to_fahrenheit"] = replace(chain.boxes["to_fahrenheit"], node=N2)
    before, after = node_slices(chain), node_slices(new)
    assert after[N1].boxes == {} and sorted(after[N2].boxes) == ["per_sensor", "to_fahrenheit"]
    assert after[N0].subscriptions.keys() == {f"Valid|{N2}"}
    assert after[N2].publications[f"Valid|{N2}"].client == N0
    removed = [i for i in update_items(before[N1], after[N1]) if isinstance(i, (Delete, Unsubscribe))]
    assert Delete(box="to_fahrenheit") in removed
    assert Unsubscribe("Converted", N2) in removed
    for node in (N0, N1, N2):
        items = update_items(before[node], after[node])
        assert apply_update(before[node], via_xml(items)) == after[node]


def test_sensor_chain_update_to_a_moved_box_is_rejected(chain):
    """Paper 3.1.2: a node refuses an update for a box it no longer holds."""
    local = node_slice(chain, N1)
    with pytest.raises(UpdateRejected) as info:
        apply_update(local, [Modify((("window-size", "10"),), box="per_sensor"),
                             Delete(box="to_fahrenheit")])
    assert [(r.index, r.kind, r.key) for r in info.value.rejections] == [(0, "box", "per_sensor")]
    assert "to_fahrenheit" in local.boxes


def test_sensor_chain_removal_order(chain):
    subscriber = read_document('<deploy><subscribe stream="Average" endpoint=":25000"/></deploy>', "sub.xml")
    plan = plan_submission(chain, [subscriber])  # the examples name no subscriber: one listening here
    assert plan.ok, plan.problems
    chain = plan.catalog
    items = update_items(chain, Catalog())
    assert apply_update(chain, items) == Catalog()
    kinds = [item_key(i)[0] for i in items]
    assert kinds[0] == "subscribe" and isinstance(items[0], Unsubscribe)
    assert kinds.index("query") < kinds.index("box") < kinds.index("output") < kinds.index("schema")
    assert kinds.index("schema") < kinds.index("node")
