"""The data plane benchmark's Boreas side: the cluster, the throughput runs and the latency runs.

A Head and three nodes (a: the whole chain; b: filter + map; c: the
aggregate) get the example's chain twice -- one_ on node a, two_ split over
b and c -- and two filter -> map latency chains (lat1_ on a, lat2_ over b
and c).  See bench/dataplane.py for what each run measures.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import copy
import itertools
import json
import os
import signal
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Self

from dataplane_data import (
    LATENCY_BATCH,
    LATENCY_RATE,
    Windows,
    check_order,
    check_windows,
    freeze_harness,
    latency_figures,
    stamped_passing,
)
from dataplane_workers import read_line, start_worker, tell
from procs import (
    BenchError,
    Processes,
    loopback_endpoints,
    sqlite_catalog,
    start_head,
    start_node,
    wait_ready,
)

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "xml" / "sensor_chain.xml"
PROBE = Path(__file__).resolve().parent / "dataplane_probe.py"
CPU_PROFILE = Path(__file__).resolve().parent / "cpu_profile.py"

# Chains deployed: prefix -> what it is for.  one_, two_: Arrow publishers; rows_: the same chain as one_ on
# node a, for the rows publishers' figure (a chain of its own: its windows start again at time 0).
ONE, TWO, ROWS, LAT1, LAT2 = "one_", "two_", "rows_", "lat1_", "lat2_"


# -- application and deployment XML ----------------------------------------------------


def application() -> str:
    """The example's schemas, its chain twice (prefixes one_, two_), and two filter -> map latency chains."""
    from lxml import etree

    parser = etree.XMLParser(load_dtd=False, no_network=True, resolve_entities=False, remove_comments=True,
                             remove_blank_text=True)
    source = etree.parse(str(EXAMPLE), parser).getroot()
    streams = {e.get("stream") for e in source.iter("input", "output", "in", "out")}
    out = etree.Element("borealis")
    for schema in source.findall("schema"):
        out.append(copy.deepcopy(schema))
    stamped = etree.SubElement(out, "schema", name="StampedReading")
    for name, kind in (("sensor", "int"), ("time", "int"), ("celsius", "double"), ("sent", "long")):
        etree.SubElement(stamped, "field", name=name, type=kind)

    def chain(prefix: str, queries: list[str], latency: bool) -> None:
        for element in source:
            if element.tag in ("input", "output") and (not latency or element.tag == "input"):
                item = copy.deepcopy(element)
                item.set("stream", prefix + item.get("stream"))
                if latency:
                    item.set("schema", "StampedReading")
                out.append(item)
        for query in source.findall("query"):
            if query.get("name") not in queries:
                continue
            item = copy.deepcopy(query)
            item.set("name", prefix + item.get("name"))
            for box in item.iter("box"):
                box.set("name", prefix + box.get("name"))
                if latency and box.get("type") == "map":  # pass the send time through
                    n = len(box.findall("parameter")) // 2
                    etree.SubElement(box, "parameter", name=f"expression.{n}", value="sent")
                    etree.SubElement(box, "parameter", name=f"output-field-name.{n}", value="sent")
            for port in item.iter("in", "out"):
                assert port.get("stream") in streams
                port.set("stream", prefix + port.get("stream"))
            out.append(item)

    whole = ["cleanup", "convert", "summarise"]
    for prefix in (ONE, TWO, ROWS):
        chain(prefix, whole, latency=False)
    for prefix in (LAT1, LAT2):
        chain(prefix, ["cleanup", "convert"], latency=True)
    return etree.tostring(out, pretty_print=True, xml_declaration=True, encoding="UTF-8").decode()


def deployment(a: str, b: str, c: str) -> str:
    """Node a: the one-node chains and latency chain; nodes b and c: the split chains (filter+map | aggregate)."""
    return (f'<?xml version="1.0"?>\n<deploy>\n'
            f'  <node endpoint="{a}" query="{ONE}cleanup {ONE}convert {ONE}summarise {LAT1}cleanup {LAT1}convert '
            f'{ROWS}cleanup {ROWS}convert {ROWS}summarise"/>\n'
            f'  <node endpoint="{b}" query="{TWO}cleanup {TWO}convert {LAT2}cleanup"/>\n'
            f'  <node endpoint="{c}" query="{TWO}summarise {LAT2}convert"/>\n'
            f'</deploy>\n')


# -- the cluster -----------------------------------------------------------------------


@dataclass
class Cluster:
    head: str
    nodes: list[str]  # a (one-node chain), b (filter+map), c (aggregate)
    pids: dict[str, int]
    token: str


async def start_cluster(procs: Processes, tmp: Path, token: str, profile: bool, probe: bool = False,
                        node_args: tuple[str, ...] = ()) -> Cluster:
    from boreas.client.head_api import submit_documents, wait_submission
    from boreas.wire.addressing import endpoint_url
    from boreas.wire.client import PeerClient, PeerError

    head_endpoint, *nodes = loopback_endpoints(4)
    head = start_head(procs, sqlite_catalog(tmp / "catalog.db"), head_endpoint)
    # cProfile writes its file when the node exits on SIGTERM
    if probe or os.environ.get("BOREAS_BENCH_LOOP"):  # ``boreas node`` with the probes / loop of dataplane_probe.py
        pids = {n: procs.spawn(f"node {n}", [str(PROBE), "node", "--endpoint", n, "--head", head, *node_args],
                               daemon=True).pid
                for n in nodes}
    elif profile:  # CPU time while the Arrow runs' events flow (bench/cpu_profile.py: SIGUSR1 on, SIGUSR2 off)
        pids = {n: procs.spawn(f"node {n}", [str(CPU_PROFILE), str(tmp / f"node-{'abc'[k]}.prof"), "node",
                                             "--endpoint", n, "--head", head, *node_args], daemon=True).pid
                for k, n in enumerate(nodes)}
    else:
        pids = {n: start_node(procs, n, head, extra=list(node_args)).pid for n in nodes}
    await wait_ready(procs, head, nodes)
    app, dep = application(), deployment(*nodes)
    (tmp / "dataplane.xml").write_text(app)
    (tmp / "dataplane_deploy.xml").write_text(dep)
    async with PeerClient(token, timeout=60.0) as peers:
        try:
            status = await submit_documents(peers, head, [("dataplane.xml", app.encode()),
                                                          ("dataplane_deploy.xml", dep.encode())])
            status = await wait_submission(peers, head, status, 60.0)
        except PeerError as exc:
            payload = getattr(exc, "payload", {}) or {}
            problems = [f"{d.get('file')}:{d.get('line')}: {d.get('reason')}" for d in payload.get("diagnostics", [])]
            raise BenchError("\n".join([f"submission refused: {exc}", *problems[:10]])) from None
        if status["state"] != "deployed":
            raise BenchError(f"submission {status['state']}: {status['nodes']}")
        for n in nodes:
            broken = (await peers.call("GET", endpoint_url(n, "/status")))["data"]["broken_boxes"]
            if broken:
                raise BenchError(f"node {n} cannot run boxes: {broken}")
    return Cluster(head, nodes, pids, token)


def cpu_seconds(pid: int) -> float | None:
    """User + system CPU time of a live process, from /proc."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            fields = fh.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return None


class Sampler:
    """Polls nodes' ``rows_in`` and processes' CPU time every ``interval`` seconds."""

    def __init__(self, nodes: list[str], pids: dict[str, int], interval: float = 0.05):
        self.nodes = nodes
        self.pids = pids
        self.interval = interval
        self.samples: dict[str, list[tuple[float, int]]] = {n: [] for n in nodes}
        self.cpu: dict[str, list[tuple[float, float]]] = {name: [] for name in pids}
        self.answer: dict[str, list[float]] = {n: [] for n in nodes}  # seconds each /status took
        self._task: asyncio.Task | None = None

    async def __aenter__(self) -> Self:
        from boreas.wire.client import PeerClient

        self._peers = PeerClient(None, timeout=2.0)
        await self._peers.__aenter__()
        await self._sample()
        self._task = asyncio.create_task(self._run())
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._task is not None
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task
        await self._sample()
        await self._peers.__aexit__(None, None, None)

    async def _sample(self) -> None:
        from boreas.wire.addressing import endpoint_url
        from boreas.wire.client import PeerError

        for n in self.nodes:
            asked = time.time()
            try:
                status = await self._peers.call("GET", endpoint_url(n, "/status"))
            except PeerError:  # a busy machine: no answer within the timeout this time; the node is asked again
                self.answer[n].append(time.time() - asked)
                continue
            now = time.time()
            self.answer[n].append(now - asked)
            self.samples[n].append((now, status["data"]["flow"].get("rows_in", 0)))
        now = time.time()
        for name, pid in self.pids.items():
            cpu = cpu_seconds(pid)
            if cpu is not None:
                self.cpu[name].append((now, cpu))

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self.interval)
            await self._sample()

    def node_rate(self, node: str) -> tuple[int, float]:
        """Rows the node took and over how long: from the last sample before its first row to the
        first sample after its last (so the duration is over-, the rate under-estimated by <= 2 intervals)."""
        s = self.samples[node]
        base, final = s[0][1], s[-1][1]
        if final == base:
            return 0, 0.0
        t0 = max(t for t, n in s if n == base)
        t1 = min(t for t, n in s if n == final)
        return final - base, t1 - t0

    def cpu_share(self, name: str, t0: float, t1: float) -> float | None:
        """CPU seconds per second of [t0, t1], interpolated from the samples."""
        s = self.cpu.get(name) or []
        if len(s) < 2:
            return None

        def at(t: float) -> float:
            for (ta, ca), (tb, cb) in itertools.pairwise(s):
                if ta <= t <= tb:
                    return ca + (cb - ca) * ((t - ta) / (tb - ta) if tb > ta else 0)
            return s[0][1] if t < s[0][0] else s[-1][1]

        return (at(t1) - at(t0)) / (t1 - t0) if t1 > t0 else None


# -- the runs --------------------------------------------------------------------------


async def boreas_throughput(procs: Processes, cluster: Cluster, args: argparse.Namespace, prefix: str,
                            nodes: list[str], expected: Windows, arrow: bool = True) -> dict[str, Any]:
    """The readings through chain ``prefix``: published as Arrow record batches of ``args.arrow_batch`` rows
    (``arrow``), else as rows in batches of ``args.batch``."""
    from boreas.client.subscriber import Subscriber

    times = args.times
    n_windows = len(expected)
    kind, batch = ("publish-arrow", args.arrow_batch) if arrow else ("publish", args.batch)
    workers = [start_worker(procs, f"publisher {prefix}{k}", [
        kind, "--head", cluster.head, "--stream", f"{prefix}Reading", "--index", str(k), "--of",
        str(args.publishers), "--times", str(times), "--batch", str(batch), "--capacity", str(args.capacity)])
        for k in range(args.publishers)]
    async with Subscriber(cluster.head, f"{prefix}Average", cluster.token) as sub:
        readies = [json.loads(await read_line(w, procs, "ready", 120)) for w in workers]
        total = sum(r["rows"] for r in readies)
        pids = {**{f"node {n}": cluster.pids[n] for n in nodes}, **{f"publisher {k}": w.pid for k, w in
                                                                      enumerate(workers)}}
        got: list[tuple] = []
        async with Sampler(nodes, pids) as sampler:
            profiled = [cluster.pids[n] for n in nodes] if args.profile and arrow else []
            for pid in profiled:  # bench/cpu_profile.py: on
                os.kill(pid, signal.SIGUSR1)
            go = time.time()
            for w in workers:
                tell(w, "go")
            last = go
            try:
                async with asyncio.timeout(max(120.0, total / 10_000)):
                    async for rows in sub.batches():
                        got += rows
                        last = time.time()
                        if len(got) >= n_windows:
                            break
            except TimeoutError:
                raise BenchError(f"{prefix}: {len(got)} of {n_windows} windows after "
                                 f"{time.time() - go:.0f} s") from None
            for pid in profiled:  # off: the stats are written
                os.kill(pid, signal.SIGUSR2)
            results = [json.loads(await read_line(w, procs, "result", 120)) for w in workers]
    procs.stop(workers)
    accepted = sum(r["accepted"] for r in results)
    refused = sum(r["refused"] for r in results)
    if accepted != total or refused:
        raise BenchError(f"{prefix}: the nodes accepted {accepted} of {total} tuples ({refused} refused)")
    check_windows(f"Boreas {prefix[:-1]}", got, expected)
    elapsed = last - go
    published = max(r["done"] for r in results) - go  # every batch acknowledged by the entry node
    node_rates = {}
    for n in nodes:
        rows, seconds = sampler.node_rate(n)
        node_rates[n] = {"rows": rows, "seconds": seconds, "rate": rows / seconds if seconds else 0.0,
                         "cpu": sampler.cpu_share(f"node {n}", go, last),
                         "status_max": max(sampler.answer[n]) * 1000}
    publishers_cpu = [r["cpu"] / (r["done"] - r["start"]) for r in results]
    return {"tuples": total, "elapsed": elapsed, "rate": total / elapsed, "published": published,
            "publish_rate": total / published, "nodes": node_rates, "publishers_cpu": publishers_cpu,
            "windows": got, "batch": batch, "arrow": arrow}


async def boreas_latency(procs: Processes, cluster: Cluster, args: argparse.Namespace, prefix: str,
                         nodes: list[str], probe: Any = None) -> dict[str, Any]:
    """Stamped tuples at LATENCY_RATE through chain ``prefix``; ``probe`` (a dataplane_probe.Recorder) marks
    when the reader has each batch."""
    from boreas.client.subscriber import Subscriber

    worker = start_worker(procs, f"paced publisher {prefix}", [
        "paced", "--head", cluster.head, "--stream", f"{prefix}Reading", "--batch", str(LATENCY_BATCH),
        "--rate", str(LATENCY_RATE), "--seconds", str(args.latency_seconds)])
    async with Subscriber(cluster.head, f"{prefix}Converted", cluster.token) as sub:
        ready = json.loads(await read_line(worker, procs, "ready", 60))
        rows_sent = ready["batches"] * LATENCY_BATCH
        expected = stamped_passing(rows_sent)
        samples: list[tuple[int, int]] = []  # (sent, received) in microseconds
        # CPU each process spends per batch: the less, the less often a wake-up waits for a core
        pids = {**{f"node {n}": cluster.pids[n] for n in nodes}, "publisher": worker.pid}
        cpu0 = {name: cpu_seconds(pid) for name, pid in pids.items()}
        own0 = time.process_time()
        freeze_harness()
        tell(worker, "go")
        try:
            async with asyncio.timeout(args.latency_seconds + 30):
                async for rows in sub.batches():
                    now = int(time.time() * 1_000_000)
                    samples += [(row[3], now) for row in rows]
                    if probe is not None and rows:
                        probe.mark("sub.got", prefix, rows[0][3], now)
                    if len(samples) >= expected:
                        break
        except TimeoutError:
            raise BenchError(f"{prefix}: {len(samples)} of {expected} stamped tuples arrived") from None
        result = json.loads(await read_line(worker, procs, "result", 60))
        cpu = {name: (cpu_seconds(pid) or 0.0) - (cpu0[name] or 0.0) for name, pid in pids.items()}
        cpu["subscriber (this process)"] = time.process_time() - own0
    procs.stop([worker])
    if result["accepted"] != rows_sent or result["refused"]:
        raise BenchError(f"{prefix}: {result['accepted']} of {rows_sent} stamped tuples accepted")
    figures = latency_figures(samples, result)
    figures["cpu_per_batch_us"] = {name: seconds / ready["batches"] * 1e6 for name, seconds in cpu.items()}
    return figures


async def measure_boreas(procs: Processes, tmp: Path, token: str, args: argparse.Namespace,
                         expected: Windows) -> dict[str, Any]:
    start = time.perf_counter()
    cluster = await start_cluster(procs, tmp, token, args.profile, probe=args.probe is not None,
                                  node_args=tuple(args.node_args.split()))
    a, b, c = cluster.nodes
    print(f"cluster up and deployed in {time.perf_counter() - start:.1f} s: Head {cluster.head}, "
          f"nodes {a} (filter->map->aggregate), {b} (filter->map) -> {c} (aggregate)", flush=True)
    out: dict[str, Any] = {"nodes": cluster.nodes}
    out["one"] = await boreas_throughput(procs, cluster, args, ONE, [a], expected)
    print(f"  throughput, one node, Arrow publishers:  {out['one']['rate']:>10,.0f} tuples/s", flush=True)
    check_order("Boreas one node", out["one"]["windows"])
    out["rows"] = await boreas_throughput(procs, cluster, args, ROWS, [a], expected, arrow=False)
    print(f"  throughput, one node, rows publishers:   {out['rows']['rate']:>10,.0f} tuples/s", flush=True)
    check_order("Boreas one node, rows", out["rows"]["windows"])
    out["two"] = await boreas_throughput(procs, cluster, args, TWO, [b, c], expected)
    print(f"  throughput, two nodes, Arrow publishers: {out['two']['rate']:>10,.0f} tuples/s", flush=True)
    check_order("Boreas two nodes", out["two"]["windows"])
    recorder = None
    if args.probe is not None:  # this process's probes: the subscriber's side
        from dataplane_probe import install

        recorder = install("sub", args.probe)
    out["lat1"] = await boreas_latency(procs, cluster, args, LAT1, [a], recorder)
    print(f"  latency, one node:      p50 {out['lat1']['p50']:.2f} ms, p99 {out['lat1']['p99']:.2f} ms", flush=True)
    out["lat2"] = await boreas_latency(procs, cluster, args, LAT2, [b, c], recorder)
    print(f"  latency, two nodes:     p50 {out['lat2']['p50']:.2f} ms, p99 {out['lat2']['p99']:.2f} ms", flush=True)
    procs.check()
    if recorder is not None:
        recorder.dump()
    return out
