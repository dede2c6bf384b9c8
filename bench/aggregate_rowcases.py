"""Micro-benchmark: the aggregate shapes that read rows before branch colAggF (docs/operators.md, "aggregate on
columns"), and those that still do, fed Arrow batches in process as a node feeds its aggregate box.

Shapes: an aggregate over ``nullable`` fields (by VALUES and by TUPLES), tumbling TUPLES windows of 1 and 3
tuples, and -- still on rows, for the record -- sliding TUPLES windows of 3 advancing by 1 and an out-of-order
stream (30% of each batch's rows shuffled, slack 5).  The data: 10 sensors, ``--per-time`` readings per sensor
and time unit, 1 in 5 ``celsius`` and ``level`` NULL, batches of ``--batch`` rows (made before the clock starts).
Printed per shape: CPU microseconds per tuple (process CPU: the machine is shared), best of ``--repeat``, and a
digest of the windows, so two runs (main's venv and the branch's, alternated in the same minutes:
``/work/main/.venv/bin/python bench/aggregate_rowcases.py`` then ``.venv/bin/python ...``) can be checked to agree.

Usage: ``python bench/aggregate_rowcases.py [--tuples 200000] [--batch 20000] [--repeat 3]``
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
                             Field("celsius", FieldType.DOUBLE, nullable=True),
                             Field("level", FieldType.LONG, nullable=True)))
VALUES = {"window-size-by": "VALUES", "window-size": "60", "order-by": "FIELD", "order-on-field": "time",
          "group-by": "sensor", "independent-window-alignment": "1", "aggregate-function.0": "count()"}
TUPLES = {"window-size-by": "TUPLES", "group-by": "sensor", "aggregate-function.0": "count()",
          "aggregate-function.1": "avg(celsius)", "aggregate-function.2": "max(level)"}
SHAPES = {
    "nullable VALUES": ({**VALUES, "aggregate-function.1": "avg(celsius)", "aggregate-function.2": "sum(level)",
                         "aggregate-function.3": "max(celsius)"}, 0.0),
    "nullable TUPLES 100": ({**TUPLES, "window-size": "100", "aggregate-function.3": "sum(level)"}, 0.0),
    "TUPLES 1": ({**TUPLES, "window-size": "1"}, 0.0),
    "TUPLES 3": ({**TUPLES, "window-size": "3"}, 0.0),
    "TUPLES 3 adv 1 (rows)": ({**TUPLES, "window-size": "3", "advance": "1"}, 0.0),
    "out of order (rows)": ({**VALUES, "slack": "5", "aggregate-function.1": "avg(celsius)"}, 0.3),
}


def feed(tuples: int, per_time: int, size: int, shuffled: float) -> list[Columns]:
    """10 sensors in order (``shuffled`` of each batch's rows permuted among themselves), as Arrow batches."""
    i = np.arange(tuples)
    rng = np.random.default_rng(7)
    sensor = (i % 10).astype(np.int32)
    t = (i // (10 * per_time)).astype(np.int64)
    celsius = rng.normal(20.0, 5.0, tuples)
    level = rng.integers(0, 50, tuples)
    null_c, null_l = rng.random(tuples) < 0.2, rng.random(tuples) < 0.2
    schema = arrow_schema(READING)
    out = []
    for a in range(0, tuples, size):
        b = min(tuples, a + size)
        idx = np.arange(a, b)
        k = int((b - a) * shuffled)
        if k:
            pick = np.sort(rng.choice(b - a, k, replace=False))
            idx[pick] = idx[pick[rng.permutation(k)]]
        arrays = [pa.array(sensor[idx], pa.int32()), pa.array(t[idx]), pa.array(celsius[idx], mask=null_c[idx]),
                  pa.array(level[idx], mask=null_l[idx])]
        out.append(Columns(pa.RecordBatch.from_arrays(arrays, schema=schema)))
    return out


def run(params: dict[str, str], batches: list[Columns]) -> tuple[float, list]:
    """CPU seconds of one pass, and the windows."""
    box = Box("agg", "aggregate", (InPort("in"),), ("out",), tuple(params.items()))
    op = AggregateOperator(box, [READING], builtin_registry().infer(box, [READING]))
    windows: list = []
    batches = [Columns(c.batch) for c in batches]  # fresh: Columns caches its rows, a repeat would not pay them
    cpu = time.process_time()
    for batch in batches:
        for _, out in op.process(0, batch, 0.0):
            windows += out
    for _, out in op.end_of_input(1.0):
        windows += out
    return time.process_time() - cpu, windows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tuples", type=int, default=200_000)
    parser.add_argument("--per-time", type=int, default=4)
    parser.add_argument("--batch", type=int, default=20_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    with open("/proc/loadavg") as f:
        load = f.read().split()[0]
    print(f"{args.tuples:,} tuples, batches of {args.batch:,}, best of {args.repeat}, load {load}")
    for label, (params, shuffled) in SHAPES.items():
        batches = feed(args.tuples, args.per_time, args.batch, shuffled)
        best = float("inf")
        windows: list = []
        for _ in range(args.repeat):
            cpu, windows = run(params, batches)
            best = min(best, cpu)
        digest = hashlib.sha1(repr([tuple(round(x, 6) if isinstance(x, float) else x for x in w)
                                    for w in windows]).encode()).hexdigest()[:10]
        print(f"{label:>22} {best / args.tuples * 1e6:>8.3f} us CPU/tuple  {len(windows):,} windows {digest}")


if __name__ == "__main__":
    main()
