"""Micro-benchmark: CPU per tuple of the columnar filter and map at small batches, against their row paths.

Issue 30's adaptive batching makes batches of 10-100 rows the normal case
at moderate rates, where each ``pyarrow.compute`` call's fixed cost (a few
µs) outweighs the rows.  This bench feeds bench/dataplane.py's filter
(``celsius > -90.0 and celsius < 60.0``) and map (``sensor``, ``time``,
``celsius * 9.0 / 5.0 + 32.0``) -- and a filter and a map with more
operations (``--wide``) -- batches of ``--batch`` rows three ways:

* **as built**: a fresh ``Columns`` per batch, the box as built (below its
  cut-over the row code, :mod:`boreas.node.operators.size_choice`);
* **columns**: the same, every batch on columns (``SizeChoice.fixed(False)``;
  what a tree without the size choice does: "as built" there);
* **row code**: the same, every batch by the row code, rows out
  (``SizeChoice.fixed(True)``; "-" on a tree without it);
* **rows from columns**: the same ``Columns`` with the columnar translation
  switched off (``columnar=False``: ``Columns.rows()`` then the row code);
* **rows**: lists of tuples, the row path alone (decoding not counted).

Printed: node CPU µs per tuple (``time.process_time``), best of
``--repeat`` rounds, and the load average.  Run under another tree's
``PYTHONPATH`` for an A/B (main against a branch, in the same minutes).

Usage: ``python bench/columnar_small.py [--batch 10 100 1000 10000] [--tuples 200000] [--repeat 5] [--wide]``
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from columnar_operators import FILTER, MAP, READING, batches, load, operator  # noqa: E402

from boreas.catalog.boxtypes import builtin_registry  # noqa: E402
from boreas.catalog.model import Box, InPort  # noqa: E402
from boreas.node.operators.filter import FilterOperator  # noqa: E402
from boreas.node.operators.map import MapOperator  # noqa: E402
from boreas.wire.columns import Columns  # noqa: E402

try:
    from boreas.node.operators.size_choice import SizeChoice
except ImportError:  # a tree without the size choice (main before branch colSmall)
    SizeChoice = None

#: Boxes with more operations per expression (more pyarrow calls per batch).
WIDE_FILTER = {"expression.0": "celsius * 1.8 + 32.0 > 0.0 and sensor % 7 <> 3 and time >= 0"}
WIDE_MAP = {"expression.0": "sensor * 2 + 1", "output-field-name.0": "s2",
            "expression.1": "time - 5", "output-field-name.1": "t5",
            "expression.2": "celsius * 9.0 / 5.0 + 32.0", "output-field-name.2": "f",
            "expression.3": "celsius > 20.0", "output-field-name.3": "hot"}


def forced(kind: str, params: dict[str, str], on_rows: bool):
    """The box with every Arrow batch on one path (None: this tree has no size choice)."""
    if SizeChoice is None:
        return None if on_rows else operator(kind, params, True)
    box = Box(kind, kind, (InPort("in"),), ("out",), tuple(params.items()))
    outputs = builtin_registry().infer(box, [READING])
    return (FilterOperator if kind == "filter" else MapOperator)(box, [READING], outputs,
                                                                 sizes=SizeChoice.fixed(on_rows))


def cpu_per_tuple(op, feed: list, as_columns: bool, tuples: int, repeat: int) -> float:
    """Best of ``repeat`` rounds, node CPU µs per tuple; fresh ``Columns`` each round (no cached rows reused)."""
    best = float("inf")
    for _ in range(repeat):
        data = [Columns(b) for b in feed] if as_columns else feed
        started = time.process_time()
        for batch in data:
            op.process(0, batch, 0.0)
        best = min(best, time.process_time() - started)
    return best / tuples * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, nargs="+", default=[10, 100, 1_000, 10_000])
    parser.add_argument("--tuples", type=int, default=200_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--wide", action="store_true", help="the boxes with more operations too")
    args = parser.parse_args()
    boxes = [("filter", FILTER), ("map", MAP)]
    if args.wide:
        boxes += [("filter", WIDE_FILTER), ("map", WIDE_MAP)]
    print(f"load average before: {load()}")
    print(f"{'box':40} {'batch':>7} {'as built':>9} {'columns':>8} {'row code':>9} {'rows from columns':>18}"
          f" {'rows':>6}  (CPU µs/tuple)")
    for kind, params in boxes:
        label = f"{kind} {list(params.values())[0][:32]}"
        for size in args.batch:
            tuples = min(args.tuples, max(20_000, size * 20))
            feed = batches(tuples, size)
            rows = [Columns(b).rows() for b in feed]
            built = cpu_per_tuple(operator(kind, params, True), feed, True, tuples, args.repeat)
            cols = cpu_per_tuple(forced(kind, params, False), feed, True, tuples, args.repeat)
            small = forced(kind, params, True)
            code = f"{cpu_per_tuple(small, feed, True, tuples, args.repeat):9.3f}" if small else f"{'-':>9}"
            via = cpu_per_tuple(operator(kind, params, False), feed, True, tuples, args.repeat)
            plain = cpu_per_tuple(operator(kind, params, False), rows, False, tuples, args.repeat)
            print(f"{label:40} {size:>7,} {built:>9.3f} {cols:>8.3f} {code} {via:>18.3f} {plain:>6.3f}")
    print(f"load average after: {load()}")


if __name__ == "__main__":
    main()
