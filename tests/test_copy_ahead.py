"""The Head builds each catalog version's copy ahead of its first reader (head/copy_ahead.py), in a worker thread.

What a reader sees is what it saw when the copy was built on its first
read: the documents ``update_document`` makes of the whole catalog; what
changes is that, once the copy was built ahead, reading it encodes nothing
(the first reader does not wait for the serialization), and that readers on
the event loop arriving during a build await that build (they get the same
documents) while the loop goes on serving.
"""

from __future__ import annotations

import asyncio
import threading

from boreas.catalog.model import Catalog
from boreas.catalog.replicate import catalog_items, update_items
from boreas.catalog.updates import update_document
from boreas.head.catalog_copy import CatalogCopies
from boreas.head.copy_ahead import CopyAhead
from boreas.head.global_feed import GlobalFeed
from boreas.head.yielding import Yielder
from boreas.regional.global_component import GlobalComponent
from boreas.wire.client import PeerClient
from test_catalog_reads import modify, planned


class HeldCatalog:
    """The catalog the test's Head holds, as ``CatalogCopies`` reads it.  A read from a worker thread (a
    build) sets :attr:`built_off_loop` and waits for :attr:`release`: the test decides when a build goes on."""

    def __init__(self, catalog: Catalog):
        self.catalog = catalog
        self.built_off_loop = threading.Event()
        self.release = threading.Event()
        self.release.set()

    def __call__(self) -> Catalog:
        catalog = self.catalog  # (a build holds the version it started from)
        if threading.current_thread() is not threading.main_thread():
            self.built_off_loop.set()
            self.release.wait(timeout=5)  # (bounded: a loop blocked by a reader would never release it)
        return catalog

    async def build_started(self) -> None:
        assert await asyncio.to_thread(self.built_off_loop.wait, 5), "no build started in a worker thread"
        self.built_off_loop.clear()


async def test_each_quiet_version_is_built_ahead_and_read_without_encoding():
    held = HeldCatalog(planned(20))
    copies = CatalogCopies(held, "head")
    ahead = CopyAhead(copies, quiet=0.01, least=0.0)
    task = asyncio.create_task(ahead.run())
    try:
        ahead.changed()
        await held.build_started()  # by CopyAhead: nobody has read yet
        built = await copies.read()  # the build under way, awaited
        encoded = copies.encoded
        assert built.version == 3 and encoded == len(catalog_items(held.catalog))
        assert built.document == update_document(catalog_items(held.catalog), version=3, origin="head").encode()
        assert (await copies.read()).copy.version == 3 and copies.full_copy().version == 3
        assert copies.encoded == encoded  # read, not encoded again

        held.catalog = changed = modify(held.catalog, "b5", "value &gt; 99.5")
        ahead.changed()
        await held.build_started()
        built = await copies.read()
        assert copies.encoded == encoded + 1  # only the changed box
        assert built.document == update_document(catalog_items(changed), version=4, origin="head").encode()
        assert built.copy.version == 4 and copies.document() == built.document and copies.encoded == encoded + 1
    finally:
        task.cancel()


async def test_readers_during_a_build_await_it_and_the_loop_keeps_serving():
    held = HeldCatalog(planned(200))
    held.release.clear()  # the first build waits, inside the worker, until the test lets it go on
    expected = update_document(catalog_items(held.catalog), version=3, origin="head").encode()
    copies = CatalogCopies(held, "head")
    first = asyncio.create_task(copies.read())  # starts the build in a worker thread
    await held.build_started()
    readers = [asyncio.create_task(copies.read()) for _ in range(3)]  # arrive while it is under way
    seen: list[bool] = []

    async def heartbeat() -> None:  # another coroutine on the loop: runs only if no reader blocks it
        seen.append(copies.ready() is None)  # True: the build was still under way
        held.release.set()

    beat = asyncio.create_task(heartbeat())
    results = await asyncio.gather(first, *readers)
    await beat
    assert seen == [True], "the loop was blocked until the build ended"
    assert [r.document for r in results] == [expected] * 4 and {r.version for r in results} == {3}
    assert len({id(r) for r in results}) == 1  # one build, shared
    assert copies.encoded == len(catalog_items(held.catalog))  # built once
    assert [r.version for r in results] == [r.copy.version for r in results]


async def test_a_reader_after_a_commit_does_not_get_the_older_build():
    held = HeldCatalog(planned(20))
    copies = CatalogCopies(held, "head")
    assert (await copies.read()).version == 3
    held.catalog = changed = modify(held.catalog, "b5", "value &gt; 99.5")
    assert copies.ready() is None
    built = await copies.read()
    assert built.version == 4 and built.document == update_document(catalog_items(changed), version=4,
                                                                     origin="head").encode()
    assert copies.ready() is built


async def test_a_feed_sends_the_copy_being_built_then_the_commits_made_meanwhile():
    held = HeldCatalog(planned(20))
    held.release.clear()
    copies = CatalogCopies(held, "head")
    changed = asyncio.Event()
    component = GlobalComponent("http://127.0.0.1:9", None,  # (not registered: the test's feed sends to it)
                                on_change=lambda version, items, catalog: changed.set())
    endpoint = await component.server.start("127.0.0.1", 0)
    async with PeerClient(None) as peers:
        feed = GlobalFeed(endpoint, peers, copies)
        try:
            feed.start()  # version 3 is not serialized yet: a worker builds it, the loop goes on
            await held.build_started()
            before, held.catalog = held.catalog, modify(held.catalog, "b5", "value &gt; 99.5")
            feed.changed(4, update_items(before, held.catalog))  # committed while the copy is built
            held.release.set()
            await asyncio.wait_for(changed.wait(), 30)
            assert component.counters["full_copies"] == 1 and component.counters["changes_applied"] == 1
            assert component.catalog == held.catalog and component.catalog.version == 4
        finally:
            feed.abort()
            await component.server.close()
            await component.peers.close()


async def test_more_commits_than_a_feed_holds_during_a_build_are_replaced_by_a_copy_of_the_newest(monkeypatch):
    """What a feed holds while a copy builds is bounded as its queue is: past the bound it drops them and sends
    a copy of the newest version instead of the one being built, so the component still ends at the Head's
    catalog."""
    monkeypatch.setattr("boreas.head.global_feed.MAX_BACKLOG", 2)
    held = HeldCatalog(planned(20))
    held.release.clear()
    copies = CatalogCopies(held, "head")
    changed = asyncio.Event()
    component = GlobalComponent("http://127.0.0.1:9", None, on_copy=lambda catalog: changed.set(),
                                on_change=lambda version, items, catalog: changed.set())
    endpoint = await component.server.start("127.0.0.1", 0)
    async with PeerClient(None) as peers:
        feed = GlobalFeed(endpoint, peers, copies)
        try:
            feed.start()
            await held.build_started()
            for version, value in zip(range(4, 9), ("90.5", "91.5", "92.5", "93.5", "94.5")):
                before, held.catalog = held.catalog, modify(held.catalog, "b5", f"value &gt; {value}")
                feed.changed(version, update_items(before, held.catalog))
                assert len(feed.held) <= 2
            held.release.set()
            while component.catalog.version != held.catalog.version:
                await asyncio.wait_for(changed.wait(), 30)
                changed.clear()
            assert component.catalog == held.catalog
            assert component.counters["full_copies"] == 1  # only the newest's: the older one was never sent
            assert component.counters["changes_applied"] == 0
        finally:
            feed.abort()
            await component.server.close()
            await component.peers.close()


def test_warming_a_one_box_change_costs_the_same_at_40_and_400_boxes():
    """What the commit wrote is encoded (one element, one checkpoint), not the catalog; the next build then
    encodes nothing and makes the documents of the whole catalog.  Counted at two sizes."""
    for boxes in (40, 400):
        held = HeldCatalog(planned(boxes))
        counted = Yielder(slice=float("inf"))  # counts the checkpoints, never sleeps
        copies = CatalogCopies(held, "head", yielder=counted)
        copies.serialize()
        encoded, calls = copies.encoded, counted.calls
        held.catalog = changed = modify(held.catalog, "b5", "value &gt; 99.5")
        assert copies.warm({"boxes": {"b5"}, "apps": {"x"}}) == 1  # (a dict that is no element: passed over)
        assert (copies.encoded - encoded, counted.calls - calls) == (1, 1)
        assert copies.warm({"boxes": {"b5"}}) == 0  # kept already
        built = copies.serialize()
        assert copies.encoded - encoded == 1
        assert built.document == update_document(catalog_items(changed), version=4, origin="head").encode()


async def until(condition, timeout: float = 10.0) -> None:
    """Wait for the copy ahead's task to get there (it says so by no event: its counters)."""
    async def wait() -> None:
        while not condition():
            await asyncio.sleep(0.01)
    await asyncio.wait_for(wait(), timeout)


async def test_a_change_that_says_what_it_wrote_is_warmed_not_built_whole():
    held = HeldCatalog(planned(20))
    copies = CatalogCopies(held, "head")
    ahead = CopyAhead(copies, quiet=0.01, least=0.0)
    task = asyncio.create_task(ahead.run())
    try:
        ahead.changed({"boxes": {"b1"}})  # nothing built yet: the whole copy, whatever the commit said
        await held.build_started()
        assert (await copies.read()).version == 3
        await until(lambda: ahead.built == 3)  # (the build's own end, just after its readers')
        encoded = copies.encoded
        held.catalog = changed = modify(held.catalog, "b5", "value &gt; 99.5")
        ahead.changed({"boxes": {"b5"}})
        await held.build_started()
        await until(lambda: ahead.warmed == 1)
        assert ahead.built == 3 and copies.ready() is None and copies.encoded == encoded + 1  # no whole build
        built = await copies.read()  # the reader's build: the kept texts walked, nothing encoded
        assert copies.encoded == encoded + 1
        assert built.document == update_document(catalog_items(changed), version=4, origin="head").encode()
        held.catalog = modify(held.catalog, "b6", "value &gt; 98.5")
        ahead.changed(None)  # a change of unknown extent: the whole copy again
        await held.build_started()
        await until(lambda: ahead.built == 5)
    finally:
        task.cancel()
