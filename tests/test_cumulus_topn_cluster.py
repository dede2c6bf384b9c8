"""A top-N view partitioned over three real node processes by its PARTITION BY column (docs/cumulus.md §3.14):
three producers, one per member, stream bids; a segment moves to another member while they do, and a member's
node is killed with SIGKILL and restarted from its log.  The changelog a subscriber of the view's out stream
writes, summed by its ``_weight``, becomes the one-node top-N box's result over the same bids.  The in-process
test over moves, splits, rebalances and restarts: test_cumulus_topn.py."""

from __future__ import annotations

import asyncio
import json
import random
from collections import Counter

import pytest
from boreas.m3.boxtype import infer_m3
from boreas.node.operators.m3topn import TopNM3Operator
from support.cluster import wait_until
from support.partitioned import Lockstep, move_and_kill, producers_for_each_member, start_partitioned, subscribe
from test_cumulus_topn import BID, BOX

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


def ranked(*batches: list) -> Counter:
    """The one-node top-N box's rows after ``batches`` (the answer a subscriber's changelog must sum to)."""
    one = TopNM3Operator(BOX, [BID], infer_m3(BOX, [BID]))
    for rows in batches:
        one.process(0, rows, 0.0)
    return Counter(one.top_rows())


async def test_a_partitioned_top_n_equals_the_one_node_result_through_a_move_and_a_kill(cluster_factory, tmp_path):
    cluster, nodes, dirs = await start_partitioned(cluster_factory, tmp_path, APP, "t")
    producers = producers_for_each_member(3)
    data = {p: bids(p, 600) for p in producers}
    want = ranked(*data.values())
    out, sub = await subscribe(cluster, "Top")
    try:
        lockstep = Lockstep(cluster, "Bid", data, BATCH)
        await lockstep.start()
        await move_and_kill(cluster, nodes, dirs, "t/0", lockstep, (200, 350, 600))
        await lockstep.close(final=False)
        await asyncio.to_thread(wait_until, lambda: summed(out) == want, 120, "the ranked rows")
    finally:
        sub.kill()
