"""Micro-benchmark: filter and map boxes whose expressions read rows until branch colExpr2, on columns.

Issue 30's per-box list (docs/dataplane.md, "What still reads rows") had
these boxes read every batch as rows: ``min``/``max`` or ``coalesce`` mixing
ints and doubles, concat or a varchar cast of a double, ``like`` with a
computed pattern.  Each box here is fed the same ``Columns`` batches (fresh
each round, so no cached rows are reused) and the CPU time of
``process`` is measured (``time.process_time``, best of ``--repeat``
rounds), printed as µs of CPU per tuple.  Run it once with this tree and once
with another (``PYTHONPATH`` or another venv) in the same minutes for an A/B:
a tree where the box is not ``columnar`` reads ``Columns.rows()``.

Usage: ``python bench/columnar_text.py [--tuples 200000] [--batch 2000] [--repeat 3]``
"""

from __future__ import annotations

import argparse
import random
import time

import pyarrow as pa

from boreas.catalog.boxtypes import builtin_registry
from boreas.catalog.model import Box, Field, FieldType, InPort, Schema
from boreas.node.operators.filter import FilterOperator
from boreas.node.operators.map import MapOperator
from boreas.wire.columns import Columns, arrow_schema

TRADE = Schema("Trade", (
    Field("l", FieldType.LONG), Field("d", FieldType.DOUBLE), Field("s", FieldType.STRING, 8),
    Field("p", FieldType.STRING, 8), Field("n", FieldType.INT, nullable=True),
))
BOXES = [("map", "min(l, d)"), ("map", "coalesce(n, d)"), ("map", "concat(s, d)"), ("map", "cast(d as varchar)"),
         ("filter", "s like p"), ("filter", "min(l, d) > 500.0")]


def build(kind: str, expression: str):
    params = {"expression.0": expression} if kind == "filter" else {
        "expression.0": expression, "output-field-name.0": "v"}
    box = Box("b", kind, (InPort("in"),), ("out0",), tuple(params.items()))
    outputs = builtin_registry().infer(box, [TRADE])
    return {"filter": FilterOperator, "map": MapOperator}[kind](box, [TRADE], outputs)


def batches(tuples: int, size: int) -> list[pa.RecordBatch]:
    rng = random.Random(7)
    target = arrow_schema(TRADE)
    out = []
    for start in range(0, tuples, size):
        n = min(size, tuples - start)
        cols = [[rng.randint(0, 1000) for _ in range(n)], [round(rng.uniform(0, 1000), 2) for _ in range(n)],
                [rng.choice(["ab", "abc", "xyz", "a1"]) for _ in range(n)],
                [rng.choice(["a%", "%c", "x_z", "%"]) for _ in range(n)],
                [None if rng.random() < 0.5 else rng.randint(0, 1000) for _ in range(n)]]
        out.append(pa.RecordBatch.from_arrays([pa.array(c, f.type) for c, f in zip(cols, target)], schema=target))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tuples", type=int, default=200_000)
    parser.add_argument("--batch", type=int, default=2000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    data = batches(args.tuples, args.batch)
    for kind, expression in BOXES:
        op = build(kind, expression)
        best = float("inf")
        for _ in range(args.repeat):
            fresh = [Columns(b) for b in data]
            start = time.process_time()
            for columns in fresh:
                op.process(0, columns, 0.0)
            best = min(best, time.process_time() - start)
        way = "columns" if op.columnar else "rows"
        print(f"{kind:6} {expression:22} {way:7} {best / args.tuples * 1e6:7.3f} µs CPU/tuple")


if __name__ == "__main__":
    main()
