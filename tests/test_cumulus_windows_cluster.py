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
from collections import Counter

import pytest
from support.partitioned import Lockstep, move_and_kill, producers_for_each_member, start_partitioned, subscribe
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


def bids(producer: str, count: int) -> list[tuple[int, int, int]]:
    """A producer's bids in event-time order (none late): about 40 a second of event time, 30 auctions."""
    rng = random.Random(producer)
    t, rows = 0, []
    for _ in range(count):
        t += rng.randrange(0, 50)
        rows.append((rng.randrange(30), rng.randrange(1, 100), t))
    return rows


async def test_a_partitioned_tumble_view_emits_every_window_once_through_a_move_and_a_kill(cluster_factory, tmp_path):
    cluster, nodes, dirs = await start_partitioned(cluster_factory, tmp_path, APP, "w")
    producers = producers_for_each_member(3)
    data = {p: bids(p, 900) for p in producers}
    ref = Reference("TUMBLE")
    for p, rows in data.items():
        ref.batch(p, rows, 0.0)
    ref.close_to(float("inf"))
    out, sub = await subscribe(cluster, "PerWindow")
    try:
        lockstep = Lockstep(cluster, "Bid", data, BATCH)
        await lockstep.start()
        await move_and_kill(cluster, nodes, dirs, "w/0", lockstep, (300, 500, 900))
        # each producer's ``final``: +inf in the watermark closes every window.  A node's own producers may end
        # before the Closes carrying the others' +inf reach its member: the view's out stream on that node ends
        # only after the member emitted its last windows (node/stream_ends.py), so the subscriber, which exits
        # at the stream's end, gets them all
        await lockstep.close(final=True)
        assert await asyncio.to_thread(sub.wait, 120) == 0, sub.stderr.read()
    finally:
        if sub.poll() is None:
            sub.kill()
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    got = Counter((r["auction"], r["window_start"], r["window_end"], r["n"], r["total"]) for r in rows)
    assert got == Counter(ref.rows)
