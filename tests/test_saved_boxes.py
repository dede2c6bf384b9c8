"""A start's catalog with its boxes from the blob saved beside the index (catalog/saved_boxes.py) is the stored one.

The oracle is reading every element's XML text (``read_catalog``); these
tests hold the start's read to it, count that no saved box's text is
decoded, and check that a blob of another version, other boxes, or a
corrupt one is ignored (every box decoded from its text, logged).
"""

from __future__ import annotations

import logging
from dataclasses import replace

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from lxml import etree
from boreas.catalog import elements
from boreas.catalog.diagnostics import CATALOG
from boreas.catalog.elements import diff
from boreas.catalog.index import CatalogIndex
from boreas.catalog.index_checkpoint import save_index
from boreas.catalog.model import Box, Catalog, InPort
from boreas.catalog.saved_boxes import KEY, StaleBoxes, decode_boxes, encode_boxes, read_catalog_at_start
from boreas.catalog.store import open_store
from boreas.catalog.submission import read_catalog
from boreas.head.service import HeadService
from boreas.catalog.xmlcodec import to_text
from support.catalog_edits import EDITS, Edit, chain


def catalog() -> Catalog:
    """chain()'s catalog and boxes with every field a saved box carries: a view and queue attributes on a
    port, table access, queue attributes on the box, no node, an application."""
    cat = chain()
    cat.boxes["b1"] = replace(cat.boxes["b1"], app="shop")
    cat.boxes["q"] = Box("q", "filter", (InPort("s1", "w1", (("queue_type", "fifo"), ("key", "a"))),), ("sq",),
                         (("expression.0", "a > 1"), ("pass-on-false-port", "1")), ("t",), None,
                         (("update_queue", "1"),), app="shop")
    return cat


def stored(store, cat: Catalog, registry=None) -> Catalog:
    """``cat`` committed to ``store``; the catalog as the store gives it back, with its index saved."""
    store.commit(store.version(), diff(Catalog(), cat))
    read = read_catalog(store)
    save_index(store, CatalogIndex.build(read, registry))
    return read


@pytest.fixture
def store(tmp_path):
    with open_store(f"sqlite:///{tmp_path}/c.db") as opened:
        yield opened


def test_the_start_reads_the_saved_boxes_and_decodes_no_box_text(store, monkeypatch) -> None:
    expected = stored(store, catalog())
    decoded = []
    real = elements.decode
    monkeypatch.setattr(elements, "decode", lambda el: decoded.append(el.tag) or real(el))
    got, saved = read_catalog_at_start(store)
    assert saved == len(expected.boxes) == 4
    assert "box" not in decoded and len(decoded) == sum(len(getattr(expected, k)) for k in ("schemas", "inputs",
                                                                                            "outputs", "views",
                                                                                            "nodes", "subscriptions"))
    assert got == expected and got.version == expected.version
    assert list(got.boxes) == list(expected.boxes)  # (the same order: a follower's dicts keep it)
    for name, box in got.boxes.items():
        assert box.app == expected.boxes[name].app and box.origin is CATALOG
        assert type(box.inputs) is tuple and all(type(p) is InPort for p in box.inputs)


def test_a_blob_of_another_version_is_ignored_and_every_box_decoded(store, caplog) -> None:
    stored(store, catalog())
    moved = read_catalog(store)
    moved.boxes["b0"] = replace(moved.boxes["b0"], node="n2")
    store.commit(store.version(), diff(read_catalog(store), moved))  # (the blob is the version before)
    caplog.set_level(logging.INFO, logger="boreas.catalog.saved_boxes")
    got, saved = read_catalog_at_start(store)
    assert saved == 0 and "saved for catalog version 1, not 2" in caplog.text
    assert got == read_catalog(store) and got.boxes["b0"].node == "n2"


def test_a_corrupt_or_foreign_blob_is_refused() -> None:
    cat = catalog()
    cat.version = 5
    data = encode_boxes(cat)
    assert decode_boxes(data, 5, set(cat.boxes)) == cat.boxes
    with pytest.raises(StaleBoxes, match="other boxes"):
        decode_boxes(data, 5, set(cat.boxes) - {"q"} | {"other"})
    with pytest.raises(StaleBoxes, match="4 boxes saved, the catalog has 3"):
        decode_boxes(data, 5, set(cat.boxes) - {"q"})
    with pytest.raises(StaleBoxes, match="checksum"):
        decode_boxes(data[:-3] + b"xyz", 5, set(cat.boxes))
    with pytest.raises(StaleBoxes, match="no header"):
        decode_boxes(b"not a blob at all", 5, set(cat.boxes))


def test_a_corrupt_blob_in_the_store_is_ignored(store) -> None:
    expected = stored(store, catalog())
    store.put_blob(KEY, b"BXBOX garbage")
    assert read_catalog_at_start(store) == (expected, 0)


async def test_a_head_started_from_an_index_saved_without_boxes_saves_them(tmp_path, caplog) -> None:
    """A store whose index was saved before the boxes were (or whose boxes blob was lost): the Head started
    from that index saves again on close, so the next start reads its boxes in bulk; one with both does not."""
    caplog.set_level(logging.INFO, logger="boreas.catalog.index_checkpoint")
    url = f"sqlite:///{tmp_path}/c.db"
    with open_store(url) as store:
        expected = stored(store, catalog(), HeadService(url, token=None).box_types)  # (decoded by the Head)
        store.put_blob(KEY, b"")  # (an empty blob: none, as before catalog/saved_boxes.py)
    for saved_before, saved_after in ((0, 4), (4, 4)):
        head = HeadService(url, token=None, snapshot_interval=0)
        await head.start("127.0.0.1", 0)
        try:
            assert head.commits.saved_boxes == saved_before and head.catalog == expected
            assert "catalog index of version 1 decoded" in caplog.text
            assert head.index_saver.saved == (expected.version if saved_before else None)
        finally:
            await head.close()
        with open_store(url) as store:
            assert read_catalog_at_start(store)[1] == saved_after


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(EDITS, min_size=1, max_size=8))
def test_saved_boxes_are_what_their_stored_text_decodes_to(edits: list[Edit]) -> None:
    """Over random catalogs (every kind of edit a submission, deployment, move or connect makes): each box
    saved and decoded equals the box its catalog-form XML text decodes to, application included."""
    cat = catalog()
    for edit in edits:
        edit(cat)
    by_text = {name: elements.decode(etree.fromstring(to_text(box))) for name, box in cat.boxes.items()}
    saved = decode_boxes(encode_boxes(cat), cat.version, set(cat.boxes))
    assert saved == by_text
    assert {name: box.app for name, box in saved.items()} == {name: box.app for name, box in by_text.items()}


def test_a_saved_box_carries_every_field_of_a_box_but_its_origin() -> None:
    """``_row`` names Box's fields by hand: a field added to Box and not saved would be reset to its default by
    every start from a blob.  (If this fails, save the new field and raise the blob's FORMAT.)"""
    import dataclasses

    assert {f.name for f in dataclasses.fields(Box)} - {"origin"} == {
        "name", "type", "inputs", "outputs", "params", "access", "node", "attrs", "app"}
