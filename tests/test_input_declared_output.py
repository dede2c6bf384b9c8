"""Issue 35 item 5: an ``<input>`` naming a stream a box writes declares that stream's schema.

Borealis's own test suite has files (its delta-processing and array
examples) that list a box's out stream among the ``<input>``s; Borealis
reads that as the stream's schema, the box being its producer.  Boreas
accepts the form, checks the declared schema against the box's inferred
out schema, keeps ordinary inputs as they were, and refuses publishing to
such a stream with the reason.
"""

from __future__ import annotations

from boreas.catalog import Catalog, plan_submission, read_document
from boreas.catalog.elements import catalog_from_elements, to_elements
from boreas.catalog.export import export_application
from boreas.catalog.index import CatalogIndex
from boreas.catalog.slices import node_slice

NODE = "localhost:15100"


def app(inputs: str, *, extra: str = "") -> str:
    """Packet -> filter ``cut`` -> Cut -> filter ``keep`` -> Result, with ``inputs`` declared."""
    return f"""<borealis>
  <schema name="packet"><field name="id" type="int"/><field name="value" type="double"/></schema>
  <schema name="narrow"><field name="id" type="int"/></schema>
{inputs}
  <output stream="Result" schema="packet"/>
  <box name="cut" type="filter"><in stream="Packet"/><out stream="Cut"/>
    <parameter name="expression.0" value="value &gt; 1.0"/></box>
  <box name="keep" type="filter"><in stream="Cut"/><out stream="Result"/>
    <parameter name="expression.0" value="id &gt; 0"/></box>
  {extra}
</borealis>"""


def deployment(publish: str = "") -> str:
    return f"""<deploy><node endpoint="{NODE}" query="q"/>{publish}</deploy>"""


def with_query(text: str) -> str:
    """The boxes inside ``<query name="q">``, which the deployment places."""
    start, end = text.index('<box name="cut"'), text.rindex("</box>") + len("</box>")
    return f'{text[:start]}<query name="q">{text[start:end]}</query>{text[end:]}'


def plan(*texts: str, base: Catalog | None = None):
    return plan_submission(base or Catalog(), [read_document(t, f"app{i}.xml") for i, t in enumerate(texts)])


BOTH = '  <input stream="Packet" schema="packet"/>\n  <input stream="Cut" schema="packet"/>'


def test_input_of_a_box_stream_is_accepted_as_its_declaration():
    result = plan(app(BOTH))
    assert result.ok, result.problems
    catalog = result.catalog
    assert set(catalog.inputs) == {"Packet"}  # the one published input
    assert [p.box for p in catalog.producers()["Cut"]] == ["cut"]  # the box is the producer
    assert catalog.outputs["Cut"].schema == "packet"  # the <input> is its schema's declaration


def test_declared_schema_is_checked_against_the_box_out_schema():
    declared_narrow = '  <input stream="Packet" schema="packet"/>\n  <input stream="Cut" schema="narrow"/>'
    result = plan(app(declared_narrow))
    assert not result.ok
    [problem] = [str(p) for p in result.problems]
    assert problem.startswith("app0.xml:5:"), problem  # the <input stream="Cut"> line
    assert "'Cut'" in problem and "'narrow'" in problem and "its producer yields" in problem
    assert "input stream 'Cut' (a box writes it: its <input> declares its schema)" in problem


def test_declaration_in_either_order_and_with_an_output_of_the_same_schema():
    reordered = app('  <input stream="Packet" schema="packet"/>').replace(
        "</borealis>", '<input stream="Cut" schema="packet"/><output stream="Cut" schema="packet"/></borealis>')
    result = plan(reordered)
    assert result.ok, result.problems
    assert "Cut" not in result.catalog.inputs and result.catalog.outputs["Cut"].schema == "packet"


def test_an_output_of_another_schema_contradicts_the_input():
    text = app(BOTH, extra='<output stream="Cut" schema="narrow"/>')
    result = plan(text)
    assert not result.ok
    assert any("input stream 'Cut' declares schema 'packet'" in str(p) and "'narrow'" in str(p)
               for p in result.problems), result.problems


def test_ordinary_inputs_are_unchanged():
    result = plan(app('  <input stream="Packet" schema="packet"/>'))
    assert result.ok, result.problems
    assert set(result.catalog.inputs) == {"Packet"} and "Cut" not in result.catalog.outputs
    # an input no box writes, and a plain unknown stream, are refused as before
    unwritten = plan(app(BOTH.replace('"Cut"', '"Spare"')))
    assert unwritten.ok and set(unwritten.catalog.inputs) == {"Packet", "Spare"}
    nowhere = plan(with_query(app('  <input stream="Packet" schema="packet"/>')),
                   deployment(f'<publish stream="Nowhere" node="{NODE}"/>'))
    assert any("publish to stream 'Nowhere', which is not an <input> stream" in str(p) for p in nowhere.problems)


def test_publishing_to_the_declared_stream_is_refused_with_the_reason():
    publish = f'<publish stream="Cut" node="{NODE}"/>'
    result = plan(with_query(app(BOTH)), deployment(publish))
    assert not result.ok
    [problem] = [str(p) for p in result.problems]
    assert "publish to stream 'Cut', which box 'cut' produces" in problem
    assert "only declares its schema" in problem
    fine = plan(with_query(app(BOTH)), deployment(f'<publish stream="Packet" node="{NODE}"/>'))
    assert fine.ok, fine.problems


def test_box_added_later_turns_a_stored_input_into_its_declaration():
    first = plan('<borealis><schema name="packet"><field name="id" type="int"/><field name="value" '
                 'type="double"/></schema><input stream="Cut" schema="packet"/></borealis>')
    assert first.ok and set(first.catalog.inputs) == {"Cut"}
    second = plan(app('  <input stream="Packet" schema="packet"/>'), base=first.catalog)
    assert second.ok, second.problems
    assert set(second.catalog.inputs) == {"Packet"} and second.catalog.outputs["Cut"].schema == "packet"


def test_slice_store_and_export_carry_the_stream_as_the_box_output():
    result = plan(with_query(app(BOTH)), deployment(f'<publish stream="Packet" node="{NODE}"/>'))
    assert result.ok, result.problems
    part = node_slice(result.catalog, NODE)
    assert set(part.inputs) == {"Packet"}  # Cut enters nowhere: the box writes it here
    assert "Cut" in part.outputs and not any(p.stream == "Cut" for p in part.publications.values())
    assert catalog_from_elements(to_elements(result.catalog)) == result.catalog
    again = plan(export_application(result.catalog))
    assert again.ok, again.problems
    assert again.catalog.outputs["Cut"] == result.catalog.outputs["Cut"]


def test_the_edit_loop_keeps_the_declaration_and_follows_a_new_schema():
    before = plan(app(BOTH)).catalog
    same = plan_submission(before, [read_document(app(BOTH), "app0.xml")], replacing=True)
    assert same.ok, same.problems
    assert same.catalog == before and "Cut" in same.changes.streams["kept"]
    narrowed = app(BOTH.replace('"Cut" schema="packet"', '"Cut" schema="narrow"'))
    refused = plan_submission(before, [read_document(narrowed, "app0.xml")], replacing=True)
    assert any("input stream 'Cut'" in str(p) and "declares schema 'narrow'" in str(p)
               for p in refused.problems), refused.problems


def test_the_incremental_check_agrees_with_the_whole_one():
    """The Head plans on its catalog's index: the declaration, a mismatch and a publish are judged alike."""
    first = plan('<borealis><schema name="packet"><field name="id" type="int"/><field name="value" '
                 'type="double"/></schema><schema name="narrow"><field name="id" type="int"/></schema>'
                 '<input stream="Cut" schema="narrow"/></borealis>').catalog
    index = CatalogIndex.build(first)
    for texts in ([app('  <input stream="Packet" schema="packet"/>')],
                  [with_query(app(BOTH)), deployment(f'<publish stream="Cut" node="{NODE}"/>')]):
        docs = [read_document(t, f"app{i}.xml") for i, t in enumerate(texts)]
        whole, indexed = plan_submission(first, docs), plan_submission(first, docs, index=index)
        assert whole.problems and list(map(str, indexed.problems)) == list(map(str, whole.problems))
