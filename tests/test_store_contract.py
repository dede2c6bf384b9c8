"""The catalog store contract as one client sees it, checked against every implementation.

Each test runs once per store (memory, sqlite, zookeeper) through the
``store`` fixture: commits and versions, conflicts on a stale base, the log,
watches, content that must round-trip, and where nodes join membership.  Other clients, races and failures
are in test_store_contract_failures.py; the helpers in
tests/support/store_contract.py.
"""

from __future__ import annotations

import pytest

from boreas.catalog.store import (
    Commit,
    ConflictError,
    StoreError,
)
from support.store_contract import Collector, benchmark_elements, delete, put, seen_by_another


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


# -- membership ---------------------------------------------------------------


def test_membership_url_is_where_a_joined_node_is_seen(store, store_kind):
    """The Head hands ``membership_url`` to its nodes: a node that joins there is listed until it
    leaves.  Embedded stores have no such place (None): the Head goes by heartbeats alone."""
    url = store.membership_url
    if store_kind in ("memory", "sqlite"):
        assert url is None
        return
    assert url is not None
    assert seen_by_another(url, "localhost:15999") == (True, False)


# -- blobs ----------------------------------------------------------------


def test_blob_round_trips_whole_and_is_replaced_whole(store):
    assert store.get_blob("index") is None
    big = bytes(range(256)) * 8000  # 2 MB: over one znode's limit, so several chunks in ZooKeeper
    store.put_blob("index", big)
    assert store.get_blob("index") == big
    store.put_blob("index", b"small")
    assert store.get_blob("index") == b"small"
    assert store.get_blob("other") is None
    assert store.version() == 0 and store.log(0) == []  # beside the catalog, not in it
