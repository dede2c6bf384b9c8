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
from boreas.client.head_api import submit_documents, wait_submission
from boreas.client.publisher import Publisher, PublishRefused
from boreas.client.subscriber import Subscriber
from boreas.wire.client import PeerClient
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
            # the good batches traveled as Arrow (what this module is about), the one with bad rows as rows
            assert (status["data"]["flow"]["arrow_batches_in"], status["data"]["flow"]["row_batches_in"]) == (2, 1)
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


def nullable_application(name_field: str = '<field name="name" type="string" size="3" nullable="true"/>',
                         schema: str = "NS", keep: str = "k &gt; 0") -> bytes:
    return f"""<borealis>
  <input stream="N" schema="{schema}"/> <output stream="Kept" schema="{schema}"/>
  <schema name="{schema}"><field name="k" type="int"/>{name_field}</schema>
  <query name="keep"><box name="keep" type="filter"><in stream="N"/><out stream="Kept"/>
    <parameter name="expression.0" value="{keep}"/></box></query>
</borealis>""".encode()


async def submit(cluster, app: bytes, replace: bool = False) -> None:
    deploy = f'<deploy><publish stream="N" node="{cluster.nodes[0].endpoint}"/>' \
             f'<node endpoint="{cluster.nodes[0].endpoint}" query="keep"/></deploy>'.encode()
    async with PeerClient(TOKEN) as peers:
        status = await submit_documents(peers, cluster.url, [("nulls.xml", app)] + ([] if replace else [
            ("deploy.xml", deploy)]), replace=replace)
        status = await wait_submission(peers, cluster.url, status, 20)
    assert status["state"] == "deployed", status


async def test_a_batch_whose_nullable_string_is_null_in_every_row_arrives():
    """The review's repro: the second batch's string column is NULL throughout; the node once threw on it, dropped
    the connection, and the publisher resent it for ever (only 2 of 4 rows arrived)."""
    async with in_process(nodes=1) as cluster:
        await submit(cluster, nullable_application())
        async with Subscriber(cluster.url, "Kept", TOKEN) as subscriber:
            async with Publisher(cluster.url, "N", TOKEN, batch_size=2) as publisher:
                await publisher.send([[1, "ab"], [2, None], [3, None], [4, None]])
            assert (publisher.accepted, publisher.refused, publisher.refusals) == (4, [], [])
            got: list[tuple] = []

            async def read() -> None:
                async for row in subscriber:
                    got.append(row)
                    if len(got) == 4:
                        return

            await asyncio.wait_for(read(), 30)
            assert got == [(1, "ab"), (2, None), (3, None), (4, None)]
        flow = (await asyncio.to_thread(get_json, f"{cluster.node_url(0)}/status"))["data"]["flow"]
        assert (flow.get("arrow_batches_in"), flow.get("row_batches_in")) == (2, None)  # rows traveled as Arrow


async def test_an_arrow_batch_of_a_replaced_schema_is_refused_row_by_row():
    """After ``submit --replace`` renamed a field, a publisher still holding the old schema sends Arrow batches
    the node cannot read: every row of them is refused, numbered and counted, as rows were."""
    async with in_process(nodes=1) as cluster:
        await submit(cluster, nullable_application())
        async with Publisher(cluster.url, "N", TOKEN, batch_size=3) as publisher:
            await submit(cluster, nullable_application('<field name="label" type="string" size="3"/>', "NS2",
                                                     "k &gt; -1"), replace=True)
            await publisher.send([[n, "ab"] for n in range(5)])
        assert (publisher.accepted, publisher.refused_count, publisher.acknowledged_rows) == (0, 5, 5)
        assert [(e.row, e.field) for e in publisher.refused] == [(n, "name") for n in range(5)]


async def test_a_batch_that_breaks_decoding_is_refused_and_the_node_goes_on():
    """An Arrow batch naming a column twice makes the node's check throw: that batch is refused with the reason
    (the publisher says so), never the connection; the node keeps taking batches."""
    import pyarrow as pa
    from boreas.wire.columns import Columns

    twice = pa.RecordBatch.from_arrays([pa.array([1], pa.int32()), pa.array(["a"]), pa.array([2], pa.int32())],
                                       names=["k", "name", "k"])
    async with in_process(nodes=1) as cluster:
        await submit(cluster, nullable_application())
        with pytest.raises(PublishRefused, match="does not decode"):
            async with Publisher(cluster.url, "N", TOKEN) as publisher:
                await publisher.send(Columns(twice))
        async with Subscriber(cluster.url, "Kept", TOKEN) as subscriber:
            async with Publisher(cluster.url, "N", TOKEN) as after:
                await after.send([[5, "ok"]])
            assert after.accepted == 1
            assert await asyncio.wait_for(anext(aiter(subscriber)), 30) == (5, "ok")
        flow = (await asyncio.to_thread(get_json, f"{cluster.node_url(0)}/status"))["data"]["flow"]
        assert flow["refused_batches"] == 1


async def test_a_refused_batch_leaves_no_gap_before_the_publishers_next(caplog):
    """A batch refused because it does not decode is refused for good: the publisher never re-sends it, so the
    node takes its next batch at once instead of holding it behind a gap that only a timeout skips."""
    import pyarrow as pa
    from boreas.wire.columns import Columns

    twice = pa.RecordBatch.from_arrays([pa.array([1], pa.int32()), pa.array(["a"]), pa.array([2], pa.int32())],
                                       names=["k", "name", "k"])
    async with in_process(nodes=1) as cluster:
        await submit(cluster, nullable_application())
        async with Subscriber(cluster.url, "Kept", TOKEN) as subscriber:
            with pytest.raises(PublishRefused, match="does not decode"):
                async with Publisher(cluster.url, "N", TOKEN) as publisher:
                    await publisher.send(Columns(twice))
                    await publisher.send([[5, "ok"]])
            assert (publisher.accepted, publisher.refused_count) == (1, 1)  # the refused batch's row counts too
            assert await asyncio.wait_for(anext(aiter(subscriber)), 30) == (5, "ok")
        received = (await asyncio.to_thread(get_json, f"{cluster.node_url(0)}/status"))["data"]["in"]
        assert received.get("held_batches", 0) == 0  # the next batch was not held behind the refused one
        assert "a gap did not fill" not in caplog.text


@pytest.mark.slow  # waits 2 s for a reply that never comes
async def test_a_batch_inside_the_dataflow_that_breaks_decoding_fails_its_connection(caplog):
    """Only a publisher's batch is refused for not decoding: a box's or a Cumulus member's (``~`` in the
    producer) fails its connection instead, so its sender keeps it and sends it again, never drops it as
    refused (a silent loss inside the dataflow)."""
    import pyarrow as pa
    from boreas.wire.columns import Columns

    twice = pa.RecordBatch.from_arrays([pa.array([1], pa.int32()), pa.array(["a"]), pa.array([2], pa.int32())],
                                       names=["k", "name", "k"])
    async with in_process(nodes=1) as cluster:
        await submit(cluster, nullable_application())
        locate = Publisher(cluster.url, "N", TOKEN)
        await locate.locate()
        link = OutboundLink(locate.entries[0], TOKEN, "upstream")
        await link.start()
        try:
            await link.send("N", Columns(twice), producer="box~0123456789ab", seq=0)
            with pytest.raises(TimeoutError):  # never answered: kept and sent again after each reconnect
                await link.flush(2)
        finally:
            await link.abort()
        assert link.counters["refused_batches"] == 0
        assert "box~0123456789ab does not decode: failing its connection" in caplog.text


@pytest.mark.slow  # the publisher asks the Head again after REROUTE_AFTER (2 s)
async def test_a_whole_refused_batch_counts_its_rows_even_when_sent_across_a_failover():
    """A batch refused whole counts each of its rows as refused, also when its send waited on an entry node that
    was down and the publisher moved to the node the Head names meanwhile (the reply then comes on the new link)."""
    import socket

    import pyarrow as pa
    from boreas.wire.columns import Columns

    twice = pa.RecordBatch.from_arrays([pa.array([1, 2], pa.int32()), pa.array(["a", "b"]),
                                        pa.array([2, 3], pa.int32())], names=["k", "name", "k"])
    with socket.socket() as probe:  # a port nothing listens on: the entry node "down"
        probe.bind(("127.0.0.1", 0))
        down = f"http://127.0.0.1:{probe.getsockname()[1]}"
    async with in_process(nodes=1) as cluster:
        await submit(cluster, nullable_application())
        publisher = Publisher(cluster.url, "N", TOKEN, capacity=1)
        await publisher.locate()
        publisher.entries = [down]
        with pytest.raises(PublishRefused, match="does not decode"):
            async with publisher:
                await publisher.send([[1, "a"]])  # the one place: queued for the node that is down
                await publisher.send(Columns(twice))  # waits for room until the publisher asks the Head again
                assert publisher.entries == [cluster.node_url(0)]
        assert (publisher.accepted, publisher.refused_count, publisher.acknowledged_rows) == (1, 2, 3)
        assert [(e.row, e.field) for e in publisher.refused] == [(1, ""), (2, "")]
