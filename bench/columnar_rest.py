"""Micro-benchmark: delay, random_drop and window_drop on Arrow columns against their row paths, in process.

Each box is fed the same stream of readings ``(sensor int, time int, celsius double)`` (``--sensors``
sensors, times in order) cut into ``--batch`` rows, two ways, alternating within each round so both
see the same load:

* **columns**: each batch a fresh ``Columns`` (how an Arrow batch reaches them); the box emits columns;
* **rows**: the same box built with ``columnar=False`` fed the same fresh ``Columns``, so it reads
  ``Columns.rows()`` -- what every batch cost before (the node converted once per batch for them).

The boxes: ``random_drop`` (``drop_rate`` 0.3), ``window_drop`` by VALUES of ``time`` (size 100,
``group-by`` sensor) and by TUPLES (size 50, no groups), both ``drop_rate`` 0.5, and ``delay``
(``delay-ms`` 0: each batch held and released by the next, so the cost of holding is counted, not a
wait).  Printed: tuples/s per box and way (best of ``--repeat`` rounds), their ratio, and the load average.
No sockets, no node: the operators only.

Usage: ``python bench/columnar_rest.py [--tuples 400000] [--batch 1000 10000] [--repeat 5] [--sensors 100]``
"""

from __future__ import annotations

import argparse
import time

import pyarrow as pa

from boreas.catalog.boxtypes import builtin_registry
from boreas.catalog.model import Box, Field, FieldType, InPort, Schema
from boreas.node.operators.shedding import RandomDropOperator, WindowDropOperator
from boreas.node.operators.timers import DelayOperator
from boreas.wire.columns import Columns, arrow_schema

READING = Schema("Reading", (Field("sensor", FieldType.INT), Field("time", FieldType.INT),
                             Field("celsius", FieldType.DOUBLE)))
BOXES = {
    "random_drop": (RandomDropOperator, {"drop_rate": "0.3", "seed": "1"}),
    "window_drop VALUES by sensor": (WindowDropOperator, {"drop_rate": "0.5", "window-size": "100",
                                                          "order-on-field": "time", "group-by": "sensor",
                                                          "seed": "1"}),
    "window_drop TUPLES": (WindowDropOperator, {"drop_rate": "0.5", "window-size": "50",
                                                "window-size-by": "TUPLES", "seed": "1"}),
    "delay": (DelayOperator, {"delay-ms": "0"}),
}


def build(name: str, columnar: bool):
    cls, params = BOXES[name]
    box = Box(name.split()[0], name.split()[0], (InPort("Reading"),), ("Out",), tuple(params.items()))
    return cls(box, [READING], builtin_registry().infer(box, [READING]), columnar=columnar)


def readings(n: int, sensors: int, batch: int) -> list[pa.RecordBatch]:
    target = arrow_schema(READING)
    whole = pa.RecordBatch.from_arrays([pa.array([i % sensors for i in range(n)], pa.int32()),
                                        pa.array([i // sensors for i in range(n)], pa.int32()),
                                        pa.array([(i % 97) / 3.0 for i in range(n)], pa.float64())], schema=target)
    return [whole.slice(at, batch) for at in range(0, n, batch)]


def rate(name: str, columnar: bool, batches: list[pa.RecordBatch]) -> float:
    op = build(name, columnar)
    fresh = [Columns(b) for b in batches]  # (no rows cached from an earlier round)
    started = time.perf_counter()
    now = 0.0
    for cols in fresh:
        now += 0.001
        op.process(0, cols, now)
    op.poll(now + 1.0)
    return sum(len(b) for b in batches) / (time.perf_counter() - started)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tuples", type=int, default=400_000)
    parser.add_argument("--batch", type=int, nargs="+", default=[1000, 10000])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--sensors", type=int, default=100)
    args = parser.parse_args()
    with open("/proc/loadavg") as f:
        print(f"load average at start: {f.read().split()[:3]}")
    print(f"{'box':32} {'batch':>6} {'columns/s':>12} {'rows/s':>12} {'ratio':>6}")
    for size in args.batch:
        batches = readings(args.tuples, args.sensors, size)
        for name in BOXES:
            best = {True: 0.0, False: 0.0}
            for _ in range(args.repeat):
                for columnar in (True, False):
                    best[columnar] = max(best[columnar], rate(name, columnar, batches))
            print(f"{name:32} {size:>6} {best[True]:>12,.0f} {best[False]:>12,.0f} {best[True] / best[False]:>5.1f}x")
    with open("/proc/loadavg") as f:
        print(f"load average at end: {f.read().split()[:3]}")


if __name__ == "__main__":
    main()
