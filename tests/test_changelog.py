"""Changelog streams (issue 30 item 2): weights on batches, passed by filter, map and union, applied by
aggregate and m3, refused by the boxes that cannot apply them.

The oracle for filter, map and union is each row on its own: a weighted row
goes where the row path sends the row and keeps its weight, so Hypothesis
draws weighted batches (the edgy values of test_columnar_operators.py,
weights of either sign and multiplicities) and compares.
"""

from __future__ import annotations

import pyarrow as pa
import pytest
from boreas.catalog import Catalog, plan_submission, read_document
from boreas.catalog.model import Box, Field, FieldType, InPort, Schema
from boreas.m3.boxtype import box_types
from boreas.node.operators.union import UnionOperator
from boreas.wire.columns import Columns, WEIGHT, arrow_schema, check, decode, payload
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.changelog import changes
from support.operators import same
from support.property_scale import examples
from test_columnar_operators import ON_COLUMNS, ON_ROWS, VALUES_ON_COLUMNS, VALUES_ON_ROWS, R, batches, build

weights = st.sampled_from([1, 1, -1, -1, 2, -3])


@st.composite
def weighted_batches(draw) -> Columns:
    columns = draw(batches())
    n = columns.batch.num_rows
    return Columns(columns.batch, weights=pa.array(draw(st.lists(weights, min_size=n, max_size=n)), pa.int64()))


def normal(pairs: list) -> list:
    return [(tuple(same(v) for v in row), w) for row, w in pairs]


def each_row(op, columns: Columns) -> dict[int, list]:
    """What the row path makes of each row alone, with the row's weight: the changelog's semantics (each value
    as its out field holds it in Arrow; one it cannot hold, a map's int beyond int64, is null)."""
    want: dict[int, list] = {}
    for row, weight in changes(columns):
        for port, out in op.process(0, [row], 0.0):
            types = arrow_schema(op.outputs[port]).types
            want.setdefault(port, []).extend((tuple(held(v, t) for v, t in zip(r, types)), weight) for r in out)
    return want


def held(value, kind: pa.DataType):
    try:
        return pa.scalar(value, kind).as_py()
    except (OverflowError, pa.ArrowInvalid, pa.ArrowTypeError):
        return None


def emitted(op, columns: Columns) -> dict[int, list]:
    got: dict[int, list] = {}
    for port, out in op.process(0, columns, 0.0):
        assert isinstance(out, Columns) and out.weights is not None  # a changelog stays one
        assert out.batch.schema.equals(arrow_schema(op.outputs[port]))
        got.setdefault(port, []).extend(changes(out))
    return got


@settings(max_examples=examples(120), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(columns=weighted_batches(), predicates=st.lists(st.sampled_from(ON_COLUMNS + ON_ROWS), min_size=1, max_size=3),
       false_port=st.booleans())
def test_filter_passes_each_rows_weight_to_where_the_row_goes(columns, predicates, false_port):
    params = {f"expression.{i}": p for i, p in enumerate(predicates)}
    params["pass-on-false-port"] = "1" if false_port else "0"
    op = build("filter", params, outs=len(predicates) + false_port)
    got, want = emitted(op, columns), each_row(op, columns)
    assert {p: normal(v) for p, v in got.items()} == {p: normal(v) for p, v in want.items()}


@settings(max_examples=examples(120), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(columns=weighted_batches(), picked=st.lists(st.sampled_from(VALUES_ON_COLUMNS + VALUES_ON_ROWS),
                                                   min_size=1, max_size=3))
def test_map_keeps_each_rows_weight(columns, picked):
    params = {}
    for i, e in enumerate(picked):
        params[f"expression.{i}"], params[f"output-field-name.{i}"] = e, f"f{i}"
    op = build("map", params)
    if not columns.batch.num_rows:
        assert op.process(0, columns, 0.0) == []
        return
    got, want = emitted(op, columns), each_row(op, columns)
    assert {p: normal(v) for p, v in got.items()} == {p: normal(v) for p, v in want.items()}


@settings(max_examples=examples(40), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(columns=weighted_batches())
def test_union_passes_weights_under_its_out_names(columns):
    out = Schema("Out", tuple(Field(f"o{i}", f.type, f.size) for i, f in enumerate(R.fields)))
    op = UnionOperator(Box("u", "union", (InPort("x"), InPort("y")), ("out",), ()), [R, R], [out])
    got = op.process(1, columns, 0.0)
    if not columns.batch.num_rows:
        assert got == []
        return
    assert normal(changes(got[0][1])) == normal(changes(columns)) and got[0][1].batch.schema.names[0] == "o0"


# -- the representation --------------------------------------------------------------------

S = Schema("S", (Field("k", FieldType.INT), Field("name", FieldType.STRING, 4)))


def test_weights_travel_as_a_column_after_the_fields_and_come_back_as_weights():
    batch = pa.RecordBatch.from_arrays([pa.array([1, 2], pa.int32()), pa.array(["a", "b"])], schema=arrow_schema(S))
    signed = Columns(batch, weights=pa.array([-1, 1], pa.int64()))
    back, errors = decode(payload(signed), S)
    assert not errors and back.rows() == [(1, "a"), (2, "b")] and back.weight_list() == [-1, 1]
    assert back.ipc() == signed.ipc()  # the same bytes go on
    plain, _ = decode(payload(Columns(batch)), S)
    assert plain.weights is None and plain.weight_list() == [1, 1]


def test_a_publishers_weight_column_is_checked_like_a_field():
    table = pa.table({"name": ["a", "b", "c"], "k": [1, 2, 3], WEIGHT: pa.array([1.0, None, -1.0])})
    got, errors = check(table, S)
    assert got.rows() == [(1, "a"), (3, "c")] and got.weight_list() == [1, -1]
    assert [(e.row, e.field, e.reason) for e in errors] == [(1, WEIGHT, "missing")]


# -- refusals at submission ----------------------------------------------------------------

APP = """<borealis>
  <schema name="S"><field name="k" type="int"/><field name="v" type="int"/></schema>
  <schema name="L"><field name="k" type="int"/><field name="v" type="long"/></schema>
  <input stream="R" schema="S"/><input stream="P" schema="S"/><input stream="PL" schema="L"/>
  <box name="view" type="m3"><in stream="R"/><out stream="V"/>
    <parameter name="sql" value="CREATE STREAM r(k INT, v INT);&#10;SELECT k, SUM(v) AS v FROM r GROUP BY k"/></box>
  <box name="big" type="filter"><in stream="V"/><out stream="F"/><parameter name="expression.0" value="v &gt; 1"/></box>
  {more}
</borealis>"""


def problems(more: str) -> list[str]:
    plan = plan_submission(Catalog(), [read_document(APP.format(more=more), "app.xml")], box_types())
    return [p.reason for p in plan.problems]


def test_a_schema_cannot_name_a_field_as_the_weights_column():
    text = APP.format(more="").replace('<field name="v" type="int"/></schema>',
                                       '<field name="v" type="int"/><field name="_weight" type="int"/></schema>', 1)
    plan = plan_submission(Catalog(), [read_document(text, "app.xml")], box_types())
    assert any("schema 'S': field name '_weight' is reserved for a changelog's weights" in p.reason and p.line == 2
               for p in plan.problems), plan.problems


def test_a_chain_of_boxes_that_apply_or_pass_weights_is_accepted():
    assert problems("""<box name="m" type="map"><in stream="F"/><out stream="M"/>
        <parameter name="expression.0" value="v * 2"/><parameter name="output-field-name.0" value="w"/></box>
      <box name="a" type="aggregate"><in stream="M"/><out stream="A"/><parameter name="window-size-by" value="VALUES"/>
        <parameter name="order-on-field" value="w"/><parameter name="window-size" value="100"/>
        <parameter name="aggregate-function.0" value="sum(w)"/><parameter name="aggregate-function.1" value="max(w)"/></box>
      <box name="u" type="union"><in stream="A"/><out stream="T"/></box>""") == []


@pytest.mark.parametrize("box, reason", [
    ("""<box name="d" type="delay"><in stream="F"/><out stream="D"/><parameter name="delay-ms" value="5"/></box>""",
     "delay box 'd' cannot read stream 'F': it is a changelog (rows with weights: m3 box 'view' revises its view's "
     "rows as -old/+new), and a delay box cannot apply weights"),
    ("""<box name="j" type="join"><in stream="F"/><in stream="P"/><out stream="J"/>
        <parameter name="predicate" value="left.k = right.k"/><parameter name="left-buffer-size" value="5"/>
        <parameter name="right-buffer-size" value="5"/></box>""",
     "join box 'j' cannot read stream 'F'"),
    ("""<box name="r" type="random_drop"><in stream="V"/><out stream="D"/><parameter name="drop_rate" value="0.5"/></box>""",
     "random_drop box 'r' cannot read stream 'V'"),
    ("""<box name="u" type="union"><in stream="F"/><in stream="PL"/><out stream="U"/></box>""",
     "union box 'u' cannot read stream 'F': it is a changelog (rows with weights: m3 box 'view' revises its view's "
     "rows as -old/+new), and it also reads plain stream 'PL', whose rows carry no weights"),
    ("""<box name="a" type="aggregate"><in stream="F"/><out stream="A"/><parameter name="window-size-by" value="TUPLES"/>
        <parameter name="window-size" value="2"/><parameter name="aggregate-function.0" value="sum(v)"/></box>""",
     "windows by TUPLES count rows as they arrive, which a retraction cannot undo (use VALUES)"),
    ("""<box name="a" type="aggregate"><in stream="F"/><out stream="A"/><parameter name="window-size-by" value="VALUES"/>
        <parameter name="order-on-field" value="k"/><parameter name="window-size" value="2"/>
        <parameter name="aggregate-function.0" value="lastval(v)"/></box>""",
     "aggregate-function.0='lastval(v)' depends on the order rows arrived in"),
])
def test_a_box_that_cannot_apply_weights_is_refused_naming_box_and_stream(box, reason):
    found = problems(box)
    assert len(found) == 1 and reason in found[0], found
