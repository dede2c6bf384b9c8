"""The data plane benchmark's Bytewax peer: a Python dataflow on Bytewax's Rust engine, same pipeline and data.

It runs in a child process (``python bench/dataplane_bytewax.py``), one
worker (``bytewax.testing.run_main``: the dataflow in this process's main
thread; more workers in one process share the GIL).  The dataflow:

    input (a socket source: the same CSV lines ``sensor,time,celsius`` as the
           Flink peer reads, parsed in Python, a batch per read)
    -> op.filter  (-90 < celsius < 60)
    -> op.map     (fahrenheit = celsius * 9 / 5 + 32)
    -> op.key_on  (the sensor)
    -> windowing.fold_window (EventClock on the time field, no wait;
                              TumblingWindower of 60 s aligned to 0): sum and count
    -> op.map     (sensor, window start, average, count)
    -> output     (a sink that stamps each window's arrival)

The clock's watermark follows the items only (its ``now_getter`` is
constant, and it never wakes on system time), so a sensor's window closes
when that sensor's first tuple of a later window arrives -- the closing
tuples at time T close the last ones, as in Boreas.  At the end of its
input Bytewax closes every window still open: the closing tuples' own
window (start T) comes out then and is left out.

Throughput: from "go" (the source connected, then every byte written at
once) until the sink has the last expected window.  Latency: filter -> map
with the ``sent`` stamp passed through, fed by bench/dataplane_workers.py's
``socket-feed`` at 10,000 tuples/s (as Spark and Flink are); each tuple's
arrival is stamped in the sink, inside the dataflow's own process (no
socket hop after the pipeline, which the other peers' figures include).
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import sys
import threading
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from dataplane_data import (
    SENSORS,
    WINDOW,
    Windows,
    check_windows,
    freeze_harness,
    latency_figures,
    stamped_passing,
)
from dataplane_sockets import BulkFeeder, PacedFeeder, readings_csv
from dataplane_workers import sync_line
from procs import HOST, BenchError, Processes

EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


def available() -> str | None:
    import importlib.util

    if importlib.util.find_spec("bytewax") is None:
        return "bytewax is not installed; `make bench-setup` installs it"
    return None


# -- the benchmark's side ------------------------------------------------------------------


def measure_bytewax(procs: Processes, tmp: Path, args: argparse.Namespace, expected: Windows) -> dict[str, Any]:
    """The child's throughput and latency runs, the windows checked; or {"unavailable": why}."""
    why = available()
    if why is not None:
        return {"unavailable": why}
    proc = procs.spawn("bytewax", [str(Path(__file__).resolve()), "--times", str(args.times),
                                   "--latency-seconds", str(args.latency_seconds),
                                   "--log", str(tmp / "bytewax-feeder.log")], pipes=True)
    try:
        r: dict[str, Any] = json.loads(sync_line(proc, procs, "Bytewax's version", 60))
        r.update(json.loads(sync_line(proc, procs, "the throughput run", 300 + args.tuples / 2_000)))
        print(f"Bytewax {r['version']}: throughput {r['throughput']['rate']:>10,.0f} tuples/s", flush=True)
        r.update(json.loads(sync_line(proc, procs, "the latency run", args.latency_seconds + 120)))
        print(f"Bytewax: latency p50 {r['latency']['p50']:.2f} ms, p99 {r['latency']['p99']:.2f} ms", flush=True)
    except BenchError as exc:
        if "exited" not in str(exc):
            raise
        return {"unavailable": f"the Bytewax run failed here: {exc}"}
    finally:
        procs.stop([proc])
    check_windows("Bytewax", r["throughput"]["windows"], expected)
    return r


# -- the child -----------------------------------------------------------------------------


def socket_source(port: int, parse: Any) -> Any:
    """A Bytewax source over the lines of one TCP connection to ``port``; ends when the sender closes."""
    from bytewax.inputs import DynamicSource, StatelessSourcePartition

    class Partition(StatelessSourcePartition):
        def __init__(self) -> None:
            self.sock = socket.create_connection((HOST, port))
            self.sock.setblocking(False)
            self.rest = b""

        def next_batch(self) -> list:
            try:
                data = self.sock.recv(1 << 20)
            except BlockingIOError:
                return []  # Bytewax polls again after 1 ms
            if not data:
                raise StopIteration
            *lines, self.rest = (self.rest + data).split(b"\n")
            return [parse(line) for line in lines]

        def close(self) -> None:
            self.sock.close()

    class Source(DynamicSource):
        def build(self, step_id: str, worker_index: int, worker_count: int) -> Partition:
            return Partition()

    return Source()


def stamping_sink(out: list) -> Any:
    """A sink keeping (item, arrival time in microseconds) for every item."""
    from bytewax.outputs import DynamicSink, StatelessSinkPartition

    class Partition(StatelessSinkPartition):
        def write_batch(self, items: list) -> None:
            now = int(time.time() * 1_000_000)
            out.extend((item, now) for item in items)

    class Sink(DynamicSink):
        def build(self, step_id: str, worker_index: int, worker_count: int) -> Partition:
            return Partition()

    return Sink()


def parse_reading(line: bytes) -> tuple[int, int, float]:
    sensor, t, c = line.split(b",")
    return int(sensor), int(t), float(c)


def parse_stamped(line: bytes) -> tuple[int, int, float, int]:
    sensor, t, c, sent = line.split(b",")
    return int(sensor), int(t), float(c), int(sent)


def windows_flow(port: int, out: list) -> Any:
    import bytewax.operators as op
    from bytewax.dataflow import Dataflow
    from bytewax.operators import windowing as win

    def fold(acc: list, r: tuple) -> list:
        acc[0] += r[2]
        acc[1] += 1
        return acc

    flow = Dataflow("boreas_bench_windows")
    readings = op.input("readings", flow, socket_source(port, parse_reading))
    valid = op.filter("valid", readings, lambda r: -90.0 < r[2] < 60.0)
    converted = op.map("to_fahrenheit", valid, lambda r: (r[0], r[1], r[2] * 9.0 / 5.0 + 32.0))
    keyed = op.key_on("by_sensor", converted, lambda r: str(r[0]))
    clock = win.EventClock(lambda r: EPOCH + timedelta(seconds=r[1]), wait_for_system_duration=timedelta(0),
                           now_getter=lambda: EPOCH, to_system_utc=lambda t: None)
    windower = win.TumblingWindower(length=timedelta(seconds=WINDOW), align_to=EPOCH)
    summed = win.fold_window("per_sensor", keyed, clock, windower, lambda: [0.0, 0], fold,
                             lambda a, b: [a[0] + b[0], a[1] + b[1]])
    rows = op.map("average", summed.down,
                  lambda kv: (int(kv[0]), kv[1][0] * WINDOW, kv[1][1][0] / kv[1][1][1], kv[1][1][1]))
    op.output("out", rows, stamping_sink(out))
    return flow


def latency_flow(port: int, out: list) -> Any:
    import bytewax.operators as op
    from bytewax.dataflow import Dataflow

    flow = Dataflow("boreas_bench_latency")
    readings = op.input("readings", flow, socket_source(port, parse_stamped))
    valid = op.filter("valid", readings, lambda r: -90.0 < r[2] < 60.0)
    converted = op.map("to_fahrenheit", valid, lambda r: (r[0], r[1], r[2] * 9.0 / 5.0 + 32.0, r[3]))
    op.output("out", converted, stamping_sink(out))
    return flow


def run_throughput(times: int) -> dict[str, Any]:
    from bytewax.testing import run_main

    feeder, out = BulkFeeder(readings_csv(times)), []
    started: dict[str, float] = {}

    def go_when_connected() -> None:
        if feeder.connected.wait(60):
            started["go"] = feeder.go(close_after=True)

    threading.Thread(target=go_when_connected, daemon=True).start()
    try:
        run_main(windows_flow(feeder.port, out))
    finally:
        feeder.close()
    windows = [(w, t) for w, t in out if w[1] < times]  # not the closing tuples' window, closed at the end of input
    expected = SENSORS * times // WINDOW
    if "go" not in started or len(windows) < expected:
        raise RuntimeError(f"{len(windows)} of {expected} windows came out")
    last = max(t for _, t in windows) / 1_000_000
    tuples = SENSORS * (times + 1)
    return {"tuples": tuples, "elapsed": last - started["go"], "rate": tuples / (last - started["go"]),
            "windows": [w for w, _ in windows]}


def run_latency(seconds: float, log: Path) -> dict[str, Any]:
    from bytewax.testing import run_main

    feeder, out = PacedFeeder(seconds, log), []
    result: dict[str, Any] = {}

    def drive() -> None:
        feeder.wait_connected()
        time.sleep(1.0)
        result.update(feeder.go())
        expected = stamped_passing(result["rows"])
        deadline = time.time() + 60
        while len(out) < expected and time.time() < deadline:
            time.sleep(0.01)
        feeder.stop()  # closes the connection: the source ends, run_main returns

    driver = threading.Thread(target=drive, daemon=True)
    flow = latency_flow(feeder.port, out)
    freeze_harness()  # the sink stamps in this process
    driver.start()
    run_main(flow)
    driver.join(5)
    if not result:
        raise RuntimeError("the paced feeder did not report")
    samples = [(item[3], t) for item, t in out]
    if len(samples) < stamped_passing(result["rows"]):
        raise RuntimeError(f"{len(samples)} of {stamped_passing(result['rows'])} stamped tuples came out")
    return latency_figures(samples, result)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--times", type=int, required=True)
    parser.add_argument("--latency-seconds", type=float, default=8.0)
    parser.add_argument("--log", default=os.devnull)
    args = parser.parse_args(argv)
    from importlib.metadata import version

    def say(payload: dict[str, Any]) -> None:
        print(json.dumps(payload), flush=True)

    say({"version": version("bytewax")})
    say({"throughput": run_throughput(args.times)})
    say({"latency": run_latency(args.latency_seconds, Path(args.log))})
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
