"""``bench/recovery.py`` part (b): the filter -> map -> aggregate chain with a snapshot every second or none.

Two clusters of three durable nodes (one box each), both up at once, get the
same rows round by round; each round's output is checked against the chain's
operators run in this process.  See bench/recovery.py for the figures.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
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
    node_status,
    stop_nodes_then_head,
)

# The chain tests/test_recovery.py uses too: filter -> map -> per-band windowed count and sum.
CHAIN = (Path(__file__).resolve().parents[1] / "examples" / "xml" / "band_chain.xml").read_text()
CHAIN_BOXES = ("keep", "banded", "sums")


def chain_deploy(nodes: list[str]) -> str:
    return (f'<deploy> <publish stream="Packet" node="{nodes[0]}"/>'
            + "".join(f' <node endpoint="{e}" query="{b}"/>' for e, b in zip(nodes, CHAIN_BOXES, strict=True))
            + " </deploy>")

class ChainExpectation:
    """The chain's operators run in this process: what the nodes must emit for the rows given so far."""

    def __init__(self) -> None:
        from boreas.catalog import plan_submission, read_document
        from boreas.catalog.model import Catalog
        from boreas.catalog.validate import stream_schemas
        from boreas.node.operators import build_operator

        catalog = plan_submission(Catalog(), [read_document(CHAIN.encode(), "app")]).catalog
        schemas = stream_schemas(catalog)
        self.ops = [build_operator(catalog.boxes[b], [schemas[p.stream] for p in catalog.boxes[b].inputs],
                                   [schemas[s] for s in catalog.boxes[b].outputs]) for b in CHAIN_BOXES]

    def feed(self, rows: list[tuple], batch: int) -> list[tuple]:
        out: list[tuple] = []
        for start in range(0, len(rows), batch):
            batches = [rows[start:start + batch]]
            for op in self.ops:
                batches = [produced for rows_in in batches for _, produced in op.process(0, rows_in, 0.0)]
            for produced in batches:
                out += produced
        return out


@dataclass
class ChainCluster:
    label: str
    interval: float
    head: str
    nodes: list[str]
    procs: list[subprocess.Popen]


async def chain_round(run: Run, cluster: ChainCluster, subscriber, publisher, rows: list[tuple],
                      expected: list[tuple]) -> dict:
    """Publish ``rows``; timed until the subscriber has the ``expected`` outputs (checked)."""
    count = len(rows)
    got: list[tuple] = []

    async def read() -> float:
        last = time.perf_counter()
        async for produced in subscriber.batches():
            got.extend(produced)
            last = time.perf_counter()
            if len(got) >= len(expected):
                return last
        return last

    reading = asyncio.create_task(read())
    began = time.perf_counter()
    await publisher.send(rows)
    try:
        last = await asyncio.wait_for(reading, timeout=max(120.0, count / 5_000))
    except TimeoutError:
        raise BenchError(f"chain {cluster.label}: {len(got)} of {len(expected)} outputs arrived") from None
    if got != expected:
        wrong = next((i for i, (a, b) in enumerate(zip(got, expected)) if a != b), min(len(got), len(expected)))
        raise BenchError(f"chain {cluster.label}: output differs from the operators' at row {wrong}: "
                         f"{got[wrong:wrong + 2]} != {expected[wrong:wrong + 2]}")
    return {"rate": count / (last - began), "seconds": last - began, "outputs": len(got)}


async def measure_chain(args: argparse.Namespace, run: Run, findings: Findings) -> dict[str, Any]:
    from boreas.client.publisher import Publisher
    from boreas.client.subscriber import Subscriber
    from boreas.wire.client import PeerClient

    clusters = []
    for label, interval in (("no snapshots", 0.0), ("snapshots every 1 s", 1.0)):
        tag = "nosnap" if interval == 0 else "snap"
        head_ep, *eps = loopback_endpoints(4)
        head = start_head(run.procs, sqlite_catalog(run.tmp / f"chain-{tag}.db"), head_ep,
                          ["--snapshot-interval", f"{interval:g}"], name=f"head-chain-{tag}")
        procs = [run.procs.children[-1].proc]
        for n, ep in enumerate(eps):
            procs.append(start_node(run.procs, ep, head, name=f"node-chain-{tag}-{CHAIN_BOXES[n]}",
                                    extra=["--data-dir", str(run.tmp / f"chain-{tag}-{n}")]))
        findings.watch(run, procs)
        clusters.append(ChainCluster(label, interval, head, eps, procs))
    for c in clusters:
        await wait_ready(run.procs, c.head, c.nodes)
        await deploy(run, c.head, CHAIN, chain_deploy(c.nodes), "chain")
    progress("(b) chain: two clusters of 3 durable nodes up (filter | map | aggregate), "
             "one Head with snapshots every 1 s, one with none")
    results: dict[str, list[dict]] = {c.label: [] for c in clusters}
    snapshots: dict[str, list[int]] = {c.label: [] for c in clusters}
    async with PeerClient(run.token) as peers:
        subs = [Subscriber(c.head, "Sums", run.token) for c in clusters]
        pubs = [Publisher(c.head, "Packet", run.token, producer=f"chain-{k}", batch_size=args.chain_batch)
                for k, c in enumerate(clusters)]
        try:
            for s, p in zip(subs, pubs, strict=True):
                await s.start()
                await p.start()
            # Both clusters get the same rows, round by round (times go on increasing across rounds),
            # so one run of the operators here says what each must emit.
            expectation, sent = ChainExpectation(), 0

            def next_rows(count: int) -> tuple[list[tuple], list[tuple]]:
                nonlocal sent
                rows = [(float(n % 13), n) for n in range(sent, sent + count)]
                sent += count
                return rows, expectation.feed(rows, args.chain_batch)

            rows, expected = next_rows(max(args.chain_batch, args.chain_rows // 5))
            for c, s, p in zip(clusters, subs, pubs, strict=True):  # warm-up
                await chain_round(run, c, s, p, rows, expected)
            for rep in range(args.reps):
                rows, expected = next_rows(args.chain_rows)
                order = [0, 1] if rep % 2 == 0 else [1, 0]
                for i in order:
                    c = clusters[i]
                    first = await last_complete(peers, c.head)
                    r = await chain_round(run, c, subs[i], pubs[i], rows, expected)
                    taken = await last_complete(peers, c.head) - first
                    results[c.label].append(r)
                    snapshots[c.label].append(taken)
                    progress(f"  round {rep + 1}/{args.reps} {c.label:22} {r['rate']:>10,.0f} rows/s "
                             f"({r['seconds']:.1f} s, {r['outputs']:,} windows, {taken} snapshots completed)")
            status = (await peers.call("GET", f"{clusters[1].head}/status"))["snapshots"]
            per_node = []
            for n, (box, ep) in enumerate(zip(CHAIN_BOXES, clusters[1].nodes, strict=True)):
                rec = (await node_status(peers, ep))["recovery"]
                if not rec.get("snapshots"):
                    findings.note(f"chain node {ep} under the snapshotting Head took no snapshot")
                on_disk = disk_log_bytes(run.tmp / f"chain-snap-{n}")
                findings.check_log_bytes(ep, rec.get("log", {}), on_disk)
                per_node.append((box, rec.get("snapshots", 0), rec.get("snapshot_bytes", 0), on_disk))
            attempt = status.get("last_attempt") or {}
            if attempt and not attempt.get("complete"):
                findings.note(f"the snapshotting Head's last attempt was not complete: {attempt}")
            if await last_complete(peers, clusters[0].head):
                findings.note("the Head with --snapshot-interval 0 took snapshots")
        finally:
            for p in pubs:
                await p.close()
            for s in subs:
                await s.close()
    for c in clusters:
        stop_nodes_then_head(run, findings, c.procs[1:], c.procs[0])
    out: dict[str, Any] = {}
    for c in clusters:
        rs = results[c.label]
        out[c.label] = {"rate": statistics.median(r["rate"] for r in rs), "rates": [r["rate"] for r in rs],
                        "snapshots": sum(snapshots[c.label]), "seconds": sum(r["seconds"] for r in rs)}
    out["per_node"] = per_node
    # each round's pair ran back to back: the median of their ratios, so the machine's drift cancels out
    out["ratio"] = statistics.median(a["rate"] / b["rate"] for a, b in zip(
        results[clusters[1].label], results[clusters[0].label], strict=True))
    return out


async def last_complete(peers, head: str) -> int:
    last = (await peers.call("GET", f"{head}/status"))["snapshots"].get("last_complete")
    return int(last["id"]) if last else 0
