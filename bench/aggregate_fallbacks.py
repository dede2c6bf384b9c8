"""Micro-benchmark: the aggregate shapes that read rows before branch colagg (docs/operators.md, "aggregate on
columns"), fed Arrow batches in process, as bench/dataplane.py's node feeds its aggregate box.

Shapes: sliding windows (60, advance 10), an expression argument, a ``double`` group-by field, ``max`` of a
string, ``count_distinct``.  The data: 10 sensors, each in order, ``--per-time`` readings per sensor and time
unit, cut into batches of ``--batch`` rows (Arrow, made before the clock starts).  Printed per shape:
tuples/s by wall time and CPU microseconds per tuple (the process's CPU time: the machine may be shared),
best of ``--repeat``, and a digest of the windows emitted, so that two runs (main's code and the branch's, each
with its own venv: ``/work/main/.venv/bin/python bench/aggregate_fallbacks.py``) can be checked to agree.

Usage: ``python bench/aggregate_fallbacks.py [--tuples 400000] [--batch 20000] [--repeat 3]``
"""

from __future__ import annotations

import argparse
import hashlib
import time

import numpy as np
import pyarrow as pa

from boreas.catalog.boxtypes import builtin_registry
from boreas.catalog.model import Box, Field, FieldType, InPort, Schema
from boreas.node.operators.aggregate import AggregateOperator
from boreas.wire.columns import Columns, arrow_schema

READING = Schema("Reading", (Field("sensor", FieldType.INT), Field("time", FieldType.LONG),
                             Field("celsius", FieldType.DOUBLE), Field("zone", FieldType.DOUBLE),
                             Field("name", FieldType.STRING, 8), Field("level", FieldType.INT)))
BASE = {"window-size-by": "VALUES", "window-size": "60", "order-by": "FIELD", "order-on-field": "time",
        "group-by": "sensor", "independent-window-alignment": "1", "aggregate-function.0": "count()"}
SHAPES = {
    "sliding 60/10": {"advance": "10", "aggregate-function.1": "avg(celsius)"},
    "expression arg": {"aggregate-function.1": "sum(celsius * 1.8 + 32.0)"},
    "double group-by": {"group-by": "zone", "aggregate-function.1": "avg(celsius)"},
    "max of string": {"aggregate-function.1": "max(name)"},
    "count_distinct": {"aggregate-function.1": "count_distinct(level)"},
}


def feed(tuples: int, per_time: int, size: int) -> list[Columns]:
    """10 sensors in order, ``per_time`` readings each per time unit, as batches of Arrow columns."""
    i = np.arange(tuples)
    sensor = (i % 10).astype(np.int32)
    t = (i // (10 * per_time)).astype(np.int64)
    rng = np.random.default_rng(7)
    celsius = rng.normal(20.0, 5.0, tuples)
    names = np.array(["alpha", "bravo", "charlie", "delta", "echo"], dtype=object)[rng.integers(0, 5, tuples)]
    level = rng.integers(0, 50, tuples).astype(np.int32)
    schema = arrow_schema(READING)
    out = []
    for a in range(0, tuples, size):
        b = min(tuples, a + size)
        arrays = [pa.array(sensor[a:b], pa.int32()), pa.array(t[a:b]), pa.array(celsius[a:b]),
                  pa.array(sensor[a:b] + 0.5), pa.array(list(names[a:b]), pa.string()), pa.array(level[a:b], pa.int32())]
        out.append(Columns(pa.RecordBatch.from_arrays(arrays, schema=schema)))
    return out


def run(params: dict[str, str], batches: list[Columns]) -> tuple[float, float, list]:
    """Wall and CPU seconds of one pass, and the windows."""
    box = Box("agg", "aggregate", (InPort("in"),), ("out",), tuple(params.items()))
    op = AggregateOperator(box, [READING], builtin_registry().infer(box, [READING]))
    windows: list = []
    wall, cpu = time.perf_counter(), time.process_time()
    for batch in batches:
        for _, out in op.process(0, batch, 0.0):
            windows += out
    for _, out in op.end_of_input(1.0):
        windows += out
    return time.perf_counter() - wall, time.process_time() - cpu, windows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tuples", type=int, default=400_000)
    parser.add_argument("--per-time", type=int, default=4)
    parser.add_argument("--batch", type=int, default=20_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    batches = feed(args.tuples, args.per_time, args.batch)
    with open("/proc/loadavg") as f:
        load = f.read().split()[0]
    print(f"{args.tuples:,} tuples, batches of {args.batch:,}, best of {args.repeat}, load {load}")
    for label, extra in SHAPES.items():
        best_wall = best_cpu = float("inf")
        windows: list = []
        for _ in range(args.repeat):
            wall, cpu, windows = run({**BASE, **extra}, batches)
            best_wall, best_cpu = min(best_wall, wall), min(best_cpu, cpu)
        digest = hashlib.sha1(repr([tuple(round(x, 6) if isinstance(x, float) else x for x in w)
                                    for w in windows]).encode()).hexdigest()[:10]
        print(f"{label:>16} {args.tuples / best_wall:>12,.0f} tuples/s {best_cpu / args.tuples * 1e6:>8.3f} us CPU/tuple"
              f"  {len(windows):,} windows {digest}")


if __name__ == "__main__":
    main()
