"""A window join partitioned over three real node processes (docs/cumulus.md §3.13, "Window joins"): q5's shape
(the auctions with the most bids per 1-second window) while three producers, one per member, stream bids; a
segment moves to another member while they do, and a member's node is killed with SIGKILL and restarted from
its log.  Every member's closed leaf rows reach member 0 in ``Gathered`` messages over the real links; a
subscriber of the query's out stream gets every window's rows exactly once, equal to the answer computed from
all of the bids.  The in-process test over moves, splits, restarts and a failover: test_cumulus_winjoin.py."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from collections import Counter

import pytest
from boreas.client.optimizer import Optimizer
from boreas.client.publisher import Publisher
from support.cluster import TOKEN, wait_until
from test_cumulus_windows_cluster import bids, producers_for_each_member
from test_cumulus_winjoin import answer

pytestmark = [pytest.mark.slow, pytest.mark.faults]

COUNTS = ("(SELECT auction, COUNT(*) AS n, window_start AS s, window_end AS e FROM TABLE(TUMBLE(TABLE Bid, "
          "DESCRIPTOR(ts), 1000)) GROUP BY auction, window_start, window_end)")
SQL = (f"SELECT X.auction, X.n, X.s FROM {COUNTS} X JOIN (SELECT MAX(C.n) AS m, C.s, C.e FROM {COUNTS} C "
       "GROUP BY C.s, C.e) Y ON X.s = Y.s AND X.e = Y.e AND X.n &gt;= Y.m")
APP = f"""<borealis>
  <input stream="Bid" schema="BidTuple" watermark="ts - INTERVAL '10' SECOND"/>
  <output stream="Hot"/>
  <schema name="BidTuple">
    <field name="auction" type="int"/><field name="price" type="int"/><field name="ts" type="long"/>
  </schema>
  <box name="j" type="m3"><in stream="Bid"/><out stream="Hot"/>
    <parameter name="sql" value="{SQL}"/>
  </box>
</borealis>"""
BATCH = 40


async def test_a_partitioned_window_join_emits_every_window_once_through_a_move_and_a_kill(cluster_factory, tmp_path):
    cluster = cluster_factory()
    await asyncio.to_thread(cluster.start_head)
    dirs = [tmp_path / f"member{m}" for m in range(3)]
    nodes = await asyncio.to_thread(cluster.start_nodes, data_dirs=dirs)
    members = "".join(f'<node endpoint="{n}"/>' for n in nodes)
    deploy = f'<deploy><partition box="j" segments="6" key="auction" epoch-ms="100">{members}</partition></deploy>'
    cluster.submit(cluster.write("app.xml", APP), cluster.write("deploy.xml", deploy))
    await asyncio.to_thread(cluster.wait_in_sync, *nodes)
    producers = producers_for_each_member(3)
    data = {p: bids(p, 900) for p in producers}
    want = answer("TUMBLE", [r for rows in data.values() for r in rows])
    out = cluster.workdir / "hot.jsonl"
    sub = subprocess.Popen([sys.executable, "-m", "boreas.cli.main", "subscribe", "Hot", "--output", str(out)],
                           env=cluster.env, stderr=subprocess.PIPE, text=True)
    try:
        await asyncio.to_thread(wait_until, lambda: any(
            s.stream == "Hot" for s in cluster.head_catalog().subscriptions.values()), what="the subscription")
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
            moving = asyncio.create_task(optimizer.move("j/0", nodes[2]))
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
    got = Counter((r["auction"], r["n"], r["s"], r["count"]) for r in rows)
    assert got == want and len(want) > 20
