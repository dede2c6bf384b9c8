"""Benchmark: the data plane -- filter -> map -> aggregate throughput and publish-to-subscriber latency.

It starts a real Head (embedded catalog in a temporary directory) and three
node processes on loopback, deploys ``examples/xml/sensor_chain.xml``
(filter ``valid`` -> map ``to_fahrenheit`` -> aggregate ``per_sensor``:
avg and count per sensor over tumbling windows of 60 time units) twice --
all three boxes on one node, and split over two nodes (filter + map on one,
the aggregate on the other, so ~95% of the tuples cross a node-to-node link)
-- plus a latency pipeline (the same filter and map, with a ``sent``
timestamp field passed through), and measures:

* **throughput** (tuples/s): N tuples published by publisher processes
  (the Python :class:`~boreas.client.publisher.Publisher`, batched),
  divided by the time from "go" until the subscriber has received the last
  aggregate output.  The data is 10 sensors x T times (T a multiple of 60);
  a final tuple per sensor at time T closes the last window, so exactly
  10*T/60 windows come out, and their ``readings`` must add up to the
  tuples the filter passes (checked).  The publishers each own a subset of
  the sensors, so every group's tuples arrive in order.  What the node
  itself achieved (its ``rows_in`` counter polled from ``/status``) and the
  CPU each process used are printed too, to say where the bottleneck is.
* **latency** (ms, p50/p99): one publisher process sends 10,000 tuples/s
  (batches of 100 every 10 ms), each stamped with ``time.time()`` in
  microseconds (a ``long`` field) when the batch is handed to the
  publisher; the subscriber (this process) records receive time - send
  time for every tuple.  Same machine, same clock.  The first second is
  warm-up and not counted.

The peer, measured in the same run after the Boreas processes are stopped,
is Spark Structured Streaming in ``local[2]`` on the same pipeline and data:

* throughput: the same N rows (identical values) as parquet files read by
  the file source, ``maxFilesPerTrigger`` 1 (micro-batches of
  ``--spark-file-rows`` rows), filter -> select -> event-time tumbling
  window of 60 s on ``timestamp_seconds(time)`` with a 0 s watermark,
  grouped by sensor, append mode (windows come out once closed, as Boreas
  emits them), into ``foreachBatch``; end to end from ``start()`` until the
  sink has the last window, after a warm-up query.  The aggregate output is
  compared with Boreas's (same windows, counts and averages).
* latency: a socket source fed by a process that sends the same stamped
  rows at 10,000 tuples/s; filter -> select; default trigger (the next
  micro-batch starts as soon as the last one ends, Spark's minimum);
  ``foreachBatch`` collects the rows and records receive time - send time.

The ratio column is always Boreas / Spark: higher is better for
throughput, lower for latency.  Timing never fails the run; the exit status
is non-zero only on errors (a process that will not start, refused rows,
outputs that are missing or wrong).  Every process is stopped and the
temporary directory removed on exit, Ctrl-C and SIGTERM included.

Usage: .venv/bin/python bench/dataplane.py [--tuples 2000000] [--publishers 2] [--batch 2000]
           [--latency-seconds 8] [--no-spark] [--keep-logs]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import copy
import json
import math
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any

HOST = "127.0.0.1"
READY_TIMEOUT = 60.0  # seconds for every process to come up
EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "xml" / "sensor_chain.xml"
SENSORS = 10
WINDOW = 60  # the example's window-size (and advance), in time units
TARGET_THROUGHPUT = 200_000  # tuples/s on one node
TARGET_P99_MS = 20.0  # at LATENCY_RATE
LATENCY_RATE = 10_000  # tuples/s
LATENCY_BATCH = 100  # tuples per batch: one batch every 10 ms
WARMUP_S = 1.0  # latency samples sent in the first second are not counted

# Chains deployed: prefix -> what it is for.
ONE, TWO, LAT1, LAT2 = "one_", "two_", "lat1_", "lat2_"


class BenchError(Exception):
    """Something went wrong (not slow: wrong); the run exits 1."""


# -- the data (the same function of the row number for Boreas and Spark) ------------


def celsius(i: int) -> float:
    """Reading number i's temperature: -45.0 .. 64.9; the filter drops the ~4.5% at 60 or above."""
    return ((i * 37) % 1100) / 10.0 - 45.0


CELSIUS_SQL = "cast((id * 37) % 1100 as double) / 10.0D - 45.0D"  # the same, in Spark SQL (same IEEE steps)


def passes(c: float) -> bool:
    return -90.0 < c < 60.0


def expected_windows(times: int) -> dict[tuple[int, int], tuple[float, int]]:
    """(sensor, window start) -> (average fahrenheit, readings) for reading i = sensor + SENSORS * time."""
    sums: dict[tuple[int, int], list] = {}
    for i in range(SENSORS * times):
        c = celsius(i)
        key = (i % SENSORS, (i // SENSORS) // WINDOW * WINDOW)
        acc = sums.setdefault(key, [0.0, 0])
        if passes(c):
            acc[0] += c * 9.0 / 5.0 + 32.0
            acc[1] += 1
    return {k: (s / n if n else 0.0, n) for k, (s, n) in sums.items()}


def percentile(sorted_values: list[float], p: float) -> float:
    """Nearest-rank percentile of an ascending list."""
    if not sorted_values:
        return math.nan
    rank = max(1, math.ceil(p / 100 * len(sorted_values)))
    return sorted_values[rank - 1]


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
    for prefix in (ONE, TWO):
        chain(prefix, whole, latency=False)
    for prefix in (LAT1, LAT2):
        chain(prefix, ["cleanup", "convert"], latency=True)
    return etree.tostring(out, pretty_print=True, xml_declaration=True, encoding="UTF-8").decode()


def deployment(a: str, b: str, c: str) -> str:
    """Node a: the one-node chain and latency chain; nodes b and c: the split chains (filter+map | aggregate)."""
    return (f'<?xml version="1.0"?>\n<deploy>\n'
            f'  <node endpoint="{a}" query="{ONE}cleanup {ONE}convert {ONE}summarise {LAT1}cleanup {LAT1}convert"/>\n'
            f'  <node endpoint="{b}" query="{TWO}cleanup {TWO}convert {LAT2}cleanup"/>\n'
            f'  <node endpoint="{c}" query="{TWO}summarise {LAT2}convert"/>\n'
            f'</deploy>\n')


# -- processes -----------------------------------------------------------------------


def free_ports(n: int) -> list[int]:
    """``n`` distinct free ports on HOST (held open together so none repeats)."""
    with contextlib.ExitStack() as stack:
        socks = [stack.enter_context(socket.socket(socket.AF_INET, socket.SOCK_STREAM)) for _ in range(n)]
        for s in socks:
            s.bind((HOST, 0))
        return [s.getsockname()[1] for s in socks]


def _tail(path: Path, lines: int = 15) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


def cpu_seconds(pid: int) -> float | None:
    """User + system CPU time of a live process, from /proc."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            fields = fh.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return None


class Processes:
    """Child processes started by this run, each in its own session, logging to a file.

    ``boreas`` components are plain Popen children; workers (publishers and the
    socket feeder: this script with ``--worker``) talk over stdin/stdout lines.
    """

    def __init__(self, workdir: Path, env: dict[str, str]):
        self.workdir = workdir
        self.env = env
        self.procs: list[tuple[str, subprocess.Popen, Path]] = []

    def spawn(self, name: str, argv: list[str], pipes: bool = False) -> subprocess.Popen:
        log = self.workdir / f"{re.sub(r'[^A-Za-z0-9.-]', '_', name)}.log"
        with open(log, "wb") as err:
            proc = subprocess.Popen([sys.executable, *argv], env=self.env, cwd=self.workdir,
                                    stdin=subprocess.PIPE if pipes else subprocess.DEVNULL,
                                    stdout=subprocess.PIPE if pipes else err, stderr=err,
                                    start_new_session=True, text=pipes, bufsize=1 if pipes else -1)
        self.procs.append((name, proc, log))
        return proc

    def boreas(self, name: str, argv: list[str]) -> subprocess.Popen:
        return self.spawn(name, ["-m", "boreas.cli.main", *argv])

    def worker(self, name: str, argv: list[str]) -> subprocess.Popen:
        return self.spawn(name, [str(Path(__file__).resolve()), "--worker", *argv], pipes=True)

    def check(self) -> None:
        for name, proc, log in self.procs:
            if proc.poll() is not None and proc.returncode != 0:
                raise BenchError(f"{name} exited with status {proc.returncode}:\n{_tail(log)}")

    def log_of(self, proc: subprocess.Popen) -> str:
        for _, p, log in self.procs:
            if p is proc:
                return _tail(log)
        return "(no log)"

    def dump_logs(self, lines: int = 15) -> None:
        for name, proc, log in self.procs:
            if name.startswith(("head", "node")) or proc.returncode not in (None, 0):
                print(f"--- last lines of {name}'s log ---\n{_tail(log, lines)}", file=sys.stderr)

    def stop(self, procs: list[subprocess.Popen] | None = None) -> None:
        """SIGTERM the process groups (all, or those given), then SIGKILL what is left after 10 s."""
        chosen = [(n, p, log) for n, p, log in self.procs if procs is None or p in procs]
        for _, proc, _ in chosen:
            if proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGTERM)
        deadline = time.monotonic() + 10
        for _, proc, _ in chosen:
            try:
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
            for stream in (proc.stdin, proc.stdout):
                if stream is not None:
                    with contextlib.suppress(OSError):
                        stream.close()
        self.procs = [item for item in self.procs if item not in chosen]


async def read_line(proc: subprocess.Popen, procs: Processes, what: str, timeout: float) -> str:
    """The worker's next stdout line (in a thread, so the event loop keeps running)."""
    assert proc.stdout is not None
    try:
        line = await asyncio.wait_for(asyncio.to_thread(proc.stdout.readline), timeout)
    except TimeoutError:
        raise BenchError(f"no {what} from worker {proc.pid} after {timeout:g} s:\n{procs.log_of(proc)}") from None
    if not line:
        proc.wait(timeout=5)
        raise BenchError(f"worker {proc.pid} exited ({proc.returncode}) before {what}:\n{procs.log_of(proc)}")
    return line.strip()


def tell(proc: subprocess.Popen, line: str) -> None:
    assert proc.stdin is not None
    proc.stdin.write(line + "\n")
    proc.stdin.flush()


# -- workers: this script run as a child process --------------------------------------


def _ready(payload: dict[str, Any]) -> None:
    print(json.dumps(payload), flush=True)


async def worker_publish(args: argparse.Namespace) -> None:
    """Publish readings of the sensors this worker owns, as fast as the node takes them."""
    from boreas.client.publisher import Publisher

    mine = [s for s in range(SENSORS) if s % args.of == args.index]
    rows = [[s, t, celsius(s + SENSORS * t)] for t in range(args.times) for s in mine]
    rows += [[s, args.times, 0.0] for s in mine]  # closes each sensor's last window
    batches = [rows[i:i + args.batch] for i in range(0, len(rows), args.batch)]
    token = os.environ["BOREAS_TOKEN"]
    async with Publisher(args.head, args.stream, token, batch_size=args.batch, capacity=args.capacity) as pub:
        _ready({"rows": len(rows)})
        await asyncio.to_thread(sys.stdin.readline)  # "go"
        cpu0, start = time.process_time(), time.time()
        for batch in batches:
            await pub.send(batch)
        queued = time.time()
        await pub.flush(timeout=300)
        done = time.time()
        cpu = time.process_time() - cpu0
    _ready({"rows": len(rows), "start": start, "queued": queued, "done": done, "cpu": cpu,
            "accepted": pub.accepted, "refused": len(pub.refused) + len(pub.refusals)})


async def worker_paced(args: argparse.Namespace) -> None:
    """Publish stamped readings at a fixed rate: ``batch`` tuples every batch/rate seconds."""
    from boreas.client.publisher import Publisher

    token = os.environ["BOREAS_TOKEN"]
    interval = args.batch / args.rate
    count = int(args.seconds * args.rate / args.batch)
    async with Publisher(args.head, args.stream, token, batch_size=args.batch) as pub:
        _ready({"batches": count})
        await asyncio.to_thread(sys.stdin.readline)
        loop = asyncio.get_running_loop()
        begin = loop.time()
        lag_max, i = 0.0, 0
        for k in range(count):
            due = begin + k * interval
            wait = due - loop.time()
            if wait > 0:
                await asyncio.sleep(wait)
            else:
                lag_max = max(lag_max, -wait)
            sent = int(time.time() * 1_000_000)
            batch = []
            for _ in range(args.batch):
                batch.append([i % SENSORS, i // SENSORS, celsius(i), sent])
                i += 1
            await pub.send(batch)
        await pub.flush(timeout=60)
        elapsed = loop.time() - begin
    _ready({"rows": i, "elapsed": elapsed, "lag_max": lag_max, "accepted": pub.accepted,
            "refused": len(pub.refused) + len(pub.refusals)})


def worker_socket_feed(args: argparse.Namespace) -> None:
    """The Spark peer's source: serve stamped readings as CSV lines at a fixed rate to one connection."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as server:
        server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        server.bind((HOST, 0))
        server.listen(1)
        _ready({"port": server.getsockname()[1]})
        conn, _ = server.accept()
    with conn:
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        _ready({"connected": True})
        sys.stdin.readline()
        interval = args.batch / args.rate
        count = int(args.seconds * args.rate / args.batch)
        begin = time.monotonic()
        lag_max, i = 0.0, 0
        for k in range(count):
            wait = begin + k * interval - time.monotonic()
            if wait > 0:
                time.sleep(wait)
            else:
                lag_max = max(lag_max, -wait)
            sent = int(time.time() * 1_000_000)
            lines = []
            for _ in range(args.batch):
                lines.append(f"{i % SENSORS},{i // SENSORS},{celsius(i)!r},{sent}\n")
                i += 1
            conn.sendall("".join(lines).encode())
        _ready({"rows": i, "elapsed": time.monotonic() - begin, "lag_max": lag_max})
        sys.stdin.readline()  # keep the connection open until told to stop


def run_worker(argv: list[str]) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("kind", choices=("publish", "paced", "socket-feed"))
    parser.add_argument("--head")
    parser.add_argument("--stream")
    parser.add_argument("--index", type=int, default=0)
    parser.add_argument("--of", type=int, default=1)
    parser.add_argument("--times", type=int, default=0)
    parser.add_argument("--batch", type=int, default=1000)
    parser.add_argument("--capacity", type=int, default=16)
    parser.add_argument("--rate", type=int, default=LATENCY_RATE)
    parser.add_argument("--seconds", type=float, default=8.0)
    args = parser.parse_args(argv)
    if args.kind == "publish":
        asyncio.run(worker_publish(args))
    elif args.kind == "paced":
        asyncio.run(worker_paced(args))
    else:
        worker_socket_feed(args)
    return 0


# -- Boreas: the cluster ---------------------------------------------------------------


@dataclass
class Cluster:
    head: str
    nodes: list[str]  # a (one-node chain), b (filter+map), c (aggregate)
    pids: dict[str, int]
    token: str


async def start_cluster(procs: Processes, tmp: Path, token: str) -> Cluster:
    from boreas.client.head_api import submit_documents, wait_submission
    from boreas.wire.addressing import endpoint_url
    from boreas.wire.client import PeerClient, PeerError

    ports = free_ports(4)
    head_endpoint = f"{HOST}:{ports[0]}"
    head = endpoint_url(head_endpoint)
    nodes = [f"{HOST}:{p}" for p in ports[1:]]
    catalog_url = f"sqlite:///{str(tmp / 'catalog.db').lstrip('/')}"
    procs.boreas("head", ["head", "--catalog", catalog_url, "--listen", head_endpoint])
    pids = {}
    for n in nodes:
        pids[n] = procs.boreas(f"node {n}", ["node", "--endpoint", n, "--head", head]).pid
    deadline = time.monotonic() + READY_TIMEOUT
    async with PeerClient(None, timeout=2.0) as peers:
        while True:
            procs.check()
            try:
                rows = {r["endpoint"]: r for r in (await peers.call("GET", f"{head}/nodes"))["nodes"]}
                waiting = [n for n in nodes if not rows.get(n, {}).get("alive")]
            except PeerError:
                waiting = ["the Head"]
            if not waiting:
                break
            if time.monotonic() > deadline:
                raise BenchError(f"not ready after {READY_TIMEOUT:g} s: {', '.join(waiting)}")
            await asyncio.sleep(0.1)
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


class Sampler:
    """Polls nodes' ``rows_in`` and processes' CPU time every ``interval`` seconds."""

    def __init__(self, nodes: list[str], pids: dict[str, int], interval: float = 0.05):
        self.nodes = nodes
        self.pids = pids
        self.interval = interval
        self.samples: dict[str, list[tuple[float, int]]] = {n: [] for n in nodes}
        self.cpu: dict[str, list[tuple[float, float]]] = {name: [] for name in pids}
        self._task: asyncio.Task | None = None

    async def __aenter__(self) -> "Sampler":
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

        for n in self.nodes:
            status = await self._peers.call("GET", endpoint_url(n, "/status"))
            self.samples[n].append((time.time(), status["data"]["flow"].get("rows_in", 0)))
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
            for (ta, ca), (tb, cb) in zip(s, s[1:]):
                if ta <= t <= tb:
                    return ca + (cb - ca) * ((t - ta) / (tb - ta) if tb > ta else 0)
            return s[0][1] if t < s[0][0] else s[-1][1]

        return (at(t1) - at(t0)) / (t1 - t0) if t1 > t0 else None


# -- Boreas: throughput ------------------------------------------------------------------


async def boreas_throughput(procs: Processes, cluster: Cluster, args: argparse.Namespace, prefix: str,
                            nodes: list[str], expected: dict[tuple[int, int], tuple[float, int]]) -> dict[str, Any]:
    from boreas.client.subscriber import Subscriber

    times = args.times
    n_windows = len(expected)
    workers = [procs.worker(f"publisher {prefix}{k}", [
        "publish", "--head", cluster.head, "--stream", f"{prefix}Reading", "--index", str(k), "--of",
        str(args.publishers), "--times", str(times), "--batch", str(args.batch), "--capacity", str(args.capacity)])
        for k in range(args.publishers)]
    async with Subscriber(cluster.head, f"{prefix}Average", cluster.token) as sub:
        readies = [json.loads(await read_line(w, procs, "ready", 120)) for w in workers]
        total = sum(r["rows"] for r in readies)
        pids = {**{f"node {n}": cluster.pids[n] for n in nodes}, **{f"publisher {k}": w.pid for k, w in
                                                                      enumerate(workers)}}
        got: list[tuple] = []
        async with Sampler(nodes, pids) as sampler:
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
                         "cpu": sampler.cpu_share(f"node {n}", go, last)}
    publishers_cpu = [r["cpu"] / (r["done"] - r["start"]) for r in results]
    return {"tuples": total, "elapsed": elapsed, "rate": total / elapsed, "published": published,
            "publish_rate": total / published, "nodes": node_rates, "publishers_cpu": publishers_cpu,
            "windows": got}


def check_windows(who: str, got: list[tuple], expected: dict[tuple[int, int], tuple[float, int]]) -> None:
    """Every expected window once, with its count and average; each sensor's windows in time order."""
    by_key = {}
    for sensor, start, avg, n in got:
        if (sensor, start) in by_key:
            raise BenchError(f"{who}: window ({sensor}, {start}) came out twice")
        by_key[(sensor, start)] = (avg, n)
    if by_key.keys() != expected.keys():
        missing = sorted(expected.keys() - by_key.keys())[:5]
        extra = sorted(by_key.keys() - expected.keys())[:5]
        raise BenchError(f"{who}: {len(by_key)} windows, expected {len(expected)} (missing {missing}, extra {extra})")
    for key, (avg, n) in expected.items():
        gavg, gn = by_key[key]
        if gn != n or not math.isclose(gavg, avg, rel_tol=1e-9, abs_tol=1e-9):
            raise BenchError(f"{who}: window {key} is ({gavg}, {gn}), expected ({avg}, {n})")


def check_order(who: str, got: list[tuple]) -> None:
    last: dict[int, int] = {}
    for sensor, start, _, _ in got:
        if start < last.get(sensor, -1):
            raise BenchError(f"{who}: sensor {sensor}'s window {start} came after {last[sensor]}")
        last[sensor] = start


# -- Boreas: latency ----------------------------------------------------------------------


async def boreas_latency(procs: Processes, cluster: Cluster, args: argparse.Namespace, prefix: str) -> dict[str, Any]:
    from boreas.client.subscriber import Subscriber

    worker = procs.worker(f"paced publisher {prefix}", [
        "paced", "--head", cluster.head, "--stream", f"{prefix}Reading", "--batch", str(LATENCY_BATCH),
        "--rate", str(LATENCY_RATE), "--seconds", str(args.latency_seconds)])
    async with Subscriber(cluster.head, f"{prefix}Converted", cluster.token) as sub:
        ready = json.loads(await read_line(worker, procs, "ready", 60))
        rows_sent = ready["batches"] * LATENCY_BATCH
        expected = sum(1 for i in range(rows_sent) if passes(celsius(i)))
        samples: list[tuple[int, int]] = []  # (sent, received) in microseconds
        tell(worker, "go")
        try:
            async with asyncio.timeout(args.latency_seconds + 30):
                async for rows in sub.batches():
                    now = int(time.time() * 1_000_000)
                    samples += [(row[3], now) for row in rows]
                    if len(samples) >= expected:
                        break
        except TimeoutError:
            raise BenchError(f"{prefix}: {len(samples)} of {expected} stamped tuples arrived") from None
        result = json.loads(await read_line(worker, procs, "result", 60))
    procs.stop([worker])
    if result["accepted"] != rows_sent or result["refused"]:
        raise BenchError(f"{prefix}: {result['accepted']} of {rows_sent} stamped tuples accepted")
    return latency_figures(samples, result)


def latency_figures(samples: list[tuple[int, int]], sender: dict[str, Any]) -> dict[str, Any]:
    first = min(s for s, _ in samples)
    kept = sorted((r - s) / 1000.0 for s, r in samples if s - first >= WARMUP_S * 1_000_000)
    return {"p50": percentile(kept, 50), "p99": percentile(kept, 99), "max": kept[-1] if kept else math.nan,
            "count": len(kept), "rate": sender["rows"] / sender["elapsed"], "lag_max": sender["lag_max"] * 1000}


async def measure_boreas(procs: Processes, tmp: Path, token: str, args: argparse.Namespace,
                         expected: dict[tuple[int, int], tuple[float, int]]) -> dict[str, Any]:
    start = time.perf_counter()
    cluster = await start_cluster(procs, tmp, token)
    a, b, c = cluster.nodes
    print(f"cluster up and deployed in {time.perf_counter() - start:.1f} s: Head {cluster.head}, "
          f"nodes {a} (filter->map->aggregate), {b} (filter->map) -> {c} (aggregate)", flush=True)
    out: dict[str, Any] = {"nodes": cluster.nodes}
    out["one"] = await boreas_throughput(procs, cluster, args, ONE, [a], expected)
    print(f"  throughput, one node:   {out['one']['rate']:>10,.0f} tuples/s", flush=True)
    check_order("Boreas one node", out["one"]["windows"])
    out["two"] = await boreas_throughput(procs, cluster, args, TWO, [b, c], expected)
    print(f"  throughput, two nodes:  {out['two']['rate']:>10,.0f} tuples/s", flush=True)
    check_order("Boreas two nodes", out["two"]["windows"])
    out["lat1"] = await boreas_latency(procs, cluster, args, LAT1)
    print(f"  latency, one node:      p50 {out['lat1']['p50']:.2f} ms, p99 {out['lat1']['p99']:.2f} ms", flush=True)
    out["lat2"] = await boreas_latency(procs, cluster, args, LAT2)
    print(f"  latency, two nodes:     p50 {out['lat2']['p50']:.2f} ms, p99 {out['lat2']['p99']:.2f} ms", flush=True)
    procs.check()
    return out


# -- Spark Structured Streaming: the peer --------------------------------------------------


class Spark:
    """A local[2] SparkSession whose JVM and files live under the run's temporary directory."""

    def __init__(self, tmp: Path):
        self.tmp = tmp
        self.session = None
        self.gateway_pid: int | None = None

    def start(self) -> Any:
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        from pyspark.sql import SparkSession

        local = self.tmp / "spark-local"
        local.mkdir(exist_ok=True)
        self.session = (SparkSession.builder.master("local[2]").appName("boreas-bench-dataplane")
                        .config("spark.ui.enabled", "false")
                        .config("spark.ui.showConsoleProgress", "false")
                        .config("spark.sql.shuffle.partitions", "2")
                        .config("spark.local.dir", str(local))
                        .config("spark.driver.extraJavaOptions", f"-Djava.io.tmpdir={local}")
                        .getOrCreate())
        self.session.sparkContext.setLogLevel("ERROR")
        with contextlib.suppress(Exception):
            self.gateway_pid = self.session.sparkContext._gateway.proc.pid
        return self.session

    def stop(self) -> None:
        if self.session is not None:
            with contextlib.suppress(Exception):
                for q in self.session.streams.active:
                    q.stop()
            with contextlib.suppress(Exception):
                self.session.stop()
            self.session = None
        if self.gateway_pid is not None:  # the JVM: make sure it is gone
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.gateway_pid, signal.SIGTERM)
            for _ in range(100):
                try:
                    os.kill(self.gateway_pid, 0)
                except ProcessLookupError:
                    break
                with contextlib.suppress(ChildProcessError):
                    if os.waitpid(self.gateway_pid, os.WNOHANG)[0]:
                        break
                time.sleep(0.1)
            else:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(self.gateway_pid, signal.SIGKILL)
            self.gateway_pid = None


def write_parquet(spark: Any, directory: Path, staging: Path, times: int, file_rows: int) -> int:
    """Reading i = sensor + SENSORS * time for time < ``times``, then the closing tuples, as parquet
    files whose modification times follow the data (the file source reads oldest first)."""
    directory.mkdir(parents=True)
    total = SENSORS * times
    step = max(SENSORS, file_rows // SENSORS * SENSORS)
    ranges = [(lo, min(lo + step, total)) for lo in range(0, total, step)]
    frames = [spark.range(lo, hi, 1, 1).selectExpr(f"cast(id % {SENSORS} as int) as sensor",
                                                   f"cast(id div {SENSORS} as int) as time",
                                                   f"{CELSIUS_SQL} as celsius") for lo, hi in ranges]
    frames.append(spark.range(0, SENSORS, 1, 1).selectExpr("cast(id as int) as sensor", f"{times} as time",
                                                            "0.0D as celsius"))
    now = time.time() - len(frames) - 10
    for k, frame in enumerate(frames):
        out = staging / f"f{k}"
        frame.write.parquet(str(out))
        (part,) = out.glob("part-*.parquet")
        target = directory / f"readings-{k:05d}.parquet"
        shutil.move(str(part), target)
        os.utime(target, (now + k, now + k))
        shutil.rmtree(out)
    return len(frames)


def spark_pipeline(source: Any) -> Any:
    from pyspark.sql import functions as F

    return (source.filter((F.col("celsius") > -90.0) & (F.col("celsius") < 60.0))
            .select("sensor", "time", (F.col("celsius") * 9.0 / 5.0 + 32.0).alias("fahrenheit"))
            .withColumn("ts", F.timestamp_seconds("time"))
            .withWatermark("ts", "0 seconds")
            .groupBy("sensor", F.window("ts", f"{WINDOW} seconds"))
            .agg(F.avg("fahrenheit").alias("fahrenheit"), F.count(F.lit(1)).alias("readings"))
            .select("sensor", F.col("window.start").cast("long").cast("int").alias("time"), "fahrenheit",
                    "readings"))


def spark_run_files(spark: Any, data: Path, checkpoint: Path, windows: int, timeout: float) -> dict[str, Any]:
    """Stream the parquet files through the pipeline until ``windows`` windows came out."""
    got: list[tuple] = []
    done = threading.Event()
    state = {"last": 0.0}

    def sink(df: Any, batch_id: int) -> None:
        rows = [tuple(r) for r in df.collect()]
        if rows:
            got.extend(rows)
            state["last"] = time.time()
        if len(got) >= windows:
            done.set()

    source = spark.readStream.schema("sensor INT, time INT, celsius DOUBLE").option("maxFilesPerTrigger", 1)
    start = time.time()
    query = (spark_pipeline(source.parquet(str(data))).writeStream.outputMode("append")
             .foreachBatch(sink).option("checkpointLocation", str(checkpoint)).start())
    try:
        while not done.wait(0.05):
            if query.exception() is not None:
                raise BenchError(f"Spark query failed: {query.exception()}")
            if time.time() - start > timeout:
                raise BenchError(f"Spark: {len(got)} of {windows} windows after {timeout:g} s")
        progress = list(query.recentProgress)
    finally:
        query.stop()
    input_rows = sum(p["numInputRows"] for p in progress)
    busy_ms = sum(p["durationMs"].get("triggerExecution", 0) for p in progress if p["numInputRows"])
    return {"elapsed": state["last"] - start, "windows": got, "input_rows": input_rows,
            "busy": busy_ms / 1000, "batches": sum(1 for p in progress if p["numInputRows"]),
            "progress_complete": len(progress) < 100}


def spark_throughput(spark: Any, tmp: Path, args: argparse.Namespace,
                     expected: dict[tuple[int, int], tuple[float, int]]) -> dict[str, Any]:
    staging = tmp / "spark-staging"
    warm_times = WINDOW * 20
    files_warm = write_parquet(spark, tmp / "spark-warm", staging, warm_times, args.spark_file_rows // 4)
    spark_run_files(spark, tmp / "spark-warm", tmp / "ckpt-warm", SENSORS * warm_times // WINDOW, 120)
    files = write_parquet(spark, tmp / "spark-data", staging, args.times, args.spark_file_rows)
    r = spark_run_files(spark, tmp / "spark-data", tmp / "ckpt-data", len(expected), max(300.0, args.tuples / 5000))
    check_windows("Spark", r["windows"], expected)
    total = SENSORS * (args.times + 1)
    r.update(tuples=total, rate=total / r["elapsed"], files=files, warm_files=files_warm,
             engine_rate=r["input_rows"] / r["busy"] if r["busy"] else math.nan)
    return r


def spark_latency(spark: Any, procs: Processes, tmp: Path, args: argparse.Namespace) -> dict[str, Any]:
    from pyspark.sql import functions as F

    feeder = procs.worker("socket feeder", ["socket-feed", "--batch", str(LATENCY_BATCH), "--rate",
                                            str(LATENCY_RATE), "--seconds", str(args.latency_seconds)])
    port = json.loads(_sync_line(feeder, procs, "port"))["port"]
    samples: list[tuple[int, int]] = []
    lock = threading.Lock()

    def sink(df: Any, batch_id: int) -> None:
        sent = df.select("sent").collect()
        now = int(time.time() * 1_000_000)
        with lock:
            samples.extend((r[0], now) for r in sent)

    parts = F.split(F.col("value"), ",")
    lines = spark.readStream.format("socket").option("host", HOST).option("port", port).load()
    stamped = lines.select(parts[0].cast("int").alias("sensor"), parts[1].cast("int").alias("time"),
                           parts[2].cast("double").alias("celsius"), parts[3].cast("long").alias("sent"))
    query = (stamped.filter((F.col("celsius") > -90.0) & (F.col("celsius") < 60.0))
             .select("sensor", "time", (F.col("celsius") * 9.0 / 5.0 + 32.0).alias("fahrenheit"), "sent")
             .writeStream.foreachBatch(sink).option("checkpointLocation", str(tmp / "ckpt-latency")).start())
    try:
        _sync_line(feeder, procs, "connection")
        time.sleep(1.0)  # let the query settle into its loop of empty triggers
        tell(feeder, "go")
        result = json.loads(_sync_line(feeder, procs, "result", args.latency_seconds + 60))
        rows_sent = result["rows"]
        expected = sum(1 for i in range(rows_sent) if passes(celsius(i)))
        deadline = time.time() + 60
        while True:
            if query.exception() is not None:
                raise BenchError(f"Spark latency query failed: {query.exception()}")
            with lock:
                n = len(samples)
            if n >= expected:
                break
            if time.time() > deadline:
                raise BenchError(f"Spark: {n} of {expected} stamped tuples arrived")
            time.sleep(0.05)
        progress = list(query.recentProgress)
    finally:
        query.stop()
        procs.stop([feeder])
    figures = latency_figures(samples, result)
    batches = [p for p in progress if p["numInputRows"]]
    figures["batch_ms"] = (sum(p["durationMs"].get("triggerExecution", 0) for p in batches) / len(batches)
                           if batches else math.nan)
    return figures


def _sync_line(proc: subprocess.Popen, procs: Processes, what: str, timeout: float = 60) -> str:
    return asyncio.run(read_line(proc, procs, what, timeout))


def measure_spark(procs: Processes, tmp: Path, args: argparse.Namespace,
                  expected: dict[tuple[int, int], tuple[float, int]]) -> dict[str, Any]:
    spark_home = Spark(tmp)
    try:
        start = time.perf_counter()
        spark = spark_home.start()
        print(f"Spark {spark.version} local[2] up in {time.perf_counter() - start:.1f} s", flush=True)
        out = {"version": spark.version}
        out["throughput"] = spark_throughput(spark, tmp, args, expected)
        print(f"  throughput:             {out['throughput']['rate']:>10,.0f} tuples/s", flush=True)
        out["latency"] = spark_latency(spark, procs, tmp, args)
        print(f"  latency:                p50 {out['latency']['p50']:.2f} ms, p99 {out['latency']['p99']:.2f} ms",
              flush=True)
        return out
    finally:
        spark_home.stop()


# -- the report ---------------------------------------------------------------------------


def report(args: argparse.Namespace, b: dict[str, Any], s: dict[str, Any] | None) -> None:
    st = s["throughput"] if s else None
    sl = s["latency"] if s else None

    def num(v: float | None, unit: str) -> str:
        if v is None or (isinstance(v, float) and math.isnan(v)):
            return "-"
        return f"{v:,.0f} {unit}" if unit == "tuples/s" else f"{v:.2f} {unit}"

    def ratio(x: float, y: float | None) -> str:
        return f"{x / y:.2f}x" if y else "-"

    rows = [
        ("throughput, one node", f">= {TARGET_THROUGHPUT:,} tuples/s", num(b["one"]["rate"], "tuples/s"),
         num(st and st["rate"], "tuples/s"), ratio(b["one"]["rate"], st and st["rate"])),
        ("throughput, two nodes", "-", num(b["two"]["rate"], "tuples/s"), num(st and st["rate"], "tuples/s"),
         ratio(b["two"]["rate"], st and st["rate"])),
        (f"latency p50 @ {LATENCY_RATE:,}/s, one node", "-", num(b["lat1"]["p50"], "ms"), num(sl and sl["p50"], "ms"),
         ratio(b["lat1"]["p50"], sl and sl["p50"])),
        (f"latency p99 @ {LATENCY_RATE:,}/s, one node", f"< {TARGET_P99_MS:g} ms", num(b["lat1"]["p99"], "ms"),
         num(sl and sl["p99"], "ms"), ratio(b["lat1"]["p99"], sl and sl["p99"])),
        (f"latency p50 @ {LATENCY_RATE:,}/s, two nodes", "-", num(b["lat2"]["p50"], "ms"),
         num(sl and sl["p50"], "ms"), ratio(b["lat2"]["p50"], sl and sl["p50"])),
        (f"latency p99 @ {LATENCY_RATE:,}/s, two nodes", "-", num(b["lat2"]["p99"], "ms"),
         num(sl and sl["p99"], "ms"), ratio(b["lat2"]["p99"], sl and sl["p99"])),
    ]
    head = ("figure", "target", "Boreas", "Spark peer", "ratio B/S")
    widths = [max(len(r[i]) for r in [head, *rows]) for i in range(len(head))]
    print()
    for row in [head, *rows]:
        print("  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths))).rstrip())
    print("(ratio B/S: Boreas / Spark -- higher is better for throughput, lower is better for latency)")

    print()
    for key, label in (("one", "one node"), ("two", "two nodes")):
        r = b[key]
        print(f"Boreas {label}: {r['tuples']:,} tuples from {args.publishers} publisher process(es), batches of "
              f"{args.batch}; all acknowledged by the entry node after {r['published']:.2f} s "
              f"({r['publish_rate']:,.0f}/s), last window at the subscriber after {r['elapsed']:.2f} s")
        for n, nr in r["nodes"].items():
            cpu = f", CPU {nr['cpu'] * 100:.0f}%" if nr["cpu"] is not None else ""
            print(f"    node {n}: took {nr['rows']:,} rows in {nr['seconds']:.2f} s = {nr['rate']:,.0f} rows/s "
                  f"(from its /status rows_in){cpu}")
        print(f"    publisher CPU: {', '.join(f'{c * 100:.0f}%' for c in r['publishers_cpu'])} "
              f"(of one core, while publishing); this machine has {os.cpu_count()} CPUs")
    for key, label in (("lat1", "one node"), ("lat2", "two nodes")):
        r = b[key]
        print(f"Boreas latency, {label}: {r['count']:,} tuples after the first {WARMUP_S:g} s, sent at "
              f"{r['rate']:,.0f}/s (sender at most {r['lag_max']:.1f} ms behind schedule); max {r['max']:.2f} ms")
    if s:
        print(f"Spark {s['version']} local[2]: throughput end to end (start() to last window in foreachBatch) "
              f"{st['rate']:,.0f} tuples/s over {st['elapsed']:.2f} s, {st['files']} parquet files of "
              f"<= {args.spark_file_rows:,} rows, one per micro-batch, after a warm-up query; by its progress "
              f"reports {st['input_rows']:,} rows in {st['batches']} micro-batches, "
              f"{st['engine_rate']:,.0f} rows per busy second"
              + ("" if st["progress_complete"] else " (only the last 100 progress reports)"))
        print(f"Spark latency: socket source, default trigger, foreachBatch collect; {sl['count']:,} tuples after "
              f"the first {WARMUP_S:g} s at {sl['rate']:,.0f}/s; max {sl['max']:.2f} ms; mean micro-batch "
              f"{sl['batch_ms']:.0f} ms")
        print("Both outputs were checked: the same windows, counts and averages.")
    else:
        print("Spark peer not run (--no-spark)")

    print()
    one, p99 = b["one"]["rate"], b["lat1"]["p99"]
    verdicts = [
        (f"throughput >= {TARGET_THROUGHPUT:,} tuples/s on one node", one >= TARGET_THROUGHPUT,
         f"{one:,.0f} tuples/s"),
        (f"p99 latency < {TARGET_P99_MS:g} ms at {LATENCY_RATE:,} tuples/s", p99 < TARGET_P99_MS, f"{p99:.2f} ms"),
    ]
    if s:
        verdicts += [
            ("throughput ahead of Spark Structured Streaming", one > st["rate"],
             f"{one:,.0f} vs {st['rate']:,.0f} tuples/s"),
            ("p99 latency ahead of Spark Structured Streaming", p99 < sl["p99"], f"{p99:.2f} vs {sl['p99']:.2f} ms"),
        ]
    for what, ok, value in verdicts:
        print(f"{'meets ' if ok else 'MISSES'}  {what}: {value}")


# -- the run ---------------------------------------------------------------------------------


def _interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        return run_worker(sys.argv[2:])
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tuples", type=int, default=2_000_000,
                        help="tuples per throughput run (rounded to 10 sensors x a multiple of 60 times)")
    parser.add_argument("--publishers", type=int, default=2, help="publisher processes (default 2)")
    parser.add_argument("--batch", type=int, default=2000, help="tuples per published batch (default 2000)")
    parser.add_argument("--capacity", type=int, default=16, help="batches a publisher may have outstanding")
    parser.add_argument("--latency-seconds", type=float, default=8.0, help="seconds of paced publishing")
    parser.add_argument("--spark-file-rows", type=int, default=100_000, help="rows per Spark micro-batch file")
    parser.add_argument("--no-spark", action="store_true", help="skip the Spark peer")
    parser.add_argument("--keep-logs", action="store_true", help="keep the temporary directory and its logs")
    args = parser.parse_args()
    args.times = max(WINDOW, args.tuples // SENSORS // WINDOW * WINDOW)
    args.tuples = SENSORS * args.times
    if not 1 <= args.publishers <= SENSORS or SENSORS % args.publishers:
        parser.error(f"--publishers must divide {SENSORS}")

    began = time.perf_counter()
    signal.signal(signal.SIGTERM, _interrupt)
    tmp = Path(tempfile.mkdtemp(prefix="boreas-bench-dataplane-"))
    from boreas.wire.auth import TOKEN_ENV, new_token

    token = new_token()
    env = {k: v for k, v in os.environ.items() if k not in ("BOREAS_HEAD", "BOREAS_CATALOG")}
    env[TOKEN_ENV] = token
    procs = Processes(tmp, env)
    code = 1
    try:
        expected = expected_windows(args.times)
        print(f"filter -> map -> aggregate (examples/xml/sensor_chain.xml): {args.tuples + SENSORS:,} tuples "
              f"({SENSORS} sensors x {args.times:,} times + {SENSORS} closing), {len(expected):,} windows out",
              flush=True)
        boreas = asyncio.run(measure_boreas(procs, tmp, token, args, expected))
        procs.stop()  # the peer gets the machine to itself
        spark = None if args.no_spark else measure_spark(procs, tmp, args, expected)
        if spark is not None:
            by_key = {(w[0], w[1]): w for w in boreas["one"]["windows"]}
            for w in spark["throughput"]["windows"]:
                mine = by_key[(w[0], w[1])]
                if mine[3] != w[3] or not math.isclose(mine[2], w[2], rel_tol=1e-9):
                    raise BenchError(f"Boreas and Spark disagree on window {w[:2]}: {mine} vs {w}")
        report(args, boreas, spark)
        code = 0
    except BenchError as exc:
        print(f"error: {exc}", file=sys.stderr)
        procs.dump_logs()
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        code = 130
    except Exception:  # noqa: BLE001 -- a library error: show it, then still clean up
        traceback.print_exc()
        procs.dump_logs()
    finally:
        previous = {s: signal.signal(s, signal.SIG_IGN) for s in (signal.SIGINT, signal.SIGTERM)}
        try:
            procs.stop()
        finally:
            if args.keep_logs:
                print(f"logs kept in {tmp}", file=sys.stderr)
            else:
                shutil.rmtree(tmp, ignore_errors=True)
            for s, handler in previous.items():
                signal.signal(s, handler)
    print(f"whole run: {time.perf_counter() - began:.1f} s")
    return code


if __name__ == "__main__":
    sys.exit(main())
