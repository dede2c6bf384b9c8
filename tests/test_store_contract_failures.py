"""The catalog store contract under contention and failure, checked against every implementation.

Each test runs once per store (memory, sqlite, zookeeper) through the
``store`` fixture; tests that need a second client on the same catalog use
``shared_store_url`` (skipped for memory://, which cannot be shared): two
clients on one catalog, processes racing to commit, a snapshot read while
another client commits; then what fails and how it says so: a closed store,
an unreachable or misnamed ZooKeeper, a commit beyond its request limit, a
race lost inside the transaction.  One client's view is in
test_store_contract.py.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
import threading

import pytest

from boreas.catalog.store import (
    Commit,
    ConflictError,
    StoreError,
    open_store,
)
from support.store_contract import Collector, benchmark_elements, delete, put


# -- two clients on one catalog --------------------------------------------------


def test_two_store_objects_see_each_others_commits(store, shared_store_url):
    with open_store(shared_store_url) as other:
        store.commit(0, [put("schema", "S", "s")])
        assert other.version() == 1
        assert other.snapshot().elements == {("schema", "S"): "s"}
        other.commit(1, [put("schema", "S", "s2")])
        assert store.snapshot().elements == {("schema", "S"): "s2"}
        with pytest.raises(ConflictError):
            store.commit(1, [])


def test_watcher_sees_commits_of_another_object(store, shared_store_url):
    seen = Collector()
    with open_store(shared_store_url) as other, store.watch(0, seen):
        other.commit(0, [put("client", "c1", "x")])
        other.commit(1, [delete("client", "c1")])
        assert seen.next() == Commit(1, (put("client", "c1", "x"),))
        assert seen.next() == Commit(2, (delete("client", "c1"),))


_INCREMENTER = textwrap.dedent(
    """
    import sys
    from boreas.catalog.store import Change, ConflictError, open_store

    url, n = sys.argv[1], int(sys.argv[2])
    with open_store(url) as store:
        print("ready", flush=True)
        sys.stdin.readline()  # wait until every worker is ready, so they overlap
        conflicts = 0
        for _ in range(n):
            while True:
                snap = store.snapshot()
                value = int(snap.elements.get(("global", "counter"), "0"))
                try:
                    store.commit(snap.version, [Change("global", "counter", str(value + 1))])
                    break
                except ConflictError:
                    conflicts += 1
        print("conflicts", conflicts, flush=True)
    """
)


def test_concurrent_processes_never_lose_an_update(store, shared_store_url):
    workers, n = 3, 40
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _INCREMENTER, shared_store_url, str(n)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        for _ in range(workers)
    ]
    try:
        for p in procs:
            assert p.stdout.readline().strip() == "ready"
        for p in procs:
            p.stdin.write("go\n")
            p.stdin.flush()
        for p in procs:
            out, _ = p.communicate(timeout=120)
            assert p.returncode == 0, out
            assert out.startswith("conflicts")
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    snap = store.snapshot()
    assert snap.elements[("global", "counter")] == str(workers * n)
    assert snap.version == workers * n
    assert [c.version for c in store.log(0)] == list(range(1, workers * n + 1))


def test_snapshot_is_consistent_while_another_client_commits(store, shared_store_url):
    """Every snapshot shows exactly one version's state, even mid-stream of commits."""
    store.commit(0, [put("table", f"filler{i}", "f" * 100) for i in range(300)])
    rounds, failures = 60, []
    done, stop = threading.Event(), threading.Event()

    def writer() -> None:
        try:
            with open_store(shared_store_url) as other:
                for i in range(1, rounds + 1):
                    if stop.is_set():
                        return
                    other.commit(i, [
                        put("box", "a", str(i)), put("box", "b", str(i)),
                        put("box", f"c{i}", str(i)), delete("box", f"c{i - 1}"),
                    ])
        except Exception as exc:  # reported by the main thread
            failures.append(exc)
        finally:
            done.set()

    thread = threading.Thread(target=writer, daemon=True)
    thread.start()
    try:
        snapshots = 0
        while not done.is_set() or snapshots == 0:
            snap = store.snapshot()
            snapshots += 1
            boxes = snap.of_kind("box")
            if snap.version == 1:
                assert boxes == {}
            else:
                i = str(snap.version - 1)
                assert boxes == {"a": i, "b": i, f"c{i}": i}
            assert len(snap.of_kind("table")) == 300
    finally:
        stop.set()
        thread.join(timeout=60)
    assert not failures
    final = str(rounds)
    assert store.snapshot().of_kind("box") == {"a": final, "b": final, f"c{final}": final}


# -- failures -------------------------------------------------------------------------


def test_use_after_close_raises_store_error(store):
    store.commit(0, [])
    store.close()
    for use in (
        store.version,
        store.snapshot,
        lambda: store.commit(1, []),
        lambda: store.log(0),
    ):
        with pytest.raises(StoreError):
            use()
    store.close()  # closing twice is harmless


@pytest.mark.slow
def test_unreachable_zookeeper_raises_store_error():
    with pytest.raises(StoreError) as info:
        open_store("zk://127.0.0.1:1/x")
    assert "127.0.0.1:1" in str(info.value)
    assert not isinstance(info.value, ConflictError)


@pytest.mark.parametrize("url", ["zk://127.0.0.1:2181", "zk://127.0.0.1:2181/", "zk:///boreas"])
def test_zookeeper_url_needs_hosts_and_chroot(url):
    with pytest.raises(StoreError, match="CHROOT"):
        open_store(url)


@pytest.mark.zookeeper
def test_zookeeper_commit_beyond_request_limit_says_how_to_raise_it(
    zookeeper_server_default_limits,
):
    """With ZooKeeper's default ~1 MB request limit the benchmark-sized commit
    cannot be one multi-op; the error must say so and how to raise the limit."""
    url = f"zk://{zookeeper_server_default_limits}/boreas-test/maxbuffer"
    with open_store(url) as store:
        base = store.version()
        too_big = [put(k, key, t) for (k, key), t in benchmark_elements().items()]
        with pytest.raises(StoreError, match="jute.maxbuffer") as info:
            store.commit(base, too_big)
        assert not isinstance(info.value, ConflictError)
        assert "-Djute.maxbuffer=" in str(info.value)
        assert store.version() == base  # nothing committed, and the client still works
        assert store.snapshot().elements == {}
        assert store.commit(base, too_big[:100]).version == base + 1
        assert len(store.snapshot().elements) == 100


@pytest.mark.zookeeper
def test_zookeeper_commit_loses_a_race_inside_the_transaction(zookeeper_server, monkeypatch):
    """A writer that passed the up-front version check still loses if another
    commit lands before its multi-op: the conditional set of the version znode
    makes the whole transaction fail, and nothing of it is applied."""
    url = f"zk://{zookeeper_server}/boreas-test/race"
    with open_store(url) as store, open_store(url) as other:
        store.commit(0, [put("box", "x", "0")])
        read_version = store._read_version

        def read_then_lose_the_race():
            seen = read_version()
            monkeypatch.setattr(store, "_read_version", read_version)
            other.commit(1, [put("box", "x", "other")])
            return seen

        monkeypatch.setattr(store, "_read_version", read_then_lose_the_race)
        with pytest.raises(ConflictError) as info:
            store.commit(1, [put("box", "x", "mine"), put("box", "y", "mine")])
        assert (info.value.expected, info.value.actual) == (1, 2)
        assert store.snapshot().elements == {("box", "x"): "other"}
        assert [c.version for c in store.log(0)] == [1, 2]
        assert store.log(1)[0].changes == (put("box", "x", "other"),)
