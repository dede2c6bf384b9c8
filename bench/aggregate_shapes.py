"""Benchmark: the aggregate box in process, per shape, fed batches of Arrow columns (as the data plane hands them).

Shapes (each the box ``bench/dataplane.py``'s ``per_sensor`` is, 10 sensors, batches of ``--batch`` rows):

* ``tuples``: ``window-size-by TUPLES``, windows of 100 tuples per sensor, tumbling;
* ``tuples-sliding``: the same, a window every 50 tuples;
* ``changes-minmax``: a changelog (each row +1, then half of them -1 in later batches) into aligned windows of
  60 by VALUES, ``min(x)``, ``max(x)``, ``count_distinct(v)``, ``count()``;
* ``changes-expr``: the same changelog, ``sum(x * 1.8 + 32.0)``, ``avg(x)``, grouped by a float field.

Prints, per shape, tuples/s (wall) and CPU µs per tuple (``time.process_time``), best of ``--repeat``.
Run it with each tree's interpreter in the same minutes for an A/B (``/work/main/.venv/bin/python`` and
the branch's), and note the load average (printed).
"""

from __future__ import annotations

import argparse
import json
import time

import pyarrow as pa
from boreas.catalog.boxtypes import builtin_registry
from boreas.catalog.model import Box, Field, FieldType, InPort, Schema
from boreas.node.operators.aggregate import AggregateOperator
from boreas.wire.columns import Columns, arrow_schema

ROW = Schema("R", (Field("sensor", FieldType.INT), Field("time", FieldType.INT), Field("x", FieldType.DOUBLE),
                   Field("v", FieldType.INT), Field("band", FieldType.DOUBLE)))

SHAPES = {
    "tuples": {"window-size-by": "TUPLES", "window-size": "100", "group-by": "sensor", "order-by": "FIELD",
               "order-on-field": "time", "aggregate-function.0": "avg(x)", "aggregate-function.1": "count()",
               "aggregate-function.2": "max(x)"},
    "tuples-sliding": {"window-size-by": "TUPLES", "window-size": "100", "advance": "50", "group-by": "sensor",
                       "aggregate-function.0": "avg(x)", "aggregate-function.1": "count()"},
    "changes-minmax": {"window-size-by": "VALUES", "window-size": "60", "order-on-field": "time",
                       "independent-window-alignment": "1", "group-by": "sensor",
                       "aggregate-function.0": "min(x)", "aggregate-function.1": "max(x)",
                       "aggregate-function.2": "count_distinct(v)", "aggregate-function.3": "count()"},
    "changes-expr": {"window-size-by": "VALUES", "window-size": "60", "order-on-field": "time",
                     "independent-window-alignment": "1", "group-by": "band",
                     "aggregate-function.0": "sum(x * 1.8 + 32.0)", "aggregate-function.1": "avg(x)"},
}


def batches(n: int, size: int, changelog: bool) -> list[Columns]:
    """``n`` rows of 10 sensors in time order, cut every ``size``; a changelog's batches also retract half
    of the previous batch's rows."""
    schema = arrow_schema(ROW)
    out = []
    prev: pa.RecordBatch | None = None
    for a in range(0, n, size):
        t = list(range(a, min(n, a + size)))
        arrays = [pa.array([i % 10 for i in t], pa.int32()), pa.array([i // 10 for i in t], pa.int32()),
                  pa.array([(i * 7919 % 1000) / 10.0 for i in t]), pa.array([i % 37 for i in t], pa.int32()),
                  pa.array([float(i % 10) + 0.5 for i in t])]
        batch = pa.RecordBatch.from_arrays(arrays, schema=schema)
        if not changelog:
            out.append(Columns(batch))
            continue
        weights = [1] * batch.num_rows
        if prev is not None:
            gone = prev.slice(0, prev.num_rows // 2)
            batch = pa.Table.from_batches([gone, batch]).combine_chunks().to_batches()[0]
            weights = [-1] * gone.num_rows + weights
        out.append(Columns(batch, weights=pa.array(weights, pa.int64())))
        prev = pa.RecordBatch.from_arrays(arrays, schema=schema)
    return out


def run(shape: str, n: int, size: int) -> tuple[float, float]:
    params = SHAPES[shape]
    box = Box("b", "aggregate", (InPort("in"),), ("out",), tuple(params.items()))
    op = AggregateOperator(box, [ROW], builtin_registry().infer(box, [ROW]))
    data = batches(n, size, shape.startswith("changes"))
    rows = sum(c.batch.num_rows for c in data)
    wall, cpu = time.perf_counter(), time.process_time()
    for c in data:
        op.process(0, c, 0.0)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    return rows / wall, cpu / rows * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--batch", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--shapes", default=",".join(SHAPES))
    args = parser.parse_args()
    result = {}
    for shape in args.shapes.split(","):
        best = max((run(shape, args.rows, args.batch) for _ in range(args.repeat)), key=lambda r: r[0])
        result[shape] = {"tuples_per_s": round(best[0]), "cpu_us_per_tuple": round(best[1], 3)}
    with open("/proc/loadavg") as f:
        result["loadavg"] = f.read().split()[:3]  # type: ignore[assignment]
    print(json.dumps(result))


if __name__ == "__main__":
    main()
