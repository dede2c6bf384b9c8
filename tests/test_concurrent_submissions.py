"""Concurrent submissions to one Head (issue 15, item 7).

Optimistic concurrency must only refuse a *real* conflict:

* 20 disjoint submissions posted at once (each adds its own schema, streams
  and box) all succeed, on the embedded store and on ZooKeeper: a commit
  that lost the race is re-planned against the newer catalog and retried;
* two submissions declaring the same box differently: exactly one
  succeeds, the other is a 422 naming the box, and none of its elements is
  committed;
* the Head does not re-read the whole store per commit: it applies each
  commit's changes to the catalog it holds (a full read is only the
  fallback for a gap the log cannot fill), whoever made the commit.
"""

from __future__ import annotations

import asyncio
import threading
import uuid
from pathlib import Path

import aiohttp
import pytest
from boreas.catalog import ValidationFailed, apply_submission, read_document
from boreas.catalog.elements import catalog_from_snapshot
from boreas.catalog.store import open_store
from boreas.catalog.submission import read_catalog
from boreas.head.service import HeadService

TOKEN = "s3cret"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
CONCURRENT = 20
STORES = ["sqlite", pytest.param("zookeeper", marks=pytest.mark.zookeeper)]


def app(tag: str, box: str | None = None, predicate: str = "x > 1") -> bytes:
    """A schema, an input, a filter box and an output, all named after ``tag``."""
    box = box or f"b{tag}"
    return f"""<borealis>
  <schema name="T{tag}"><field name="x" type="int"/></schema>
  <input stream="A{tag}" schema="T{tag}"/>
  <box name="{box}" type="filter"><in stream="A{tag}"/><out stream="B{tag}"/>
    <parameter name="expression.0" value="{predicate}"/></box>
  <output stream="B{tag}" schema="T{tag}"/>
</borealis>""".encode()


@pytest.fixture
def head_store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return "sqlite:///" + str(tmp_path / "catalog.db")
    server = request.getfixturevalue("zookeeper_server")
    return f"zk://{server}/boreas-concurrent/{uuid.uuid4().hex[:12]}"


@pytest.fixture
async def head(head_store_url: str):
    service = HeadService(head_store_url, token=TOKEN, snapshot_interval=0)
    await service.start("127.0.0.1", 0)
    try:
        yield service
    finally:
        await service.close()


class CountingReads:
    """Counts whole-catalog reads (``snapshot()``) made through a store object."""

    def __init__(self, store) -> None:
        self.count = 0
        inner = store.snapshot

        def snapshot():
            self.count += 1
            return inner()

        store.snapshot = snapshot


async def submit(session: aiohttp.ClientSession, head: HeadService, name: str, data: bytes) -> tuple[int, dict]:
    form = aiohttp.FormData()
    form.add_field("file", data, filename=name, content_type="application/xml")
    async with session.post(f"http://{head.server.endpoint}/submissions", data=form, headers=AUTH,
                            timeout=aiohttp.ClientTimeout(total=120)) as resp:
        return resp.status, await resp.json()


async def submit_all(head: HeadService, documents: list[tuple[str, bytes]]) -> list[tuple[int, dict]]:
    async with aiohttp.ClientSession() as session:
        return await asyncio.gather(*(submit(session, head, name, data) for name, data in documents))


@pytest.mark.parametrize("head_store_url", STORES, indirect=True)
async def test_concurrent_disjoint_submissions_all_succeed(head):
    reads = CountingReads(head.store)
    answers = await submit_all(head, [(f"app{i}.xml", app(str(i))) for i in range(CONCURRENT)])
    failed = [a for a in answers if a[0] != 202]
    assert not failed, f"{len(failed)} of {CONCURRENT} failed, e.g. {failed[0]}"
    assert sorted(a[1]["version"] for a in answers) == list(range(1, CONCURRENT + 1))
    await head.caught_up(CONCURRENT)
    assert sorted(head.catalog.boxes) == sorted(f"b{i}" for i in range(CONCURRENT))
    # The Head planned every retry on the catalog it holds, caught up from the log.
    assert reads.count == 0
    assert head.catalog_full_reads == 1  # the one at start
    stored = catalog_from_snapshot(await asyncio.to_thread(head.store.snapshot))
    assert stored == head.catalog


@pytest.mark.parametrize("head_store_url", STORES, indirect=True)
async def test_conflicting_submissions_one_wins_the_other_fails_cleanly(head):
    reads = CountingReads(head.store)
    answers = await submit_all(head, [("x.xml", app("X", box="dup", predicate="x > 1")),
                                      ("y.xml", app("Y", box="dup", predicate="x = 0"))])
    codes = sorted(code for code, _ in answers)
    assert codes == [202, 422], answers
    (_, won), (_, lost) = sorted(answers, key=lambda a: a[0])
    loser = "Y" if won["sources"] == ["x.xml"] else "X"
    assert any("duplicate box 'dup'" in d["reason"] for d in lost["diagnostics"]), lost
    await head.caught_up(1)
    catalog = head.catalog
    assert catalog.version == 1  # one commit, nothing of the loser's half-applied
    assert f"A{loser}" not in catalog.inputs and f"T{loser}" not in catalog.schemas
    assert f"B{loser}" not in catalog.outputs
    assert catalog.boxes["dup"].inputs[0].stream != f"A{loser}"
    assert reads.count == 0


@pytest.mark.parametrize("head_store_url", STORES, indirect=True)
async def test_head_applies_other_writers_commits_without_rereading(head, head_store_url):
    """Commits made straight to the store (``boreas catalog apply``) and the Head's own
    submissions interleave; the Head applies each one's changes, never reading everything."""
    reads = CountingReads(head.store)

    def cli_writer() -> None:
        with open_store(head_store_url) as other:
            for i in range(5):
                apply_submission(other, [read_document(app(f"cli{i}"), f"cli{i}.xml")])

    writer = threading.Thread(target=cli_writer)
    writer.start()
    answers = await submit_all(head, [(f"h{i}.xml", app(f"h{i}")) for i in range(5)])
    await asyncio.to_thread(writer.join, 60)
    assert [code for code, _ in answers] == [202] * 5, answers
    await head.caught_up(10)
    assert len(head.catalog.boxes) == 10
    assert reads.count == 0 and head.catalog_full_reads == 1
    assert catalog_from_snapshot(await asyncio.to_thread(head.store.snapshot)) == head.catalog


@pytest.mark.parametrize("head_store_url", ["sqlite"], indirect=True)
async def test_a_gap_the_log_cannot_fill_is_read_in_full(head, head_store_url):
    """The fallback: a commit arrives whose predecessors the log no longer has."""
    with open_store(head_store_url) as other:
        apply_submission(other, [read_document(app("g1"), "g1.xml")])
        apply_submission(other, [read_document(app("g2"), "g2.xml")])
    await head.caught_up(2)
    head.store.log = lambda since: []  # as if the log had lost those entries (the watch stalls too)
    with open_store(head_store_url) as other:
        apply_submission(other, [read_document(app("g3"), "g3.xml")])
        applied = apply_submission(other, [read_document(app("g4"), "g4.xml")])
    head.commits.committed(applied.commit)  # version 4 arrives; 3 is a gap the log cannot fill
    await head.caught_up(4)
    assert head.catalog.version == 4 and {"bg3", "bg4"} <= set(head.catalog.boxes)
    assert head.catalog_full_reads == 2


def test_concurrent_writers_in_separate_store_objects_all_commit(tmp_path):
    """``apply_submission`` from several writers (like several CLIs) at once: none is refused."""
    url = "sqlite:///" + str(tmp_path / "c.db")
    errors: list[BaseException] = []

    def writer(w: int) -> None:
        try:
            with open_store(url) as store:
                for i in range(5):
                    apply_submission(store, [read_document(app(f"w{w}_{i}"), "a.xml")])
        except Exception as exc:  # noqa: BLE001 -- reported below
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(w,)) for w in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors, errors[:1]
    with open_store(url) as store:
        assert len(catalog_from_snapshot(store.snapshot()).boxes) == 20


def test_a_real_conflict_is_refused_not_retried(tmp_path):
    url = "sqlite:///" + str(tmp_path / "c.db")
    with open_store(url) as store:
        apply_submission(store, [read_document(app("X", box="dup"), "x.xml")])
        before = store.snapshot()
        with pytest.raises(ValidationFailed, match="duplicate box 'dup'"):
            apply_submission(store, [read_document(app("Y", box="dup", predicate="x = 0"), "y.xml")])
        assert store.snapshot() == before


def test_a_stale_copy_does_not_refuse_what_the_store_allows(tmp_path):
    """A Head's catalog may trail the store by a commit; a submission that needs that commit
    is planned again on the current catalog, not refused."""
    with open_store("sqlite:///" + str(tmp_path / "c.db")) as store:
        stale = read_catalog(store)
        apply_submission(store, [read_document(app("X"), "x.xml")])
        uses_ax = b"""<borealis><box name="late" type="filter"><in stream="AX"/><out stream="L"/>
            <parameter name="expression.0" value="x > 5"/></box></borealis>"""
        applied = apply_submission(store, [read_document(uses_ax, "late.xml")], base=stale)
        assert applied.commit.version == 2 and "late" in applied.after.boxes
        with pytest.raises(ValidationFailed, match="duplicate box 'late'"):
            apply_submission(store, [read_document(uses_ax, "late.xml")], base=stale)
        assert store.version() == 2


@pytest.mark.zookeeper
def test_the_zookeeper_log_keeps_only_recent_commits_and_old_readers_read_whole(zookeeper_server):
    """ZooKeeper's snapshots hold the catalog log: pruned, they stop growing with every commit."""
    from boreas.catalog.model import Catalog
    from boreas.catalog.store import Change, StoreError
    from boreas.catalog.submission import catch_up

    url = f"zk://{zookeeper_server}/prune-{uuid.uuid4().hex[:8]}"
    with open_store(url) as store:
        store.keep_log, store.prune_every = 10, 5
        for n in range(1, 31):
            store.commit(n - 1, [Change("schema", f"S{n}", f'<schema name="S{n}"><field name="x" type="int"/></schema>')])
        assert len(store.kept_log_versions()) <= store.keep_log + store.prune_every
        assert store.kept_log_versions()[-1] == 30
        assert [c.version for c in store.log(25)] == [26, 27, 28, 29, 30]
        with pytest.raises(StoreError, match="keeps the last 10 commits"):
            store.log(0)
        behind = catch_up(store, Catalog())  # far behind: the log cannot help, the catalog is read whole
        assert behind.version == 30 and len(behind.schemas) == 30
