"""The catalog store contract, checked against every implementation.

Each test runs once per store (memory, sqlite, zookeeper) through the
``store`` fixture; tests that need a second client on the same catalog use
``shared_store_url`` (skipped for memory://, which cannot be shared).
"""

from __future__ import annotations

import queue
import subprocess
import sys
import textwrap
import threading

import pytest

from boreas.catalog.store import (
    Change,
    Commit,
    ConflictError,
    StoreError,
    open_store,
)

WAIT = 20.0  # generous upper bound for a watch delivery; only hit on failure


def put(kind: str, key: str, text: str) -> Change:
    return Change(kind, key, text)


def delete(kind: str, key: str) -> Change:
    return Change(kind, key, None)


class Collector:
    """A watch callback that queues what it is given."""

    def __init__(self) -> None:
        self.q: queue.Queue[Commit] = queue.Queue()

    def __call__(self, commit: Commit) -> None:
        self.q.put(commit)

    def next(self) -> Commit:
        try:
            return self.q.get(timeout=WAIT)
        except queue.Empty:
            pytest.fail("watch delivered nothing")

    def versions(self, n: int) -> list[int]:
        return [self.next().version for _ in range(n)]


def benchmark_elements(n: int = 3000) -> dict[tuple[str, str], str]:
    """n box elements of ~300 bytes each: the size of the benchmark's catalog."""
    return {
        ("box", f"box-{i:05d}"): f"<box name='box-{i:05d}' type='filter'>"
        + f"<in stream='s{i % 97}'/><out stream='o{i}'/>".ljust(240, " ")
        + "</box>"
        for i in range(n)
    }


# -- basics ---------------------------------------------------------------


def test_empty_store(store):
    assert store.version() == 0
    snap = store.snapshot()
    assert snap.version == 0
    assert snap.elements == {}
    assert store.log(0) == []


def test_commit_bumps_version_and_shows_elements(store):
    c = store.commit(0, [put("schema", "T", "<schema name='T'/>"), put("box", "f1", "<box/>")])
    assert c.version == 1
    assert store.version() == 1
    snap = store.snapshot()
    assert snap.version == 1
    assert snap.elements == {("schema", "T"): "<schema name='T'/>", ("box", "f1"): "<box/>"}
    assert snap.of_kind("box") == {"f1": "<box/>"}


def test_put_update_delete(store):
    store.commit(0, [put("query", "q", "v1"), put("query", "keep", "k")])
    store.commit(1, [put("query", "q", "v2")])
    assert store.snapshot().elements == {("query", "q"): "v2", ("query", "keep"): "k"}
    store.commit(2, [delete("query", "q")])
    snap = store.snapshot()
    assert snap.version == 3
    assert snap.elements == {("query", "keep"): "k"}
    store.commit(3, [put("query", "q", "again")])
    assert store.snapshot().elements[("query", "q")] == "again"


def test_delete_of_absent_element_is_noop(store):
    store.commit(0, [put("table", "t", "x")])
    c = store.commit(1, [delete("table", "missing"), delete("view", "t")])
    assert c.version == 2
    assert store.snapshot().elements == {("table", "t"): "x"}
    assert store.log(1)[0].changes == (delete("table", "missing"), delete("view", "t"))


def test_empty_batch_bumps_version(store):
    c = store.commit(0, [])
    assert c == Commit(1, ())
    assert store.version() == 1
    assert store.log(0) == [Commit(1, ())]


def test_batch_naming_element_twice_is_rejected(store):
    store.commit(0, [put("box", "b", "old")])
    with pytest.raises(ValueError):
        store.commit(1, [put("box", "b", "x"), delete("box", "b")])
    assert store.version() == 1
    assert store.snapshot().elements == {("box", "b"): "old"}
    assert len(store.log(0)) == 1


def test_stale_base_conflicts_and_changes_nothing(store):
    store.commit(0, [put("input", "a", "1")])
    store.commit(1, [put("input", "b", "2")])
    before, log_before = store.snapshot(), store.log(0)
    with pytest.raises(ConflictError) as info:
        store.commit(1, [put("input", "a", "stale"), put("input", "c", "3")])
    assert (info.value.expected, info.value.actual) == (1, 2)
    assert isinstance(info.value, StoreError)
    assert store.snapshot() == before
    assert store.log(0) == log_before
    with pytest.raises(ConflictError):
        store.commit(5, [])  # a base from the future is just as wrong
    assert store.version() == 2


def test_log_returns_commits_in_order(store):
    batches = [
        [put("node", "localhost:15000", "<node/>")],
        [put("box", "b1", "<b1/>"), put("box", "b2", "<b2/>")],
        [delete("box", "b1")],
    ]
    for base, batch in enumerate(batches):
        store.commit(base, batch)
    assert store.log(0) == [Commit(i + 1, tuple(b)) for i, b in enumerate(batches)]
    assert [c.version for c in store.log(1)] == [2, 3]
    assert store.log(3) == []


# -- watches ----------------------------------------------------------------


def test_watch_from_zero_delivers_existing_then_new(store):
    for base in range(3):
        store.commit(base, [put("box", f"b{base}", str(base))])
    seen = Collector()
    with store.watch(0, seen):
        first = [seen.next() for _ in range(3)]
        assert first == store.log(0)
        store.commit(3, [put("box", "b3", "3")])
        store.commit(4, [delete("box", "b0")])
        assert seen.next() == Commit(4, (put("box", "b3", "3"),))
        assert seen.next() == Commit(5, (delete("box", "b0"),))
        store.commit(5, [])
        assert seen.next().version == 6  # nothing repeated before it


def test_watch_from_later_version_skips_earlier(store):
    for base in range(3):
        store.commit(base, [put("view", "v", str(base))])
    seen = Collector()
    with store.watch(2, seen):
        assert seen.next() == Commit(3, (put("view", "v", "2"),))
        store.commit(3, [put("view", "v", "3")])
        assert seen.next().version == 4


def test_failing_callback_does_not_stop_the_watch(store):
    seen = Collector()

    def callback(commit: Commit) -> None:
        seen(commit)
        if commit.version == 1:
            raise RuntimeError("callback bug")

    with store.watch(0, callback):
        store.commit(0, [])
        store.commit(1, [])
        assert seen.versions(2) == [1, 2]


def test_closed_watch_stops_delivering(store):
    seen, other = Collector(), Collector()
    watch = store.watch(0, seen)
    with store.watch(0, other):
        store.commit(0, [])
        assert seen.next().version == 1
        watch.close()
        store.commit(1, [])
        assert other.versions(2) == [1, 2]
        store.commit(2, [])
        assert other.next().version == 3
    assert seen.q.empty()


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


# -- content ------------------------------------------------------------------


def test_awkward_keys_round_trip(store):
    keys = [
        "a/b/c", "host:15000", "stream|tcp://h:1", "with space", "%41", "%", ".", "..",
        "ключ", "tab\tand\nnewline", "zookeeper", "x" * 200,
    ]
    store.commit(0, [put("subscribe", k, f"text of {k}") for k in keys])
    assert store.snapshot().of_kind("subscribe") == {k: f"text of {k}" for k in keys}
    store.commit(1, [delete("subscribe", k) for k in keys[::2]])
    assert set(store.snapshot().of_kind("subscribe")) == set(keys[1::2])
    assert store.log(1)[0].changes == tuple(delete("subscribe", k) for k in keys[::2])


def test_large_element_round_trips(store):
    text = "".join(f"<row n='{i}'/>" for i in range(8000))[: 100 * 1024]
    assert len(text) == 100 * 1024
    store.commit(0, [put("table", "big", text)])
    assert store.snapshot().elements[("table", "big")] == text
    assert store.log(0)[0].changes[0].text == text


def test_unicode_text_round_trips(store):
    text = "héllo ✓ 日本語 😀 \u0000 \U0010fffd"
    store.commit(0, [put("type", "u", text)])
    assert store.snapshot().elements[("type", "u")] == text
    assert store.log(0)[0].changes[0].text == text


def test_benchmark_sized_commit(store):
    n = 3000
    elements = benchmark_elements(n)
    assert all(len(t) >= 280 for t in elements.values())
    c = store.commit(0, [put(k, key, t) for (k, key), t in elements.items()])
    assert c.version == 1
    snap = store.snapshot()
    assert snap.elements == elements
    # and an update of all of them (set instead of create for every znode)
    store.commit(1, [put(k, key, t + " ") for (k, key), t in elements.items()])
    assert store.snapshot().elements == {ident: t + " " for ident, t in elements.items()}
    assert len(store.log(1)[0].changes) == n


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
