"""Micro-benchmark: bench/dataplane.py's filter -> map -> aggregate on Arrow columns, in process, the
aggregate on columns against the aggregate reading rows (what it did before issue 30 item 3).

The boxes of ``examples/xml/sensor_chain.xml`` (filter ``valid``, map
``to_fahrenheit``, aggregate ``per_sensor``: avg and count per sensor over
aligned tumbling windows of 60) are fed the benchmark's readings
(bench/dataplane_data.py: 10 sensors, each in order) cut into batches of
Arrow columns.  The filter and map run on columns either way; the aggregate
then either takes the map's ``Columns`` as they are (**columns**:
node/operators/aggregate_columns.py) or reads their rows (**rows**:
``Columns.rows()`` then its row loop, the path before).  Both must give the
same windows (checked).  Printed: tuples/s of the whole chain and of the
aggregate alone, by the process's CPU time (the machine may be shared),
best of ``--repeat`` rounds, beside issue 30's target of 5M tuples/s on one
node.  No sockets, no node: the operators only.

Usage: ``python bench/aggregate_columns.py [--tuples 600000] [--batch 2000 20000] [--repeat 3]``
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from columnar_operators import FILTER, MAP, READING, batches  # noqa: E402

from boreas.catalog.boxtypes import builtin_registry  # noqa: E402
from boreas.catalog.model import Box, InPort  # noqa: E402
from boreas.node.operators.aggregate import AggregateOperator  # noqa: E402
from boreas.node.operators.filter import FilterOperator  # noqa: E402
from boreas.node.operators.map import MapOperator  # noqa: E402
from boreas.wire.columns import Columns  # noqa: E402

AGGREGATE = {"aggregate-function.0": "avg(fahrenheit)", "aggregate-function-output-name.0": "fahrenheit",
             "aggregate-function.1": "count()", "aggregate-function-output-name.1": "readings",
             "window-size-by": "VALUES", "window-size": "60", "advance": "60", "order-by": "FIELD",
             "order-on-field": "time", "group-by": "sensor", "independent-window-alignment": "1"}
TARGET = 5_000_000  # tuples/s, filter -> map -> aggregate on one node (issue 30)


def chain():
    """Fresh filter, map and aggregate boxes of the example."""
    types = builtin_registry()
    boxes, schema = [], READING
    for kind, params, cls in (("filter", FILTER, FilterOperator), ("map", MAP, MapOperator),
                              ("aggregate", AGGREGATE, AggregateOperator)):
        box = Box(kind, kind, (InPort("in"),), ("out",), tuple(params.items()))
        outputs = types.infer(box, [schema])
        boxes.append(cls(box, [schema], outputs))
        schema = outputs[0]
    return boxes


def run(feed: list, as_rows: bool) -> tuple[float, float, list]:
    """CPU seconds of the chain and of its aggregate, and the windows, for one pass over ``feed``."""
    filt, mapper, agg = chain()
    windows: list = []
    total = in_agg = 0.0
    for batch in feed:
        started = time.process_time()
        emitted = filt.process(0, Columns(batch), 0.0)
        for _, part in emitted:
            for _, mapped in mapper.process(0, part, 0.0):
                at = time.process_time()
                for _, out in agg.process(0, mapped.rows() if as_rows else mapped, 0.0):
                    windows += out
                in_agg += time.process_time() - at
        total += time.process_time() - started
    return total, in_agg, windows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tuples", type=int, default=600_000)
    parser.add_argument("--batch", type=int, nargs="+", default=[2_000, 20_000])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    print(f"{args.tuples:,} readings, filter -> map -> aggregate in process, best of {args.repeat}; tuples/s of CPU")
    print(f"{'batch':>7} {'aggregate on':>13} {'chain':>12} {'aggregate':>12} {'chain vs 5M':>12}")
    for size in args.batch:
        feed = batches(args.tuples, size)
        results = {}
        for label, as_rows in (("rows", True), ("columns", False)):
            best = (float("inf"), float("inf"), [])
            for _ in range(args.repeat):
                got = run(feed, as_rows)
                best = (min(best[0], got[0]), min(best[1], got[1]), got[2])
            results[label] = best
            print(f"{size:>7,} {label:>13} {args.tuples / best[0]:>12,.0f} {args.tuples / best[1]:>12,.0f} "
                  f"{args.tuples / best[0] / TARGET:>11.2f}x")
        rows_windows, column_windows = results["rows"][2], results["columns"][2]
        if len(rows_windows) != len(column_windows) or any(
                a[:2] != b[:2] or a[3] != b[3] or abs(a[2] - b[2]) > 1e-9 * max(1.0, abs(a[2]))
                for a, b in zip(rows_windows, column_windows)):
            sys.exit("the aggregate on columns gave other windows than on rows")
        print(f"{'':>7} {'columns/rows':>13} {results['rows'][0] / results['columns'][0]:>11.2f}x "
              f"{results['rows'][1] / results['columns'][1]:>11.2f}x   ({len(column_windows):,} windows, equal)")


if __name__ == "__main__":
    main()
