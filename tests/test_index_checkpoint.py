"""A checked index saved beside its catalog (catalog/index_checkpoint.py) is what the whole check makes.

A Head that starts decodes the index saved for the catalog version it read
instead of checking the catalog whole; these tests hold the decoded index to
the whole check (``CatalogIndex.build``, the oracle) over random catalogs,
check that a stale or corrupt one is refused and the catalog checked whole
(and the log says so), and start a Head twice on one store.
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter

import pytest
from boreas.catalog import read_document
from boreas.catalog.boxtypes import BoxTypeRegistry, builtin_registry
from boreas.catalog.index import CatalogIndex
from boreas.catalog.index_checkpoint import KEY, load_index, save_index
from boreas.catalog.index_codec import StaleIndex, decode_index, encode_index
from boreas.catalog.store import open_store
from boreas.head.index_saver import IndexSaver
from boreas.head.service import HeadService
from support.catalog_edits import EDITS, Edit, chain
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

FACTS = ("refs", "states", "typings", "stream_schemas", "problems")


def facts(index: CatalogIndex) -> tuple:
    return tuple(getattr(index, name) for name in FACTS)


@pytest.mark.slow
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(EDITS, min_size=1, max_size=12), st.lists(EDITS, min_size=1, max_size=4))
def test_a_decoded_index_equals_the_whole_check(edits: list[Edit], then: list[Edit]) -> None:
    """Every catalog a sequence of edits reaches (valid or not), its index saved and decoded: the same facts as
    checking it whole, and the next change checked against it gives the same diagnostics."""
    index = CatalogIndex.build(chain())
    for version, edit in enumerate(edits, start=1):
        after = index.catalog.copy()
        edit(after)
        after.version = version
        derived = index.derive(after)
        whole = CatalogIndex.build(after)
        decoded = decode_index(encode_index(derived), after, derived.registry)
        assert Counter(map(str, decoded.problems)) == Counter(map(str, whole.problems))
        if whole.ok:
            assert facts(decoded)[:4] == facts(whole)[:4]
            assert facts(decode_index(encode_index(whole), after, whole.registry)) == facts(whole)
            index = derived
    nxt = index.catalog.copy()
    for edit in then:
        edit(nxt)
    decoded = decode_index(encode_index(index), index.catalog, index.registry)
    assert Counter(map(str, decoded.derive(nxt).problems)) == Counter(map(str, CatalogIndex.build(nxt).problems))


def test_a_chain_round_trips_every_fact() -> None:
    catalog = chain()
    index = CatalogIndex.build(catalog)
    decoded = decode_index(encode_index(index), catalog, index.registry)
    assert facts(decoded) == facts(index)
    assert all(decoded.typings[name].box is catalog.boxes[name] for name in catalog.boxes)  # the catalog's own


def test_a_stale_or_corrupt_index_is_refused_and_the_catalog_checked_whole(caplog) -> None:
    caplog.set_level(logging.INFO, logger="boreas.catalog.index_checkpoint")
    catalog = chain()
    catalog.version = 7
    with open_store("memory://") as store:
        index, decoded = load_index(store, catalog)
        assert not decoded and "no saved catalog index" in caplog.text
        save_index(store, index)
        assert load_index(store, catalog)[1]
        newer = catalog.copy()
        newer.version = 8
        caplog.clear()
        again, decoded = load_index(store, newer)
        assert not decoded and "saved for catalog version 7, not 8" in caplog.text
        assert facts(again) == facts(CatalogIndex.build(newer))
        renamed = catalog.copy()
        renamed.boxes["b9"] = renamed.boxes.pop("b2")
        with pytest.raises(StaleIndex, match="other elements or box types"):
            decode_index(store.get_blob(KEY), renamed, index.registry)
        data = bytearray(store.get_blob(KEY))
        data[-3] ^= 0xFF
        store.put_blob(KEY, bytes(data))
        caplog.clear()
        assert not load_index(store, catalog)[1]
        assert "the blob is corrupt" in caplog.text
        store.put_blob(KEY, b"not an index")
        assert not load_index(store, catalog)[1]


def test_another_box_type_registry_makes_the_index_stale() -> None:
    catalog = chain()
    data = encode_index(CatalogIndex.build(catalog))
    full = builtin_registry()
    fewer = BoxTypeRegistry(full.get(name) for name in full.names() if name != "union")
    with pytest.raises(StaleIndex, match="other elements or box types"):
        decode_index(data, catalog, fewer)


APP = """<borealis><schema name="R"><field name="a" type="int"/></schema><input stream="in" schema="R"/>
  <box name="f" type="filter"><in stream="in"/><out stream="out"/><parameter name="expression.0" value="a &gt; 1"/>
  </box><output stream="out"/></borealis>"""
DEP = '<deploy><node endpoint="localhost:15001" query="f"/></deploy>'


async def test_a_head_starts_from_the_index_it_saved(tmp_path, caplog) -> None:
    caplog.set_level(logging.INFO, logger="boreas.catalog.index_checkpoint")
    url = f"sqlite:///{tmp_path}/c.db"
    head = HeadService(url, token=None, snapshot_interval=0, nodes=["localhost:15001"])
    await head.start("127.0.0.1", 0)
    try:
        submission = await head.submit([read_document(APP, "app.xml"), read_document(DEP, "dep.xml")])
        await head.caught_up(submission.version)
    finally:
        await head.close()  # saves what it holds
    caplog.clear()
    again = HeadService(url, token=None, snapshot_interval=0, nodes=["localhost:15001"])
    await again.start("127.0.0.1", 0)
    try:
        assert f"catalog index of version {submission.version} decoded" in caplog.text
        assert facts(again.index) == facts(CatalogIndex.build(again.catalog, again.box_types))
        assert set(again.syncs) == {"localhost:15001"}
        assert "f" in again.syncs["localhost:15001"].desired.boxes
    finally:
        await again.close()


async def test_the_saver_saves_after_a_quiet_spell_and_not_twice() -> None:
    catalog = chain()
    catalog.version = 3
    held = [CatalogIndex.build(catalog)]
    with open_store("memory://") as store:
        saver = IndexSaver(lambda: held[0], lambda: store, quiet=0.01, least=0.0)
        task = asyncio.create_task(saver.run())
        try:
            saver.changed()
            for _ in range(500):  # (until the task had its turn: no timing is asserted)
                if store.get_blob(KEY) is not None:
                    break
                await asyncio.sleep(0.01)
            assert decode_index(store.get_blob(KEY), catalog, held[0].registry).catalog is catalog
            assert saver.saved == 3
            assert await saver.flush() == 0.0  # saved already: nothing written again
        finally:
            task.cancel()
