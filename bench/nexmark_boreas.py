"""Nexmark on Boreas: one query as an ``m3`` box on one node's operator, fed the generated events; DuckDB checks it.

Each query becomes an application (``app_xml``): one ``<input>`` stream per
event kind it reads (``Person``, ``Auction``, ``Bid``; ``dateTime`` and
``expires`` as ``double`` milliseconds, ids and prices ``int``) and one ``m3`` box whose ``sql`` is the
query's Boreas form (``bench/nexmark_queries.py``).  The application is
planned as ``boreas submit`` plans it (``plan_submission`` with the full
box-type registry): a query Boreas cannot run is refused there, and
:func:`plan` returns the refusal as the user would read it.

A query Boreas accepts runs in process, as ``bench/m3box.py`` runs TPC-H Q3:
the box's operator (``node/operators``' ``build_operator``, what a node
runs) is fed each block's Arrow batches (``Columns``) port by port in event
order; the clock covers the feeding alone (the batches are made first).
Throughput is the events of the kinds the query reads per second.  Then
:func:`duckdb_check` compares DuckDB running the same SQL over the same
events (a view of rows against ``GROUP BY ALL`` with ``count(*)``: M3 keeps
a row's multiplicity in ``count``) with what a subscriber of the box's out
stream would hold -- the changelog the box emitted, folded in order
(:func:`folded`: each row's weight added, -old/+new) -- and with the box's
view: an emitted stream that differs from the view fails the check even
where the view is right.
"""

from __future__ import annotations

import math
import re
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import sqlglot
from sqlglot import exp
from nexmark_queries import COLUMNS, Query

STREAMS = {"person": "Person", "auction": "Auction", "bid": "Bid", "side_input": "SideInput"}
_TYPES = {"INT": "int", "DOUBLE": "double", "VARCHAR": "string"}
_ARROW = {"INT": pa.int32(), "DOUBLE": pa.float64(), "VARCHAR": pa.string()}
_SIZE = ' size="200"'  # a string field's declared size (the generated strings are shorter)


def columns(kind: str) -> list[tuple[str, str]]:
    """(name, SQL type) of a kind's columns as the box declares them."""
    return [tuple(c.split()) for c in COLUMNS[kind].split(", ")]


def app_xml(q: Query) -> str:
    """The query as a Boreas application: its kinds as input streams, an ``m3`` box writing ``Result``."""
    schemas, inputs, ins = [], [], []
    for kind in q.side + q.reads:  # side inputs (tables) first, as the box's SQL declares them
        fields = "".join(f'<field name="{n}" type="{_TYPES[t]}"{_SIZE if t == "VARCHAR" else ""}/>'
                         for n, t in columns(kind))
        schemas.append(f'<schema name="{STREAMS[kind]}Tuple">{fields}</schema>')
        inputs.append(f'<input stream="{STREAMS[kind]}" schema="{STREAMS[kind]}Tuple"/>')
        ins.append(f'<in stream="{STREAMS[kind]}"/>')
    return (f'<borealis>{"".join(inputs)}{"".join(schemas)}<box name="{q.name}" type="m3">{"".join(ins)}'
            f'<out stream="Result"/><parameter name="sql"><![CDATA[{q.boreas()}]]></parameter></box></borealis>')


@dataclass
class Planned:
    """An accepted query: its operator, ready to be fed (one per run: the box's state is the view)."""

    query: Query
    operator: Any
    out_fields: list[str]
    emitted: list = field(default_factory=list)  # (out port, batch) the box emitted, in order (:func:`feed`)


def plan(q: Query) -> Planned | str:
    """The query's box operator, or Boreas's refusal (the plan's problems, as ``boreas submit`` prints them)."""
    from boreas.catalog import Catalog, plan_submission, read_document
    from boreas.catalog.validate import stream_schemas
    from boreas.m3.boxtype import box_types
    from boreas.node.operators import build_operator

    types = box_types()
    try:
        made = plan_submission(Catalog(), [read_document(app_xml(q), f"nexmark_{q.name}.xml")], types)
    except Exception as exc:  # noqa: BLE001 - a refusal raised while reading is still the refusal to print
        return f"{type(exc).__name__}: {exc}"
    if not made.ok:
        return "; ".join(str(p) for p in made.problems)
    schemas = stream_schemas(made.catalog, types)
    box = made.catalog.boxes[q.name]
    op = build_operator(box, [schemas[p.stream] for p in box.inputs], [schemas[s] for s in box.outputs])
    return Planned(q, op, [f.name for f in schemas[box.outputs[0]].fields])


def side_table(kind: str) -> pa.RecordBatch:
    """A side input's rows (``nexmark_gen``'s, the same on every run)."""
    import nexmark_gen

    return {"side_input": nexmark_gen.side_input}[kind]()


def boreas_batch(kind: str, batch: pa.RecordBatch) -> pa.RecordBatch:
    """A generated batch as the box's stream carries it: the declared columns, timestamps as ms since the epoch."""
    cols = []
    for name, sql_type in columns(kind):
        col = batch.column(batch.schema.names.index({"datetime": "dateTime"}.get(name, name)))
        if pa.types.is_timestamp(col.type):
            col = col.cast(pa.int64())
        cols.append(col.cast(_ARROW[sql_type]))
    return pa.record_batch(cols, names=[n for n, _ in columns(kind)])


def feed(planned: Planned, blocks: list[dict[str, pa.RecordBatch]]) -> tuple[float, float, int]:
    """(seconds, CPU seconds, events fed): every block's batches of the kinds read, port by port, into the
    operator; a side input (q13's) is published whole first, outside the clocks and the count (it is the box's
    setup).  Seconds are the wall clock's, CPU seconds this process's (``time.process_time``): on a machine
    shared with other work the wall clock counts the time the process waited for a core too, so events/s
    from it falls with the load average while CPU per event does not (docs/benchmarks.md, "Folds kept per
    row (branch nexI)")."""
    from boreas.wire.columns import Columns

    q, op = planned.query, planned.operator
    emitted = planned.emitted
    for port, kind in enumerate(q.side):
        emitted.extend(op.process(port, Columns(boreas_batch(kind, side_table(kind))), 0.0))
    fed = [(port, Columns(boreas_batch(kind, b[kind]))) for b in blocks
           for port, kind in enumerate(q.reads, start=len(q.side)) if b[kind].num_rows]
    events = sum(len(c) for _, c in fed)
    began, cpu = time.perf_counter(), time.process_time()
    for port, cols in fed:
        emitted.extend(op.process(port, cols, 0.0))  # kept, not read, inside the clocks: folded after
    return time.perf_counter() - began, time.process_time() - cpu, events


def folded(emitted: list) -> list[tuple]:
    """What a subscriber of the box's out stream holds after ``emitted`` (``(port, batch)`` in order): every
    batch's rows with their weights (a plain batch's +1 each) added up, each row listed as often as its sum.

    Raises ValueError where a batch takes away a row the stream did not hold (its sum below 0 after the
    batch): a retraction of a row never emitted, which a subscriber cannot apply.

    >>> folded([(0, [(1, 'a', 1)]), (0, [(1, 'a', 2)])])
    [(1, 'a', 1), (1, 'a', 2)]
    >>> folded([(0, [(7, 1)]), (0, [(7, 2), (7, 2)])])
    [(7, 1), (7, 2), (7, 2)]
    """
    from boreas.wire.columns import Columns

    held: Counter = Counter()
    for _, batch in emitted:
        weights = batch.weight_list() if isinstance(batch, Columns) else [1] * len(batch)
        rows = batch.rows() if isinstance(batch, Columns) else batch
        for row, weight in zip(rows, weights):
            held[tuple(row)] += weight
        for row in rows:
            if held[tuple(row)] < 0:
                raise ValueError(f"the changelog takes away {tuple(row)}, which it had not emitted")
    return [row for row, n in held.items() for _ in range(n)]


def duckdb_check(planned: Planned, tables: dict[str, pa.Table]) -> str:
    """"matches" when the box's emitted changelog, folded (what a subscriber holds), and its view both hold
    DuckDB's rows; else ``DIFFERS: ...`` saying which side differs and where first."""
    want = duckdb_rows(planned, tables)
    try:
        stream = folded(planned.emitted)
    except ValueError as exc:
        return f"DIFFERS: emitted stream: {exc}"
    for side, got in (("emitted stream", stream), ("view", view_rows(planned))):
        differs = compare(got, want)
        if differs is not None:
            return f"DIFFERS: {side}: {differs}"
    return "matches"


def view_rows(planned: Planned) -> list[tuple]:
    """The box's view as rows: key columns, then the value(s) (a view of rows: its ``count``); a top-N box's
    result is its ranked rows (node/operators/m3topn.py), a row there n times listed n times."""
    if hasattr(planned.operator, "top_rows"):
        return planned.operator.top_rows()
    rows = []
    for key, value in planned.operator.runtime.view("Q1").items():
        values = value if isinstance(value, tuple) else (value,)
        if any(v for v in values):
            rows.append(tuple(key) + tuple(values))
    return rows


def duckdb_rows(planned: Planned, tables: dict[str, pa.Table]) -> list[tuple]:
    """The same SQL in DuckDB over the same events (a view of rows: each distinct row and its count)."""
    import duckdb

    q = planned.query
    con = duckdb.connect()
    for kind in q.side:
        con.register(kind, pa.Table.from_batches([boreas_batch(kind, side_table(kind))]))
    for kind in q.reads:
        table = tables[kind]  # (a kind no event of the run has: an empty table of its columns)
        batches = [boreas_batch(kind, b) for b in table.to_batches()] or [
            boreas_batch(kind, pa.RecordBatch.from_pylist([], schema=table.schema))]
        con.register(kind, pa.Table.from_batches(batches))
    sql = duckdb_sql(q.select())
    if hasattr(planned.operator, "top_rows"):  # a top-N: its ties broken as the box breaks them (docs/m3.md)
        from boreas.m3.compiler.rownumber import ranked_sql, split_topn

        inner, topn = split_topn(sql)
        sql = ranked_sql(inner, topn, planned.operator.ranked.columns)
    described = [d[0] for d in con.execute(f"SELECT * FROM ({sql}) LIMIT 0").description]
    if planned.out_fields and planned.out_fields[-1] == "count" and len(planned.out_fields) == len(described) + 1:
        sql = f"SELECT *, count(*) FROM ({sql}) GROUP BY ALL"
    return [tuple(r) for r in con.execute(sql).fetchall()]


_JAVA_DATE = {"yyyy": "%Y", "MM": "%m", "dd": "%d", "HH": "%H", "mm": "%M", "ss": "%S"}


def _epoch(ms: exp.Expression) -> exp.Expression:
    """DOUBLE milliseconds as a DuckDB TIMESTAMP (UTC, as Boreas's event-time functions read them)."""
    return exp.Anonymous(this="epoch_ms", expressions=[exp.cast(ms, "BIGINT")])


def _to_duckdb(node: exp.Expression) -> exp.Expression:
    if isinstance(node, exp.Table) and node.args.get("version"):  # a lookup join of a static table: a join
        node.set("version", None)
        return node
    if isinstance(node, exp.Anonymous) and node.name.upper() == "PROCTIME":
        return exp.Literal.number(0)
    if isinstance(node, exp.Hour):
        return exp.Anonymous(this="hour", expressions=[_epoch(node.this)])
    if isinstance(node, exp.Is) and isinstance(node.this, exp.RegexpExtract):  # Flink's NULL: no match (DuckDB: '')
        return exp.Not(this=exp.Anonymous(this="regexp_matches", expressions=[node.this.this.copy(),
                                                                              node.this.expression.copy()]))
    if isinstance(node, exp.RegexpExtract):  # Flink's third argument is the group
        group = node.args.get("position") or node.args.get("group") or exp.Literal.number(1)
        return exp.Anonymous(this="regexp_extract", expressions=[node.this, node.expression, group])
    if isinstance(node, exp.Anonymous) and node.name.upper() == "SPLIT_INDEX":  # 0-based; split_part is 1-based
        s, sep, i = node.expressions
        return exp.Anonymous(this="split_part", expressions=[s, sep, exp.Literal.number(int(i.name) + 1)])
    if isinstance(node, exp.Anonymous) and node.name.upper() == "COUNT_CHAR":  # the suite's UDF (q14)
        s, c = node.expressions
        gone = exp.Anonymous(this="replace", expressions=[s.copy(), c, exp.Literal.string("")])
        return exp.Sub(this=exp.Length(this=s), expression=exp.Length(this=gone))
    if isinstance(node, exp.Anonymous) and node.name.upper() == "DATE_FORMAT":
        t, pattern = node.expressions
        fmt = re.sub("|".join(_JAVA_DATE), lambda m: _JAVA_DATE[m.group()], pattern.name)
        return exp.Anonymous(this="strftime", expressions=[_epoch(t), exp.Literal.string(fmt)])
    return node


def duckdb_sql(sql: str) -> str:
    """The Boreas form of a query as DuckDB runs it: Flink's functions (``HOUR``, ``DATE_FORMAT`` of DOUBLE ms,
    ``SPLIT_INDEX``, ``REGEXP_EXTRACT``'s group, the suite's UDF ``count_char``) as DuckDB's; a lookup join
    (``FOR SYSTEM_TIME AS OF``, q13) of its static side input as the ordinary join it then equals;
    ``REGEXP_EXTRACT(...) IS NULL`` (q21) as Flink's no match, ``NOT regexp_matches(...)`` (DuckDB's
    ``regexp_extract`` gives ``''`` there, never NULL).

    >>> duckdb_sql("SELECT SPLIT_INDEX(url, '/', 3), HOUR(datetime), DATE_FORMAT(datetime, 'yyyy-MM-dd') FROM bid")
    "SELECT SPLIT_PART(url, '/', 4), HOUR(EPOCH_MS(CAST(datetime AS BIGINT))), STRFTIME(EPOCH_MS(CAST(datetime AS BIGINT)), '%Y-%m-%d') FROM bid"
    """
    tree = sqlglot.parse_one(sql)
    if not any(isinstance(n, (exp.Hour, exp.RegexpExtract, exp.Anonymous, exp.Version)) for n in tree.walk()):
        return sql
    return tree.transform(_to_duckdb).sql(dialect="duckdb")


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, float) or isinstance(b, float):
        return a is not None and b is not None and math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-6)
    return a == b


def compare(got: list[tuple], want: list[tuple], peer: str = "DuckDB") -> str | None:
    """None when the two results hold the same rows (floats to 1e-9), else what differs first."""
    if len(got) != len(want):
        return f"{len(got):,} rows, {peer} {len(want):,}"
    key = lambda r: tuple((x is None, x if not isinstance(x, float) else round(x, 6)) for x in r)  # noqa: E731
    for g, w in zip(sorted(got, key=key), sorted(want, key=key)):
        if len(g) != len(w) or not all(_same(x, y) for x, y in zip(g, w)):
            return f"row {g} where {peer} has {w}"
    return None
