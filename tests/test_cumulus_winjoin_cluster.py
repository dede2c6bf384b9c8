"""A window join partitioned over three real node processes (docs/cumulus.md §3.13, "Window joins"): q5's shape
(the auctions with the most bids per 1-second window) while three producers, one per member, stream bids; a
segment moves to another member while they do, and a member's node is killed with SIGKILL and restarted from
its log.  Every member's closed leaf rows reach member 0 in ``Gathered`` messages over the real links; a
subscriber of the query's out stream gets every window's rows exactly once, equal to the answer computed from
all of the bids.  The in-process test over moves, splits, restarts and a failover: test_cumulus_winjoin.py."""

from __future__ import annotations

import asyncio
import json
from collections import Counter

import pytest
from support.partitioned import Lockstep, move_and_kill, producers_for_each_member, start_partitioned, subscribe
from test_cumulus_windows_cluster import bids
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
    cluster, nodes, dirs = await start_partitioned(cluster_factory, tmp_path, APP, "j")
    producers = producers_for_each_member(3)
    data = {p: bids(p, 900) for p in producers}
    want = answer("TUMBLE", [r for rows in data.values() for r in rows])
    out, sub = await subscribe(cluster, "Hot")
    try:
        lockstep = Lockstep(cluster, "Bid", data, BATCH)
        await lockstep.start()
        await move_and_kill(cluster, nodes, dirs, "j/0", lockstep, (300, 500, 900))
        await lockstep.close(final=True)
        assert await asyncio.to_thread(sub.wait, 120) == 0, sub.stderr.read()
    finally:
        if sub.poll() is None:
            sub.kill()
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    got = Counter((r["auction"], r["n"], r["s"], r["count"]) for r in rows)
    assert got == want and len(want) > 20
