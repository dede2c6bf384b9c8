"""A ZooKeeper commit writes what changed, not the catalog (issue 37 item 5).

The oracle is ZooKeeper's own record: every znode's ``mzxid`` is the
transaction that last wrote it, and a commit is one multi-op, one
transaction.  After a commit of a few changes to a catalog of many
elements, the znodes that transaction wrote are exactly the version, the
changed elements and the commit's log entry (a whole copy, when one is
due, is written apart, in transactions of its own).
"""

from __future__ import annotations

import uuid

import pytest
from boreas.catalog.store import Change, open_store
from kazoo.client import KazooClient

pytestmark = pytest.mark.zookeeper


def schema(n: int, field: str = "x") -> str:
    return f'<schema name="S{n}"><field name="{field}" type="int"/></schema>'


def written_by(client: KazooClient, root: str, zxid: int) -> set[str]:
    """Every znode under ``root`` whose last write was transaction ``zxid`` (created or set)."""
    found = set()
    stack = [root]
    while stack:
        path = stack.pop()
        stat = client.exists(path)
        if stat is None:
            continue
        if stat.mzxid == zxid:
            found.add(path)
        stack.extend(f"{path}/{child}" for child in client.get_children(path))
    return found


def test_a_commit_writes_the_changed_elements_and_its_log_entry_only(zookeeper_server):
    chroot = f"writes-{uuid.uuid4().hex[:8]}"
    with open_store(f"zk://{zookeeper_server}/{chroot}") as store:
        store.snapshot()  # as a Head does: it then keeps the element names (and copies when due)
        store.commit(0, [Change("schema", f"S{n}", schema(n)) for n in range(300)])
        store.commit(1, [Change("schema", "S7", schema(7, "y")), Change("schema", "S8", None),
                         Change("schema", "new", schema(-1))])
    client = KazooClient(hosts=zookeeper_server)
    client.start()
    try:
        root = f"/{chroot}/catalog"
        zxid = client.exists(f"{root}/version").mzxid  # the last commit's transaction
        assert client.get(f"{root}/version")[0] == b"2"
        assert written_by(client, root, zxid) == {
            f"{root}/version", f"{root}/elements/schema/S7", f"{root}/elements/schema/new",
            f"{root}/log/{2:012d}"}
        assert client.exists(f"{root}/elements/schema/S8") is None  # deleted in the same transaction
        assert len(client.get_children(f"{root}/elements/schema")) == 300
    finally:
        client.stop()
        client.close()
