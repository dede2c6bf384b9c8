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
from collections import Counter

import pytest
from support.partitioned import Lockstep, move_and_kill, producers_for_each_member, start_partitioned, subscribe

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
    cluster, nodes, dirs = await start_partitioned(cluster_factory, tmp_path, APP, "s")
    producers = producers_for_each_member(3)
    data = {p: bids(p, 900) for p in producers}
    want = sessions([r for rows in data.values() for r in rows])
    out, sub = await subscribe(cluster, "PerSession")
    try:
        lockstep = Lockstep(cluster, "Bid", data, BATCH)
        await lockstep.start()
        await move_and_kill(cluster, nodes, dirs, "s/0", lockstep, (300, 500, 900))
        await lockstep.close(final=True)
        assert await asyncio.to_thread(sub.wait, 120) == 0, sub.stderr.read()
    finally:
        if sub.poll() is None:
            sub.kill()
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    got = Counter((r["auction"], r["window_start"], r["window_end"], r["n"], r["total"]) for r in rows)
    assert got == want
