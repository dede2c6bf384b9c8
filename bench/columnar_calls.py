"""Micro-benchmark: ways to evaluate bench/dataplane.py's filter and map expressions on one Arrow batch.

Measures CPU µs per batch, at batch sizes ``--batch``, of:

* **translated**: the box's columnar translation (:mod:`boreas.node.operators.arrow_exprs`: one
  ``pyarrow.compute`` call per operation, plus its exactness checks);
* **bare calls**: the same kernels called with nothing around them (``pc.greater``, ... : the floor of
  that design);
* **Function.call**: the same kernels through ``pc.get_function(...).call`` (no Python wrapper);
* **one Expression**: the whole expression as one ``pyarrow.compute.Expression`` evaluated by one
  ``RecordBatch.filter`` (filter) or one Acero ``project`` plan (map): what "one call per batch" costs;
* **row code**: ``Columns.rows()`` then the box's compiled row code (the row path, rows out).

Usage: ``python bench/columnar_calls.py [--batch 10 100 1000 10000] [--rounds 300]``
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.acero as acero
import pyarrow.compute as pc

sys.path.insert(0, str(Path(__file__).resolve().parent))

from columnar_operators import FILTER, MAP, READING, batches, load, operator  # noqa: E402

from boreas.catalog.model import FieldType  # noqa: E402
from boreas.node.operators.arrow_exprs import Translator  # noqa: E402
from boreas.wire.columns import Columns  # noqa: E402

LOW, HIGH, K9, K5, K32 = pa.scalar(-90.0), pa.scalar(60.0), pa.scalar(9.0), pa.scalar(5.0), pa.scalar(32.0)
GREATER, LESS, AND = pc.get_function("greater"), pc.get_function("less"), pc.get_function("and")
MUL, DIV, ADD = pc.get_function("multiply"), pc.get_function("divide"), pc.get_function("add")
KEEP = (pc.field("celsius") > -90.0) & (pc.field("celsius") < 60.0)
FAHRENHEIT = pc.field("celsius") * 9.0 / 5.0 + 32.0


def per_batch(run, feed: list, rounds: int) -> float:
    """Best of 3 passes, CPU µs per batch of ``run(batch)`` over ``rounds`` batches of ``feed``."""
    best = float("inf")
    data = (feed * (rounds // len(feed) + 1))[:rounds]
    for _ in range(3):
        fresh = [Columns(b) for b in data]
        started = time.process_time()
        for batch in fresh:
            run(batch)
        best = min(best, time.process_time() - started)
    return best / rounds * 1e6


def project(columns: Columns) -> pa.Table:
    plan = acero.Declaration.from_sequence([
        acero.Declaration("table_source", acero.TableSourceNodeOptions(pa.Table.from_batches([columns.batch]))),
        acero.Declaration("project", acero.ProjectNodeOptions(
            [pc.field("sensor"), pc.field("time"), FAHRENHEIT], ["sensor", "time", "fahrenheit"]))])
    return plan.to_table(use_threads=False)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, nargs="+", default=[10, 100, 1_000, 10_000])
    parser.add_argument("--rounds", type=int, default=300)
    args = parser.parse_args()
    t = Translator(READING, per_row=True, nullable=True)
    mask = t.predicate(FILTER["expression.0"])
    field = t.value(MAP["expression.2"], FieldType.DOUBLE)
    row_filter, row_map = operator("filter", FILTER, False), operator("map", MAP, False)
    ways = {
        "filter": {
            "translated": lambda c: c.batch.filter(mask(c.batch)),
            "bare calls": lambda c: c.batch.filter(pc.and_(pc.greater(c.batch.column(2), LOW),
                                                           pc.less(c.batch.column(2), HIGH))),
            "Function.call": lambda c: c.batch.filter(AND.call([GREATER.call([c.batch.column(2), LOW]),
                                                                LESS.call([c.batch.column(2), HIGH])])),
            "one Expression": lambda c: c.batch.filter(KEEP),
            "row code": lambda c: row_filter.process(0, c, 0.0),
        },
        "map": {
            "translated": lambda c: pa.RecordBatch.from_arrays(
                [c.batch.column(0), c.batch.column(1), field(c.batch)], names=["sensor", "time", "fahrenheit"]),
            "bare calls": lambda c: pc.add(pc.divide(pc.multiply(c.batch.column(2), K9), K5), K32),
            "Function.call": lambda c: ADD.call([DIV.call([MUL.call([c.batch.column(2), K9]), K5]), K32]),
            "one Expression": project,
            "row code": lambda c: row_map.process(0, c, 0.0),
        },
    }
    print(f"load average before: {load()}")
    print(f"{'box':7} {'way':15} " + " ".join(f"{size:>9,}" for size in args.batch) + "  (CPU µs per batch)")
    feeds = {size: batches(min(size * 20, 200_000), size)[:20] for size in args.batch}
    for box, runs in ways.items():
        for way, run in runs.items():
            cells = [per_batch(run, feeds[size], max(20, args.rounds * 100 // max(size, 100))) for size in args.batch]
            print(f"{box:7} {way:15} " + " ".join(f"{c:9.1f}" for c in cells))
    print(f"load average after: {load()}")


if __name__ == "__main__":
    main()
