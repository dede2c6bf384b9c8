"""Issue 15, "Real Borealis files": array field types and <type> aliases.

Array field types are accepted and carried, and refused where Boreas's
data plane would have to carry array values, naming file, line, element
and why.  (Split from tests/test_borealis_forms.py, the element orders the
Borealis parser accepts beyond the DTD's.)
"""

from __future__ import annotations

import pytest
from lxml import etree

from boreas.catalog import ValidationFailed, open_store, read_document
from boreas.catalog.slices import node_slice, stream_route
from boreas.catalog.schemas_of import schemas_of
from boreas.catalog.submission import apply_submission, read_catalog
from support.borealis_forms import PARSER, accepted, carried_unchanged, dtd_content_errors, line_of, plan


# -- array field types and <type> aliases --------------------------------------------------

VIDEO = """<?xml version="1.0"?>
<!DOCTYPE borealis SYSTEM "../../../src/src/borealis.dtd">
<borealis>
    <type name="image" array="byte(0...319, 0...239, 0...2)"/>
    <input stream="Video" schema="Frame"/>
    <schema name="Frame">
        <field name="time"   type="int"/>
        <field name="pixels" type="byte(0...319, 0...239, 0...2)"/>
        <field name="thumb"  type="image"/>
        <field name="grid"   type="short(4, 1...8)"/>
    </schema>
    <output stream="Video"/>
</borealis>
"""


def test_array_types_are_what_the_dtd_documents_but_does_not_declare():
    errors = dtd_content_errors(etree.fromstring(VIDEO.encode(), PARSER))
    assert any("not among the enumerated set" in m for m in errors)


def test_array_fields_and_type_aliases_are_accepted_and_carried_through_the_catalog():
    catalog = accepted(VIDEO)
    fields = {f.name: f for f in catalog.schemas["Frame"].fields}
    assert fields["time"].array is None and fields["time"].type.value == "int"
    assert (fields["pixels"].type, fields["pixels"].array) == (None, "byte(0...319, 0...239, 0...2)")
    assert (fields["thumb"].type, fields["thumb"].array) == (None, "image")
    assert fields["grid"].array == "short(4, 1...8)"
    assert catalog.types["image"].array == "byte(0...319, 0...239, 0...2)"
    carried_unchanged(catalog)
    route = stream_route(catalog, "Video")
    assert route["entries"] == []  # no node takes it: nothing can publish array values into Boreas
    assert ["pixels", "byte(0...319, 0...239, 0...2)", None] in route["schema"]["fields"]


def test_arrays_survive_a_real_store(tmp_path):
    store = open_store(f"sqlite:///{tmp_path}/c.db")
    try:
        applied = apply_submission(store, [read_document(VIDEO, "video.xml")])
        assert read_catalog(store) == applied.after
    finally:
        store.close()


def test_an_alias_declared_in_an_earlier_submission_is_used_later():
    first = accepted('<borealis><type name="image" array="byte(0...9, 0...9)"/></borealis>')
    later = plan('<borealis><schema name="F"><field name="p" type="image"/></schema></borealis>', base=first)
    assert later.ok, later.problems


def test_inline_array_spellings_are_kept_in_one_canonical_form():
    catalog = accepted('<borealis><schema name="F"><field name="p" type="byte( 0 ... 9,3 )"/></schema></borealis>')
    assert catalog.schemas["F"].fields[0].array == "byte(0...9, 3)"


def reading_box(extra: str = "") -> str:
    """VIDEO with a filter box reading the array-carrying stream (its predicate reads only time)."""
    return VIDEO.replace('<output stream="Video"/>', f"""<output stream="Late"/>
    <box name="late" type="filter">
        <in stream="Video"/>
        <out stream="Late"/>
        <parameter name="expression.0" value="time &gt; 10"/>
    </box>{extra}""")


def test_a_box_reading_an_array_stream_carries_it_with_aliases_resolved():
    """The data plane carries arrays (docs/operators.md, "Array fields"): the filter reads only time and
    passes every field on; a field typed by a <type> alias flows as the alias's array type."""
    catalog = accepted(reading_box())
    late = {f.name: f for f in schemas_of(catalog)["Late"].fields}
    assert late["pixels"].array == "byte(0...319, 0...239, 0...2)"
    assert late["thumb"].array == "byte(0...319, 0...239, 0...2)"  # (image, resolved)
    assert catalog.schemas["Frame"].field("thumb").array == "image"  # (the catalog keeps what was written)


def test_a_predicate_reading_an_array_is_refused_naming_the_field_and_why():
    doc = reading_box().replace("time &gt; 10", "pixels &gt; 10")
    [problem] = plan(doc).problems
    assert (problem.file, problem.line, problem.path) == ("app0.xml", line_of(doc, "<box"), "/borealis/box")
    assert "field 'pixels' is an array (byte(0...319, 0...239, 0...2)): expressions compare and compute on " \
           "scalar fields only" in problem.reason


def test_borealis_element_references_are_refused_with_what_they_meant():
    doc = reading_box().replace("time &gt; 10", "pixels-&gt;byte &gt; 10")
    [problem] = plan(doc).problems
    assert "'pixels->byte' is Borealis's array element reference" in problem.reason
    assert "Boreas runs none of those boxes" in problem.reason


def test_an_array_as_a_group_key_is_refused():
    doc = VIDEO.replace('<output stream="Video"/>', """<output stream="N"/>
    <box name="count" type="aggregate"><in stream="Video"/><out stream="N"/>
        <parameter name="aggregate-function.0" value="count()"/>
        <parameter name="window-size-by" value="TUPLES"/><parameter name="window-size" value="2"/>
        <parameter name="group-by" value="grid"/></box>""")
    [problem] = plan(doc).problems
    assert (problem.file, problem.line) == ("app0.xml", line_of(doc, "<box"))
    assert problem.reason.startswith("aggregate box 'count': parameter 'group-by' names field 'grid', an array "
                                     "(short(4, 1...8))")


def test_aggregating_an_array_is_refused():
    doc = VIDEO.replace('<output stream="Video"/>', """<output stream="N"/>
    <box name="top" type="aggregate"><in stream="Video"/><out stream="N"/>
        <parameter name="aggregate-function.0" value="max(grid)"/>
        <parameter name="window-size-by" value="TUPLES"/><parameter name="window-size" value="2"/></box>""")
    [problem] = plan(doc).problems
    assert "field 'grid' is an array (short(4, 1...8))" in problem.reason


def test_an_m3_box_reading_an_array_field_is_refused():
    from boreas.m3.boxtype import box_types

    doc = VIDEO.replace('<output stream="Video"/>', """<output stream="N"/>
    <box name="count" type="m3"><in stream="Video"/><out stream="N"/>
        <parameter name="sql" value="SELECT COUNT(*) FROM Video"/></box>""")
    [problem] = plan(doc, registry=box_types()).problems
    assert problem.reason.startswith("m3 box 'count' in port 0 reads stream 'Video'")
    assert "field 'pixels' is an array" in problem.reason and "m3 boxes do not carry array fields" in problem.reason


def test_publishing_and_subscribing_array_streams_is_accepted_but_not_arrays_of_strings():
    deploy = """<deploy>
        <publish stream="Video" node=":15000"/>
        <subscribe stream="Video" endpoint=":25000"/>
        <node endpoint=":15000" query=""/>
    </deploy>"""
    assert plan(VIDEO, deploy).ok
    result = plan(VIDEO.replace("short(4, 1...8)", "string(4)"), deploy)
    reasons = sorted(p.reason for p in result.problems)
    assert len(reasons) == 2, result.problems
    assert reasons[0].startswith("publish to stream 'Video': its field 'grid' is an array of strings")
    assert reasons[1].startswith("subscribe to stream 'Video': its field 'grid' is an array of strings")
    assert {(p.file, p.line) for p in result.problems} == {("app1.xml", 2), ("app1.xml", 3)}


def test_an_unknown_type_name_is_refused_at_its_field():
    doc = VIDEO.replace('type="image"', 'type="bool"')
    result = plan(doc)
    [problem] = result.problems
    assert (problem.file, problem.line) == ("app0.xml", line_of(doc, '<field name="thumb"'))
    assert problem.path == "/borealis/schema/field[3]"
    assert "field 'thumb' has type 'bool', which is neither a Borealis type" in problem.reason
    assert "aliases: image" in problem.reason


def test_float_is_refused_once_at_its_field_naming_the_types_and_double():
    """``type="float"`` passes the XSD (it could be an alias declared elsewhere); validation says what
    exists and suggests double, and a box, publish or subscribe on the stream does not call it an array."""
    doc = """<borealis>
    <input stream="In" schema="S"/>
    <schema name="S"><field name="x" type="float"/><field name="y" type="int"/></schema>
    <box name="f" type="filter"><in stream="In"/><out stream="Out"/>
        <parameter name="expression.0" value="y &gt; 1"/></box>
    <output stream="Out"/>
</borealis>"""
    deploy = """<deploy>
    <publish stream="In" node=":15000"/>
    <subscribe stream="Out" endpoint=":25000"/>
    <node endpoint=":15000" query="f"/>
</deploy>"""
    [problem] = plan(doc, deploy).problems
    assert (problem.file, problem.line, problem.path) == ("app0.xml", 3, "/borealis/schema/field[1]")
    assert problem.reason.startswith("schema 'S': field 'x' has type 'float', which is neither a Borealis "
                                     "type (byte, short, int, long, single, double, string, timestamp)")
    assert problem.reason.endswith("did you mean 'double' (or 'single', 32 bits)?")


@pytest.mark.parametrize("field_type, why", [
    ("byte(0...319", "bad value type='byte(0...319' on <field>: not a Borealis type"),
    ("bool(2)", "element type 'bool' is not one of"),
    ("byte(9...1)", "dimension 1 runs from 9 down to 1"),
    ("byte(int, 0...2)", "dimension 1 'int' is sparse"),
    ("byte(2, 0...*)", "only the leftmost dimension may be"),
    ("aShip(0...*)", "an array of tuples, whose element type names a <schema>, is not carried"),
])
def test_malformed_array_types_are_refused(field_type, why):
    doc = VIDEO.replace('type="short(4, 1...8)"', f'type="{field_type}"')
    with pytest.raises(ValidationFailed) as failed:
        read_document(doc, "v.xml")
    [problem] = failed.value.diagnostics
    assert (problem.file, problem.line) == ("v.xml", line_of(doc, '<field name="grid"'))
    assert problem.path == "/borealis/schema/field[4]" and why in problem.reason


@pytest.mark.parametrize("alias, why", [
    ('<type name="int" array="byte(2)"/>', "would hide the Borealis type 'int'"),
    ('<type name="t" array="bool(2)"/>', "element type 'bool' is not one of"),
    ('<type name="t" array="byte(2"/>', "is not element(dimension, ...)"),
])
def test_bad_type_declarations_are_refused(alias, why):
    with pytest.raises(ValidationFailed) as failed:
        read_document(f"<borealis>\n{alias}\n</borealis>", "t.xml")
    [problem] = failed.value.diagnostics
    assert (problem.file, problem.line, problem.path) == ("t.xml", 2, "/borealis/type")
    assert why in problem.reason


def test_a_node_slice_carries_the_aliases_its_schemas_name():
    doc = VIDEO.replace('<output stream="Video"/>', """<table name="frames" schema="Frame">
        <key field="time"/></table>""")
    catalog = accepted(doc)
    placed = plan('<deploy><node endpoint=":15000" query="frames"/></deploy>', base=catalog)
    assert placed.ok, placed.problems
    part = node_slice(placed.catalog, "localhost:15000")
    assert "Frame" in part.schemas and part.types == {"image": catalog.types["image"]}
