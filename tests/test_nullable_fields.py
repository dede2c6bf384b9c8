"""Nullable stream fields (issue 33 item 2, the data plane): declared in the application XML, carried by
rows (None, msgpack nil) and Arrow columns (validity), and treated by filter, map, aggregate and join with
SQL's three-valued logic; Borealis fields without the attribute still refuse NULL.

The oracle for the operators' SQL semantics is DuckDB over the same rows."""

from __future__ import annotations

import functools

import duckdb
import msgspec
import pyarrow as pa
import pytest
from boreas.catalog import Catalog, ValidationFailed, plan_submission, read_document
from boreas.catalog.model import Subscription
from boreas.catalog.xmlcodec import to_text
from boreas.m3.boxtype import box_types
from boreas.node.dataflow import Dataflow
from boreas.wire.columns import Columns, check, decode, from_rows, payload
from boreas.wire.tuples import RowType
from hypothesis import given, settings
from hypothesis import strategies as st
from support.property_scale import SETTINGS, examples

APP = """<borealis>
  <schema name="Reading">
    <field name="k" type="int"/>
    <field name="x" type="int" nullable="true"/>
    <field name="y" type="double" nullable="1"/>
    <field name="s" type="string" size="4" nullable="true"/>
  </schema>
  <input stream="In" schema="Reading"/>
  <box name="keep" type="filter"><in stream="In"/><out stream="Kept"/>
    <parameter name="expression.0" value="x &lt;&gt; 3 or k = 0"/></box>
  <box name="calc" type="map"><in stream="Kept"/><out stream="Calc"/>
    <parameter name="expression.0" value="k"/><parameter name="output-field-name.0" value="k"/>
    <parameter name="expression.1" value="x + 1"/><parameter name="output-field-name.1" value="x1"/>
    <parameter name="expression.2" value="coalesce(x, -1)"/><parameter name="output-field-name.2" value="xc"/>
    <parameter name="expression.3" value="y is null"/><parameter name="output-field-name.3" value="ynull"/>
    <parameter name="expression.4" value="s"/><parameter name="output-field-name.4" value="s"/></box>
  <box name="sums" type="aggregate"><in stream="In"/><out stream="Sums"/>
    <parameter name="aggregate-function.0" value="sum(x)"/><parameter name="aggregate-function-output-name.0" value="sx"/>
    <parameter name="aggregate-function.1" value="count(x)"/><parameter name="aggregate-function-output-name.1" value="cx"/>
    <parameter name="aggregate-function.2" value="count(*)"/><parameter name="aggregate-function-output-name.2" value="n"/>
    <parameter name="aggregate-function.3" value="avg(y)"/><parameter name="aggregate-function-output-name.3" value="ay"/>
    <parameter name="aggregate-function.4" value="max(x)"/><parameter name="aggregate-function-output-name.4" value="mx"/>
    <parameter name="window-size-by" value="TUPLES"/><parameter name="window-size" value="3"/>
    <parameter name="advance" value="3"/><parameter name="group-by" value="k"/></box>
  <output stream="Calc"/>
  <output stream="Sums"/>
</borealis>"""


@functools.lru_cache(maxsize=1)
def catalog():
    """The planned application with a subscriber of Calc and Sums (planned once: read, never changed)."""
    planned = plan_submission(Catalog(), [read_document(APP, "app.xml")], box_types()).catalog
    for stream in ("Calc", "Sums"):
        planned.subscriptions[f"{stream}|c:9"] = Subscription(stream, "c:9")
    return planned


def test_the_xml_declares_a_nullable_field_and_the_catalog_writes_it_back():
    schema = catalog().schemas["Reading"]
    assert [f.nullable for f in schema.fields] == [False, True, True, True]
    assert 'nullable="true"' in to_text(schema) and to_text(schema).count("nullable") == 3
    assert read_document(f"<borealis>{to_text(schema)}</borealis>", "again.xml").declarations[0] == schema
    with pytest.raises(ValidationFailed, match="nullable"):
        read_document(APP.replace('nullable="1"', 'nullable="maybe"'), "bad.xml")


def test_derived_streams_are_nullable_where_their_values_may_be_null():
    from boreas.catalog.validate import stream_schemas
    schemas = stream_schemas(catalog())
    calc = {f.name: f.nullable for f in schemas["Calc"].fields}
    assert calc == {"k": False, "x1": True, "xc": False, "ynull": False, "s": True}
    sums = {f.name: f.nullable for f in schemas["Sums"].fields}
    assert sums == {"k": False, "sx": True, "cx": False, "n": False, "ay": True, "mx": True}


def test_rows_and_columns_carry_null_in_a_nullable_field_only():
    schema = catalog().schemas["Reading"]
    rt = RowType(schema)
    rows, errors = rt.decode(msgspec.msgpack.encode([[1, None, None, None], [None, 1, 1.0, "a"], [2, 3, 0.5, "ab"]]))
    assert rows == [(1, None, None, None), (2, 3, 0.5, "ab")]
    assert [(e.row, e.field) for e in errors] == [(1, "k")]
    assert rt.from_text(["1", "", "", "\\N"]) == (1, None, None, None)
    assert rt.from_text(["1", "2", "2.5", ""]) == (1, 2, 2.5, "")  # a string's empty text is the empty string
    cols = from_rows([(1, None, None, None), (2, 3, 0.5, "ab")], schema)
    assert cols.batch.column("x").null_count == 1
    back, errors = decode(payload(cols), schema)
    assert back.rows() == [(1, None, None, None), (2, 3, 0.5, "ab")] and not errors
    table = pa.record_batch({"k": pa.array([1, None], pa.int32()), "x": [None, 2], "y": [None, 1.0],
                             "s": [None, "b"]})
    good, errors = check(table, schema)
    assert good.rows() == [(1, None, None, None)] and [(e.row, e.field, e.reason) for e in errors] == [
        (1, "k", "missing")]


def flow() -> Dataflow:
    cat = catalog()
    dataflow = Dataflow("n:1", None, "n:1#a", box_types=box_types())
    dataflow.reconfigure(cat)
    return dataflow


def sent(dataflow: Dataflow, stream: str) -> list[tuple]:
    out: list[tuple] = []
    for _, rows, _, _ in dataflow.out.withdraw("c:9", {stream}):
        out += rows.rows() if isinstance(rows, Columns) else list(rows)
    return out


def duckdb_rows(rows: list[tuple], sql: str) -> list[tuple]:
    con = duckdb.connect()
    con.execute("CREATE TABLE R(i INTEGER, k INTEGER, x INTEGER, y DOUBLE, s VARCHAR)")
    if rows:
        con.executemany("INSERT INTO R VALUES (?, ?, ?, ?, ?)", [(i, *r) for i, r in enumerate(rows)])
    return con.execute(sql).fetchall()


CALC_SQL = ("SELECT k, x + 1, COALESCE(x, -1), CAST(y IS NULL AS INTEGER), s FROM R "
            "WHERE x <> 3 OR k = 0 ORDER BY i")

rows_st = st.lists(st.tuples(st.integers(0, 2), st.one_of(st.none(), st.integers(0, 4)),
                             st.one_of(st.none(), st.sampled_from([0.5, 1.5])),
                             st.one_of(st.none(), st.sampled_from(["a", "bb"]))), max_size=12)


@settings(max_examples=examples(25), **SETTINGS)
@given(rows=rows_st, arrow=st.booleans())
def test_filter_and_map_are_sqls_on_null_heavy_rows(rows, arrow):
    import asyncio
    dataflow = flow()
    schema = catalog().schemas["Reading"]
    batch = from_rows(rows, schema) if arrow and rows else rows
    if batch is not None and len(rows):
        asyncio.run(dataflow.router.enter("In", batch, "pub-In", 0, ""))
    assert sent(dataflow, "Calc") == duckdb_rows(rows, CALC_SQL)


@settings(max_examples=examples(25), **SETTINGS)
@given(rows=rows_st)
def test_aggregate_skips_nulls_and_is_null_over_no_value(rows):
    """Tumbling windows of 3 tuples per group: SUM/AVG/MAX of only NULLs are NULL, COUNT(x) counts values."""
    import asyncio
    dataflow = flow()
    if rows:
        asyncio.run(dataflow.router.enter("In", rows, "pub-In", 0, ""))
    want = duckdb_rows(rows, """
        WITH w AS (SELECT *, (ROW_NUMBER() OVER (PARTITION BY k ORDER BY i) - 1) // 3 AS win,
                          COUNT(*) OVER (PARTITION BY k) AS total FROM R)
        SELECT k, SUM(x), COUNT(x), COUNT(*), AVG(y), MAX(x), MAX(i) AS last FROM w
        WHERE win < total // 3 GROUP BY k, win ORDER BY last""")
    assert sent(dataflow, "Sums") == [r[:-1] for r in want]


JOIN_APP = """<borealis>
  <schema name="L"><field name="t" type="int"/><field name="k" type="int" nullable="true"/></schema>
  <schema name="R"><field name="t" type="int"/><field name="k" type="int"/></schema>
  <input stream="Ls" schema="L"/><input stream="Rs" schema="R"/><input stream="More" schema="L"/>
  <box name="match" type="join"><in stream="Ls"/><in stream="Rs"/><out stream="Pairs"/>
    <parameter name="predicate" value="left.k = right.k or left.k is null and right.k = 0"/>
    <parameter name="left-buffer-size" value="9"/><parameter name="right-buffer-size" value="9"/>
    <parameter name="out-field.0" value="left.t"/><parameter name="out-field-name.0" value="lt"/>
    <parameter name="out-field.1" value="right.t"/><parameter name="out-field-name.1" value="rt"/></box>
  <box name="both" type="union"><in stream="Rs"/><in stream="More"/><out stream="Both"/></box>
  <output stream="Pairs"/><output stream="Both"/>
</borealis>"""


def test_a_join_never_matches_null_keys_and_a_union_is_nullable_where_an_input_is():
    import asyncio
    from boreas.catalog.validate import stream_schemas
    cat = plan_submission(Catalog(), [read_document(JOIN_APP, "app.xml")], box_types()).catalog
    assert [f.nullable for f in stream_schemas(cat)["Both"].fields] == [False, True]
    cat.subscriptions["Pairs|c:9"] = Subscription("Pairs", "c:9")
    dataflow = Dataflow("n:1", None, "n:1#a", box_types=box_types())
    dataflow.reconfigure(cat)
    left = [(1, None), (2, 1), (3, None)]
    right = [(10, 1), (11, 0), (12, 2)]

    async def feed():
        await dataflow.router.enter("Ls", from_rows(left, cat.schemas["L"]), "pub-L", 0, "")
        await dataflow.router.enter("Rs", right, "pub-R", 0, "")
    asyncio.run(feed())
    want = duckdb.sql("SELECT l.t, r.t FROM (VALUES (1, NULL), (2, 1), (3, NULL)) l(t, k), "
                      "(VALUES (10, 1), (11, 0), (12, 2)) r(t, k) "
                      "WHERE l.k = r.k OR l.k IS NULL AND r.k = 0 ORDER BY r.t, l.t").fetchall()
    assert sent(dataflow, "Pairs") == want == [(2, 10), (1, 11), (3, 11)]


def test_an_aggregate_over_a_changelog_is_null_when_its_last_value_leaves():
    from boreas.catalog.model import Field, FieldType, Schema
    from boreas.node.operators.aggregate_changes import Retracting
    s = Schema("S", (Field("g", FieldType.INT), Field("v", FieldType.INT, nullable=True), Field("t", FieldType.INT)))
    out = Schema("A", (Field("g", FieldType.INT), Field("s", FieldType.LONG, nullable=True),
                       Field("a", FieldType.DOUBLE, nullable=True), Field("m", FieldType.INT, nullable=True),
                       Field("c", FieldType.INT)))
    agg = Retracting(["sum(v)", "avg(v)", "max(v)", "count(v)"], s, out, groups=[0], size=100, advance=100,
                     order=2, emit_start=False)
    assert agg.apply([(1, None, 5), (1, 4, 6)], [1, 1]) == ([(1, 4, 4.0, 4, 1)], [1])
    assert agg.apply([(1, 4, 6)], [-1]) == ([(1, 4, 4.0, 4, 1), (1, None, None, None, 0)], [-1, 1])


def test_a_declared_output_schema_must_be_nullable_where_its_producer_may_write_null():
    app = APP.replace('<output stream="Calc"/>', '<output stream="Calc" schema="C"/>').replace(
        "<input ", '<schema name="C"><field name="k" type="int"/><field name="x1" type="int"/>'
                   '<field name="xc" type="int"/><field name="ynull" type="int"/>'
                   '<field name="s" type="string" size="4" nullable="true"/></schema><input ', 1)
    problems = plan_submission(Catalog(), [read_document(app, "app.xml")], box_types()).problems
    assert [str(p).split(": ", 2)[-1] for p in problems] == [
        "output stream 'Calc' declares schema 'C' (k int, x1 int, xc int, ynull int, s string(4) null), but its "
        "producer yields (k int, x1 int null, xc int, ynull int, s string(4) null) (field 'x1' is NULL where map "
        "box 'calc' writes NULL; declare it nullable=\"true\")"]
    fixed = app.replace('<field name="x1" type="int"/>', '<field name="x1" type="int" nullable="true"/>')
    assert not plan_submission(Catalog(), [read_document(fixed, "app.xml")], box_types()).problems


def test_csv_text_reads_an_empty_value_as_null_on_the_columnar_path_as_on_the_row_path():
    from boreas.cli.text_columns import typed
    schema = catalog().schemas["Reading"]
    text = [["1", "", " ", "\\N"], ["2", "7", "", ""], ["3", " 4", "2.5", "ab"]]
    batch, problems = typed(pa.record_batch({f.name: [r[i] for r in text] for i, f in enumerate(schema.fields)}),
                            schema)
    assert not problems
    assert [tuple(r.values()) for r in batch.to_pylist()] == [RowType(schema).from_text(r) for r in text] == [
        (1, None, None, None), (2, 7, None, ""), (3, 4, 2.5, "ab")]


def test_boreas_subscribe_writes_csv_that_boreas_publish_reads_back_with_its_nulls():
    import csv
    import io
    from boreas.cli.subscribe_output import CsvOutput
    schema = catalog().schemas["Reading"]
    rows = [(1, None, None, None), (2, 7, 0.5, ""), (3, None, 2.5, "ab")]
    out = io.StringIO()
    writer = CsvOutput(out, schema)
    writer.write(rows)
    writer.flush()
    lines = list(csv.reader(io.StringIO(out.getvalue())))
    assert lines[0] == ["k", "x", "y", "s"]
    assert [RowType(schema).from_text(line) for line in lines[1:]] == rows
