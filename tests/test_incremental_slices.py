"""Incremental slicing (catalog/slice_index.py) gives exactly what slicing the whole catalog gives.

After each committed random edit (tests/support/catalog_edits.py), the
nodes :class:`NodeSlices` reports changed must be exactly the nodes whose
slice changed when every node is sliced from scratch
(``node_slices``, the oracle), each with the same slice, so the same
update XML goes to the same nodes; and no other node is sent anything.
"""

from __future__ import annotations

import pytest
from boreas.catalog import Catalog
from boreas.catalog.index import CatalogIndex
from boreas.catalog.replicate import update_items
from boreas.catalog.slice_index import NodeSlices
from boreas.catalog.slices import node_slices
from boreas.catalog.updates import update_document
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.catalog_edits import BOX_EDITS, DEPLOY_EDITS, EDITS, Edit, chain


def _xml(old: Catalog | None, new: Catalog | None) -> str:
    """The update XML a node is sent to go from one slice to the other."""
    return update_document(update_items(old or Catalog(), new or Catalog()), version=1)


@pytest.mark.slow
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.booleans(), st.lists(EDITS, min_size=1, max_size=14))
def test_the_nodes_updated_and_their_update_xml_equal_full_slicing(from_chain: bool, edits: list[Edit]) -> None:
    _compare(from_chain, edits)


@pytest.mark.slow
@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.booleans(), st.lists(st.one_of(BOX_EDITS, DEPLOY_EDITS), min_size=1, max_size=14))
def test_slices_patched_after_placements_equal_full_slicing(from_chain: bool, edits: list[Edit]) -> None:
    """Boxes, moves, connects, publishes and subscribes: the changes whose slices are patched
    (``patch_slice``: only the streams they touch sliced again), not built whole."""
    _compare(from_chain, edits)


def _compare(from_chain: bool, edits: list[Edit]) -> None:
    index = CatalogIndex.build(chain() if from_chain else Catalog())
    slices = NodeSlices()
    slices.advance(index)
    full = node_slices(index.catalog)
    assert slices.slices == full
    for edit in edits:
        after = index.catalog.copy()
        edit(after)
        derived = index.derive(after)
        if not derived.ok:
            continue  # refused: nothing committed, nothing sent
        held = dict(slices.slices)
        changed = slices.advance(derived)
        full_after = node_slices(after)
        expected = {n for n in set(full) | set(full_after) if full.get(n) != full_after.get(n)}
        assert set(changed) == expected
        for node in expected:
            assert changed[node] == full_after.get(node)
            assert _xml(held.get(node), changed[node]) == _xml(full.get(node), full_after.get(node))
        assert slices.slices == full_after
        index, full = derived, full_after
