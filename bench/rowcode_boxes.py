"""Micro-benchmark: table, aggregate, join and aurorajoin boxes whose expressions read nullable fields or math.

Branch colJT (issue 30, item 7) gave these boxes filter's and map's
translator, ``per_row`` and ``nullable`` on: a ``where``, an argument or a
predicate over a nullable field or with ``sqrt``/``ln``/``coalesce`` is
evaluated on columns, and only the rows where Python might compute
otherwise get the box's row code.  Before (main until then) such a box read
every batch as rows.  Run it twice in the same minutes, once per tree::

    mkdir -p /tmp/main/boreas && git archive main | tar -x -C /tmp/main/boreas
    PYTHONPATH=/tmp/main python bench/rowcode_boxes.py

Boxes (in process, no node), fed fresh Arrow ``Columns`` of ``--batch``
tuples whose nullable double is NULL in a tenth of the rows and negative in
another tenth (``sqrt``/``ln`` fail there):

* **select**: ``select * from T where T.k == input.k and sqrt(T.w) > input.d`` over ``--table`` rows;
* **aggregate**: ``sum(sqrt(x))``, ``avg(coalesce(x, 0.0) * 2.0)``, ``count()``, ``group-by g`` (100 groups;
  ``aggregate10``: 10), tumbling VALUES windows of 100 on ``time``;
* **join**: ``left.k = right.k and ln(right.w) < left.v``, out ``left.k``, ``sqrt(right.w)``, buffers of 1,000;
* **aurorajoin**: the same predicate, both sides VALUES on ``time``, window 1,000.

Printed per box: tuples/s and node CPU µs per tuple (``time.process_time``),
best of ``--repeat`` rounds, and the rows made from columns (``Columns.rows``):
every tuple where the box reads rows, the flagged rows alone where it does not.

Usage: ``python bench/rowcode_boxes.py [--tuples 100000] [--batch 1000] [--repeat 3] [--table 1000]
[--only select aggregate join aurorajoin]``
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

SIDE = Schema("Side", (Field("k", FieldType.INT), Field("time", FieldType.INT),
                       Field("v", FieldType.DOUBLE), Field("w", FieldType.DOUBLE, nullable=True)))
READING = Schema("Reading", (Field("g", FieldType.INT), Field("time", FieldType.INT),
                             Field("x", FieldType.DOUBLE, nullable=True)))
ASK = Schema("Ask", (Field("k", FieldType.INT), Field("d", FieldType.DOUBLE)))
JOIN = "left.k = right.k and ln(right.w) < left.v"


def odd(i: int) -> float | None:
    """A nullable double: NULL in a tenth of the rows, negative in another tenth, else positive."""
    return None if i % 10 == 3 else -float(i % 7) - 1.0 if i % 10 == 7 else float(i % 97) + 0.5


def select_operator(table: int):
    sql = "select * from T where T.k == input.k and sqrt(T.w) > input.d"
    app = f"""<borealis>
      <schema name="Row"><field name="k" type="int"/><field name="v" type="int"/>
        <field name="w" type="double" nullable="true"/></schema>
      <schema name="Ask"><field name="k" type="int"/><field name="d" type="double"/></schema>
      <input stream="Ask" schema="Ask"/><table name="T" schema="Row"><key field="k"/></table>
      <box name="b" type="select"><in stream="Ask"/><access table="T"/><out stream="F"/>
        <parameter name="sql" value="{html.escape(sql)}"/></box></borealis>"""
    plan = plan_submission(Catalog(), [read_document(app, "bench.xml")], box_types())
    schemas = stream_schemas(plan.catalog, box_types())
    bound = bind(plan.catalog.boxes["b"], plan.catalog)
    op = build_operator(bound, [schemas["Ask"]], [schemas[s] for s in bound.outputs])
    rows = KeyedRows(op.key_indexes)
    for k in range(table):
        rows.put((k, k % 13, odd(k)))
    op.attach(rows)
    return op


def box_operator(kind: str, params: dict[str, str], inputs: list[Schema]):
    box = Box("b", kind, tuple(InPort(f"i{i}") for i in range(len(inputs))), ("out",), tuple(params.items()))
    return build_operator(box, inputs, builtin_registry().infer(box, inputs))


def aggregate():
    return box_operator("aggregate", {
        "window-size-by": "VALUES", "window-size": "100", "order-on-field": "time", "group-by": "g",
        "aggregate-function.0": "sum(sqrt(x))", "aggregate-function.1": "avg(coalesce(x, 0.0) * 2.0)",
        "aggregate-function.2": "count()"}, [READING])


def join(kind: str):
    params = {"predicate": JOIN, "out-field.0": "left.k", "out-field-name.0": "k",
              "out-field.1": "sqrt(right.w)", "out-field-name.1": "r"}
    if kind == "join":
        params.update({"left-buffer-size": "1000", "right-buffer-size": "1000"})
    else:
        params.update({"down-size": "1000", "up-size": "1000", "left-order-by": "VALUES",
                       "right-order-by": "VALUES", "left-order-on-field": "time", "right-order-on-field": "time"})
    return box_operator(kind, params, [SIDE, SIDE])


def ask_events(tuples: int, batch: int, table: int) -> list[tuple[int, pa.RecordBatch]]:
    schema = arrow_schema(ASK)
    return [(0, pa.RecordBatch.from_arrays(
        [pa.array([(13 * i) % (2 * table) for i in range(s, min(tuples, s + batch))], pa.int32()),
         pa.array([float(i % 11) for i in range(s, min(tuples, s + batch))])], schema=schema))
        for s in range(0, tuples, batch)]


def reading_events(tuples: int, batch: int, groups: int = 100) -> list[tuple[int, pa.RecordBatch]]:
    schema = arrow_schema(READING)
    return [(0, pa.RecordBatch.from_arrays(
        [pa.array([i % groups for i in range(s, min(tuples, s + batch))], pa.int32()),
         pa.array([i // 10 for i in range(s, min(tuples, s + batch))], pa.int32()),
         pa.array([odd(i) for i in range(s, min(tuples, s + batch))], pa.float64())], schema=schema))
        for s in range(0, tuples, batch)]


def side_events(tuples: int, batch: int) -> list[tuple[int, pa.RecordBatch]]:
    """Batches alternating between the sides, time rising by one per tuple on each, 200 keys."""
    schema, events, clock = arrow_schema(SIDE), [], [0, 0]
    for start in range(0, tuples, batch):
        port = (start // batch) % 2
        n = min(batch, tuples - start)
        times = list(range(clock[port], clock[port] + n))
        clock[port] += n
        events.append((port, pa.RecordBatch.from_arrays(
            [pa.array([(7 * t + port) % 200 for t in times], pa.int32()), pa.array(times, pa.int32()),
             pa.array([float(t % 5) for t in times]), pa.array([odd(t) for t in times], pa.float64())],
            schema=schema)))
    return events


class RowsMade:
    """Counts the rows made from columns (``Columns.rows``) while it is installed."""

    def __init__(self) -> None:
        self.count = 0
        self._rows = Columns.rows

    def __enter__(self) -> "RowsMade":
        def counted(columns: Columns) -> list[tuple]:
            out = self._rows(columns)
            self.count += len(out)
            return out
        Columns.rows = counted  # type: ignore[method-assign]
        return self

    def __exit__(self, *exc: object) -> None:
        Columns.rows = self._rows  # type: ignore[method-assign]


def feed(op, events) -> tuple[float, float, int]:
    with RowsMade() as made:
        wall, cpu = time.perf_counter(), time.process_time()
        for port, batch in events:
            op.process(port, Columns(batch), 0.0)
        return time.perf_counter() - wall, time.process_time() - cpu, made.count


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tuples", type=int, default=100_000)
    parser.add_argument("--batch", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--table", type=int, default=1000)
    parser.add_argument("--only", nargs="*", default=None, help="run only the boxes whose name starts so")
    args = parser.parse_args()
    cases = [
        ("select", lambda: select_operator(args.table), ask_events(args.tuples, args.batch, args.table)),
        ("aggregate", aggregate, reading_events(args.tuples, args.batch)),
        ("aggregate10", aggregate, reading_events(args.tuples, args.batch, 10)),
        ("join", lambda: join("join"), side_events(args.tuples, args.batch)),
        ("aurorajoin", lambda: join("aurorajoin"), side_events(args.tuples, args.batch)),
    ]
    tree = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(build_operator.__code__.co_filename))))
    print(f"# tree {tree}, load {open('/proc/loadavg').read().split()[:3]}")
    for name, make, events in cases:
        if args.only is not None and not any(name.startswith(o) for o in args.only):
            continue
        tuples = sum(b.num_rows for _, b in events)
        best = None
        for _ in range(args.repeat):
            wall, cpu, made = feed(make(), events)
            best = (wall, cpu, made) if best is None or cpu < best[1] else best
        print(f"{name:12} {tuples / best[0]:>12,.0f} tuples/s  {best[1] / tuples * 1e6:8.2f} µs CPU/tuple  "
              f"rows made {best[2]:,} of {tuples:,}")


if __name__ == "__main__":
    main()
