"""Tests for keeping catalog copies current (``replicate``): update items and their application.

Property tests draw pairs of random valid catalogs (``support/catalog_pairs.py``,
built on the topologies of ``support/topologies.py``) and check that

1. ``update_items(a, b)`` applied to ``a`` gives ``b``, directly and through
   update XML, and names exactly the elements that differ;
2. ``catalog_items(c)`` applied to an empty catalog gives ``c``;
3. ``apply_update`` is atomic: items naming absent things are each rejected
   (index, kind, key) and nothing changes.

Node slices and the order of update items are ``test_replicate_slices.py``;
example-based tests on the sensor chain are ``test_replicate_examples.py``.
``BOREAS_PROPERTY_SCALE`` multiplies the example counts as in ``test_properties.py``.
"""

from __future__ import annotations

from typing import Any

import pytest
from boreas.catalog.documents import Delete, Disconnect, Modify, Move, NodeAssignment, Unsubscribe
from boreas.catalog.elements import KIND_TO_DICT, is_element, to_elements
from boreas.catalog.model import Catalog, Node, Schema
from boreas.catalog.replicate import UpdateRejected, apply_update, catalog_items, update_items
from hypothesis import given, settings
from hypothesis import strategies as st
from support.catalog_pairs import DELETE_KIND, catalog_pairs, catalogs, item_key, via_xml
from support.property_scale import SETTINGS, examples


def _differing(a: Catalog, b: Catalog) -> set[tuple[str, str]]:
    out = set()
    for kind, (attr, _) in KIND_TO_DICT.items():
        da, db = getattr(a, attr), getattr(b, attr)
        out |= {(kind, key) for key in da.keys() | db.keys() if da.get(key) != db.get(key)}
    return out


# =============================================================================
# 1-2. update_items / apply_update / catalog_items round trips
# =============================================================================


@settings(max_examples=examples(35), **SETTINGS)
@given(catalog_pairs())
def test_update_items_turn_a_into_b(pair):
    a, b = pair
    items = update_items(a, b)
    assert apply_update(a, items) == b
    # Exactly the elements that differ are named, each once.
    keys = [item_key(i) for i in items]
    assert len(keys) == len(set(keys)), keys
    assert set(keys) == _differing(a, b)


@settings(max_examples=examples(30), **SETTINGS)
@given(catalog_pairs())
def test_update_items_turn_a_into_b_through_update_xml(pair):
    a, b = pair
    items = update_items(a, b)
    read_back = via_xml(items, version=9)
    assert read_back == items
    after = apply_update(a, read_back, version=9)
    assert after == b
    assert after.version == 9


@pytest.mark.slow  # make test-fast: test_update_items_turn_a_into_b checks the items name exactly what differs
@settings(max_examples=examples(20), **SETTINGS)
@given(catalogs())
def test_update_items_of_equal_catalogs_is_empty(c):
    assert update_items(c, c) == []
    assert update_items(c, c.copy()) == []


@settings(max_examples=examples(30), **SETTINGS)
@given(catalogs())
def test_catalog_items_rebuild_the_catalog(c):
    items = catalog_items(c)
    assert all(is_element(i) for i in items), "a full copy only declares"
    assert len(items) == len(to_elements(c))
    assert apply_update(Catalog(), items) == c
    assert apply_update(Catalog(), via_xml(items)) == c


# =============================================================================
# 3. apply_update is atomic
# =============================================================================

_ABSENT = "absent_"  # generated names start with S, s_, b_, t_, q_, v, T, rs_, P, o_, fld_


@st.composite
def bad_items(draw, n: int) -> tuple[Any, tuple[str, str]]:
    """An item naming something no generated catalog holds, and the (kind, key) it is rejected with."""
    name = f"{_ABSENT}{n}"
    which = draw(st.sampled_from(["delete", "delete-node", "delete-global", "modify-box",
                                  "modify-table", "unsubscribe", "unsubscribe-all", "move",
                                  "assign"]))
    if which == "delete":
        attr = draw(st.sampled_from([a for a in DELETE_KIND if a not in ("node", "global_")]))
        return Delete(**{attr: name}), (DELETE_KIND[attr], name)
    if which == "delete-node":
        return Delete(node=f"absent-host:{20000 + n}"), ("node", f"absent-host:{20000 + n}")
    if which == "delete-global":
        return Delete(global_=f"absent-host:{20000 + n}"), ("global", f"absent-host:{20000 + n}")
    if which == "modify-box":
        return Modify((("p", "1"),), box=name), ("box", name)
    if which == "modify-table":
        return Modify((("p", "1"),), table=name), ("table", name)
    if which == "unsubscribe":
        return Unsubscribe(name, "localhost:25000"), ("subscribe", f"{name}|localhost:25000")
    if which == "unsubscribe-all":
        return Unsubscribe(name), ("subscribe", f"{name}|")
    if which == "move":
        return Move("localhost:15000", box=name), ("box", name)
    return NodeAssignment("localhost:15000", (name,)), ("box", name)


@settings(max_examples=examples(30), **SETTINGS)
@given(catalog_pairs(), st.data())
def test_apply_update_is_atomic_and_lists_every_bad_item(pair, data):
    a, b = pair
    a.version = 3
    before = to_elements(a)
    # (item, the (kind, key) it must be rejected with, or None)
    tagged: list[tuple[Any, tuple[str, str] | None]] = [(i, None) for i in update_items(a, b)]
    places = data.draw(st.lists(st.integers(0, len(tagged)), min_size=1, max_size=4))
    for n, at in enumerate(sorted(places, reverse=True)):  # from the back: earlier places hold
        tagged.insert(at, data.draw(bad_items(n)))
    # Deleting twice what the update leaves in place fails the second time.
    present = [(kind, key) for kind, (attr, _) in KIND_TO_DICT.items() if kind != "subscribe"
               for key in getattr(b, attr)]
    if present and data.draw(st.booleans()):
        kind, key = data.draw(st.sampled_from(sorted(present)))
        attr = {v: k for k, v in DELETE_KIND.items()}[kind]
        tagged += [(Delete(**{attr: key}), None), (Delete(**{attr: key}), (kind, key))]
    items = [item for item, _ in tagged]
    expected = [(index, *why) for index, (_, why) in enumerate(tagged) if why is not None]
    with pytest.raises(UpdateRejected) as info:
        apply_update(a, items, version=4)
    got = [(r.index, r.kind, r.key) for r in info.value.rejections]
    assert got == expected
    assert all(r.reason for r in info.value.rejections)
    for index, _, _ in expected:
        assert f"item {index}:" in str(info.value)
    # Nothing changed.
    assert to_elements(a) == before
    assert a.version == 3
    # The same items through update XML are refused the same way.
    with pytest.raises(UpdateRejected) as again:
        apply_update(a, via_xml(items))
    assert [(r.index, r.kind, r.key) for r in again.value.rejections] == expected
    assert to_elements(a) == before


@pytest.mark.slow  # make test-fast: test_apply_update_is_atomic_... checks a refused update's input
@settings(max_examples=examples(20), **SETTINGS)
@given(catalog_pairs())
def test_successful_apply_does_not_touch_its_input(pair):
    a, b = pair
    before = to_elements(a)
    after = apply_update(a, update_items(a, b))
    assert to_elements(a) == before
    after.boxes.clear()
    after.schemas["added_later"] = Schema("added_later", ())
    assert to_elements(a) == before


def test_rejections_in_order_with_kind_and_key():
    c = Catalog(nodes={"localhost:15000": Node("localhost:15000")})
    items = [Delete(box="gone"), Node("localhost:15001"), Modify((("x", "1"),), table="t"),
             Delete(node="localhost:15000"), Delete(node="localhost:15000"),
             Unsubscribe("S", "localhost:25000"), Delete(stream="nowhere"), Disconnect(stream="s")]
    with pytest.raises(UpdateRejected) as info:
        apply_update(c, items)
    assert [(r.index, r.kind, r.key) for r in info.value.rejections] == [
        (0, "box", "gone"), (2, "table", "t"), (4, "node", "localhost:15000"),
        (5, "subscribe", "S|localhost:25000"), (6, "stream", "nowhere"), (7, "disconnect", "s")]
    assert info.value.rejections[0].as_dict() == {
        "index": 0, "kind": "box", "key": "gone", "reason": "box 'gone' is not here"}
    assert list(c.nodes) == ["localhost:15000"]
