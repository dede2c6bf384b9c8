"""``<partition>`` in update XML, in the Head's ``/boxes`` answer and in every store (issue 13, docs/cumulus.md §2.3, §2.6)."""

from __future__ import annotations

import uuid

import aiohttp
import pytest
from boreas.catalog import Catalog, ValidationFailed, apply_submission, open_store, read_document
from boreas.catalog.document_model import Delete
from boreas.catalog.replicate import apply_update, catalog_items, update_items
from boreas.catalog.updates import describe_item, update_document
from boreas.m3.boxtype import box_types
from support.partition_docs import NODES, PARTITION, app, committed, deploy


def test_update_items_declare_a_partition_after_its_box_and_nodes_and_delete_it_before_the_box():
    _, catalog = committed(app(), deploy(PARTITION))
    items = catalog_items(catalog)
    kinds = [type(i).__name__ for i in items]
    assert kinds.index("Partition") > max(i for i, k in enumerate(kinds) if k in ("Box", "Node"))
    read_back = read_document(update_document(items, version=5), "u.xml").items
    assert read_back == items and apply_update(Catalog(), read_back) == catalog
    empty = Catalog(nodes=dict(catalog.nodes))
    removal = update_items(catalog, empty)
    deletes = [(i.partition, i.box) for i in removal if isinstance(i, Delete)]
    assert deletes.index(("v", None)) < deletes.index((None, "v"))
    assert apply_update(catalog, removal) == empty


def test_delete_partition_in_update_xml():
    _, catalog = committed(app(), deploy(PARTITION))
    (item,) = read_document('<update><delete partition="v"/></update>', "u.xml").items
    assert item == Delete(partition="v") and describe_item(item) == "- partition v"
    assert "v" not in apply_update(catalog, [item]).partitions
    assert describe_item(catalog.partitions["v"]) == "+ partition v (3 members, 8 segments)"


# -- the Head -----------------------------------------------------------------------------


async def test_the_head_answers_a_partitioned_boxs_layout():
    from boreas.head.service import HeadService
    from boreas.m3.cumulus import Layout

    head = HeadService("memory://", token=None, snapshot_interval=0, nodes=NODES)
    await head.start("127.0.0.1", 0)
    try:
        docs = [read_document(app(), "app.xml"), read_document(deploy(PARTITION), "dep.xml")]
        submission = await head.submit(docs)
        await head.caught_up(submission.version)
        async with aiohttp.ClientSession() as session:
            async with session.get(f"http://{head.server.endpoint}/boxes/v") as resp:
                assert resp.status == 200
                answer = await resp.json()
            async with session.get(f"http://{head.server.endpoint}/boxes/f") as resp:
                plain = await resp.json()
    finally:
        await head.close()
    part = answer["partition"]
    assert answer["node"] is None and answer["type"] == "m3"
    assert list(part)[:6] == ["box", "members", "segments", "maps", "layout", "first_epoch"]
    assert part["members"] == list(NODES) and part["maps"] == {"Q1_total": 0, "Q1_n": 0}
    assert part["segments"][:2] == [[0, 0, 512, 0], [1, 512, 1024, 1]] and len(part["segments"]) == 8
    assert (part["layout"], part["first_epoch"], part["epoch_ms"], part["key"]) == (1, 0, 100, "a")
    assert len(part["id"]) == 12
    layout = Layout.from_dict(part)
    assert layout.owner_of_slot(600) == 1 and layout.column("Q1_n") == 0
    assert plain["node"] == "localhost:15001" and plain["partition"] is None


async def test_the_head_refuses_members_it_does_not_know():
    from boreas.head.service import HeadService

    head = HeadService("memory://", token=None, snapshot_interval=0, nodes=NODES[:1])
    await head.start("127.0.0.1", 0)
    try:
        docs = [read_document(app(), "app.xml"), read_document(deploy(PARTITION), "dep.xml")]
        with pytest.raises(ValidationFailed) as info:
            await head.submit(docs)
    finally:
        await head.close()
    unknown = [d for d in info.value.diagnostics if "has not registered with the Head" in d.reason]
    assert {d.reason.split("'")[1] for d in unknown} == set(NODES[1:])
    assert all(d.file == "dep.xml" and d.line == 3 for d in unknown)


# -- every store ------------------------------------------------------------------------------


def test_every_store_commits_and_reads_back_a_partition(store):
    from boreas.catalog.elements import catalog_from_snapshot

    docs = [read_document(app(), "app.xml"), read_document(deploy(PARTITION), "dep.xml")]
    after = apply_submission(store, docs, registry=box_types()).after
    assert catalog_from_snapshot(store.snapshot()) == after and "v" in after.partitions


@pytest.mark.zookeeper
def test_a_zookeeper_catalog_made_before_partitions_existed_takes_them(zookeeper_server):
    url = f"zk://{zookeeper_server}/boreas-test/old-layout-{uuid.uuid4().hex[:8]}"
    from kazoo.client import KazooClient

    with open_store(url) as old:
        folder = old.element_znode("partition")
    zk = KazooClient(hosts=zookeeper_server)
    zk.start()
    try:
        zk.delete(folder)  # as a catalog laid out before the kind existed
    finally:
        zk.stop()
        zk.close()
    store = open_store(url)
    try:
        test_every_store_commits_and_reads_back_a_partition(store)
    finally:
        store.close()
