"""A SESSION view partitioned over three real node processes (docs/cumulus.md §3.13, "SESSION views"): three
producers, one per member, stream bids with pauses longer than the gap (sessions end while they stream); a
segment moves to another member while they do, taking the held rows of its keys' open sessions with it, and a
member's node is killed with SIGKILL and restarted from its log.  A subscriber of the view's out stream gets
every session's row exactly once, equal to the sessions found offline from all of the bids.  The in-process
property test over moves, splits, restarts and failovers: test_cumulus_sessions.py."""

from __future__ import annotations

import asyncio
import json
import random
import subprocess
import sys
from collections import Counter

import pytest
from boreas.client.optimizer import Optimizer
from boreas.client.publisher import Publisher
from support.cluster import TOKEN, wait_until
from test_cumulus_windows_cluster import producers_for_each_member

pytestmark = [pytest.mark.slow, pytest.mark.faults]

GAP = 1000
SQL = ("SELECT auction, window_start, window_end, COUNT(*) AS n, SUM(price) AS total FROM TABLE(SESSION(TABLE Bid "
       f"PARTITION BY auction, DESCRIPTOR(ts), {GAP})) GROUP BY auction, window_start, window_end")
APP = f"""<borealis>
  <input stream="Bid" schema="BidTuple" watermark="ts - INTERVAL '10' SECOND"/>
  <output stream="PerSession"/>
  <schema name="BidTuple">
    <field name="auction" type="int"/><field name="price" type="int"/><field name="ts" type="long"/>
  </schema>
  <box name="s" type="m3"><in stream="Bid"/><out stream="PerSession"/>
    <parameter name="sql" value="{SQL}"/>
  </box>
</borealis>"""
BATCH = 40


def bids(producer: str, count: int) -> list[tuple[int, int, int]]:
    """A producer's bids in event-time order (none late): 20 auctions, a pause of 3 s after every 150 bids."""
    rng = random.Random(producer)
    t, rows = 0, []
    for i in range(count):
        t += rng.randrange(0, 50) + (3000 if i % 150 == 149 else 0)
        rows.append((rng.randrange(20), rng.randrange(1, 100), t))
    return rows


def sessions(rows: list[tuple[int, int, int]]) -> Counter:
    """Every session's row from all of the bids: per auction sorted by time, cut at gaps of GAP or more."""
    out: Counter = Counter()
    for auction in {r[0] for r in rows}:
        run: list[tuple] = []
        for r in sorted((r for r in rows if r[0] == auction), key=lambda r: r[2]) + [None]:
            if run and (r is None or r[2] - run[-1][2] >= GAP):
                out[(auction, run[0][2], run[-1][2] + GAP, len(run), sum(x[1] for x in run))] += 1
                run = []
            if r is not None:
                run.append(r)
    return out


async def test_a_partitioned_session_view_emits_every_session_once_through_a_move_and_a_kill(cluster_factory, tmp_path):
    cluster = cluster_factory()
    await asyncio.to_thread(cluster.start_head)
    dirs = [tmp_path / f"member{m}" for m in range(3)]
    nodes = await asyncio.to_thread(cluster.start_nodes, data_dirs=dirs)
    members = "".join(f'<node endpoint="{n}"/>' for n in nodes)
    deploy = f'<deploy><partition box="s" segments="6" key="auction" epoch-ms="100">{members}</partition></deploy>'
    cluster.submit(cluster.write("app.xml", APP), cluster.write("deploy.xml", deploy))
    await asyncio.to_thread(cluster.wait_in_sync, *nodes)
    producers = producers_for_each_member(3)
    data = {p: bids(p, 900) for p in producers}
    want = sessions([r for rows in data.values() for r in rows])
    out = cluster.workdir / "sessions.jsonl"
    sub = subprocess.Popen([sys.executable, "-m", "boreas.cli.main", "subscribe", "PerSession", "--output", str(out)],
                           env=cluster.env, stderr=subprocess.PIPE, text=True)
    try:
        await asyncio.to_thread(wait_until, lambda: any(
            s.stream == "PerSession" for s in cluster.head_catalog().subscriptions.values()), what="the subscription")
        publishers = [Publisher(cluster.head, "Bid", TOKEN, producer=p, batch_size=BATCH) for p in producers]
        for publisher in publishers:
            await publisher.start()

        async def publish(part: slice) -> None:
            """The producers' rows in lockstep: none runs the watermark's 10 s ahead of another."""
            for start in range(part.start, part.stop, BATCH):
                for publisher, p in zip(publishers, producers):
                    await publisher.send(data[p][start:min(start + BATCH, part.stop)])
                for publisher in publishers:
                    await publisher.flush()

        await publish(slice(0, 300))
        async with Optimizer(cluster.head, TOKEN) as optimizer:
            moving = asyncio.create_task(optimizer.move("s/0", nodes[2]))
            await publish(slice(300, 500))
            moved = (await moving).relayout
        assert moved["changed"] and moved["moves"][0][0] == 0
        await asyncio.to_thread(cluster.stop, nodes[1], True)  # kill -9: recovered from its log
        await asyncio.to_thread(cluster.start_node, nodes[1], True, dirs[1])
        await publish(slice(500, 900))
        for publisher in publishers:
            await publisher.close(final=True)
        assert await asyncio.to_thread(sub.wait, 120) == 0, sub.stderr.read()
    finally:
        if sub.poll() is None:
            sub.kill()
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    got = Counter((r["auction"], r["window_start"], r["window_end"], r["n"], r["total"]) for r in rows)
    assert got == want
