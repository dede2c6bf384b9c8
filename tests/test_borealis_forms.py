"""Issue 15, "Real Borealis files": forms the Borealis parser accepts beyond the DTD's order.

Each form is built from a real example (/work/shared/borealis/move_Move.xml)
and checked against the shared DTD first, to show that the DTD's content
model refuses it while the original parser (which reads each kind of child
wherever it is) accepts it; then Boreas must read it, validate it, and
carry it through the store, export and update XML unchanged.

Array field types and <type> aliases: tests/test_borealis_arrays.py.
"""

from __future__ import annotations

import itertools

import pytest
from lxml import etree

from boreas.catalog import ValidationFailed, read_document
from support.borealis_forms import PARSER, accepted, add, carried_unchanged, dtd_content_errors, example, line_of, text


# -- a box's parameters and accesses before its outs ------------------------------------


def box_with(children_order: list[str], access: bool = False) -> str:
    """The example with box1's children in the given order (in, out, parameter, access)."""
    root = example()
    box = root.find("box")
    if access:
        add(root, '<table name="seen" schema="PacketTuple"><key field="time"/></table>')
        add(box, '<access table="seen"/>')
    by_tag = {c.tag: c for c in box if isinstance(c.tag, str)}
    for child in list(box):
        box.remove(child)
    for tag in children_order:
        box.append(by_tag[tag])
    return text(root)


@pytest.mark.parametrize("order, access", [
    (["in", "parameter", "out"], False),
    (["in", "access", "out", "parameter"], True),
    (["in", "parameter", "access", "out"], True),
])
def test_box_parameters_and_accesses_before_outs(order, access):
    doc = box_with(order, access)
    assert any("Element box content does not follow the DTD" in m
               for m in dtd_content_errors(etree.fromstring(doc, PARSER)))
    catalog = accepted(doc)
    box = catalog.boxes["box1"]
    assert box.outputs == ("Result",) and box.param("expression.0") == "1=1"
    assert box.access == (("seen",) if access else ())
    assert catalog.boxes == accepted(box_with(["in", "out", "parameter", *(["access"] if access else [])],
                                              access)).boxes
    carried_unchanged(catalog)


def test_box_outs_and_parameters_interleave_and_ports_keep_their_order():
    doc = """<borealis><input stream="A" schema="S"/>
      <schema name="S"><field name="x" type="int"/></schema>
      <box name="split" type="filter"><in stream="A"/>
        <parameter name="expression.0" value="x &gt; 1"/><out stream="Big"/>
        <parameter name="pass-on-false-port" value="1"/><out stream="Small"/>
      </box></borealis>"""
    assert accepted(doc).boxes["split"].outputs == ("Big", "Small")


@pytest.mark.parametrize("doc, where, why", [
    ('<borealis><box name="b" type="filter"><parameter name="p" value="1"/><in stream="A"/>'
     '<out stream="B"/></box></borealis>', "/borealis/box/parameter", "unexpected child element <parameter>"),
    ('<borealis><box name="b" type="filter"><in stream="A"/><out stream="B"/><in stream="C"/></box></borealis>',
     "/borealis/box/in[2]", "unexpected child element <in>"),
])
def test_other_box_orders_keep_their_refusal(doc, where, why):
    with pytest.raises(ValidationFailed) as failed:
        read_document(doc, "bad.xml")
    [problem] = failed.value.diagnostics
    assert (problem.file, problem.line, problem.path) == ("bad.xml", 1, where)
    assert why in problem.reason


# -- a table's indexes before its keys --------------------------------------------------


def table_doc(children: str) -> str:
    root = example()
    add(root, f'<table name="seen" schema="PacketTuple" stream="Packet">{children}</table>')
    return text(root)


def test_table_indexes_before_keys():
    doc = table_doc('<index field="value"/><key field="time"/><index field="time"/><key field="value"/>'
                    '<parameter name="truncate" value="1"/>')
    assert any("Element table content does not follow the DTD" in m
               for m in dtd_content_errors(etree.fromstring(doc, PARSER)))
    catalog = accepted(doc)
    table = catalog.tables["seen"]
    assert table.keys == ("time", "value") and table.indexes == ("value", "time")
    assert table.params == (("truncate", "1"),)
    carried_unchanged(catalog)


@pytest.mark.parametrize("children, why", [
    ('<index field="value"/>', "incomplete content of <table> (expected <key>)"),
    ('<parameter name="truncate" value="1"/><key field="time"/>', "unexpected child element <parameter>"),
])
def test_a_table_still_needs_a_key_and_parameters_last(children, why):
    doc = table_doc(children)
    with pytest.raises(ValidationFailed) as failed:
        read_document(doc, "t.xml")
    [problem] = failed.value.diagnostics
    assert (problem.file, problem.line) == ("t.xml", line_of(doc, "<table")) and why in problem.reason


# -- connection point views: children in any order, <radius> -----------------------------

VIEW_CHILDREN = ['<order field="time"/>', '<radius value="5"/>', '<size value="10"/>',
                 '<parameter name="p" value="1"/>']


def view_doc(children: list[str]) -> str:
    root = example()
    box_in = root.find("box/in")
    box_in.set("connection_point_view", "recent")
    add(root, f'<connection_point_view name="recent" stream="Packet">{"".join(children)}'
              f'</connection_point_view>')
    return text(root)


@pytest.mark.parametrize("children", list(itertools.permutations(VIEW_CHILDREN)),
                         ids=lambda c: "-".join(etree.fromstring(x).tag for x in c))
def test_connection_point_view_children_in_any_order(children):
    catalog = accepted(view_doc(list(children)))
    view = catalog.views["recent"]
    assert (view.size, view.range, view.order_field, view.radius) == (10, None, "time", 5)
    assert view.params == (("p", "1"),)
    carried_unchanged(catalog)


def test_the_dtd_refuses_what_the_borealis_parser_reads():
    doc = view_doc(['<order field="time"/>', '<radius value="5"/>', '<range start="3" end="10"/>'])
    errors = dtd_content_errors(etree.fromstring(doc, PARSER))
    assert any("No declaration for element radius" in m for m in errors)
    assert any("Element connection_point_view content does not follow the DTD" in m for m in errors)
    assert accepted(doc).views["recent"].range == ("3", "10")


@pytest.mark.parametrize("children, why", [
    (['<order field="time"/>'], "needs exactly one of <size value=...> (the last N tuples) or <range"),
    (['<size value="1"/>', '<range start="1" end="2"/>'], "needs exactly one of <size"),
    (['<size value="1"/>', '<order field="time"/>', '<order field="value"/>'], "has 2 <order> elements"),
    (['<radius value="1"/>', '<size value="1"/>', '<radius value="2"/>'], "has 2 <radius> elements"),
    (['<radius value="wide"/>', '<size value="1"/>'], "<radius> attribute value='wide' is not a whole number"),
])
def test_a_view_with_the_wrong_children_is_refused_naming_file_line_element(children, why):
    doc = view_doc(children)
    with pytest.raises(ValidationFailed) as failed:
        read_document(doc, "v.xml")
    [problem] = failed.value.diagnostics
    assert (problem.file, problem.path) == ("v.xml", "/borealis/connection_point_view")
    assert problem.line == line_of(doc, "<connection_point_view") and why in problem.reason


def test_a_doctype_naming_the_dtd_is_never_loaded(tmp_path):
    # A DOCTYPE that names a real DTD with a default attribute: were it
    # loaded, every <box> would gain node=":15999".
    (tmp_path / "evil.dtd").write_text('<!ATTLIST box node CDATA ":15999">')
    doc = box_with(["in", "parameter", "out"]).replace(
        "<borealis>", f'<!DOCTYPE borealis SYSTEM "{tmp_path / "evil.dtd"}">\n<borealis>', 1)
    assert "evil.dtd" in doc
    assert accepted(doc).boxes["box1"].node is None
