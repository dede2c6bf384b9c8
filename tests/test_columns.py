"""Arrow columns on the data plane (issue 30): a batch checked as columns is what the row path takes, and an
``m3`` box fed columns keeps exactly the maps, views and changes it keeps when fed the same rows."""

from __future__ import annotations

import pyarrow as pa
import pytest
from boreas.catalog.model import Field, FieldType, Schema
from boreas.node.operators.m3box import date_of
from boreas.wire.columns import Columns, arrow_schema, check, decode, payload
from boreas.wire.columns import from_rows as at_the_edge
from boreas.wire.frames import ARROW, decode as decode_frame, encode, make_batch
from boreas.wire.tuples import RowType
from hypothesis import example, given, settings
from hypothesis import strategies as st
from support.changelog import changes
from support.m3_q3 import duckdb_q3, q3_app, q3_rows, wire
from support.native import skip_without_native
from test_m3_box import q3_operator

ALL = Schema("All", (
    Field("b", FieldType.BYTE), Field("s", FieldType.SHORT), Field("i", FieldType.INT),
    Field("l", FieldType.LONG), Field("f", FieldType.SINGLE), Field("d", FieldType.DOUBLE),
    Field("str", FieldType.STRING, 3), Field("t", FieldType.TIMESTAMP),
))

def from_rows(rows: list[tuple], schema: Schema) -> Columns:
    """Rows (sequences in field order) as columns of ``schema``; nothing checked (the receiver checks)."""
    target = arrow_schema(schema)
    if not rows:
        return Columns(pa.RecordBatch.from_pylist([], target))
    arrays = [pa.array(list(column), type=f.type) for column, f in zip(zip(*rows), target)]
    return Columns(pa.RecordBatch.from_arrays(arrays, schema=target))


good_rows = st.lists(st.tuples(
    st.integers(-128, 127), st.integers(-32768, 32767), st.integers(-2**31, 2**31 - 1),
    st.integers(-2**63, 2**63 - 1), st.just(1.5), st.floats(allow_nan=False),
    st.text(max_size=3), st.integers(0, 2**62)), max_size=40)


@settings(max_examples=60, deadline=None)
@given(good_rows)
def test_good_rows_cross_as_columns_unchanged(rows):
    cols = from_rows(rows, ALL)
    frame = decode_frame(encode(make_batch("S", "p", 0, cols)))
    assert frame.fmt == ARROW
    got, errors = RowType(ALL).decode_payload(bytes(frame.rows), frame.fmt)
    assert errors == [] and isinstance(got, Columns)
    assert got.rows() == RowType(ALL).check(rows)[0]


NO_SINGLE = Schema("NoSingle", tuple(f for f in ALL.fields if f.type != FieldType.SINGLE))


@settings(max_examples=60, deadline=None)
@given(good_rows)
def test_rows_a_publisher_sent_become_the_same_rows_as_columns_at_the_edge(rows):
    """What a node's intake does with a batch of rows: the checked rows as columns, read back (here, after a
    frame, from the input log's bytes) as the same rows; a ``single`` field keeps the rows as they are."""
    checked = RowType(NO_SINGLE).check([r[:4] + r[5:] for r in rows])[0]
    cols = at_the_edge(checked, NO_SINGLE)
    if not checked:
        assert cols is None
        return
    assert cols.rows() is checked and cols.batch.to_pylist() == [dict(zip(cols.batch.schema.names, r)) for r in checked]
    again, errors = decode(payload(cols), NO_SINGLE)
    assert errors == [] and again.rows() == checked
    assert at_the_edge(RowType(ALL).check(rows)[0], ALL) is None


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(-300, 300), st.sampled_from(["ab", "abcd", None]),
                          st.one_of(st.none(), st.floats(allow_nan=False))), max_size=30))
def test_bad_values_are_refused_naming_the_rows_the_row_path_names(rows):
    schema = Schema("T", (Field("b", FieldType.BYTE), Field("str", FieldType.STRING, 3),
                          Field("d", FieldType.DOUBLE)))
    batch = pa.record_batch({"b": pa.array([r[0] for r in rows], pa.int64()),
                             "str": pa.array([r[1] for r in rows], pa.string()),
                             "d": pa.array([r[2] for r in rows], pa.float64())})
    cols, errors = check(batch, schema)
    good, row_errors = RowType(schema).check(rows)
    assert cols.rows() == good
    assert [(e.row, e.field) for e in errors] == [(e.row, e.field) for e in row_errors]


def test_a_batch_with_columns_the_schema_lacks_or_misses_is_refused_whole():
    schema = Schema("T", (Field("a", FieldType.INT), Field("b", FieldType.INT)))
    rows, errors = RowType(schema).decode_payload(payload(from_rows([(1, 2)], Schema("U", (
        Field("a", FieldType.INT), Field("c", FieldType.INT))))), ARROW)
    assert len(rows) == 0 and errors[0].field == "c" and "not a field of schema T" in errors[0].reason
    rows, errors = RowType(schema).decode_payload(b"\xc4\x03abc", ARROW)
    assert len(rows) == 0 and "not an Arrow IPC stream" in errors[0].reason
    cols, _ = decode(payload(from_rows([(2, 1)], schema)), schema)
    assert cols.rows() == [(2, 1)] and arrow_schema(schema).names == ["a", "b"]


def columns_of(schema: Schema, rows: list[tuple]) -> Columns:
    cols, errors = check(from_rows(rows, schema).batch, schema)
    assert not errors
    return cols


KINDS: set[str] = set()  # what the boxes emitted: rows (list) or Columns


def feed(op, data: dict[str, list[tuple]], cut: list[int], columns: bool, sign: int | None = None) -> list:
    """Every relation's rows in batches of the sizes ``cut`` repeats; every change the box emitted, in order."""
    emitted = []
    for port, name in enumerate(("customer", "orders", "lineitem")):
        rows = wire(data[name])
        if sign is not None:
            rows = [(sign, *row) for row in rows]
        i = k = 0
        while i < len(rows):
            part = rows[i:i + cut[k % len(cut)]]
            i, k = i + len(part), k + 1
            batch = columns_of(op.inputs[port], part) if columns else part
            for out, changed in op.process(port, batch, 0.0):
                KINDS.add(type(changed).__name__)
                emitted.append((out, sorted(changes(changed))))
    return emitted


@pytest.mark.parametrize("backend", ["native", "python"])
@settings(max_examples=8, deadline=None)
@given(st.lists(st.integers(1, 120), min_size=1, max_size=4), st.integers(0, 50))
def test_an_m3_box_fed_columns_keeps_what_it_keeps_fed_rows(backend, cut, seed):
    if backend == "native":
        skip_without_native()
    data = q3_rows(seed, customers=15, orders=60, items=200)
    make = q3_operator(q3_app(backend=backend))
    by_rows, by_columns = make(), make()
    by_rows.columns_out = False  # its view changes as Runtime.changes() finds them, emitted as rows
    KINDS.clear()
    from_columns = feed(by_columns, data, cut, columns=True)
    assert KINDS == {"Columns"}  # a changelog (native: read from the journals in bulk)
    assert from_columns == feed(by_rows, data, cut, columns=False)
    assert by_columns.runtime.state() == by_rows.runtime.state()
    assert by_columns.runtime.view("Q1") == pytest.approx(duckdb_q3(data))


@settings(max_examples=5, deadline=None)
@given(st.lists(st.integers(1, 90), min_size=1, max_size=3))
def test_signs_in_columns_insert_and_delete_as_in_rows(cut):
    data = q3_rows(3, customers=15, orders=60, items=200)
    make = q3_operator(q3_app(sign=True))
    by_rows, by_columns = make(), make()
    by_rows.columns_out = False
    for sign, part in ((1, data), (-1, {name: rows[::3] for name, rows in data.items()})):
        assert feed(by_columns, part, cut, True, sign) == feed(by_rows, part, cut, False, sign)
    assert by_columns.runtime.state() == by_rows.runtime.state()
    left = {name: [r for i, r in enumerate(rows) if i % 3] for name, rows in data.items()}
    assert by_columns.runtime.view("Q1") == pytest.approx(duckdb_q3(left))
    odd = columns_of(by_columns.inputs[2], [(0, *wire([data["lineitem"][1]])[0])])
    assert by_columns.process(2, odd, 0.0) == [] and by_columns.ignored == 1
    assert date_of(0).year == 1970


SHAPES = {
    "one int key": "SELECT k, SUM(v) AS s FROM t GROUP BY k",
    "a string key and a date key": "SELECT name, day, SUM(v * 2) AS s FROM t GROUP BY name, day",
    "an average (numerator over denominator)": "SELECT name, AVG(x) AS a FROM t GROUP BY name",
    "no key": "SELECT SUM(x) AS total, COUNT(*) AS n FROM t",
    "a double key": "SELECT x, COUNT(*) AS n FROM t GROUP BY x",
}


def shape_operator(sql: str):
    from boreas.catalog import Catalog, plan_submission, read_document
    from boreas.catalog.validate import stream_schemas
    from boreas.m3.boxtype import box_types
    from boreas.node.operators import build_operator

    text = f"""<borealis><input stream="T" schema="TT"/><output stream="Out"/>
      <schema name="TT"><field name="sign" type="int"/><field name="k" type="int"/><field name="name" type="string" size="6"/>
        <field name="day" type="timestamp"/><field name="v" type="int"/><field name="x" type="double"/></schema>
      <box name="q" type="m3"><in stream="T"/><out stream="Out"/><parameter name="sign-field" value="sign"/>
        <parameter name="sql" value="CREATE STREAM t(k INT, name VARCHAR(6), day DATE, v INT, x DOUBLE);&#10;{sql}"/>
      </box></borealis>"""
    types = box_types()
    plan = plan_submission(Catalog(), [read_document(text, "shape.xml")], types)
    assert plan.ok, plan.problems
    schemas = stream_schemas(plan.catalog, types)
    box = plan.catalog.boxes["q"]
    return lambda: build_operator(box, [schemas["T"]], [schemas["Out"]])


events = st.lists(st.tuples(st.sampled_from([1, 1, 1, -1]), st.integers(-3, 3), st.sampled_from(["a", "bb", "ccc"]),
                            st.sampled_from([0, 86_400_000_000 * 9000, -86_400_000_000 * 3 + 5]),
                            st.integers(-10, 10), st.sampled_from([0.5, -2.25, 0.0, 3.0])), min_size=1, max_size=60)


@pytest.mark.parametrize("shape", sorted(SHAPES))
@settings(max_examples=15, deadline=None)
@given(st.lists(events, min_size=1, max_size=4))
@example([[(1, 0, "a", 0, 0, 0.5)], [(-1, 0, "a", 0, 0, 0.5)]])  # a keyless SUM back to NULL over no rows
def test_view_changes_read_as_columns_are_the_rows_runtime_changes_finds(shape, batches):
    skip_without_native()
    make = shape_operator(SHAPES[shape])
    by_rows, by_columns = make(), make()
    by_rows.columns_out = False
    schema = by_columns.inputs[0]
    for rows in batches:
        got = by_columns.process(0, columns_of(schema, rows), 0.0)
        want = by_rows.process(0, rows, 0.0)
        assert all(isinstance(changed, Columns) for _, changed in got)
        assert sorted((port, sorted(changes(changed), key=repr)) for port, changed in got) == \
            sorted((port, sorted(changes(changed), key=repr)) for port, changed in want)  # (a keyless SUM: None)
