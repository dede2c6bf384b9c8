"""A restarted Head knows what the Head before it knew, on each store (issue 37: a restart in seconds).

A Head's start reads the catalog (on ZooKeeper: a whole copy in a few
znodes and the log since, catalog/store/zk_snapshot.py), decodes the index
its predecessor saved (catalog/index_checkpoint.py) and slices every node.
The oracle is the Head that ran before: after a restart the catalog, every
fact of its index and every node's slice are the same, and the index is the
one the whole check makes.  On ZooKeeper the copy thresholds are lowered so
that this small catalog is read from a copy plus a log tail, as a large one is.
"""

from __future__ import annotations

import logging
import uuid

import pytest
from boreas.catalog import read_document
from boreas.catalog.index import CatalogIndex
from boreas.catalog.store.zk_snapshot import CopyDue, WholeCopies
from boreas.head.service import HeadService

FACTS = ("refs", "states", "typings", "stream_schemas", "problems")
NODES = [f"localhost:1500{n}" for n in range(3)]


def facts(index: CatalogIndex) -> tuple:
    return tuple(getattr(index, name) for name in FACTS)


def part(first: int, last: int) -> list:
    """Boxes ``first``..``last - 1`` of chains over :data:`NODES` (the first part declares the inputs)."""
    app = ['<borealis>']
    if first == 0:
        app.append('<schema name="R"><field name="a" type="int"/><field name="v" type="double"/></schema>')
        app += [f'<input stream="in{c}" schema="R"/>' for c in range(len(NODES))]
    placed: dict[str, list[str]] = {node: [] for node in NODES}
    for i in range(first, last):
        c = i % len(NODES)
        upstream = f"in{c}" if i < len(NODES) else f"b{i - len(NODES)}_t"
        app.append(f'<box name="b{i}" type="filter"><in stream="{upstream}"/><out stream="b{i}_t"/>'
                   f'<parameter name="expression.0" value="v &gt; {i}.5"/></box>')
        placed[NODES[c]].append(f"b{i}")
    app.append(f'<output stream="b{last - 1}_t"/></borealis>')
    dep = "<deploy>" + "".join(f'<node endpoint="{n}" query="{" ".join(b)}"/>' for n, b in placed.items() if b)
    return [read_document("".join(app), "app.xml"), read_document(dep + "</deploy>", "dep.xml")]


@pytest.fixture(params=["sqlite", pytest.param("zookeeper", marks=pytest.mark.zookeeper)])
def store_url(request: pytest.FixtureRequest, tmp_path, monkeypatch) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path}/c.db"
    server = request.getfixturevalue("zookeeper_server")
    monkeypatch.setattr(CopyDue, "due", lambda self: self.changes >= 20)  # a copy every 20 element changes
    return f"zk://{server}/restart-{uuid.uuid4().hex[:8]}"


@pytest.fixture
def copies_read(monkeypatch) -> list[bool]:
    """Each whole-copy read by a ZooKeeper store from now on: whether it found a copy."""
    found: list[bool] = []
    read = WholeCopies.read

    def recorded(self: WholeCopies):
        copy = read(self)
        found.append(copy is not None)
        return copy

    monkeypatch.setattr(WholeCopies, "read", recorded)
    return found


async def test_a_restarted_head_holds_the_same_catalog_index_and_slices(store_url, copies_read, caplog) -> None:
    caplog.set_level(logging.INFO, logger="boreas")
    head = HeadService(store_url, token=None, snapshot_interval=0, nodes=NODES)
    await head.start("127.0.0.1", 0)
    try:
        for first, last in ((0, 30), (30, 45)):
            submission = await head.submit(part(first, last))
            await head.caught_up(submission.version)
        catalog, known = head.catalog, facts(head.index)
        slices = {endpoint: sync.desired for endpoint, sync in head.syncs.items()}
    finally:
        await head.close()  # saves its index
    assert len(catalog.boxes) == 45 and set(slices) == set(NODES)
    caplog.clear()
    copies_read.clear()
    again = HeadService(store_url, token=None, snapshot_interval=0, nodes=NODES)
    await again.start("127.0.0.1", 0)
    try:
        assert f"catalog index of version {catalog.version} decoded" in caplog.text
        if store_url.startswith("zk://"):  # read from a copy and the log since, not element by element
            assert copies_read == [True]
        assert again.commits.saved_boxes == 45  # its boxes from the blob saved with the index, not their XML
        assert again.catalog == catalog
        assert all(again.catalog.boxes[name].app == box.app for name, box in catalog.boxes.items())
        assert facts(again.index) == known == facts(CatalogIndex.build(again.catalog, again.box_types))
        assert {endpoint: sync.desired for endpoint, sync in again.syncs.items()} == slices
    finally:
        await again.close()


@pytest.mark.zookeeper
def test_a_catalog_laid_out_again_does_not_start_from_the_old_ones_saved_boxes(zookeeper_server) -> None:
    """The saved index and boxes live in the catalog's own subtree: a catalog removed and laid out again under
    the same chroot counts its versions from 0 again, and its version 1 must be read from its own texts, not
    from the blob the old catalog saved at its version 1 (same box names, other content)."""
    from dataclasses import replace

    from boreas.catalog.elements import diff
    from boreas.catalog.index_checkpoint import save_index
    from boreas.catalog.model import Catalog
    from boreas.catalog.saved_boxes import read_catalog_at_start
    from boreas.catalog.store import open_store
    from boreas.catalog.submission import read_catalog
    from kazoo.client import KazooClient
    from support.catalog_edits import chain

    url = f"zk://{zookeeper_server}/again-{uuid.uuid4().hex[:8]}"
    old = chain()
    new = replace(old, boxes={**old.boxes, "b1": replace(old.boxes["b1"], params=(("expression.0", "a > 99"),))})
    with open_store(url) as store:
        store.commit(store.version(), diff(Catalog(), old))
        save_index(store, CatalogIndex.build(read_catalog(store)))
    client = KazooClient(hosts=zookeeper_server)
    client.start()
    try:
        client.delete("/" + url.rsplit("/", 1)[1] + "/catalog", recursive=True)
    finally:
        client.stop()
    with open_store(url) as store:
        store.commit(store.version(), diff(Catalog(), new))
        read, taken = read_catalog_at_start(store)
    assert taken == 0 and read.boxes["b1"].params == (("expression.0", "a > 99"),)
