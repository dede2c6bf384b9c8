"""The Head builds each catalog version's copy ahead of its first reader (head/copy_ahead.py), in a worker thread.

What a reader sees is what it saw when the copy was built on its first
read: the documents ``update_document`` makes of the whole catalog; what
changes is that, once the copy was built ahead, reading it encodes nothing
(the first reader does not wait for the serialization), and that readers on
the event loop racing the worker get the same documents.
"""

from __future__ import annotations

import asyncio

from boreas.catalog.replicate import catalog_items
from boreas.catalog.updates import update_document
from boreas.head.catalog_copy import CatalogCopies
from boreas.head.copy_ahead import CopyAhead
from test_catalog_reads import modify, planned


async def built(ahead: CopyAhead, version: int) -> None:
    for _ in range(500):  # (bounded: a build of 20 boxes takes milliseconds)
        if ahead.built == version:
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"version {version} was not built ahead (last: {ahead.built})")


async def test_each_quiet_version_is_built_ahead_and_read_without_encoding():
    current = {"catalog": planned(20)}
    copies = CatalogCopies(lambda: current["catalog"], "head")
    ahead = CopyAhead(copies, quiet=0.01, least=0.0)
    task = asyncio.create_task(ahead.run())
    try:
        ahead.changed()
        await built(ahead, 3)
        encoded = copies.encoded
        assert encoded == len(catalog_items(current["catalog"]))
        assert copies.document() == update_document(catalog_items(current["catalog"]), version=3,
                                                    origin="head").encode()
        assert copies.full_copy().version == 3 and copies.encoded == encoded  # read, not encoded again

        current["catalog"] = changed = modify(current["catalog"], "b5", "value &gt; 99.5")
        ahead.changed()
        await built(ahead, 4)
        assert copies.encoded == encoded + 1  # only the changed box
        assert copies.document() == update_document(catalog_items(changed), version=4, origin="head").encode()
        assert copies.encoded == encoded + 1
    finally:
        task.cancel()


async def test_readers_racing_the_worker_get_the_same_documents():
    catalog = planned(200)
    expected = update_document(catalog_items(catalog), version=3, origin="head").encode()
    for _ in range(5):
        copies = CatalogCopies(lambda: catalog, "head")
        worker = asyncio.create_task(asyncio.to_thread(copies.prepare))
        read = [copies.document() for _ in range(3)]
        version, _ = await worker
        assert version == 3 and read == [expected] * 3 and copies.document() == expected
        assert copies.encoded == len(catalog_items(catalog))  # built once, by whichever came first
