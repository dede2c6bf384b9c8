"""Micro-benchmark: aurorajoin, select and joinstatic fed Arrow batches, on whichever tree ``boreas`` imports from.

Run it twice in the same minutes, once per tree, for an A/B (issue 30,
branch colJoin): the branch reads those batches on columns, main read
their rows (an operator without ``takes_columns`` is handed
``Columns.rows()``, as the node's router does).  To import main::

    mkdir -p /tmp/main/boreas && git archive main | tar -x -C /tmp/main/boreas
    PYTHONPATH=/tmp/main python bench/aurorajoin_tables.py

Boxes (in process, no node, no sockets):

* **aurorajoin**: trades and quotes of ``--symbols`` symbols, ``left.symbol =
  right.symbol``, out ``left.time``, ``right.time``, ``left.price -
  right.bid``; both sides ``VALUES`` on time, ``--window`` time units;
  batches alternate between the sides, time rising by one per tuple on each;
* **select**: ``select * from T where T.k == input.k`` over a table of
  ``--table`` rows, ``pass-on-no-results`` (half the keys miss);
* **joinstatic**: ``right.k = left.k``, out ``left.v + right.w``, the same
  table and inputs;
* **insert**: ``insert into T values (k, v * 2, 0.5)`` (keys 0..2 * table: half replace a row, half are new);
* **update**: ``update T set T.v = T.v + input.v, T.w = T.w * 0.5 where T.k = input.k`` (half the keys match a row;
  no key twice in a batch of up to 2 * table tuples, so every batch is applied on columns);
* **select, no equality**: ``where T.v < input.v`` (a nested loop over the
  whole table: every tuple meets ``--table`` rows), on a tenth of the
  tuples.

Printed per box: tuples/s and node CPU µs per tuple (``time.process_time``),
best of ``--repeat`` rounds, each round with fresh ``Columns`` (no cached
rows), and which path the box took.

Usage: ``python bench/aurorajoin_tables.py [--tuples 200000] [--batch 1000] [--repeat 3] [--table 1000]
[--window 1000] [--symbols 200] [--only aurorajoin select joinstatic insert update]``
"""

from __future__ import annotations

import argparse
import html
import os
import time

import pyarrow as pa

from boreas.catalog import Catalog, plan_submission, read_document
from boreas.catalog.boxtypes import builtin_registry
from boreas.catalog.model import Box, Field, FieldType, InPort, Schema
from boreas.catalog.table_params import bind
from boreas.catalog.validate import stream_schemas
from boreas.m3.boxtype import box_types
from boreas.node.operators import build_operator
from boreas.node.operators.table_rows import KeyedRows
from boreas.wire.columns import Columns, arrow_schema

TRADE = Schema("Trade", (Field("time", FieldType.INT), Field("symbol", FieldType.STRING, 8),
                         Field("price", FieldType.DOUBLE)))
QUOTE = Schema("Quote", (Field("time", FieldType.INT), Field("symbol", FieldType.STRING, 8),
                         Field("bid", FieldType.DOUBLE)))
ASK = Schema("Ask", (Field("k", FieldType.INT), Field("v", FieldType.INT)))


def aurorajoin(window: int):
    params = {"predicate": "left.symbol = right.symbol", "down-size": str(window), "up-size": str(window),
              "left-order-by": "VALUES", "right-order-by": "VALUES", "left-order-on-field": "time",
              "right-order-on-field": "time", "out-field.0": "left.time", "out-field-name.0": "t",
              "out-field.1": "right.time", "out-field-name.1": "q", "out-field.2": "left.price - right.bid",
              "out-field-name.2": "spread"}
    box = Box("j", "aurorajoin", (InPort("t"), InPort("q")), ("out",), tuple(params.items()))
    return build_operator(box, [TRADE, QUOTE], builtin_registry().infer(box, [TRADE, QUOTE]))


def table_operator(kind: str, text: str, table: int):
    """A ``select`` (``text``: its sql) or ``joinstatic`` (``text``: its predicate) over table T, keys 0..table-1,
    built as a node builds it (the catalog binds the box to its table)."""
    if kind in ("insert", "update"):
        box = (f'<box name="b" type="{kind}"><in stream="Ask"/><access table="T"/>'
               f'<parameter name="sql" value="{html.escape(text)}"/></box>')
    elif kind == "select":
        box = (f'<box name="b" type="select"><in stream="Ask"/><access table="T"/><out stream="F"/><out stream="M"/>'
               f'<parameter name="sql" value="{html.escape(text)}"/><parameter name="pass-on-no-results" value="1"/>'
               f'</box>')
    else:
        box = (f'<box name="b" type="joinstatic"><in stream="Ask"/><access table="T"/><out stream="P"/>'
               f'<parameter name="predicate" value="{html.escape(text)}"/>'
               f'<parameter name="out-field.0" value="left.v + right.w"/><parameter name="out-field-name.0" value="x"/>'
               f'</box>')
    app = f"""<borealis>
      <schema name="Row"><field name="k" type="int"/><field name="v" type="int"/><field name="w" type="double"/></schema>
      <schema name="Ask"><field name="k" type="int"/><field name="v" type="int"/></schema>
      <input stream="Ask" schema="Ask"/><table name="T" schema="Row"><key field="k"/></table>{box}</borealis>"""
    plan = plan_submission(Catalog(), [read_document(app, "bench.xml")], box_types())
    schemas = stream_schemas(plan.catalog, box_types())
    bound = bind(plan.catalog.boxes["b"], plan.catalog)
    op = build_operator(bound, [schemas["Ask"]], [schemas[s] for s in bound.outputs])
    rows = KeyedRows(op.key_indexes)
    for k in range(table):
        rows.put((k, (k * 31) % table, k / 2))
    op.attach(rows)
    return op


def feed(op, events) -> tuple[float, float]:
    wall, cpu = time.perf_counter(), time.process_time()
    for port, batch in events:
        op.process(port, Columns(batch) if op.takes_columns else Columns(batch).rows(), 0.0)
    return time.perf_counter() - wall, time.process_time() - cpu


def join_events(tuples: int, batch: int, symbols: int) -> list[tuple[int, pa.RecordBatch]]:
    events, clock = [], [0, 0]
    for start in range(0, tuples, batch):
        port = (start // batch) % 2
        n = min(batch, tuples - start)
        times = list(range(clock[port], clock[port] + n))
        clock[port] += n
        names = [f"S{(7 * t + port) % symbols}" for t in times]
        prices = [float(t % 97) for t in times]
        schema = arrow_schema(TRADE if port == 0 else QUOTE)
        events.append((port, pa.RecordBatch.from_arrays([pa.array(times, pa.int32()), pa.array(names),
                                                         pa.array(prices)], schema=schema)))
    return events


def ask_events(tuples: int, batch: int, table: int) -> list[tuple[int, pa.RecordBatch]]:
    schema = arrow_schema(ASK)
    return [(0, pa.RecordBatch.from_arrays(
        [pa.array([(13 * i) % (2 * table) for i in range(s, min(tuples, s + batch))], pa.int32()),
         pa.array([i % table for i in range(s, min(tuples, s + batch))], pa.int32())], schema=schema))
        for s in range(0, tuples, batch)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tuples", type=int, default=200_000)
    parser.add_argument("--batch", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--table", type=int, default=1000)
    parser.add_argument("--symbols", type=int, default=200)
    parser.add_argument("--window", type=int, default=1000)
    parser.add_argument("--only", nargs="*", default=None, help="run only the boxes whose name starts so")
    args = parser.parse_args()
    cases = [
        ("aurorajoin", lambda: aurorajoin(args.window), join_events(args.tuples, args.batch, args.symbols)),
        ("select k=k", lambda: table_operator("select", "select * from T where T.k == input.k", args.table),
         ask_events(args.tuples, args.batch, args.table)),
        ("joinstatic k=k", lambda: table_operator("joinstatic", "right.k = left.k", args.table),
         ask_events(args.tuples, args.batch, args.table)),
        ("insert", lambda: table_operator("insert", "insert into T values (k, v * 2, 0.5)", args.table),
         ask_events(args.tuples, args.batch, args.table)),
        ("update k=k", lambda: table_operator(
            "update", "update T set T.v = T.v + input.v, T.w = T.w * 0.5 where T.k = input.k", args.table),
         ask_events(args.tuples, args.batch, args.table)),
        ("select v<v", lambda: table_operator("select", "select * from T where T.v < input.v", args.table),
         ask_events(args.tuples // 10, args.batch, args.table)),
    ]
    print(f"# tree {os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(build_operator.__code__.co_filename))))}, "
          f"load {open('/proc/loadavg').read().split()[:3]}")
    for name, make, events in cases:
        if args.only is not None and not any(name.startswith(o) for o in args.only):
            continue
        tuples = sum(b.num_rows for _, b in events)
        best = None
        for _ in range(args.repeat):
            op = make()
            wall, cpu = feed(op, events)
            best = (wall, cpu) if best is None or wall < best[0] else best
        path = "columns" if getattr(op, "columnar", False) and op.takes_columns else "rows"
        print(f"{name:16} {tuples / best[0]:>12,.0f} tuples/s  {best[1] / tuples * 1e6:8.2f} µs CPU/tuple  ({path})")


if __name__ == "__main__":
    main()
