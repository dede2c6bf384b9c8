"""``bench/cumulus.py --parts move``: the pause a segment move of ~1M entries causes while rows stream."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import random
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from cumulus_q3 import MOVE_TARGET, producers  # noqa: E402
from cumulus_scaling import start_cluster  # noqa: E402
from procs import (
    BenchError,
    Run,
    progress,
)

GROUP_SQL = "SELECT a, SUM(b) AS s, COUNT(*) AS n FROM R GROUP BY a"
GROUP_APP = f"""<borealis>
  <input stream="R" schema="RT"/>
  <schema name="RT"><field name="a" type="int"/><field name="b" type="int"/></schema>
  <box name="g" type="m3">
    <in stream="R"/>
    <out stream="G"/>
    <parameter name="sql" value="{GROUP_SQL}"/>
  </box>
  <output stream="G"/>
</borealis>"""
GROUP_MAPS = ("Q1_s", "Q1_n")  # a's SUM(b) and COUNT(*): one entry each per distinct a
LOAD_CHUNK = 50_000  # entries per POST /segments/g/load


def gaps(times: list[float], lo: float, hi: float) -> tuple[float, float]:
    """The longest gap between consecutive ``times`` (sorted) that overlaps ``[lo, hi]``, and when it began."""
    best, at = 0.0, lo
    for t0, t1 in itertools.pairwise(times):
        if t1 >= lo and t0 <= hi and t1 - t0 > best:
            best, at = t1 - t0, t0
    return best, at


def rows_per_s(arrivals: list[tuple[float, int, int]], lo: float, hi: float) -> float:
    return sum(m + o for t, m, o in arrivals if lo <= t < hi) / max(hi - lo, 1e-9)


async def move_pause(args: argparse.Namespace, run: Run) -> dict[str, Any]:
    """Box ``g`` (GROUP BY a) over 2 members, 2 segments, bulk-loaded so member 1's segment holds
    ``--move-entries`` entries; publishers stream ``--move-rate`` rows/s over every key; the segment moves
    to member 0 (the leader).  Measured: the leader's answer, the longest gap between changes of the moving segment's
    keys on out stream G (what a subscriber sees paused), and the view changes per second."""
    import msgspec
    from boreas.client.optimizer import Optimizer
    from boreas.client.publisher import Publisher
    from boreas.client.query import QueryClient
    from boreas.client.subscriber import Subscriber
    from boreas.m3.cumulus import slot
    from boreas.wire.addressing import endpoint_url
    from boreas.wire.client import PeerClient

    def deploy(nodes: list[str]) -> str:
        members = "".join(f'<node endpoint="{n}"/>' for n in nodes)
        return (f'<deploy><publish stream="R"/><partition box="g" segments="2" epoch-ms="{args.epoch_ms}">'
                f'{members}</partition></deploy>')

    cluster = await start_cluster(args, run, "move", 2, GROUP_APP, deploy)
    head, nodes = cluster.head, cluster.nodes
    async with QueryClient(head, run.token) as reader:
        layout = await reader.layout_of("g", fresh=True)
        maps = (await reader.maps("g"))["maps"]
    if layout is None or sorted(maps) != sorted(GROUP_MAPS):
        raise BenchError(f"box g: expected a partitioned box with maps {GROUP_MAPS}, got {sorted(maps)}")
    # member 1's segment moves to member 0, the leader: its answer then comes once the entries are in (a
    # leader that gives a segment away answers once it sent it, before the target installed it)
    seg = next((s for s in layout.segments if s.member == 1), None)
    if seg is None or not any(s.member == 0 for s in layout.segments):
        raise BenchError(f"box g: expected a segment on each member, got {layout.to_dict()['segments']}")
    lo, hi = seg.lo, seg.hi

    # the keys: 0, 1, ... until the moving segment holds --move-entries entries (two per key)
    began = time.perf_counter()
    want, moving, a = args.move_entries // len(GROUP_MAPS), 0, 0
    owners = layout.owners
    per_member: list[list] = [[], []]
    while moving < want:
        s = slot(a)
        moving += lo <= s < hi
        entries = per_member[owners[s]]
        entries.append(["Q1_s", [a], a % 100 + 1])  # no zero: a zero entry is no entry
        entries.append(["Q1_n", [a], 1])
        a += 1
    keys = a
    encoder = msgspec.msgpack.Encoder()
    async with PeerClient(run.token, timeout=120.0) as peers:

        async def load(member: int) -> None:
            entries = per_member[member]
            for part, start in enumerate(range(0, len(entries), LOAD_CHUNK), 1):
                url = endpoint_url(layout.members[member], f"/segments/g/load?job=bench&part={part}")
                await peers.call("POST", url, data=encoder.encode(entries[start:start + LOAD_CHUNK]),
                                 content_type="application/msgpack")

        await asyncio.gather(load(0), load(1))
        total = sum(len(e) for e in per_member)
        deadline = time.monotonic() + 120
        while True:
            counted = [await peers.call("GET", f"http://{n}/segments/g") for n in nodes]
            held = {int(sid): sum(per_map.values()) for c in counted for sid, per_map in c["segments"].items()}
            if sum(held.values()) == total:
                break
            run.procs.check()
            if time.monotonic() > deadline:
                raise BenchError(f"box g: {sum(held.values()):,} of {total:,} bulk-loaded entries in after 120 s")
            await asyncio.sleep(0.2)
    per_member.clear()
    loaded_s = time.perf_counter() - began
    progress(f"move: {total:,} entries bulk-loaded ({keys:,} keys; segment g/{seg.id} holds {held[seg.id]:,}) "
             f"in {loaded_s:.1f} s; streaming {args.move_rate:,} rows/s, then moving g/{seg.id} to member 0")

    sub = Subscriber(head, "G", run.token, queue_batches=4096)
    await sub.start()
    arrivals: list[tuple[float, int, int]] = []  # (time, rows of the moving segment's keys, other rows)

    async def consume() -> None:
        async for rows in sub.batches():
            t = time.perf_counter()
            n = sum(1 for row in rows if lo <= slot(row[0]) < hi)
            arrivals.append((t, n, len(rows) - n))

    consuming = asyncio.create_task(consume())
    names = producers("R", 2, 2)
    pubs = [Publisher(head, "R", run.token, producer=p, batch_size=args.move_batch, capacity=args.window)
            for p in names]
    for p in pubs:
        await p.start()
    stop = asyncio.Event()
    sent = {"rows": 0, "b": 0}
    behind = [0.0]  # the most a publisher fell behind its schedule (its window full: the box held it back)

    async def stream(publisher: Publisher, seed: int) -> None:
        rnd = random.Random(seed)
        interval = args.move_batch / (args.move_rate / len(pubs))
        t0, i = time.perf_counter(), 0
        while not stop.is_set():
            delay = t0 + i * interval - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            else:
                behind[0] = max(behind[0], -delay)
            rows = [(rnd.randrange(keys), rnd.randrange(100)) for _ in range(args.move_batch)]
            sent["rows"] += len(rows)
            sent["b"] += sum(b for _, b in rows)
            await publisher.send(rows)
            i += 1

    streaming = [asyncio.create_task(stream(p, i)) for i, p in enumerate(pubs)]
    t_start = time.perf_counter()
    await asyncio.sleep(args.move_warmup)
    behind_before = behind[0]
    t_call = time.perf_counter()
    async with Optimizer(head, run.token, timeout=120.0) as optimizer:
        reply = (await optimizer.move(f"g/{seg.id}", layout.members[0])).relayout
    t_reply = time.perf_counter()
    await asyncio.sleep(args.move_after)
    stop.set()
    await asyncio.gather(*streaming)
    for p in pubs:
        await p.flush(timeout=60.0)
    t_stop = time.perf_counter()
    # every row in the maps: the sums of both maps equal what was loaded and streamed
    want_n = keys + sent["rows"]
    want_s = sum(k % 100 + 1 for k in range(keys)) + sent["b"]
    async with QueryClient(head, run.token) as reader:
        deadline = time.monotonic() + 60
        while True:
            got_n = (await reader.query("g", map="Q1_n", agg="sum")).value
            got_s = (await reader.query("g", map="Q1_s", agg="sum")).value
            if (got_n, got_s) == (want_n, want_s):
                break
            if time.monotonic() > deadline:
                raise BenchError(f"box g after the move: COUNT {got_n:,} and SUM {got_s:,}, expected {want_n:,} "
                                 f"and {want_s:,}")
            await asyncio.sleep(0.2)
        _, answers = await reader.segments("g")
    await asyncio.sleep(0.3)
    consuming.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await consuming
    for p in pubs:
        await p.close()
    await sub.close()
    run.procs.stop([*cluster.node_procs, cluster.head_proc])

    moved = [list(m) for m in reply.get("moves", [])]
    if moved != [[seg.id, 1, 0]]:
        raise BenchError(f"the leader answered moves {moved}, not [[{seg.id}, 1, 0]]")
    after = {int(sid): sum(per_map.values()) for ans in answers for sid, per_map in ans["segments"].items()}
    times_moving = [t for t, m, _ in arrivals if m]
    times_other = [t for t, _, o in arrivals if o]
    window = (t_call, t_reply + args.move_after / 2)
    pause, pause_at = gaps(times_moving, *window)
    base_gap, _ = gaps(times_moving, t_start + 0.5, t_call)
    other_gap, _ = gaps(times_other, *window)
    base_rate = rows_per_s(arrivals, t_start + 0.5, t_call)
    during_rate = rows_per_s(arrivals, t_call, t_reply)
    lowest = min(rows_per_s(arrivals, t, t + 0.25) for t in
                 (t_call + 0.05 * i for i in range(max(1, int((window[1] - 0.25 - t_call) / 0.05)) + 1)))
    return {
        "box": "g", "sql": GROUP_SQL, "members": 2, "segment": seg.id, "from": layout.members[1], "to": layout.members[0],
        "entries_moved": after.get(seg.id, 0), "entries_total": total, "keys": keys, "load_seconds": loaded_s,
        "rate_rows_per_s": args.move_rate, "batch": args.move_batch, "streamed_rows": sent["rows"],
        "leader_seconds": reply["seconds"], "call_seconds": t_reply - t_call,
        "pause_seconds": pause, "pause_began_after_call_s": pause_at - t_call, "gap_before_move_s": base_gap,
        "other_segment_gap_s": other_gap,
        "rows_per_s_before": base_rate, "rows_per_s_during": during_rate, "lowest_250ms_rows_per_s": lowest,
        "dip": 1 - during_rate / base_rate if base_rate else None,
        "publisher_behind_s": behind[0], "publisher_behind_before_move_s": behind_before,
        "streamed_seconds": t_stop - t_start,
        "target_seconds": MOVE_TARGET, "target_met": pause < MOVE_TARGET and reply["seconds"] < MOVE_TARGET,
    }
