"""``bench/recovery.py`` part (d): a durable node running filter -> map -> aggregate replays a large log.

Issue 30's recovery figure: "a durable node running filter -> map ->
aggregate replays a 10M-event log at at least 5M events/s".  One node with
``--data-dir`` runs the whole chain of ``examples/xml/sensor_chain.xml``
(filter ``valid`` -> map ``to_fahrenheit`` -> aggregate ``per_sensor``, the
data plane benchmark's pipeline); its input log is filled with the data
plane benchmark's readings (bench/dataplane_data.py: 10 sensors in order),
published from this process as Arrow record batches of ``--chain-replay-batch``
rows (made with numpy before publishing, bench/dataplane_workers.py).  A
subscriber reads the aggregate's windows as they come.  Then the node is
killed with SIGKILL and restarted with the same ``--data-dir``: no snapshot
was ever taken, so the recovery replays the whole log through the three
boxes (replay alone).  The figure is events/s = the events in the log /
the node's own ``replay_seconds`` (``GET /status``: the log's records read,
decoded and processed again; its ``recovery_seconds``, which adds opening
and validating the log, reading its catalog and restoring state, is
printed beside), against the 5M target; and events per second of the node's
CPU in the replay (``replay_cpu_seconds``), which a shared machine's load
does not stretch.

Checked: every batch published was replayed (``replayed_batches``), and the
windows the subscriber read before the kill are the expected ones
(:func:`closed_windows`: bench/dataplane_data.py's ``expected_windows``
made with numpy, all but the last window of each sensor, which the next
reading would close).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from dataplane_data import SENSORS, WINDOW, Windows, check_windows  # noqa: E402
from dataplane_workers import reading_batches  # noqa: E402
from procs import (  # noqa: E402
    BenchError,
    Run,
    loopback_endpoints,
    progress,
    sqlite_catalog,
    start_head,
    start_node,
    wait_ready,
)
from recovery_common import Findings, deploy, disk_log_bytes, node_status, stop_nodes_then_head  # noqa: E402
from recovery_restart import kill_and_recover  # noqa: E402

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "xml" / "sensor_chain.xml"
TARGET = 5_000_000  # events/s replayed (issue 30)


def closed_windows(table: Any) -> Windows:
    """(sensor, window start) -> (average fahrenheit, readings) of the readings in ``table``, every window
    but each sensor's last (what ``expected_windows`` says, with numpy: 10M readings in Python take ~10 s)."""
    import numpy as np

    sensor = table.column("sensor").to_numpy().astype(np.int64)
    start = table.column("time").to_numpy().astype(np.int64) // WINDOW * WINDOW
    c = table.column("celsius").to_numpy()
    passing = (c > -90.0) & (c < 60.0)
    span = int(start.max()) // WINDOW + 1
    cell = sensor * span + start // WINDOW
    sums = np.bincount(cell[passing], weights=(c * 9.0 / 5.0 + 32.0)[passing], minlength=SENSORS * span)
    counts = np.bincount(cell[passing], minlength=SENSORS * span)
    seen = np.bincount(cell, minlength=SENSORS * span)
    out: Windows = {}
    for k in np.nonzero(seen)[0].tolist():
        s, w = divmod(k, span)
        if w < span - 1:
            n = int(counts[k])
            out[(s, w * WINDOW)] = (float(sums[k]) / n if n else 0.0, n)
    return out


async def measure_chain_replay(args: argparse.Namespace, run: Run, findings: Findings) -> dict[str, Any]:
    from boreas.client.publisher import Publisher
    from boreas.client.subscriber import Subscriber
    from boreas.wire.client import PeerClient

    import pyarrow as pa

    times = max(WINDOW, args.chain_replay_events // SENSORS // WINDOW * WINDOW)
    batch = args.chain_replay_batch
    head_ep, ep = loopback_endpoints(2)
    head = start_head(run.procs, sqlite_catalog(run.tmp / "chain-replay.db"), head_ep,
                      ["--snapshot-interval", "0"], name="head-chain-replay")
    head_proc = run.procs.children[-1].proc
    data_dir = run.tmp / "chain-replay"
    node = start_node(run.procs, ep, head, name="node-chain-replay", extra=["--data-dir", str(data_dir)])
    findings.watch(run, [head_proc, node])
    await wait_ready(run.procs, head, [ep])
    dep = (f'<deploy><publish stream="Reading" node="{ep}"/>'
           f'<node endpoint="{ep}" query="cleanup convert summarise"/></deploy>')
    await deploy(run, head, EXAMPLE.read_text(), dep, "chain-replay")
    table = pa.Table.from_batches(reading_batches(list(range(SENSORS)), times, batch))
    table = table.slice(0, SENSORS * times)  # no closing readings: the last windows stay open in the state
    events = table.num_rows
    expected = closed_windows(table)
    progress(f"(d) replay of filter -> map -> aggregate: filling the durable node's log with {events:,} events "
             f"(Arrow batches of {batch:,})")
    got: list[tuple] = []
    async with Subscriber(head, "Average", run.token) as sub:

        async def read() -> None:  # while the publisher fills the log (a subscriber that reads late is cut off)
            async for rows in sub.batches():
                got.extend(rows)
                if len(got) >= len(expected):
                    return

        reader = asyncio.create_task(read())
        began = time.perf_counter()
        async with Publisher(head, "Reading", run.token, producer="fill", batch_size=batch, capacity=16) as pub:
            await pub.send(table)
            await pub.flush(timeout=600)
        if pub.accepted != events or pub.refused:
            raise BenchError(f"chain replay: the node accepted {pub.accepted} of {events} events")
        fill = time.perf_counter() - began
        try:
            await asyncio.wait_for(reader, 120)
        except TimeoutError:
            raise BenchError(f"chain replay: {len(got):,} of {len(expected):,} windows after 120 s") from None
    check_windows("chain replay, before the kill", got, expected)
    async with PeerClient(run.token, timeout=120.0) as peers:
        log = (await node_status(peers, ep))["recovery"]["log"]
        progress(f"  filled: {fill:.1f} s ({events / fill:,.0f} events/s), log {log['next'] - log['first']:,} "
                 f"records, {disk_log_bytes(data_dir) / 1e6:,.1f} MB; {len(got):,} windows out, checked")
        node, rec = await kill_and_recover(run, peers, head, ep, node, data_dir, max(120.0, events / 50_000),
                                           findings)
    published = -(-events // batch)
    if rec["replayed_batches"] < published:
        findings.note(f"chain replay: {rec['replayed_batches']:,} batches replayed of the {published:,} published")
    if rec["restored_from"] is not None:
        findings.note(f"chain replay: restored from snapshot {rec['restored_from']} though none was taken")
    seconds, cpu = rec["replay_seconds"], rec["replay_cpu_seconds"]
    rate = events / seconds if seconds else float("inf")
    cpu_rate = events / cpu if cpu else float("inf")
    progress(f"  replay alone: the log replayed in {seconds:.3f} s ({cpu:.3f} s of the node's CPU), recovery "
             f"{rec['recovery_seconds']:.3f} s (wall {rec['wall_seconds']:.2f} s), {rec['replayed_batches']:,} batches "
             f"replayed: {rate:,.0f} events/s ({cpu_rate:,.0f} per CPU second)")
    stop_nodes_then_head(run, findings, [node], head_proc)
    return {"events": events, "batch": batch, "rate": rate, "cpu_rate": cpu_rate,
            "recovery": json.loads(json.dumps(rec)),
            "fill_rate": events / fill, "windows": len(got)}
