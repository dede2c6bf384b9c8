"""Micro-benchmark: bench/dataplane.py's filter and map on Arrow columns against their row paths, in process.

The boxes of ``examples/xml/sensor_chain.xml`` (filter ``valid``:
``celsius > -90.0 and celsius < 60.0``; map ``to_fahrenheit``: ``sensor``,
``time``, ``celsius * 9.0 / 5.0 + 32.0``) are fed the benchmark's readings
(bench/dataplane_data.py) cut into batches, three ways:

* **columns**: the batch as a ``Columns`` (how an Arrow batch reaches them);
  the operator evaluates with pyarrow.compute and emits columns;
* **rows from columns**: the same batch with the columnar translation
  switched off: the operator reads ``Columns.rows()`` (what it cost before
  issue 30's item 2, and what a batch that falls back costs);
* **rows**: a list of tuples, the row path alone (a batch that arrived as
  msgpack rows; decoding is not counted).

And a **join** (``examples/xml/trade_join.xml``'s shape: trades and quotes
of 200 symbols, ``left.symbol = right.symbol``, out ``max(left.time,
right.time)``, ``left.symbol``, ``left.price - right.bid``, 1,000 tuples
buffered per side), batches alternating between the sides, the same three
ways (``--join-tuples`` in all, ``--join-batch`` a batch; each in tuple
meets about 5 buffered ones), and rows fed to the columnar join.

And the joins by batch size (``--joins``, alone): ``join`` and ``aurorajoin``
fed the same trades and quotes (batches alternating between the sides, time
rising by one a tuple on each) at ``--join-batch`` sizes against
``--join-window`` (the join's buffer sizes in tuples, the aurorajoin's
``VALUES`` windows in time), four ways: **columns** (as built: a batch of few
pairs on rows, ``JoinPaths.on_rows``), **columns always** (every batch on
columns, the cut-over off: what small batches cost before branch colAJ),
**rows from columns** (``columnar=False`` fed the same ``Columns``) and
**rows** (lists of tuples); node CPU µs per tuple (``time.process_time``),
best of ``--repeat`` rounds, and the load average.  Run under ``PYTHONPATH``
of another tree (``git archive main``) for an A/B: a tree without the size
choice prints "-" for columns always.

And boxes whose expressions kept them on rows before (``--formerly``): a
filter with ``sqrt`` (a whole-box ``Unsupported`` until then), a map with
``%`` of doubles (fmod, likewise), and a map dividing by ``sensor % 10``,
zero for a tenth of the rows (a per-batch ``Fallback`` until then: every
batch went the row path; now those rows alone get the row code's None),
columns against rows from the same ``Columns`` (what they cost before).

Printed: tuples/s per box, batch size and way (best of ``--repeat`` rounds;
each round makes fresh ``Columns`` so no cached rows are reused).  No
sockets, no node: the operators only.

Usage: ``python bench/columnar_operators.py [--tuples 400000] [--batch 100 2000 20000] [--repeat 5]
[--join-tuples 20000] [--join-batch 100 1000 5000]``; ``python bench/columnar_operators.py --joins
[--join-batch 10 30 100 1000] [--join-window 20 1000]``
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import pyarrow as pa

sys.path.insert(0, str(Path(__file__).resolve().parent))

from dataplane_data import SENSORS, celsius  # noqa: E402

from boreas.catalog.boxtypes import builtin_registry  # noqa: E402
from boreas.catalog.model import Box, Field, FieldType, InPort, Schema  # noqa: E402
from boreas.node.operators.filter import FilterOperator  # noqa: E402
from boreas.node.operators.aurorajoin import AuroraJoinOperator  # noqa: E402
from boreas.node.operators.join import JoinOperator  # noqa: E402
from boreas.node.operators.map import MapOperator  # noqa: E402
from boreas.wire.columns import Columns, arrow_schema  # noqa: E402

READING = Schema("ReadingTuple", (Field("sensor", FieldType.INT), Field("time", FieldType.INT),
                                  Field("celsius", FieldType.DOUBLE)))
FILTER = {"expression.0": "celsius > -90.0 and celsius < 60.0"}
MAP = {"expression.0": "sensor", "output-field-name.0": "sensor", "expression.1": "time",
       "output-field-name.1": "time", "expression.2": "celsius * 9.0 / 5.0 + 32.0",
       "output-field-name.2": "fahrenheit"}

TRADE = Schema("Trade", (Field("time", FieldType.INT), Field("symbol", FieldType.STRING, 8),
                         Field("price", FieldType.DOUBLE)))
QUOTE = Schema("Quote", (Field("time", FieldType.INT), Field("symbol", FieldType.STRING, 8),
                         Field("bid", FieldType.DOUBLE)))
JOIN = {"predicate": "left.symbol = right.symbol", "left-buffer-size": "1000", "right-buffer-size": "1000",
        "out-field.0": "max(left.time, right.time)", "out-field-name.0": "time",
        "out-field.1": "left.symbol", "out-field-name.1": "symbol",
        "out-field.2": "left.price - right.bid", "out-field-name.2": "spread"}
SYMBOLS = 200
#: Boxes that went the row path before expressions had columnar twins for them (the module docstring).
FORMERLY = (("filter", {"expression.0": "sqrt(celsius + 100.0) > 8.0"}),
            ("map", {"expression.0": "celsius % 7.0", "output-field-name.0": "rest"}),
            ("map", {"expression.0": "time / (sensor % 10)", "output-field-name.0": "q"}))


def operator(kind: str, params: dict[str, str], columnar: bool):
    box = Box(kind, kind, (InPort("in"),), ("out",), tuple(params.items()))
    outputs = builtin_registry().infer(box, [READING])
    # columnar=False: Columns are read as rows, as before issue 30's item 2
    return (FilterOperator if kind == "filter" else MapOperator)(box, [READING], outputs, columnar=columnar)


def batches(tuples: int, size: int) -> list[pa.RecordBatch]:
    target = arrow_schema(READING)
    out = []
    for start in range(0, tuples, size):
        ids = range(start, min(start + size, tuples))
        out.append(pa.RecordBatch.from_arrays(
            [pa.array([i % SENSORS for i in ids], pa.int32()), pa.array([i // SENSORS for i in ids], pa.int32()),
             pa.array([celsius(i) for i in ids], pa.float64())], schema=target))
    return out


def rate(op, feed: list, tuples: int, repeat: int, fresh: bool) -> float:
    best = float("inf")
    for _ in range(repeat):
        data = [Columns(b) for b in feed] if fresh else feed
        started = time.perf_counter()
        for batch in data:
            op.process(0, batch, 0.0)
        best = min(best, time.perf_counter() - started)
    return tuples / best


def join_batches(tuples: int, size: int) -> list[tuple[int, pa.RecordBatch]]:
    """(side, batch) alternating: trades on the left, quotes on the right."""
    out = []
    for n, start in enumerate(range(0, tuples, size)):
        ids = range(start, min(start + size, tuples))
        side = n % 2
        out.append((side, pa.RecordBatch.from_arrays(
            [pa.array(list(ids), pa.int32()), pa.array([f"S{i * 7919 % SYMBOLS}" for i in ids]),
             pa.array([100.0 + i % 50 - side for i in ids])], schema=arrow_schema(TRADE if side == 0 else QUOTE))))
    return out


def join_rate(columnar: bool, feed: list, tuples: int, repeat: int, fresh: bool) -> float:
    best = float("inf")
    for _ in range(repeat):
        box = Box("match", "join", (InPort("t"), InPort("q")), ("out",), tuple(JOIN.items()))
        op = JoinOperator(box, [TRADE, QUOTE], builtin_registry().infer(box, [TRADE, QUOTE]), columnar=columnar)
        data = [(side, Columns(b)) for side, b in feed] if fresh else feed
        started = time.perf_counter()
        for side, batch in data:
            op.process(side, batch, 0.0)
        best = min(best, time.perf_counter() - started)
    return tuples / best


def sized_join(kind: str, window: int, columnar: bool, rows_below: int | None):
    """A ``join`` or ``aurorajoin`` of trades and quotes on the symbol (the module docstring); ``rows_below``: its
    size choice's cut-over (None: as built)."""
    if kind == "join":
        params = {**JOIN, "left-buffer-size": str(window), "right-buffer-size": str(window)}
        box = Box("match", "join", (InPort("t"), InPort("q")), ("out",), tuple(params.items()))
        make = JoinOperator
    else:
        params = {"predicate": "left.symbol = right.symbol", "down-size": str(window), "up-size": str(window),
                  "left-order-by": "VALUES", "right-order-by": "VALUES", "left-order-on-field": "time",
                  "right-order-on-field": "time", **{k: v for k, v in JOIN.items() if k.startswith("out-field")}}
        box = Box("match", "aurorajoin", (InPort("t"), InPort("q")), ("out",), tuple(params.items()))
        make = AuroraJoinOperator
    op = make(box, [TRADE, QUOTE], builtin_registry().infer(box, [TRADE, QUOTE]), columnar=columnar)
    if rows_below is not None:
        op.paths.cut_at(rows_below)
    return op


def rising_batches(tuples: int, size: int) -> list[tuple[int, pa.RecordBatch]]:
    """(side, batch) alternating, time rising by one a tuple on each side (an aurorajoin's VALUES windows)."""
    out, clock = [], [0, 0]
    for n, start in enumerate(range(0, tuples, size)):
        side, count = n % 2, min(size, tuples - start)
        times = range(clock[side], clock[side] + count)
        clock[side] += count
        out.append((side, pa.RecordBatch.from_arrays(
            [pa.array(list(times), pa.int32()), pa.array([f"S{(7 * t + side) % SYMBOLS}" for t in times]),
             pa.array([100.0 + t % 50 - side for t in times])], schema=arrow_schema(TRADE if side == 0 else QUOTE))))
    return out


def join_cpu(make, feed: list, fresh: bool, repeat: int) -> float:
    """Best CPU seconds of ``repeat`` rounds, a fresh box each (None if the box has no such choice)."""
    best = float("inf")
    for _ in range(repeat):
        op = make()
        data = [(side, Columns(b)) for side, b in feed] if fresh else feed
        started = time.process_time()
        for side, batch in data:
            op.process(side, batch, 0.0)
        best = min(best, time.process_time() - started)
    return best


def joins(args: argparse.Namespace) -> None:
    """join and aurorajoin by batch size and window, four ways (the module docstring)."""
    print(f"{args.join_tuples:,} tuples, best of {args.repeat}; node CPU µs per tuple; load average {load()}")
    print(f"{'box':10} {'window':>6} {'batch':>6} {'columns':>8} {'always':>8} {'rows/col':>8} {'rows':>8} "
          f"{'rows/col ÷ columns':>18}")
    has_choice = hasattr(sized_join("join", 1, True, None).paths, "cut_at")
    for kind in ("aurorajoin", "join"):
        for window in args.join_window:
            for size in args.join_batch:
                feed = rising_batches(args.join_tuples, size)
                rows = [(side, Columns(b).rows()) for side, b in feed]
                per = 1e6 / args.join_tuples
                on_columns = join_cpu(lambda: sized_join(kind, window, True, None), feed, True, args.repeat) * per
                always = (join_cpu(lambda: sized_join(kind, window, True, -1), feed, True, args.repeat) * per
                          if has_choice else None)
                via_rows = join_cpu(lambda: sized_join(kind, window, False, None), feed, True, args.repeat) * per
                plain = join_cpu(lambda: sized_join(kind, window, False, None), rows, False, args.repeat) * per
                shown = f"{always:8.2f}" if always is not None else f"{'-':>8}"
                print(f"{kind:10} {window:>6,} {size:>6,} {on_columns:8.2f} {shown} {via_rows:8.2f} {plain:8.2f} "
                      f"{via_rows / on_columns:>17.2f}x")
    print(f"load average after: {load()}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tuples", type=int, default=400_000)
    parser.add_argument("--batch", type=int, nargs="+", default=[100, 2_000, 20_000])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--join-tuples", type=int, default=20_000)
    parser.add_argument("--join-batch", type=int, nargs="+", default=[100, 1_000, 5_000])
    parser.add_argument("--formerly", action="store_true", help="only the boxes that fell back to rows before")
    parser.add_argument("--joins", action="store_true", help="only join and aurorajoin by batch size")
    parser.add_argument("--join-window", type=int, nargs="+", default=[20, 1_000])
    args = parser.parse_args()
    if args.joins:
        if args.join_batch == [100, 1_000, 5_000]:
            args.join_batch = [10, 30, 100, 1_000]
        joins(args)
        return
    if args.formerly:
        formerly(args)
        return
    print(f"{args.tuples:,} readings, best of {args.repeat}; tuples/s")
    print(f"{'box':8} {'batch':>7} {'columns':>13} {'rows from columns':>18} {'rows':>13} {'columns/rows':>13}")
    for kind, params in (("filter", FILTER), ("map", MAP)):
        for size in args.batch:
            feed = batches(args.tuples, size)
            rows = [Columns(b).rows() for b in feed]
            on_columns = rate(operator(kind, params, True), feed, args.tuples, args.repeat, fresh=True)
            via_rows = rate(operator(kind, params, False), feed, args.tuples, args.repeat, fresh=True)
            plain = rate(operator(kind, params, False), rows, args.tuples, args.repeat, fresh=False)
            print(f"{kind:8} {size:>7,} {on_columns:>13,.0f} {via_rows:>18,.0f} {plain:>13,.0f} "
                  f"{on_columns / plain:>12.1f}x")
    for size in args.join_batch:
        feed = join_batches(args.join_tuples, size)
        rows = [(side, Columns(b).rows()) for side, b in feed]
        on_columns = join_rate(True, feed, args.join_tuples, args.repeat, fresh=True)
        via_rows = join_rate(False, feed, args.join_tuples, args.repeat, fresh=True)
        plain = join_rate(False, rows, args.join_tuples, args.repeat, fresh=False)
        rows_in = join_rate(True, rows, args.join_tuples, args.repeat, fresh=False)
        print(f"{'join':8} {size:>7,} {on_columns:>13,.0f} {via_rows:>18,.0f} {plain:>13,.0f} "
              f"{on_columns / plain:>12.1f}x   (rows into the columnar join: {rows_in:,.0f})")


def formerly(args: argparse.Namespace) -> None:
    """:data:`FORMERLY`'s boxes, columns against rows from the same batches, in one run."""
    print(f"{args.tuples:,} readings, best of {args.repeat}; tuples/s; load average {load()}")
    print(f"{'box':60} {'batch':>7} {'columns':>13} {'rows from columns':>18} {'ratio':>7}")
    for kind, params in FORMERLY:
        for size in args.batch:
            feed = batches(args.tuples, size)
            op = operator(kind, params, True)
            assert op.columnar, params
            on_columns = rate(op, feed, args.tuples, args.repeat, fresh=True)
            via_rows = rate(operator(kind, params, False), feed, args.tuples, args.repeat, fresh=True)
            label = f"{kind} {params['expression.0']}"
            print(f"{label:60} {size:>7,} {on_columns:>13,.0f} {via_rows:>18,.0f} {on_columns / via_rows:>6.1f}x")
    print(f"load average after: {load()}")


def load() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


if __name__ == "__main__":
    main()
