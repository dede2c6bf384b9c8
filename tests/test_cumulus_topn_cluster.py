"""A top-N view partitioned over three real node processes by its PARTITION BY column (docs/cumulus.md §3.14):
three producers, one per member, stream bids; a segment moves to another member while they do, and a member's
node is killed with SIGKILL and restarted from its log.  The changelog a subscriber of the view's out stream
writes, summed by its ``_weight``, becomes the one-node top-N box's result over the same bids.  The in-process
test over moves, splits, rebalances and restarts: test_cumulus_topn.py."""

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
from boreas.m3.boxtype import infer_m3
from boreas.node.operators.m3topn import TopNM3Operator
from support.cluster import TOKEN, wait_until
from test_cumulus_topn import BID, BOX
from test_cumulus_windows_cluster import producers_for_each_member

pytestmark = [pytest.mark.slow, pytest.mark.faults]

APP = f"""<borealis>
  <input stream="Bid" schema="BidTuple"/>
  <output stream="Top"/>
  <schema name="BidTuple">
    <field name="auction" type="int"/><field name="price" type="int"/><field name="bidder" type="int"/>
  </schema>
  <box name="t" type="m3"><in stream="Bid"/><out stream="Top"/>
    <parameter name="sql" value="{dict(BOX.parameters)['sql'].replace(chr(10), ' ').replace('<', '&lt;')}"/>
  </box>
</borealis>"""
BATCH = 40


def bids(producer: str, count: int) -> list[tuple[int, int, int]]:
    rng = random.Random(producer)
    return [(rng.randrange(20), rng.randrange(1, 100), rng.randrange(8)) for _ in range(count)]


def summed(path) -> Counter:
    total: Counter = Counter()
    if path.exists():
        for line in path.read_text().splitlines():
            if line.strip():
                r = json.loads(line)
                total[(r["auction"], r["bidder"], r["total"], r["rn"])] += r["_weight"]
    return +total


async def subscribe_top(cluster):
    """``boreas subscribe Top`` (to its end: no --count) writing JSON lines, once the Head lists it: the file
    and the process (the caller waits for or kills it)."""
    out = cluster.workdir / "top.jsonl"
    sub = subprocess.Popen([sys.executable, "-m", "boreas.cli.main", "subscribe", "Top", "--output", str(out)],
                           env=cluster.env, stderr=subprocess.PIPE, text=True)
    await asyncio.to_thread(wait_until, lambda: any(
        s.stream == "Top" for s in cluster.head_catalog().subscriptions.values()), what="the subscription")
    return out, sub


async def start_top_n(cluster_factory, tmp_path):
    """A Head and three durable nodes (data under ``tmp_path``) running APP's top-N box ``t`` partitioned in 6
    segments by auction, every node in sync: the cluster, the nodes' endpoints and their data directories."""
    cluster = cluster_factory()
    await asyncio.to_thread(cluster.start_head)
    dirs = [tmp_path / f"member{m}" for m in range(3)]
    nodes = await asyncio.to_thread(cluster.start_nodes, data_dirs=dirs)
    members = "".join(f'<node endpoint="{n}"/>' for n in nodes)
    deploy = f'<deploy><partition box="t" segments="6" key="auction" epoch-ms="100">{members}</partition></deploy>'
    cluster.submit(cluster.write("app.xml", APP), cluster.write("deploy.xml", deploy))
    await asyncio.to_thread(cluster.wait_in_sync, *nodes)
    return cluster, nodes, dirs


async def test_a_partitioned_top_n_equals_the_one_node_result_through_a_move_and_a_kill(cluster_factory, tmp_path):
    cluster, nodes, dirs = await start_top_n(cluster_factory, tmp_path)
    producers = producers_for_each_member(3)
    data = {p: bids(p, 600) for p in producers}
    one = TopNM3Operator(BOX, [BID], infer_m3(BOX, [BID]))
    for rows in data.values():
        one.process(0, rows, 0.0)
    want = Counter(one.top_rows())
    out, sub = await subscribe_top(cluster)
    try:
        publishers = [Publisher(cluster.head, "Bid", TOKEN, producer=p, batch_size=BATCH) for p in producers]
        for publisher in publishers:
            await publisher.start()

        async def publish(part: slice) -> None:
            for start in range(part.start, part.stop, BATCH):
                for publisher, p in zip(publishers, producers):
                    await publisher.send(data[p][start:min(start + BATCH, part.stop)])
                for publisher in publishers:
                    await publisher.flush()

        await publish(slice(0, 200))
        async with Optimizer(cluster.head, TOKEN) as optimizer:
            moving = asyncio.create_task(optimizer.move("t/0", nodes[2]))
            await publish(slice(200, 350))
            moved = (await moving).relayout
        assert moved["changed"] and moved["moves"][0][0] == 0
        await asyncio.to_thread(cluster.stop, nodes[1], True)  # kill -9: recovered from its log
        await asyncio.to_thread(cluster.start_node, nodes[1], True, dirs[1])
        await publish(slice(350, 600))
        for publisher in publishers:
            await publisher.close()
        await asyncio.to_thread(wait_until, lambda: summed(out) == want, 120, "the ranked rows")
    finally:
        sub.kill()
