"""``bench/recovery.py`` part (a): rows/s into a filter node, durable under several group commit settings or not.

The durable nodes log every batch and acknowledge it once fsynced; each round
runs every setting back to back (order rotated) so the ratio against memory
only cancels the machine's drift.  See bench/recovery.py for the figures.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from procs import (  # noqa: E402
    BenchError,
    Run,
    cpu_seconds,
    loopback_endpoints,
    progress,
    sqlite_catalog,
    start_head,
    start_node,
    wait_ready,
)
from recovery_common import (  # noqa: E402
    DEFAULT_COMMIT,
    Findings,
    deploy,
    filters_app,
    filters_deploy,
    node_status,
    stop_nodes_then_head,
)


def commit_label(setting: tuple[int, float] | None) -> str:
    if setting is None:
        return "memory only"
    label = f"durable, commit {setting[0]}/{setting[1]:g} ms"
    return label + " (default)" if setting == DEFAULT_COMMIT else label


async def ingest_once(run: Run, head: str, stream: str, chunk: list[tuple], total: int, batch: int,
                      capacity: int, producer: str, pid: int) -> dict[str, float]:
    """``total`` rows (``chunk`` over and over) into ``stream``, timed until all are acknowledged."""
    from boreas.client.publisher import Publisher

    async with Publisher(head, stream, run.token, producer=producer, batch_size=batch, capacity=capacity) as pub:
        node_cpu, own_cpu, began = cpu_seconds(pid), time.process_time(), time.perf_counter()
        left = total
        while left > 0:
            part = chunk if left >= len(chunk) else chunk[:left]
            await pub.send(part)
            left -= len(part)
        await pub.flush(timeout=300)
        elapsed = time.perf_counter() - began
        node_cpu, own_cpu = cpu_seconds(pid) - node_cpu, time.process_time() - own_cpu
    if pub.accepted != total or pub.refused:
        raise BenchError(f"{stream}: the node accepted {pub.accepted} of {total} rows "
                         f"({len(pub.refused)} refused)")
    return {"rate": total / elapsed, "seconds": elapsed, "node_cpu": node_cpu / elapsed,
            "publisher_cpu": own_cpu / elapsed}


async def measure_ingest(args: argparse.Namespace, run: Run, findings: Findings) -> dict[str, Any]:
    from boreas.wire.client import PeerClient

    settings: list[tuple[int, float] | None] = [None, *args.commit]
    keys = [str(k) for k in range(len(settings))]
    head_ep, *eps = loopback_endpoints(1 + len(settings))
    head = start_head(run.procs, sqlite_catalog(run.tmp / "ingest.db"), head_ep,
                      ["--snapshot-interval", "0"], name="head-ingest")
    procs = [run.procs.children[-1].proc]
    nodes = {}
    for k, setting, ep in zip(keys, settings, eps, strict=True):
        extra = [] if setting is None else ["--data-dir", str(run.tmp / f"ingest-{k}"), "--commit-every",
                                            str(setting[0]), "--commit-ms", str(setting[1])]
        nodes[k] = start_node(run.procs, ep, head, name=f"node-ingest-{k}", extra=extra)
        procs.append(nodes[k])
    findings.watch(run, procs)
    await wait_ready(run.procs, head, eps)
    await deploy(run, head, filters_app(keys, "value >= 50.0"), filters_deploy(dict(zip(keys, eps))), "ingest")
    progress(f"(a) ingest: {len(settings)} nodes up ({', '.join(commit_label(s) for s in settings)})")
    chunk = [(float(i % 100), i) for i in range(100 * args.ingest_batch)]
    for k in keys:  # warm-up: connections, code generation, the log's first segment
        await ingest_once(run, head, f"In{k}", chunk, max(len(chunk), args.ingest_rows // 10), args.ingest_batch,
                          args.capacity, f"warm-{k}", nodes[k].pid)
    results: dict[str, list[dict]] = {k: [] for k in keys}
    async with PeerClient(run.token) as peers:
        before = {k: (await node_status(peers, eps[i]))["recovery"] for i, k in enumerate(keys)}
        for rep in range(args.reps):
            order = keys[rep % len(keys):] + keys[: rep % len(keys)]  # rotate, so no setting always goes first
            for k in order:
                r = await ingest_once(run, head, f"In{k}", chunk, args.ingest_rows, args.ingest_batch,
                                      args.capacity, f"ingest-{k}-{rep}", nodes[k].pid)
                results[k].append(r)
                progress(f"  round {rep + 1}/{args.reps} {commit_label(settings[int(k)]):40} "
                         f"{r['rate']:>10,.0f} rows/s (node CPU {r['node_cpu']:.0%}, "
                         f"publisher CPU {r['publisher_cpu']:.0%})")
        after = {k: (await node_status(peers, eps[i]))["recovery"] for i, k in enumerate(keys)}
    out = []
    for k, setting in zip(keys, settings, strict=True):
        rs = results[k]
        entry = {"setting": setting, "rate": statistics.median(r["rate"] for r in rs),
                 "rates": [r["rate"] for r in rs],
                 # against memory only in the same round: the machine's drift over the run cancels out
                 "ratio": statistics.median(r["rate"] / m["rate"] for r, m in zip(rs, results[keys[0]], strict=True)),
                 "node_cpu": statistics.median(r["node_cpu"] for r in rs),
                 "publisher_cpu": statistics.median(r["publisher_cpu"] for r in rs)}
        if setting is not None:
            log0, log1 = before[k].get("log", {}), after[k].get("log", {})
            appends = log1.get("appends_total", 0) - log0.get("appends_total", 0)
            flushes = log1.get("flushes_total", 0) - log0.get("flushes_total", 0)
            entry["per_fsync"] = appends / flushes if flushes else None
            if not appends:
                findings.note(f"ingest node with {commit_label(setting)} appended nothing to its input log")
        out.append(entry)
    stop_nodes_then_head(run, findings, procs[1:], procs[0])
    return {"entries": out}
