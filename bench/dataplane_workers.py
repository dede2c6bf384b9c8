"""The data plane benchmark's worker processes, and how the benchmark talks to them.

A worker is this file run as a child process (``python
bench/dataplane_workers.py KIND ...``, started by :func:`start_worker`): it
gets ready, says so as a JSON line on stdout, waits for a "go" line on
stdin, does its work and answers with a JSON line of results.

* ``publish``: a Publisher sending the readings of the sensors it owns, as
  fast as the node takes them (the throughput runs).
* ``publish-arrow``: the same readings, made as columns (numpy) and cut into
  pyarrow record batches before "go"; the Publisher sends each as one Arrow
  IPC stream, so the process does no per-row work while the clock runs.
* ``paced``: a Publisher sending stamped readings at a fixed rate (latency).
* ``socket-feed``: the Spark peer's latency source, the same stamped
  readings as CSV lines at the same rate to one socket connection.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from dataplane_data import LATENCY_RATE, SENSORS, celsius, freeze_harness
from procs import HOST, BenchError, Processes

# -- the benchmark's side ----------------------------------------------------------------


def start_worker(procs: Processes, name: str, argv: list[str]) -> subprocess.Popen:
    return procs.spawn(name, [str(Path(__file__).resolve()), *argv], pipes=True)


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


def sync_line(proc: subprocess.Popen, procs: Processes, what: str, timeout: float = 60) -> str:
    """:func:`read_line` outside an event loop."""
    return asyncio.run(read_line(proc, procs, what, timeout))


def tell(proc: subprocess.Popen, line: str) -> None:
    assert proc.stdin is not None
    proc.stdin.write(line + "\n")
    proc.stdin.flush()


# -- the worker's side -------------------------------------------------------------------


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


def reading_batches(mine: list[int], times: int, size: int) -> list:
    """The readings of sensors ``mine`` (reading i = sensor + SENSORS * time, times 0 .. times-1, then one
    closing reading per sensor at ``times``) as pyarrow record batches of ``size`` rows, in the order the
    rows publisher sends them; made with numpy, no row is built (the same values as :func:`celsius`)."""
    import numpy as np
    import pyarrow as pa

    sensors = np.array(mine, dtype=np.int64)
    t = np.repeat(np.arange(times, dtype=np.int64), len(mine))
    s = np.tile(sensors, times)
    c = ((s + SENSORS * t) * 37 % 1100) / 10.0 - 45.0  # celsius(i), the same IEEE steps
    table = pa.table({"sensor": np.concatenate([s, sensors]).astype(np.int32),
                      "time": np.concatenate([t, np.full(len(mine), times)]).astype(np.int32),
                      "celsius": np.concatenate([c, np.zeros(len(mine))])})
    return table.to_batches(max_chunksize=size)


async def worker_publish_arrow(args: argparse.Namespace) -> None:
    """Publish the readings of the sensors this worker owns as Arrow record batches, as fast as the node
    takes them: made before "go"; while the clock runs the Publisher only encodes each batch as an IPC stream
    (one call into pyarrow per batch)."""
    from boreas.client.publisher import Publisher

    mine = [s for s in range(SENSORS) if s % args.of == args.index]
    batches = reading_batches(mine, args.times, args.batch)
    rows = sum(b.num_rows for b in batches)
    token = os.environ["BOREAS_TOKEN"]
    async with Publisher(args.head, args.stream, token, batch_size=args.batch, capacity=args.capacity) as pub:
        _ready({"rows": rows})
        await asyncio.to_thread(sys.stdin.readline)  # "go"
        cpu0, start = time.process_time(), time.time()
        for batch in batches:
            await pub.send(batch)
        queued = time.time()
        await pub.flush(timeout=300)
        done = time.time()
        cpu = time.process_time() - cpu0
    _ready({"rows": rows, "start": start, "queued": queued, "done": done, "cpu": cpu,
            "accepted": pub.accepted, "refused": len(pub.refused) + len(pub.refusals)})


async def worker_paced(args: argparse.Namespace) -> None:
    """Publish stamped readings at a fixed rate: ``batch`` tuples every batch/rate seconds."""
    from boreas.client.publisher import Publisher

    if os.environ.get("BOREAS_BENCH_PROBE"):  # bench/dataplane.py --probe: the publisher's side
        from dataplane_probe import install

        install("pub")
    token = os.environ["BOREAS_TOKEN"]
    interval = args.batch / args.rate
    count = int(args.seconds * args.rate / args.batch)
    async with Publisher(args.head, args.stream, token, batch_size=args.batch) as pub:
        _ready({"batches": count})
        await asyncio.to_thread(sys.stdin.readline)
        freeze_harness()
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
        freeze_harness()
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


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("kind", choices=("publish", "publish-arrow", "paced", "socket-feed"))
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
    from dataplane_probe import cpu_profile, use_loop

    use_loop()
    if args.kind == "paced":
        cpu_profile("pub")
    if args.kind == "publish":
        asyncio.run(worker_publish(args))
    elif args.kind == "publish-arrow":
        asyncio.run(worker_publish_arrow(args))
    elif args.kind == "paced":
        asyncio.run(worker_paced(args))
    else:
        worker_socket_feed(args)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
