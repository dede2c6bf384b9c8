"""``bench/recovery.py`` part (c): how long a killed durable node takes to recover against the size of its log.

One node per log size, SIGKILLed and restarted with the same ``--data-dir``:
first with log replay alone, then after a snapshot that cut its log.  The
figure is the node's own ``recovery_seconds``.  See bench/recovery.py.
"""

from __future__ import annotations

import argparse
import asyncio
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

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
from recovery_common import (  # noqa: E402
    Findings,
    deploy,
    disk_log_bytes,
    filters_app,
    filters_deploy,
    node_status,
    stop_nodes_then_head,
)


async def wait_recovered(run: Run, peers, endpoint: str, proc: subprocess.Popen, timeout: float) -> dict:
    """Poll the restarted node's /status until its recovery is over; its "recovery" section."""
    from boreas.wire.client import PeerError

    deadline = time.monotonic() + timeout
    while True:
        run.procs.check()
        try:
            rec = (await node_status(peers, endpoint))["recovery"]
            if rec.get("state") == "ready" and rec.get("recovery_seconds") is not None:
                return rec
        except PeerError:
            pass
        if time.monotonic() > deadline:
            raise BenchError(f"node {endpoint} did not recover within {timeout:g} s:\n{run.procs.log_of(proc)}")
        await asyncio.sleep(0.02)


async def publish(run: Run, head: str, stream: str, chunk: list[tuple], total: int, batch: int,
                  producer: str) -> float:
    """``total`` rows (``chunk`` over and over) into ``stream``, acknowledged; rows/s."""
    from boreas.client.publisher import Publisher

    began = time.perf_counter()
    async with Publisher(head, stream, run.token, producer=producer, batch_size=batch, capacity=16) as pub:
        left = total
        while left > 0:
            part = chunk if left >= len(chunk) else chunk[:left]
            await pub.send(part)
            left -= len(part)
        await pub.flush(timeout=600)
    if pub.accepted != total or pub.refused:
        raise BenchError(f"{stream}: the node accepted {pub.accepted} of {total} rows")
    return total / (time.perf_counter() - began)


async def kill_and_recover(run: Run, peers, head: str, endpoint: str, proc: subprocess.Popen, data_dir: Path,
                           timeout: float, findings: Findings) -> tuple[subprocess.Popen, dict]:
    before = (await node_status(peers, endpoint))["recovery"]
    before["log"] = dict(before.get("log", {}), disk_bytes=disk_log_bytes(data_dir))
    findings.check_log_bytes(endpoint, before["log"], before["log"]["disk_bytes"])
    killed = time.perf_counter()
    proc = run.procs.restart(proc, kill=True)
    rec = await wait_recovered(run, peers, endpoint, proc, timeout)
    rec = dict(rec, wall_seconds=time.perf_counter() - killed, log_before=before.get("log", {}))
    await wait_ready(run.procs, head, [endpoint])  # alive again for the Head (snapshots need every node)
    return proc, rec


async def measure_recovery(args: argparse.Namespace, run: Run, findings: Findings) -> dict[str, Any]:
    from boreas.wire.client import PeerClient, PeerError

    sizes = args.events
    keys = [str(k) for k in range(len(sizes))]
    head_ep, *eps = loopback_endpoints(1 + len(sizes))
    head = start_head(run.procs, sqlite_catalog(run.tmp / "recovery.db"), head_ep,
                      ["--snapshot-interval", "0"], name="head-recovery")
    head_proc = run.procs.children[-1].proc
    dirs = {k: run.tmp / f"recovery-{k}" for k in keys}
    nodes = {k: start_node(run.procs, ep, head, name=f"node-recovery-{sizes[int(k)]}",
                           extra=["--data-dir", str(dirs[k])])
             for k, ep in zip(keys, eps, strict=True)}
    findings.watch(run, [head_proc, *nodes.values()])
    await wait_ready(run.procs, head, eps)
    await deploy(run, head, filters_app(keys, "value < 1.0"), filters_deploy(dict(zip(keys, eps))), "recovery")
    batch = args.recovery_batch
    chunk = [(float(i % 100), i) for i in range(batch * 50)]
    tail = args.tail
    progress(f"(c) recovery: {len(sizes)} durable nodes up; filling their logs "
             f"({', '.join(f'{s:,}' for s in sizes)} events in batches of {batch:,})")
    timeout = max(120.0, max(sizes) / 50_000)
    replay: dict[int, dict] = {}
    snap: dict[int, list[dict]] = {s: [] for s in sizes}
    async with PeerClient(run.token, timeout=120.0) as peers:
        for k, size in zip(keys, sizes, strict=True):
            began = time.perf_counter()
            rate = await publish(run, head, f"In{k}", chunk, size, batch, f"fill-{k}")
            log = (await node_status(peers, eps[int(k)]))["recovery"]["log"]
            progress(f"  filled node {size:>12,}: {time.perf_counter() - began:6.1f} s ({rate:,.0f} rows/s), "
                     f"log {log['next'] - log['first']:,} records, {disk_log_bytes(dirs[k]) / 1e6:,.1f} MB")
        # Log replay alone: no snapshot has ever been taken.
        for k, size in zip(keys, sizes, strict=True):
            ep = eps[int(k)]
            await publish(run, head, f"In{k}", chunk, tail, batch, f"tail-replay-{k}")
            nodes[k], rec = await kill_and_recover(run, peers, head, ep, nodes[k], dirs[k], timeout, findings)
            replay[size] = rec
            records = rec["log_before"].get("next", 0) - rec["log_before"].get("first", 0)
            progress(f"  replay alone, {size:>12,} events: recovery {rec['recovery_seconds']:.3f} s "
                     f"(wall {rec['wall_seconds']:.2f} s), replayed {rec['replayed_batches']:,} of {records:,} "
                     f"log records, restored_from {rec['restored_from']}")
            if rec["restored_from"] is not None:
                findings.note(f"node {size:,}: restored from snapshot {rec['restored_from']} though none was taken")
            if rec["replayed_batches"] < (size + tail) // batch:
                findings.note(f"node {size:,} (replay alone): replayed {rec['replayed_batches']:,} batches, "
                              f"fewer than the {(size + tail) // batch:,} it took")
        # With a snapshot just before the kill.
        for rep in range(args.snap_reps):
            for k, size in zip(keys, sizes, strict=True):
                ep = eps[int(k)]
                try:
                    taken = await peers.call("POST", f"{head}/snapshots", timeout=120.0)
                except PeerError as exc:
                    raise BenchError(f"POST /snapshots failed: {exc} {getattr(exc, 'payload', '')}") from None
                if not taken.get("complete"):
                    raise BenchError(f"snapshot not complete: {taken}")
                sid = int(taken["id"])
                mine = taken["nodes"].get(ep, {})
                deadline = time.monotonic() + 30
                while True:  # the node hears the snapshot is complete with a heartbeat reply, and cuts its log
                    rec0 = (await node_status(peers, ep))["recovery"]
                    if (rec0.get("completed_snapshot") or 0) >= sid:
                        break
                    if time.monotonic() > deadline:
                        findings.note(f"node {size:,} never heard that snapshot {sid} is complete (30 s)")
                        break
                    await asyncio.sleep(0.05)
                log0 = dict(rec0.get("log", {}), disk_bytes=disk_log_bytes(dirs[k]))
                await publish(run, head, f"In{k}", chunk, tail, batch, f"tail-snap-{k}-{rep}")
                nodes[k], rec = await kill_and_recover(run, peers, head, ep, nodes[k], dirs[k], timeout, findings)
                rec["snapshot"] = {"id": sid, "bytes": mine.get("bytes"), "pause_seconds": mine.get("pause_seconds"),
                                   "head_seconds": taken.get("seconds"), "log_after_cut": log0}
                snap[size].append(rec)
                records = rec["log_before"].get("next", 0) - rec["log_before"].get("first", 0)
                progress(f"  snapshot {sid} + tail, {size:>12,} events: recovery {rec['recovery_seconds']:.3f} s "
                         f"(wall {rec['wall_seconds']:.2f} s), restored_from {rec['restored_from']}, replayed "
                         f"{rec['replayed_batches']:,}, log before the kill {records:,} records "
                         f"{rec['log_before']['disk_bytes'] / 1e6:,.2f} MB")
                if rec["restored_from"] != sid:
                    findings.note(f"node {size:,}: restored from {rec['restored_from']}, not from snapshot {sid} "
                                  f"taken just before the kill")
                if log0.get("first", 0) == 0:
                    findings.note(f"node {size:,}: its log was not cut after snapshot {sid} (first position 0)")
                if rec["replayed_batches"] > 2 * (-(-tail // batch)) + 4:
                    findings.note(f"node {size:,}: replayed {rec['replayed_batches']:,} batches after snapshot "
                                  f"{sid}; the tail was {-(-tail // batch)}")
    stop_nodes_then_head(run, findings, list(nodes.values()), head_proc)
    return {"replay": replay, "snap": snap}
