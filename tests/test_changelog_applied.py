"""Changelog streams applied (issue 30 item 2): an aggregate retracts, an `m3` view takes -old/+new, a chain of
them equals DuckDB's answer, and subscribers show the weights.

The filter, map and union that pass weights, the representation and the
refusals are tests/test_changelog.py's.
"""

from __future__ import annotations

from collections import Counter

import pyarrow as pa
import pytest
from boreas.catalog import Catalog, plan_submission, read_document
from boreas.catalog.model import Box, Field, FieldType, InPort, Schema
from boreas.m3.boxtype import box_types
from boreas.wire.columns import Columns, WEIGHT, arrow_schema
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.changelog import follow, multiset
from support.property_scale import examples


# -- aggregate over a changelog --------------------------------------------------------------

G = Schema("G", (Field("g", FieldType.INT), Field("v", FieldType.INT), Field("name", FieldType.STRING, 2)))
FUNCTIONS = ["count(*)", "sum(v)", "avg(v)", "min(v)", "max(name)", "count_distinct(name)", "count(v)"]


def aggregate(size: int, advance: int, order_by_field: bool):
    params = {"window-size-by": "VALUES", "order-on-field": "v", "window-size": str(size), "advance": str(advance),
              "group-by": "g", "order-by": "FIELD" if order_by_field else "TUPLENUM",
              **{f"aggregate-function.{i}": f for i, f in enumerate(FUNCTIONS)}}
    box = Box("a", "aggregate", (InPort("in"),), ("out",), tuple(params.items()))
    from boreas.node.operators.aggregate import AggregateOperator

    return AggregateOperator(box, [G], build_types().infer(box, [G]))


def build_types():
    from boreas.catalog.boxtypes import builtin_registry

    return builtin_registry()


def expected(rows: list[tuple], size: int, advance: int, order_by_field: bool) -> Counter:
    """The aggregate of the rows present now, computed from scratch: the rows a changelog's reader holds."""
    windows: dict[tuple, list[tuple]] = {}
    for row in rows:
        g, v, _ = row
        for k in range((v - size) // advance + 1, v // advance + 1):
            windows.setdefault((g, k * advance), []).append(row)
    out: Counter = Counter()
    for (g, start), held in windows.items():
        vs, names = [r[1] for r in held], [r[2] for r in held]
        prefix = (g, start) if order_by_field else (g,)
        out[prefix + (len(held), sum(vs), sum(vs) / len(vs), min(vs), max(names), len(set(names)), len(vs))] += 1
    return out


def signed(rows: list[tuple], weights: list[int]) -> Columns:
    target = arrow_schema(G)
    arrays = [pa.array([r[i] for r in rows], f.type) for i, f in enumerate(target)]
    return Columns(pa.RecordBatch.from_arrays(arrays, schema=target), weights=pa.array(weights, pa.int64()))


@st.composite
def changelogs(draw) -> list[tuple[tuple, int]]:
    """Rows entering and later leaving (only rows that are there leave), some several times."""
    present: list[tuple] = []
    log: list[tuple[tuple, int]] = []
    for _ in range(draw(st.integers(1, 60))):
        if present and draw(st.integers(0, 2)) == 0:
            row = present.pop(draw(st.integers(0, len(present) - 1)))
            log.append((row, -1))
        else:
            row = (draw(st.integers(0, 2)), draw(st.integers(-20, 40)), draw(st.sampled_from(["a", "b", "cc"])))
            present.append(row)
            log.append((row, 1))
    return log


@settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(log=changelogs(), cuts=st.lists(st.integers(1, 12), min_size=1, max_size=5),
       shape=st.sampled_from([(10, 10, True), (10, 5, True), (7, 7, False), (1000, 1000, False)]),
       moved=st.booleans())
def test_an_aggregate_over_a_changelog_retracts_to_the_aggregate_of_the_rows_left(log, cuts, shape, moved):
    import msgspec

    size, advance, by_field = shape
    op = aggregate(size, advance, by_field)
    out: list = []
    i = k = 0
    while i < len(log):
        part = log[i:i + cuts[k % len(cuts)]]  # batch boundaries fall inside groups and windows
        i, k = i + len(part), k + 1
        for port, batch in op.process(0, signed([r for r, _ in part], [w for _, w in part]), 0.0):
            assert port == 0 and batch.weights is not None
            out.append(batch)
        if moved and k == 2:  # the box moves: its accumulators go with it
            state = msgspec.msgpack.decode(msgspec.msgpack.encode(op.state()))
            op = aggregate(size, advance, by_field)
            op.restore(state)
    left = Counter()
    for row, w in log:
        left[row] += w
    rows = [r for r, n in left.items() for _ in range(n)]
    assert multiset(out) == expected(rows, size, advance, by_field)
    assert op.counters()["late_tuples"] == 0


# -- a chain: m3 -> filter -> map -> aggregate, against DuckDB --------------------------------

CHAIN = """<borealis>
  <schema name="E"><field name="sign" type="int"/><field name="k" type="int"/><field name="v" type="int"/></schema>
  <input stream="Events" schema="E"/>
  <box name="totals" type="m3"><in stream="Events"/><out stream="Totals"/><parameter name="sign-field" value="sign"/>
    <parameter name="sql" value="CREATE STREAM e(k INT, v INT);&#10;SELECT k, SUM(v) AS s FROM e GROUP BY k"/></box>
  <box name="positive" type="filter"><in stream="Totals"/><out stream="Positive"/>
    <parameter name="expression.0" value="s &gt; 0"/></box>
  <box name="bucket" type="map"><in stream="Positive"/><out stream="Buckets"/>
    <parameter name="expression.0" value="k % 3"/><parameter name="output-field-name.0" value="g"/>
    <parameter name="expression.1" value="s"/><parameter name="output-field-name.1" value="s"/></box>
  <box name="per" type="aggregate"><in stream="Buckets"/><out stream="Per"/><parameter name="group-by" value="g"/>
    <parameter name="window-size-by" value="VALUES"/><parameter name="order-on-field" value="s"/>
    <parameter name="window-size" value="1000000000"/>
    <parameter name="aggregate-function.0" value="count(*)"/><parameter name="aggregate-function.1" value="sum(s)"/>
    <parameter name="aggregate-function.2" value="max(s)"/><parameter name="aggregate-function.3" value="min(s)"/></box>
  <output stream="Per"/>
</borealis>"""

CHAIN_SQL = """SELECT k % 3 AS g, COUNT(*), SUM(s), MAX(s), MIN(s)
FROM (SELECT k, SUM(sign * v) AS s FROM events GROUP BY k) WHERE s > 0 GROUP BY g"""


@pytest.mark.parametrize("columns", [True, False], ids=["arrow", "rows"])
@settings(max_examples=examples(12), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(events=st.lists(st.tuples(st.sampled_from([1, 1, -1]), st.integers(0, 12), st.integers(-5, 20)),
                       min_size=1, max_size=80),
       cut=st.integers(1, 15))
def test_a_changelog_through_m3_filter_map_and_aggregate_is_what_duckdb_computes(columns, events, cut):
    import duckdb
    from boreas.catalog.validate import stream_schemas
    from boreas.node.operators import build_operator

    types = box_types()
    plan = plan_submission(Catalog(), [read_document(CHAIN, "chain.xml")], types)
    assert plan.ok, plan.problems
    schemas = stream_schemas(plan.catalog, types)
    ops = {name: build_operator(box, [schemas[p.stream] for p in box.inputs], [schemas[s] for s in box.outputs])
           for name, box in plan.catalog.boxes.items()}
    out: list = []
    for i in range(0, len(events), cut):
        rows = events[i:i + cut]
        batch = signed_events(rows, schemas["Events"]) if columns else rows
        for _, totals in ops["totals"].process(0, batch, 0.0):
            for _, positive in ops["positive"].process(0, totals, 0.0):
                for _, buckets in ops["bucket"].process(0, positive, 0.0):
                    out += [b for _, b in ops["per"].process(0, buckets, 0.0)]
    db = duckdb.connect()
    db.execute("CREATE TABLE events(sign INT, k INT, v INT)")
    db.executemany("INSERT INTO events VALUES (?, ?, ?)", events)
    want = Counter(tuple(r) for r in db.execute(CHAIN_SQL).fetchall())
    assert multiset(out) == want


def signed_events(rows: list[tuple], schema: Schema) -> Columns:
    target = arrow_schema(schema)
    return Columns(pa.RecordBatch.from_arrays([pa.array([r[i] for r in rows], f.type) for i, f in enumerate(target)],
                                              schema=target))


# -- what a subscriber shows ------------------------------------------------------------------

V = Schema("V", (Field("k", FieldType.INT), Field("total", FieldType.LONG)))


@pytest.mark.parametrize("fmt", ["jsonl", "csv"])
def test_boreas_subscribe_writes_a_weight_field_for_a_changelog_only(tmp_path, fmt):
    from boreas.cli.subscribe_output import open_output
    from boreas.client.subscriber import WeightedRows

    plain, changelog = tmp_path / f"plain.{fmt}", tmp_path / f"changes.{fmt}"
    out = open_output(fmt, str(plain), V)
    out.write([(1, 15), (2, 7)])
    out.close()
    out = open_output(fmt, str(changelog), V)
    out.write(WeightedRows([(1, 15), (2, 7)], [1, 1]))
    out.write(WeightedRows([(1, 15), (1, 18)], [-1, 1]), limit=1)
    out.close()
    if fmt == "jsonl":
        assert plain.read_text() == '{"k": 1, "total": 15}\n{"k": 2, "total": 7}\n'  # as it always was
        assert changelog.read_text().splitlines() == [
            '{"k": 1, "total": 15, "_weight": 1}', '{"k": 2, "total": 7, "_weight": 1}',
            '{"k": 1, "total": 15, "_weight": -1}']
    else:
        assert plain.read_text() == "k,total\n1,15\n2,7\n"
        assert changelog.read_text() == "k,total,_weight\n1,15,1\n2,7,1\n1,15,-1\n"
    empty = tmp_path / f"empty.{fmt}"
    out = open_output(fmt, str(empty), V)
    out.close()
    assert empty.read_text() == ("k,total\n" if fmt == "csv" else "")


def test_a_parquet_subscription_of_a_changelog_has_a_weight_column(tmp_path):
    import pyarrow.parquet as pq
    from boreas.cli.subscribe_output import open_output

    batch = pa.RecordBatch.from_arrays([pa.array([1, 1], pa.int32()), pa.array([15, 18], pa.int64())],
                                       schema=arrow_schema(V))
    out = open_output("parquet", str(tmp_path / "c.parquet"), V)
    out.write(batch.append_column(pa.field(WEIGHT, pa.int64(), nullable=False), pa.array([-1, 1], pa.int64())))
    out.close()
    table = pq.read_table(tmp_path / "c.parquet")
    assert table.column_names == ["k", "total", WEIGHT] and table.column(WEIGHT).to_pylist() == [-1, 1]
    out = open_output("parquet", str(tmp_path / "p.parquet"), V)
    out.write(batch)
    out.close()
    assert pq.read_table(tmp_path / "p.parquet").column_names == ["k", "total"]


def test_an_m3_box_reads_another_m3_boxs_changelog_as_inserts_and_deletes():
    """A view of a view: the second box applies the first's -old/+new as deletes and inserts (weights, no
    sign field), so it holds what DuckDB computes over the first view."""
    import duckdb
    from boreas.catalog.validate import stream_schemas
    from boreas.node.operators import build_operator

    text = CHAIN.replace('<output stream="Per"/>', """<output stream="Counts"/>
      <box name="narrow" type="map"><in stream="Totals"/><out stream="Narrow"/>
        <parameter name="expression.0" value="k % 3"/><parameter name="output-field-name.0" value="g"/>
        <parameter name="expression.1" value="cast(s as int)"/><parameter name="output-field-name.1" value="s"/></box>
      <box name="counts" type="m3"><in stream="Narrow"/><out stream="Counts"/>
        <parameter name="sql" value="CREATE STREAM n(g INT, s INT);&#10;SELECT g, COUNT(*) AS c, SUM(s) AS t FROM n GROUP BY g"/>
      </box>""")
    types = box_types()
    plan = plan_submission(Catalog(), [read_document(text, "views.xml")], types)
    assert plan.ok, plan.problems
    schemas = stream_schemas(plan.catalog, types)
    ops = {name: build_operator(box, [schemas[p.stream] for p in box.inputs], [schemas[s] for s in box.outputs])
           for name, box in plan.catalog.boxes.items()}
    events = [(1, k % 7, v) for k, v in zip(range(40), range(-3, 37))] + [(-1, 2, 1), (-1, 3, 5), (1, 3, -5)]
    view: dict = {}
    for i in range(0, len(events), 9):
        for _, totals in ops["totals"].process(0, signed_events(events[i:i + 9], schemas["Events"]), 0.0):
            for _, narrow in ops["narrow"].process(0, totals, 0.0):
                for _, counts in ops["counts"].process(0, narrow, 0.0):
                    follow(view, counts, tuple, 1)
    db = duckdb.connect()
    db.execute("CREATE TABLE events(sign INT, k INT, v INT)")
    db.executemany("INSERT INTO events VALUES (?, ?, ?)", events)
    want = {(g,): (c, t) for g, c, t in db.execute(
        "SELECT k % 3, COUNT(*), SUM(s) FROM (SELECT k, SUM(sign * v) AS s FROM events GROUP BY k HAVING s <> 0) "
        "GROUP BY k % 3").fetchall()}
    assert view == want and view


def test_a_partitioned_m3_box_writes_a_changelog_and_reads_one():
    from boreas.catalog.changelog import changelog_streams
    from support.partition_docs import PARTITION, app, deploy, plan

    below = """<box name="g" type="filter"><in stream="V"/><out stream="G"/><parameter name="expression.0" value="1 = 1"/></box>
      <box name="w" type="m3"><in stream="R"/><out stream="W"/>
        <parameter name="sql" value="SELECT a, SUM(b) AS b FROM R GROUP BY a"/></box>"""
    result = plan(app(extra=below), deploy(PARTITION, '<node endpoint="localhost:15001" query="f g w"/>'))
    assert result.ok, result.problems  # a filter passes the partitioned box's weights on
    assert sorted(changelog_streams(result.catalog)) == ["G", "V", "W"]
    delayed = app(extra="""<box name="d" type="delay"><in stream="V"/><out stream="D"/>
        <parameter name="delay-ms" value="1"/></box>""")
    reasons = [p.reason for p in plan(delayed, deploy(PARTITION, '<node endpoint="localhost:15001" query="f d"/>')).problems]
    assert any("delay box 'd' cannot read stream 'V'" in r and "m3 box 'v' revises its view's rows" in r
               for r in reasons), reasons
    fed = app(extra="""<box name="w" type="m3"><in stream="R"/><out stream="W"/>
        <parameter name="sql" value="SELECT a, SUM(b) AS b FROM R GROUP BY a"/></box>""").replace(
        '<box name="v" type="m3"><in stream="R"/>', '<box name="v" type="m3"><in stream="W"/>')
    reasons = [p.reason for p in plan(fed, deploy(PARTITION, '<node endpoint="localhost:15001" query="f w"/>')).problems]
    # its coordinators route the weighted columns (tests/test_cumulus_columns.py): no refusal of the changelog
    assert not any("cannot read stream 'W'" in r for r in reasons) and reasons, reasons
