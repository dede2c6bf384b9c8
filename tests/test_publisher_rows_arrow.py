"""A row publisher sends Arrow record batches made in the client (issue 30, items 1, 5, 7).

The rows a publisher is given are checked with the node's row check and built
into columns of the stream's Arrow schema (client/row_batches.py, checked
by tests/test_row_batches.py); the node takes them as they came.  What a
user sees stays: the same rows arrive, bad rows are refused one by one with
their field and reason, a re-run drops what was taken, and a publish begun by an older publisher (msgpack rows) and run
again by this one drops what the node already took instead of being refused.
"""

from __future__ import annotations

import asyncio

import pytest
from boreas.client.publisher import Publisher, PublishRefused
from boreas.client.subscriber import Subscriber
from boreas.wire.links import OutboundLink
from support.cluster import TOKEN, get_json
from support.inprocess import in_process


def readings(first: int, count: int) -> list[tuple]:
    return [(n % 3, 20.0 + n) for n in range(first, first + count)]


def converted(rows: list[tuple]) -> list[tuple]:
    """What the in-process application's filter and map make of readings (support/inprocess.py)."""
    return [(s, c * 9.0 / 5.0 + 32.0) for s, c in rows if c > -90.0]


async def until_sentinel(subscriber: Subscriber, head: str) -> list[tuple]:
    """Every row the subscriber gets before a sentinel published after them: exactly what was taken, no more."""
    async with Publisher(head, "Reading", TOKEN, producer="sentinel") as sentinel:
        await sentinel.send([(99, 0.0)])
    got: list[tuple] = []

    async def read() -> None:
        async for row in subscriber:
            if row[0] == 99:
                return
            got.append(row)

    await asyncio.wait_for(read(), 30)
    return got


async def test_rows_and_bad_rows_through_nodes_as_before():
    async with in_process(nodes=2) as cluster:
        await cluster.deploy()
        good = readings(0, 25)
        async with Subscriber(cluster.url, "Converted", TOKEN) as subscriber:
            async with Publisher(cluster.url, "Reading", TOKEN, batch_size=10) as publisher:
                await publisher.send(good[:20] + [(1, -100.0), (2, "hot"), {"sensor": 7, "celsius": 1.5}]
                                     + [(2**40, 1.0)] + good[20:])
            assert publisher.accepted == 27
            assert [(e.row, e.field, e.reason) for e in publisher.refused] == [
                (21, "celsius", "expected double, got str 'hot'"), (23, "sensor", "1099511627776 is out of range for int")]
            status = await asyncio.to_thread(get_json, f"{cluster.node_url(0)}/status")
            assert status["data"]["flow"]["refused_rows"] == 2
            rows = good[:20] + [(1, -100.0), (7, 1.5)] + good[20:]
            assert await until_sentinel(subscriber, cluster.url) == converted(rows)


async def test_a_publish_begun_as_msgpack_rows_is_finished_as_arrow_once():
    """A publisher of an older Boreas sent its first batches as msgpack rows and stopped; the same producer run
    again sends Arrow: what the node took is dropped as duplicates (not refused as other rows), the rest taken,
    every row arrives once.  A reused producer with other rows is still refused."""
    async with in_process(nodes=2) as cluster:
        await cluster.deploy()
        rows = readings(0, 50)
        async with Subscriber(cluster.url, "Converted", TOKEN) as subscriber:
            locate = Publisher(cluster.url, "Reading", TOKEN)
            await locate.locate()
            old = OutboundLink(locate.entries[0], TOKEN, "p", digests=True)
            await old.start()
            for start in (0, 10, 20):  # what an older publisher sent: rows as msgpack, each batch's digest of them
                await old.send("Reading", [list(r) for r in rows[start:start + 10]])
            await old.flush(10)
            await old.abort()
            async with Publisher(cluster.url, "Reading", TOKEN, producer="p", batch_size=10) as publisher:
                await publisher.send(rows)
            assert (publisher.duplicates, publisher.accepted, publisher.refusals) == (3, 20, [])
            assert await until_sentinel(subscriber, cluster.url) == converted(rows)
            with pytest.raises(PublishRefused, match="already published batch 0 of Reading with other rows"):
                async with Publisher(cluster.url, "Reading", TOKEN, producer="p", batch_size=10) as again:
                    await again.send(readings(100, 10))
