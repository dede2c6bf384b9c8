"""Issue 15 item 21: an ``m3`` box's relations are its in streams, by name.

``SELECT R.B, SUM(R.A * S.C) FROM R, S WHERE R.B = S.B GROUP BY R.B`` in a
box whose in streams are ``R`` and ``S`` compiles with the streams'
schemas, without a ``CREATE STREAM`` repeating them in the parameter; the
Head's validation and the node's operator both accept it.  ``CREATE
STREAM`` still renames (in port i feeds the i-th declared relation).
"""

from __future__ import annotations

import duckdb
import pytest

from boreas.catalog import Catalog, plan_submission, read_document
from boreas.catalog.validate import stream_schemas as catalog_stream_schemas
from boreas.m3.boxtype import box_types

BOX_TYPES = box_types()  # the registry the Head and the nodes pass: Borealis's types and m3


def stream_schemas(catalog):
    return catalog_stream_schemas(catalog, BOX_TYPES)
from boreas.node.operators import build_operator
from support.changelog import changes, follow

ITEM_21 = "SELECT R.B, SUM(R.A * S.C) FROM R, S WHERE R.B = S.B GROUP BY R.B"


def app(sql: str = ITEM_21, r: str = "R", s: str = "S", extra_field: str = "", sign: bool = False) -> str:
    """Streams ``r`` and ``s`` (schemas RT(A, B), ST(B, C)) into one m3 box writing ``Out``."""
    sign_field = '<field name="sign" type="int"/>' if sign else ""
    sign_param = '<parameter name="sign-field" value="sign"/>' if sign else ""
    return f"""<borealis>
  <input stream="{r}" schema="RT"/>
  <input stream="{s}" schema="ST"/>
  <schema name="RT"><field name="A" type="int"/><field name="B" type="int"/>{sign_field}{extra_field}</schema>
  <schema name="ST"><field name="B" type="int"/><field name="C" type="long"/>{sign_field}</schema>
  <box name="q" type="m3">
    <in stream="{r}"/>
    <in stream="{s}"/>
    <out stream="Out"/>
    <parameter name="sql" value="{sql}"/>{sign_param}
  </box>
  <output stream="Out"/>
</borealis>"""


def plan(text: str):
    return plan_submission(Catalog(), [read_document(text, "m3.xml")], BOX_TYPES)


def operator(text: str):
    result = plan(text)
    assert result.ok, result.problems
    schemas = stream_schemas(result.catalog)
    box = result.catalog.boxes["q"]
    return build_operator(box, [schemas[p.stream] for p in box.inputs], [schemas[o] for o in box.outputs])


def test_the_head_validates_sql_over_in_streams_by_name():
    result = plan(app())
    assert result.ok, result.problems
    out = stream_schemas(result.catalog)["Out"]
    # The key column, then the SUM of an int times a long: an INT-valued map, so long.
    assert [(f.name, f.type.value) for f in out.fields] == [("B", "int"), ("sum_1", "long")]


def test_the_node_runs_it_and_matches_duckdb():
    op = operator(app())
    r_rows = [(a, a % 3) for a in range(1, 12)]
    s_rows = [(b, c) for b in range(3) for c in (10, 2**40)]  # a long value: no overflow on the way
    view: dict[tuple, int] = {}
    for port, rows in ((0, r_rows[:5]), (1, s_rows), (0, r_rows[5:])):
        for _, out in op.process(port, rows, 0.0):
            follow(view, out, tuple, 1)  # the view's changelog: -old/+new
    con = duckdb.connect()
    con.execute("CREATE TABLE R(A BIGINT, B BIGINT)")
    con.execute("CREATE TABLE S(B BIGINT, C BIGINT)")
    con.executemany("INSERT INTO R VALUES (?, ?)", r_rows)
    con.executemany("INSERT INTO S VALUES (?, ?)", s_rows)
    expected = {(b,): int(total) for b, total in con.execute(ITEM_21).fetchall()}
    assert view == expected and view


def test_a_sign_field_is_not_a_column_and_deletes():
    op = operator(app(sign=True))
    op.process(1, [(1, 5, 1)], 0.0)
    [(_, rows)] = op.process(0, [(2, 1, 1), (3, 1, 1)], 0.0)
    assert changes(rows) == [((1, 25), 1)]
    [(_, rows)] = op.process(0, [(2, 1, -1)], 0.0)
    assert changes(rows) == [((1, 25), -1), ((1, 15), 1)]  # the row revised: -old, +new


def test_create_stream_still_renames_by_port():
    renamed = ("CREATE STREAM r(A INT, B INT); CREATE STREAM s(B INT, C INT); "
               "SELECT r.B, SUM(r.A * s.C) FROM r, s WHERE r.B = s.B GROUP BY r.B")
    # The streams have other names; the declarations name the relations.
    result = plan(app(renamed, r="Left", s="Right").replace('type="long"', 'type="int"'))
    assert result.ok, result.problems


def test_unknown_relation_names_the_in_streams():
    result = plan(app(ITEM_21.replace("FROM R, S", "FROM R, T")))
    assert not result.ok
    reason = result.problems[0].reason
    assert "m3 box 'q': parameter 'sql': unknown relation T (relations: R, S)" in reason
    assert result.problems[0].line == 6  # the <box>


def test_an_unknown_column_is_refused_with_its_position():
    reason = plan(app(ITEM_21.replace("S.C", "S.D"))).problems[0].reason
    assert "unknown column S.D" in reason and "(at line 1, col" in reason


@pytest.mark.parametrize("stream, why", [("Map", "not an SQL name"), ("R.x", "not an SQL name")])
def test_a_stream_name_that_is_no_sql_name_asks_for_create_stream(stream, why):
    result = plan(app(ITEM_21.replace("R.", f"{stream}.").replace("FROM R", f"FROM {stream}"), r=stream))
    reason = " ".join(p.reason for p in result.problems)
    assert why in reason and "CREATE STREAM" in reason


def test_the_same_stream_on_two_ports_asks_for_create_stream():
    text = app().replace('<in stream="S"/>', '<in stream="R"/>')
    reason = plan(text).problems[0].reason
    assert "in port 1 reads stream 'R', as in port 0 does" in reason


def test_a_filter_connected_before_a_port_keeps_the_relation_name_and_the_state():
    """A connect (load shedding inserts a filter on an arc) rewires the port to the filter's stream;
    the SQL still reads ``S``, and the maps carry over to the rebuilt box, as the node does it."""
    result = plan(app())
    schemas = stream_schemas(result.catalog)
    box = result.catalog.boxes["q"]
    op = operator(app())
    op.process(0, [(2, 1)], 0.0)
    rewired = box.rewired(1, "S_shed")
    assert rewired.in_name(1) == "S" and rewired.param("in-name.1") == "S"
    moved = build_operator(rewired, [schemas["R"], schemas["S"]], [schemas["Out"]])
    moved.restore(op.state())  # the same program: the relations kept their names
    [(_, rows)] = moved.process(1, [(1, 7)], 0.0)
    assert changes(rows) == [((1, 14), 1)]
    assert rewired.rewired(1, "S") == box  # the disconnect gives the declared box back


def test_a_view_grouped_by_a_string_gets_a_sized_string_field_every_slice_can_carry():
    """A string key column of a view takes its in stream field's size (a Borealis string needs one), so the
    slices of a node running the box are valid update XML."""
    from boreas.catalog.replicate import catalog_items
    from boreas.catalog.slices import node_slice
    from boreas.catalog.updates import update_document

    text = ('<borealis><input stream="R" schema="RT"/>'
            '<schema name="RT"><field name="g" type="string" size="12"/><field name="b" type="int"/></schema>'
            '<query name="v"><box name="q" type="m3"><in stream="R"/><out stream="Out"/>'
            '<parameter name="sql" value="SELECT g, SUM(b) AS s FROM R GROUP BY g"/></box></query>'
            '<output stream="Out"/></borealis>')
    deploy = '<deploy><node endpoint="localhost:15001" query="v"/></deploy>'
    result = plan_submission(Catalog(), [read_document(text, "app.xml"), read_document(deploy, "d.xml")], BOX_TYPES)
    assert result.ok, result.problems
    out = stream_schemas(result.catalog)["Out"]
    assert [(f.name, f.type.value, f.size) for f in out.fields] == [("g", "string", 12), ("s", "long", None)]
    box = result.catalog.boxes["q"]
    part = node_slice(result.catalog, box.node, BOX_TYPES)
    read_document(update_document(catalog_items(part)).encode(), "the node's update")  # valid: no error
