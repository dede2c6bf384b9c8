"""A TUMBLE view partitioned over three real node processes (docs/cumulus.md §3.13): three producers, one per
member, stream bids (the stream's watermark declared on its ``<input>``, 10 s behind: a member's node
may take its producer's batches a few seconds after another's); a segment moves to another member while they do, and a member's node is killed with
SIGKILL and restarted from its log.  A subscriber of the view's out stream gets every window's row exactly
once, equal to the row-at-a-time reference (tests/test_cumulus_windows.py's), none of them late.  The in-process property test over moves, splits and restarts:
test_cumulus_windows.py."""

from __future__ import annotations

import asyncio
import json
import random
import subprocess
import sys
import zlib
from collections import Counter

import pytest
from boreas.client.optimizer import Optimizer
from boreas.client.publisher import Publisher
from support.cluster import TOKEN, wait_until
from test_cumulus_windows import Reference

pytestmark = [pytest.mark.slow, pytest.mark.faults]

SQL = ("SELECT auction, window_start, window_end, COUNT(*) AS n, SUM(price) AS total "
       "FROM TABLE(TUMBLE(TABLE Bid, DESCRIPTOR(ts), INTERVAL '1' SECOND)) GROUP BY auction, window_start, window_end")
APP = f"""<borealis>
  <input stream="Bid" schema="BidTuple" watermark="ts - INTERVAL '10' SECOND"/>
  <output stream="PerWindow"/>
  <schema name="BidTuple">
    <field name="auction" type="int"/><field name="price" type="int"/><field name="ts" type="long"/>
  </schema>
  <box name="w" type="m3"><in stream="Bid"/><out stream="PerWindow"/>
    <parameter name="sql" value="{SQL}"/>
  </box>
</borealis>"""
BATCH = 40


def producers_for_each_member(n: int) -> list[str]:
    """Producer ids that the publisher's pick sends to members 0, 1, ..., n-1."""
    found: dict[int, str] = {}
    i = 0
    while len(found) < n:
        found.setdefault(zlib.crc32(f"bids-{i}".encode()) % n, f"bids-{i}")
        i += 1
    return [found[m] for m in range(n)]


def bids(producer: str, count: int) -> list[tuple[int, int, int]]:
    """A producer's bids in event-time order (none late): about 40 a second of event time, 30 auctions."""
    rng = random.Random(producer)
    t, rows = 0, []
    for _ in range(count):
        t += rng.randrange(0, 50)
        rows.append((rng.randrange(30), rng.randrange(1, 100), t))
    return rows


async def test_a_partitioned_tumble_view_emits_every_window_once_through_a_move_and_a_kill(cluster_factory, tmp_path):
    cluster = cluster_factory()
    await asyncio.to_thread(cluster.start_head)
    dirs = [tmp_path / f"member{m}" for m in range(3)]
    nodes = await asyncio.to_thread(cluster.start_nodes, data_dirs=dirs)
    members = "".join(f'<node endpoint="{n}"/>' for n in nodes)
    deploy = f'<deploy><partition box="w" segments="6" key="auction" epoch-ms="100">{members}</partition></deploy>'
    cluster.submit(cluster.write("app.xml", APP), cluster.write("deploy.xml", deploy))
    await asyncio.to_thread(cluster.wait_in_sync, *nodes)
    producers = producers_for_each_member(3)
    data = {p: bids(p, 900) for p in producers}
    ref = Reference("TUMBLE")
    for p, rows in data.items():
        ref.batch(p, rows, 0.0)
    ref.close_to(float("inf"))
    out = cluster.workdir / "windows.jsonl"
    sub = subprocess.Popen([sys.executable, "-m", "boreas.cli.main", "subscribe", "PerWindow", "--output", str(out)], env=cluster.env, stderr=subprocess.PIPE,
                           text=True)
    try:
        await asyncio.to_thread(wait_until, lambda: any(
            s.stream == "PerWindow" for s in cluster.head_catalog().subscriptions.values()), what="the subscription")
        publishers = [Publisher(cluster.head, "Bid", TOKEN, producer=p, batch_size=BATCH) for p in producers]
        for publisher in publishers:
            await publisher.start()

        async def publish(part: slice) -> None:
            """The producers' rows in lockstep, a batch each in turn: no producer runs the stream's 10 s
            watermark delay ahead of another (none of their rows is late)."""
            for start in range(part.start, part.stop, BATCH):
                for publisher, p in zip(publishers, producers):
                    await publisher.send(data[p][start:min(start + BATCH, part.stop)])
                for publisher in publishers:
                    await publisher.flush()

        await publish(slice(0, 300))
        async with Optimizer(cluster.head, TOKEN) as optimizer:
            moving = asyncio.create_task(optimizer.move("w/0", nodes[2]))
            await publish(slice(300, 500))
            moved = (await moving).relayout
        assert moved["changed"] and moved["moves"][0][0] == 0
        await asyncio.to_thread(cluster.stop, nodes[1], True)  # kill -9: recovered from its log
        await asyncio.to_thread(cluster.start_node, nodes[1], True, dirs[1])
        await publish(slice(500, 900))
        # each producer's ``final``: +inf in the watermark closes every window.  A node's own producers may end
        # before the Closes carrying the others' +inf reach its member: the view's out stream on that node ends
        # only after the member emitted its last windows (node/stream_ends.py), so the subscriber, which exits
        # at the stream's end, gets them all
        for publisher in publishers:
            await publisher.close(final=True)
        assert await asyncio.to_thread(sub.wait, 120) == 0, sub.stderr.read()
    finally:
        if sub.poll() is None:
            sub.kill()
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    got = Counter((r["auction"], r["window_start"], r["window_end"], r["n"], r["total"]) for r in rows)
    assert got == Counter(ref.rows)
