"""A Head on ZooKeeper reads the catalog from a whole copy in a few znodes plus the log since (issue 37 item 5).

The oracle is the catalog the test committed, element by element: every
reader gets exactly it, whether it reads the copy and replays the log tail,
or (the tail pruned, or no copy) the elements one by one.
"""

from __future__ import annotations

import json
import uuid

import pytest
from boreas.catalog.store import Change, open_store
from boreas.catalog.store.zk_snapshot import EVERY_CHANGES
from kazoo.client import KazooClient

pytestmark = pytest.mark.zookeeper

BIG = EVERY_CHANGES + 10  # one commit this size makes a copy due


def schema(n: int, field: str = "x") -> str:
    return f'<schema name="S{n}"><field name="{field}" type="int"/></schema>'


def fill(store, expected: dict) -> int:
    """Read (as a Head starting does), commit BIG schemas in one commit, then three small changes."""
    assert store.snapshot().version == 0
    store.commit(0, [Change("schema", f"S{n}", schema(n)) for n in range(BIG)])
    changes = [[Change("schema", "S1", None)], [Change("schema", "S2", schema(2, "y"))],
               [Change("schema", "new", schema(-1))]]
    for version, batch in enumerate(changes, start=1):
        store.commit(version, batch)
    expected.update({("schema", f"S{n}"): schema(n) for n in range(BIG)})
    del expected[("schema", "S1")]
    expected[("schema", "S2")] = schema(2, "y")
    expected[("schema", "new")] = schema(-1)
    return 4


def test_a_store_opened_later_reads_the_copy_and_the_log_since_exactly(zookeeper_server):
    url = f"zk://{zookeeper_server}/copies-{uuid.uuid4().hex[:8]}"
    expected: dict = {}
    with open_store(url) as writer:
        version = fill(writer, expected)
    client = KazooClient(hosts=zookeeper_server)
    client.start()
    try:  # the copy is there, at the big commit's version (docs/architecture.md, znode layout)
        chroot = url.rsplit("/", 1)[1]
        pointer = json.loads(client.get(f"/{chroot}/catalog/snapshot")[0])
        assert pointer["version"] == 1 and pointer["copy"].startswith("1-")  # (one folder per writer)
        assert client.get_children(f"/{chroot}/catalog/snapshots") == [pointer["copy"]]
    finally:
        client.stop()
        client.close()
    with open_store(url) as reader:
        snapshot = reader.snapshot()
        assert snapshot.version == version and snapshot.elements == expected
        reader.commit(version, [Change("schema", "S3", None)])  # and commits on from there
    with open_store(url) as again:
        del expected[("schema", "S3")]
        assert again.snapshot().elements == expected


def test_with_the_log_since_the_copy_pruned_the_catalog_is_read_element_by_element(zookeeper_server):
    url = f"zk://{zookeeper_server}/copies-{uuid.uuid4().hex[:8]}"
    expected: dict = {}
    with open_store(url) as writer:
        writer.keep_log, writer.prune_every = 1, 1  # the log keeps the last commit only
        version = fill(writer, expected)
    with open_store(url) as reader:
        snapshot = reader.snapshot()
        assert snapshot.version == version and snapshot.elements == expected


def copy_pointer(server: str, url: str) -> bytes | None:
    """The data of ``/<chroot>/catalog/snapshot`` (None: no copy)."""
    client = KazooClient(hosts=server)
    client.start()
    try:
        found = client.exists(f"/{url.rsplit('/', 1)[1]}/catalog/snapshot")
        return client.get(f"/{url.rsplit('/', 1)[1]}/catalog/snapshot")[0] if found else None
    finally:
        client.stop()
        client.close()


def test_a_big_catalog_read_element_by_element_is_copied_for_the_next_reader(zookeeper_server):
    """A catalog committed by a store that never read one (no copy kept: another tool) is read one by one once;
    that reader writes the copy, and the next reads it (and the same elements)."""
    url = f"zk://{zookeeper_server}/copies-{uuid.uuid4().hex[:8]}"
    with open_store(url) as writer:  # commits without a snapshot first: it keeps no elements, writes no copy
        writer.commit(0, [Change("schema", f"S{n}", schema(n)) for n in range(BIG)])
        writer.commit(1, [Change("schema", "S1", None)])
    assert copy_pointer(zookeeper_server, url) is None
    with open_store(url) as first:
        expected = first.snapshot().elements
    assert len(expected) == BIG - 1 and ("schema", "S1") not in expected
    assert b'"version": 2' in (copy_pointer(zookeeper_server, url) or b"")
    with open_store(url) as second:
        snapshot = second.snapshot()
        assert snapshot.version == 2 and snapshot.elements == expected


def test_a_small_catalog_read_element_by_element_writes_no_copy(zookeeper_server):
    url = f"zk://{zookeeper_server}/copies-{uuid.uuid4().hex[:8]}"
    with open_store(url) as writer:
        writer.commit(0, [Change("schema", f"S{n}", schema(n)) for n in range(10)])
    with open_store(url) as reader:
        assert len(reader.snapshot().elements) == 10
    assert copy_pointer(zookeeper_server, url) is None
