"""The ZooKeeper store's whole copies under races and failures (docs/architecture.md, ZooKeeper store).

Two writers of one copy version, a copy that does not decode, an older copy
pointed at over a newer one, a commit finishing while the store closes, and
close() while ZooKeeper is unreachable with a copy under way.  The oracle is
the catalog committed, element by element; the races are made to happen, not
hoped for, by a TCP proxy in front of the real ZooKeeper that holds or cuts
one client's traffic when it sees a given request go by.
"""

from __future__ import annotations

import json
import random
import re
import select
import socket
import string
import threading
import uuid
from collections.abc import Iterator

import pytest
from boreas.catalog.store import Change, open_store, znodes
from boreas.catalog.store.zk_snapshot import EVERY_CHANGES, WholeCopies, encode_copy
from kazoo.client import KazooClient

pytestmark = pytest.mark.zookeeper

BIG = EVERY_CHANGES + 10  # one commit this size makes a copy due
#: kazoo's get of the copy pointer: the path, then the watch flag (a create/set carries the data instead).
POINTER_GET = re.compile(rb"/catalog/snapshot[\x00\x01]")
#: The pointer's data, in a create or set of it.
POINTER_DATA = re.compile(rb'\{"version"')


class Proxy:
    """A TCP proxy to ZooKeeper for one test: forwards both ways until a client-to-server chunk matches
    ``hold`` (then that chunk and all after it wait for :meth:`release`) or ``cut_after`` (then the server's
    next reply goes through and every connection is cut; new ones are cut at once until :meth:`release`)."""

    def __init__(self, upstream: str, hold: re.Pattern[bytes] | None = None,
                 cut_after: re.Pattern[bytes] | None = None):
        host, port = upstream.rsplit(":", 1)
        self._upstream = (host, int(port))
        self._hold, self._cut_after = hold, cut_after
        self.triggered = threading.Event()
        self._released = False
        self._cut_next_reply = False
        self._cut = False
        self._held: list[tuple[socket.socket, bytes]] = []
        self._peers: dict[socket.socket, socket.socket] = {}
        self._from_client: set[socket.socket] = set()
        self._lock = threading.Lock()
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.address = f"127.0.0.1:{self._listener.getsockname()[1]}"
        self._stop = False
        self._thread = threading.Thread(target=self._run, name="zk-proxy", daemon=True)
        self._thread.start()

    def arm(self, cut_after: re.Pattern[bytes]) -> None:
        with self._lock:
            self._cut_after = cut_after

    def release(self) -> None:
        with self._lock:
            self._released, self._cut = True, False
            for sock, data in self._held:
                self._peers[sock].sendall(data)
            self._held.clear()

    def close(self) -> None:
        self._stop = True
        self._thread.join(10)
        for sock in [self._listener, *self._peers]:
            sock.close()

    def _drop(self, sock: socket.socket) -> None:
        peer = self._peers.pop(sock, None)
        self._from_client.discard(sock)
        sock.close()
        if peer is not None:
            self._drop(peer)

    def _run(self) -> None:
        while not self._stop:
            readable, _, _ = select.select([self._listener, *self._peers], [], [], 0.1)
            with self._lock:
                for sock in readable:
                    if sock is self._listener:
                        client, _ = self._listener.accept()
                        if self._cut:
                            client.close()
                            continue
                        server = socket.create_connection(self._upstream)
                        self._peers.update({client: server, server: client})
                        self._from_client.add(client)
                    elif sock in self._peers:
                        self._forward(sock)

    def _forward(self, sock: socket.socket) -> None:
        try:
            data = sock.recv(1 << 20)
        except OSError:
            data = b""
        if not data:
            self._drop(sock)
            return
        if sock in self._from_client and not self._released:
            if self._held or (self._hold is not None and self._hold.search(data)):
                self._held.append((sock, data))
                self.triggered.set()
                return
            if self._cut_after is not None and self._cut_after.search(data):
                self._cut_next_reply = True
        self._peers[sock].sendall(data)
        if sock not in self._from_client and self._cut_next_reply:
            self._cut_next_reply, self._cut = False, True
            for each in list(self._peers):
                self._drop(each)
            self.triggered.set()


@pytest.fixture
def chroot() -> str:
    return f"/copy-races-{uuid.uuid4().hex[:8]}"


@pytest.fixture
def client(zookeeper_server: str) -> Iterator[KazooClient]:
    client = KazooClient(hosts=zookeeper_server)
    client.start()
    yield client
    client.stop()
    client.close()


def pointer(client: KazooClient, chroot: str) -> dict:
    return json.loads(client.get(f"{chroot}/catalog/snapshot")[0])


def random_schemas(count: int) -> dict[tuple[str, str], str]:
    """Schemas of ~350 random characters each: they compress little, so 6,000 make a copy of two chunks."""
    rng = random.Random(7)
    return {("schema", f"S{n}"): f'<schema name="S{n}" doc="{"".join(rng.choices(string.ascii_letters, k=320))}">'
            f'<field name="x" type="int"/></schema>' for n in range(count)}


def test_two_writers_of_one_copy_version_never_corrupt_it(zookeeper_server, client, chroot):
    """A writer's chunks at version 1 (another order of the same elements, its pointer never set: killed) and a
    second writer of version 1: every later reader still reads the catalog exactly."""
    url = f"zk://{zookeeper_server}{chroot}"
    elements = random_schemas(6_000)
    with open_store(url) as writer:  # commits without a snapshot first: no copy
        writer.commit(0, [Change(kind, key, text) for (kind, key), text in elements.items()])
    other = encode_copy(dict(reversed(list(elements.items()))))
    assert len(other) == 2
    client.create(f"{chroot}/catalog/snapshots/1/000000", other[0], makepath=True)  # (the layout before the fix)
    with open_store(url) as first:
        assert first.snapshot().elements == elements  # read one by one; writes copy 1
    assert pointer(client, chroot)["version"] == 1
    with open_store(url) as second:
        snapshot = second.snapshot()
        assert snapshot.version == 1 and snapshot.elements == elements
    assert client.get_children(f"{chroot}/catalog/snapshots") == [pointer(client, chroot)["copy"]]


@pytest.mark.parametrize("chunk", [b"not a copy", None], ids=["undecodable", "missing"])
def test_a_copy_that_does_not_decode_is_read_as_absent_and_replaced(zookeeper_server, client, chroot, chunk):
    """A pointer at the catalog's version naming a copy that does not decode, or whose chunk is not there
    (its writer lost the connection while pointing, then deleted it): read one by one, then replaced."""
    url = f"zk://{zookeeper_server}{chroot}"
    with open_store(url) as writer:
        writer.commit(0, [Change("schema", f"S{n}", f'<schema name="S{n}"/>') for n in range(BIG)])
    expected = {("schema", f"S{n}"): f'<schema name="S{n}"/>' for n in range(BIG)}
    client.ensure_path(f"{chroot}/catalog/snapshots/1")
    if chunk is not None:
        client.create(f"{chroot}/catalog/snapshots/1/000000", chunk)
    client.create(f"{chroot}/catalog/snapshot", b'{"version": 1, "chunks": 1}')
    with open_store(url) as first:
        assert first.snapshot().elements == expected  # (read one by one, and a good copy written)
    assert pointer(client, chroot)["copy"].startswith("1-")
    with open_store(url) as second:
        assert second.snapshot().elements == expected


def test_an_older_copy_never_replaces_a_newer_one_pointed_at_meanwhile(zookeeper_server, client, chroot):
    """The older writer is held just before it points at its copy; the newer one points meanwhile."""
    root = f"{chroot}/catalog"
    client.ensure_path(root)
    proxy = Proxy(zookeeper_server, hold=POINTER_DATA)
    slow = KazooClient(hosts=proxy.address)
    slow.start()
    try:
        older = threading.Thread(target=WholeCopies(slow, root).write, args=(5, {("schema", "a"): "<old/>"}))
        older.start()
        assert proxy.triggered.wait(60)
        WholeCopies(client, root).write(9, {("schema", "a"): "<new/>"})
        proxy.release()
        older.join(60)
        assert not older.is_alive()
        assert WholeCopies(client, root).read() == (9, {("schema", "a"): "<new/>"})
        assert client.get_children(f"{root}/snapshots") == [pointer(client, chroot)["copy"]]  # (the old one deleted)
    finally:
        proxy.release()
        slow.stop()
        slow.close()
        proxy.close()


def test_a_commit_finishing_while_the_store_closes_returns_normally(client, chroot):
    """The commit's reply arrives after close() began: the copy it makes due is not written, and it returns."""
    root = f"{chroot}/catalog"
    copies = WholeCopies(client, root)
    copies.kept(0, {}, None)
    copies.close()
    copies.committed(0, [Change("schema", f"S{n}", "<s/>") for n in range(EVERY_CHANGES)])  # (due: it was not)
    assert client.exists(f"{root}/snapshot") is None


def test_close_returns_while_zookeeper_is_unreachable_with_a_copy_under_way(zookeeper_server, chroot, monkeypatch):
    """ZooKeeper goes away right after the copy writer read the pointer: close() still returns (it waits for the
    copy at most REQUEST_TIMEOUT, and every request of the copy is bounded)."""
    proxy = Proxy(zookeeper_server)
    store = open_store(f"zk://{proxy.address}{chroot}")
    closing = threading.Thread(target=store.close, daemon=True)
    try:
        assert store.snapshot().version == 0
        proxy.arm(POINTER_GET)  # (armed now: the snapshot above read the pointer too)
        store.commit(0, [Change(kind, key, text) for (kind, key), text in random_schemas(BIG).items()])
        assert proxy.triggered.wait(60)  # the copy writer read the pointer, then ZooKeeper went away
        monkeypatch.setattr(znodes, "REQUEST_TIMEOUT", 2.0)  # (from now on: the commit above took its time)
        closing.start()
        closing.join(60)
        assert not closing.is_alive(), "close() hung on the copy being written"
    finally:
        proxy.release()
        if not closing.is_alive():
            closing.join(60)
        proxy.close()
