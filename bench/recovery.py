"""Benchmark: durability -- what the input log and snapshots cost, and how long a recovery takes.

Real processes on loopback (a Head with its embedded catalog, nodes), three
parts, each figure printed as a ratio against its peer measured in the same run:

(a) **ingest**: rows/s into one node running a filter box (half the rows
    pass; nothing subscribes to its output), published by this process with
    the Python Publisher and timed until every batch is acknowledged.  The
    peer is the same node without ``--data-dir``; the durable node logs
    every batch and acknowledges it once fsynced (group commit).  Several
    group commit settings (``--commit N/T``: fsync every N batches or T ms)
    run side by side, each on its own node, interleaved over ``--reps``
    rounds (order rotated), to choose the defaults by measurement.  The
    ratio is the median over rounds of durable / memory-only in the same
    round (so the machine's drift over the run cancels out).  Target: the
    default setting >= 0.8x.  Snapshots are off (``--snapshot-interval 0``)
    so only the log is measured.  The node's and the publisher's CPU shares
    say which side limited a round.
(b) **snapshots**: the filter -> map -> aggregate chain of
    tests/test_recovery.py, one box per durable node, end to end from the
    first row published until the subscriber has the last aggregate output
    (checked equal to what the operators compute in this process).  The
    same chain under a Head taking a snapshot every second against one
    under a Head taking none (``--snapshot-interval 0``), both up at once and
    measured back to back, round by round (ratio: the median of the rounds').
    Target overhead < 10% (ratio >= 0.9).
(c) **recovery**: a durable node whose input log holds 100k, 1M and 10M
    events (rows, in batches of ``--recovery-batch``; a filter that passes
    1%), one node per size, killed with SIGKILL and restarted with the same
    ``--data-dir``: first with log replay alone (no snapshot ever taken:
    everything since the node started is replayed), then -- ``--snap-reps``
    times -- with a snapshot taken just before the kill (``POST
    /snapshots``, the node hears it is complete and cuts its log, then a
    small fixed tail of ``--tail`` rows is published).  The figure is the
    node's own ``recovery_seconds`` (``GET /status``: from the start of its
    recovery to ready: log opened and validated, state restored, log
    replayed); the wall time from the restart to ``ready`` (Python start-up
    included) is printed too.  Target: with snapshots, flat within 2x from
    the smallest log to the largest.

Timing never fails the run; the exit status is non-zero only on errors (a
process that will not start, refused rows, wrong or missing output, a
recovery that does not happen).  What looked wrong but did not stop the run
(warnings and errors in the processes' logs, a node that did not restore
from the snapshot or replayed an unexpected number of batches) is listed
after the table.  Progress goes to stderr, the results to stdout.

Usage::

    .venv/bin/python bench/recovery.py [--quick] [--events 100000,1000000,10000000]
        [--commit 64/1,256/2,1024/5] [--capacity 256] [--ingest-rows 4000000] [--chain-rows 4000000]
        [--reps 7] [--tail 10000] [--snap-reps 3] [--only ingest|chain|recovery] [--keep-logs]

The full run takes about 5 minutes on 2 cores; ``--quick`` (logs of 10k/100k/1M
events, 1M rows per round, 3 rounds) under a minute.
"""

from __future__ import annotations

import argparse
import asyncio
import re
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from xml.sax.saxutils import quoteattr

sys.path.insert(0, str(Path(__file__).resolve().parent))

from procs import (
    BenchError,
    Run,
    cpu_seconds,
    loopback_endpoints,
    progress,  # noqa: E402
    run_bench,
    sqlite_catalog,
    start_head,
    start_node,
    wait_ready,
)

DEFAULT_COMMIT = (256, 2.0)  # the node's defaults (boreas node --commit-every / --commit-ms)

SCHEMA = '<schema name="P"> <field name="value" type="double"/> <field name="time" type="int"/> </schema>'

# The chain tests/test_recovery.py uses too: filter -> map -> per-band windowed count and sum.
CHAIN = (Path(__file__).resolve().parents[1] / "examples" / "xml" / "band_chain.xml").read_text()
CHAIN_BOXES = ("keep", "banded", "sums")

# Lines in a process's log that say something went wrong (Python logging levels, tracebacks).
TROUBLE = re.compile(r"\b(WARNING|ERROR|CRITICAL|Traceback)\b")


def disk_log_bytes(data_dir: Path) -> int:
    """Bytes of the input log's segment files in a node's data directory, as on disk now."""
    return sum(f.stat().st_size for f in (data_dir / "log").glob("*.log") if f.is_file())


def filters_app(keys: list[str], expression: str) -> str:
    """One filter box ``f<k>`` from ``In<k>`` to ``Out<k>`` per key."""
    parts = ["<borealis>", SCHEMA]
    for k in keys:
        parts.append(f'<input stream="In{k}" schema="P"/> <output stream="Out{k}" schema="P"/>'
                     f'<box name="f{k}" type="filter"> <in stream="In{k}"/> <out stream="Out{k}"/>'
                     f' <parameter name="expression.0" value={quoteattr(expression)}/> </box>')
    parts.append("</borealis>")
    return "\n".join(parts)


def filters_deploy(nodes: dict[str, str]) -> str:
    """Key -> endpoint: ``In<k>`` enters at that node, which runs ``f<k>``."""
    return "<deploy>" + "".join(f'<publish stream="In{k}" node="{e}"/> <node endpoint="{e}" query="f{k}"/>'
                                for k, e in nodes.items()) + "</deploy>"


def chain_deploy(nodes: list[str]) -> str:
    return (f'<deploy> <publish stream="Packet" node="{nodes[0]}"/>'
            + "".join(f' <node endpoint="{e}" query="{b}"/>' for e, b in zip(nodes, CHAIN_BOXES, strict=True))
            + " </deploy>")


async def deploy(run: Run, head: str, app: str, dep: str, name: str) -> None:
    from boreas.client.head_api import deploy_and_wait
    from boreas.wire.client import PeerClient

    async with PeerClient(run.token, timeout=60.0) as peers:
        try:
            await deploy_and_wait(peers, head, app, f"{name}.xml", timeout=60.0)
            await deploy_and_wait(peers, head, dep, f"{name}_deploy.xml", timeout=60.0)
        except Exception as exc:
            raise BenchError(f"deploying {name}: {exc}") from None


def stop_nodes_then_head(run: Run, findings: Findings, nodes: list[subprocess.Popen],
                         head: subprocess.Popen) -> None:
    """The nodes first, so none logs a failed heartbeat to a Head already gone; what the processes log
    from here on (a Head's snapshot of nodes being stopped, ...) is not looked through."""
    findings.freeze()
    run.procs.stop(nodes)
    run.procs.stop([head])


async def node_status(peers, endpoint: str) -> dict:
    return await peers.call("GET", f"http://{endpoint}/status")


@dataclass
class Findings:
    """What looked wrong without stopping the run, and the processes' logs to look through."""

    notes: list[str] = field(default_factory=list)
    logs: dict[str, Path] = field(default_factory=dict)  # name -> log file
    ends: dict[str, int] = field(default_factory=dict)  # name -> bytes of its log to look through

    def note(self, message: str) -> None:
        progress(f"  NOTE: {message}")
        self.notes.append(message)

    def check_log_bytes(self, endpoint: str, status_log: dict, on_disk: int) -> None:
        """Note (once) when /status's recovery.log.size_bytes is not the size of the log on disk."""
        said = status_log.get("size_bytes", 0)
        if abs(said - on_disk) > max(1_000_000, on_disk / 10) and not getattr(self, "_bytes_noted", False):
            self._bytes_noted = True
            self.note(f"node {endpoint}: /status recovery.log.size_bytes says {said:,} bytes but its log segments on "
                      f"disk hold {on_disk:,} (log positions {status_log.get('first')}..{status_log.get('next')}); "
                      f"the figures below use the size on disk")

    def watch(self, run: Run, procs: list[subprocess.Popen]) -> None:
        for p in procs:
            path = run.procs.log_path(p)
            name = next(c.name for c in run.procs.children if c.proc is p)
            if path is not None:
                self.logs[name] = path

    def freeze(self) -> None:
        """Look through the logs only up to here (the processes are about to be stopped)."""
        for name, path in self.logs.items():
            if name not in self.ends:
                try:
                    self.ends[name] = path.stat().st_size
                except OSError:
                    self.ends[name] = 0

    def log_trouble(self, limit: int = 6) -> list[str]:
        out = []
        for name, path in self.logs.items():
            try:
                with path.open("rb") as fh:
                    lines = fh.read(self.ends.get(name, -1)).decode(errors="replace").splitlines()
            except OSError:
                continue
            bad = [line for line in lines if TROUBLE.search(line)]
            if bad:
                out.append(f"{name}: {len(bad)} warning/error lines, e.g.:")
                seen: set[str] = set()
                for line in bad:
                    key = re.sub(r"\d+", "#", line)[:160]
                    if key not in seen:
                        seen.add(key)
                        out.append(f"    {line[:300]}")
                    if len(seen) >= limit:
                        break
        return out


# -- (a) ingest into one filter node: durable or not ------------------------------------------------


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


# -- (b) the chain with snapshots every second or none ----------------------------------------------


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


# -- (c) recovery time against the size of the log ---------------------------------------------------


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


# -- the report -------------------------------------------------------------------------------------


def report(args: argparse.Namespace, r: dict[str, Any], findings: Findings) -> None:
    rows: list[tuple[str, str, str, str, str]] = []
    flat: float | None = None  # (c) with snapshots: largest / smallest

    def rate(v: float) -> str:
        return f"{v:,.0f} rows/s"

    if "ingest" in r:
        entries = r["ingest"]["entries"]
        memory = entries[0]
        for e in entries[1:]:
            per = f", {e['per_fsync']:.1f} batches/fsync" if e.get("per_fsync") else ""
            rows.append((f"(a) ingest, {commit_label(e['setting'])}{per}", rate(e["rate"]),
                         rate(memory["rate"]) + " (memory only)", f"{e['ratio']:.3f}x",
                         ">= 0.8x" if e["setting"] == DEFAULT_COMMIT else "-"))
    if "chain" in r:
        none, every = r["chain"]["no snapshots"], r["chain"]["snapshots every 1 s"]
        rows.append((f"(b) chain filter|map|aggregate, snapshots every 1 s ({every['snapshots']} taken)",
                     rate(every["rate"]), rate(none["rate"]) + " (no snapshots)",
                     f"{r['chain']['ratio']:.3f}x", ">= 0.9x"))
    if "recovery" in r:
        sizes = args.events
        small = sizes[0]
        snap = {s: statistics.median(x["recovery_seconds"] for x in r["recovery"]["snap"][s]) for s in sizes}
        replay = {s: r["recovery"]["replay"][s]["recovery_seconds"] for s in sizes}

        def secs(v: float) -> str:
            return f"{v:.3f} s"

        def ratio(a: float, b: float) -> str:
            return f"{a / b:.2f}x" if b > 0 else "-"

        for s in sizes:
            extra = f" (median of {len(r['recovery']['snap'][s])})" if len(r["recovery"]["snap"][s]) > 1 else ""
            rows.append((f"(c) recovery, snapshot + {args.tail:,}-row tail, log of {s:,} events{extra}",
                         secs(snap[s]), secs(replay[s]) + " (replay alone)", ratio(snap[s], replay[s]), "-"))
        flat = snap[sizes[-1]] / snap[small] if snap[small] > 0 else None
        rows.append((f"(c) recovery with snapshot: largest / smallest log ({sizes[-1]:,} / {small:,})",
                     secs(snap[sizes[-1]]), secs(snap[small]), ratio(snap[sizes[-1]], snap[small]), "<= 2x"))
        rows.append((f"(c) recovery by replay alone: largest / smallest log ({sizes[-1]:,} / {small:,})",
                     secs(replay[sizes[-1]]), secs(replay[small]), ratio(replay[sizes[-1]], replay[small]), "-"))

    width = max(len(row[0]) for row in rows)
    print(f"\ndurability: the input log, snapshots and recovery (2 cores, loopback; ratios against the "
          f"peer measured in this run{'; quick run' if args.quick else ''})\n")
    print(f"{'figure':{width}}  {'measured':>16}  {'peer':>34}  {'ratio':>7}  {'target':>7}")
    print(f"{'':{width}}  {'(median)':>16}  {'(median)':>34}  {'(*)':>7}")
    for name, measured, peer, ratio_, target in rows:
        print(f"{name:{width}}  {measured:>16}  {peer:>34}  {ratio_:>7}  {target:>7}")

    print("(*) ingest and chain: the median of the rounds' ratios (each round runs measured and peer back to "
          "back); recovery: of the medians")
    if "ingest" in r:
        entries = r["ingest"]["entries"]
        best = max(entries[1:], key=lambda e: e["ratio"])
        print(f"\n(a) best group commit setting by ingest rate against memory only: {commit_label(best['setting'])} "
              f"({best['ratio']:.2f}x; publisher capacity {args.capacity} batches of {args.ingest_batch:,} rows)")
        for e in entries:
            print(f"    {commit_label(e['setting']):40} rounds: {', '.join(f'{v:,.0f}' for v in e['rates'])} rows/s;"
                  f" node CPU {e['node_cpu']:.0%}, publisher CPU {e['publisher_cpu']:.0%}")
    if "chain" in r:
        for label, c in r["chain"].items():
            if label == "ratio":
                continue
            if label == "per_node":
                print("    snapshotting cluster: " + "; ".join(
                    f"{box}: {n} snapshots, {b / max(n, 1):,.0f} bytes each, log now {lb / 1e6:,.1f} MB"
                    for box, n, b, lb in c))
                continue
            print(f"(b) {label:22} rounds: {', '.join(f'{v:,.0f}' for v in c['rates'])} rows/s; "
                  f"{c['snapshots']} snapshots completed in {c['seconds']:.1f} s measured")
    if "recovery" in r:
        print("(c) recovery details (recovery_seconds as the node reports it; wall: SIGKILL to ready, "
              "interpreter start-up included):")
        for s in args.events:
            rp = r["recovery"]["replay"][s]
            print(f"    {s:>12,} events  replay alone: {rp['recovery_seconds']:.3f} s "
                  f"(wall {rp['wall_seconds']:.2f} s), {rp['replayed_batches']:,} batches replayed, "
                  f"log {rp['log_before']['disk_bytes'] / 1e6:,.1f} MB")
            for x in r["recovery"]["snap"][s]:
                sn = x["snapshot"]
                print(f"    {'':>12}         snapshot {sn['id']}: {x['recovery_seconds']:.3f} s "
                      f"(wall {x['wall_seconds']:.2f} s), {x['replayed_batches']:,} batches replayed, "
                      f"restored_from {x['restored_from']}, snapshot {sn['bytes']} bytes, pause "
                      f"{(sn['pause_seconds'] or 0) * 1e3:.1f} ms, log after the cut "
                      f"{sn['log_after_cut']['disk_bytes'] / 1e6:,.2f} MB")
        print("    (the node reports recovery_seconds rounded to the millisecond)")
    verdicts = []
    if "ingest" in r:
        default = next((e for e in r["ingest"]["entries"][1:] if e["setting"] == DEFAULT_COMMIT), None)
        if default is not None:
            verdicts.append(f"(a) durable ingest >= 0.8x: {'met' if default['ratio'] >= 0.8 else 'MISSED'}")
    if "chain" in r:
        verdicts.append(f"(b) snapshot overhead < 10%: {'met' if r['chain']['ratio'] >= 0.9 else 'MISSED'}")
    if "recovery" in r:
        verdicts.append(f"(c) recovery with snapshots flat within 2x: "
                        f"{'met' if flat is not None and flat <= 2 else 'MISSED'}")
    print("\ntargets (timing never fails the run): " + "; ".join(verdicts))

    trouble = findings.log_trouble()
    if findings.notes or trouble:
        print("\nwhat looked wrong (the run went on):")
        for n in findings.notes:
            print(f"  - {n}")
        for line in trouble:
            print(f"  {line}")
    else:
        print("\nnothing looked wrong: no warnings or errors in the processes' logs")


# -- main -------------------------------------------------------------------------------------------


def parse_commit(text: str) -> list[tuple[int, float]]:
    out = []
    for item in text.split(","):
        every, _, ms = item.partition("/")
        out.append((int(every), float(ms or DEFAULT_COMMIT[1])))
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true",
                        help="a quick run: logs of 10k/100k/1M events, fewer rows and rounds")
    parser.add_argument("--events", type=lambda t: [int(x) for x in t.split(",")],
                        help="log sizes for (c), smallest first (default 100000,1000000,10000000)")
    parser.add_argument("--commit", type=parse_commit, default=parse_commit("64/1,256/2,1024/5"),
                        help="group commit settings N/T for (a) (default 64/1,256/2,1024/5)")
    parser.add_argument("--ingest-rows", type=int, help="rows per ingest round (default 4000000)")
    parser.add_argument("--ingest-batch", type=int, default=1000)
    parser.add_argument("--capacity", type=int, default=256,
                        help="the ingest publisher's outstanding batches (default 256, the Publisher's default)")
    parser.add_argument("--chain-rows", type=int, help="rows per chain round (default 4000000)")
    parser.add_argument("--chain-batch", type=int, default=1000)
    parser.add_argument("--reps", type=int, help="rounds per figure in (a) and (b) (default 7; quick 3)")
    parser.add_argument("--recovery-batch", type=int, default=2000)
    parser.add_argument("--tail", type=int, default=10_000, help="rows published after the snapshot (default 10000)")
    parser.add_argument("--snap-reps", type=int, default=3, help="kills after a snapshot per log size (default 3)")
    parser.add_argument("--only", choices=["ingest", "chain", "recovery"], action="append",
                        help="run only these parts (repeatable)")
    parser.add_argument("--keep-logs", action="store_true")
    args = parser.parse_args()
    quick = args.quick
    args.events = args.events or ([10_000, 100_000, 1_000_000] if quick else [100_000, 1_000_000, 10_000_000])
    args.ingest_rows = args.ingest_rows or (1_000_000 if quick else 4_000_000)
    args.chain_rows = args.chain_rows or (1_000_000 if quick else 4_000_000)
    args.reps = args.reps or (3 if quick else 7)
    if quick:
        args.snap_reps = min(args.snap_reps, 2)
    if sorted(args.events) != args.events or len(args.events) < 2:
        parser.error("--events: two or more sizes, smallest first")
    parts = args.only or ["ingest", "chain", "recovery"]

    def body(run: Run) -> None:
        findings = Findings()

        async def everything() -> dict[str, Any]:
            out: dict[str, Any] = {}
            for part, fn in (("ingest", measure_ingest), ("chain", measure_chain), ("recovery", measure_recovery)):
                if part in parts:
                    began = time.perf_counter()
                    out[part] = await fn(args, run, findings)
                    progress(f"  ({part}: {time.perf_counter() - began:.0f} s)")
            return out

        report(args, asyncio.run(everything()), findings)

    return run_bench("recovery", body, args.keep_logs)


if __name__ == "__main__":
    sys.exit(main())
