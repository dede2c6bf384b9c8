"""Revision boxes and Borealis's other box types at submission (issue 35): what is accepted, what is refused, why.

The applications here are written for these tests in the shape of Borealis's
revision tests (a quote stream with a ``revised_value`` field, an aggregate
feeding maps and filters, connection point views with a radius).
"""

from __future__ import annotations

import pytest
from boreas.catalog import Catalog, plan_submission, read_document
from boreas.catalog.changelog import changelog_streams
from boreas.catalog.schemas_of import schemas_of
from boreas.m3.boxtype import box_types

HEAD = """<borealis>
  <input stream="Quotes" schema="Quote"/>
  <schema name="Quote">
    <field name="time" type="int"/><field name="quote" type="string" size="4"/>
    <field name="price" type="int"/><field name="revised_value" type="string" size="4"/>
  </schema>
"""

CHAIN = HEAD + """
  <output stream="Cheap" schema="Priced"/>
  <schema name="Priced">
    <field name="quote" type="string" size="4"/><field name="time" type="int"/>
    <field name="price" type="int"/><field name="count" type="int"/><field name="revised_value" type="string" size="4"/>
  </schema>
  <query name="revisions">
    <box name="sums" type="revisionaggregate">
      <in stream="Quotes"/><out stream="Sums"/>
      <parameter name="aggregate-function.0" value="sum(price)"/>
      <parameter name="aggregate-function.1" value="count()"/>
      <parameter name="window-size-by" value="VALUES"/><parameter name="window-size" value="4"/>
      <parameter name="advance" value="2"/><parameter name="order-by" value="FIELD"/>
      <parameter name="order-on-field" value="time"/><parameter name="group-by" value="quote"/>
      <parameter name="processing-mode" value="UPSTREAM"/><parameter name="anchor" value="QuotesCP"/>
    </box>
    <box name="shift" type="revisionmap">
      <in stream="Sums"/><out stream="Shifted"/>
      <parameter name="expression.0" value="quote"/><parameter name="output-field-name.0" value="quote"/>
      <parameter name="inverse.0" value="quote"/>
      <parameter name="expression.1" value="time"/><parameter name="output-field-name.1" value="time"/>
      <parameter name="inverse.1" value="time"/>
      <parameter name="expression.2" value="agg_0 + 10"/><parameter name="output-field-name.2" value="price"/>
      <parameter name="inverse.2" value="price - 10"/>
      <parameter name="expression.3" value="agg_1"/><parameter name="output-field-name.3" value="count"/>
      <parameter name="inverse.3" value="count"/>
      <parameter name="processing-mode" value="DOWNSTREAM"/><parameter name="anchor" value="CheapCP, DearCP"/>
    </box>
    <box name="split" type="revisionfilter">
      <in stream="Shifted"/><out stream="Cheap"/><out stream="Dear"/>
      <parameter name="expression.0" value="price &lt; 100"/><parameter name="pass-on-false-port" value="1"/>
      <parameter name="processing-mode" value="DOWNSTREAM"/>
    </box>
  </query>
  <connection_point_view name="QuotesCP" stream="Quotes">
    <order field="time"/><size value="50"/><radius value="6"/>
  </connection_point_view>
"""


def plan(text: str):
    return plan_submission(Catalog(), [read_document(text, "app.xml")], box_types())


def test_a_chain_of_revision_boxes_is_accepted_and_writes_changelogs_with_borealis_s_out_fields():
    planned = plan(CHAIN + "</borealis>")
    assert planned.ok, planned.problems
    schemas = schemas_of(planned.catalog, box_types())
    assert [f.name for f in schemas["Sums"].fields] == ["quote", "time", "agg_0", "agg_1", "revised_value"]
    assert [f.name for f in schemas["Cheap"].fields][-1] == "revised_value"
    assert sorted(changelog_streams(planned.catalog)) == ["Cheap", "Dear", "Shifted", "Sums"]


def test_a_revision_box_s_changelog_feeds_an_m3_view_and_not_a_delay():
    m3 = CHAIN + """<box name="view" type="m3"><in stream="Dear"/><out stream="V"/>
        <parameter name="sql" value="SELECT quote, SUM(price) AS total FROM Dear GROUP BY quote"/></box></borealis>"""
    assert plan(m3).ok, plan(m3).problems
    delay = CHAIN + """<box name="later" type="delay"><in stream="Dear"/><out stream="D"/>
        <parameter name="delay-ms" value="5"/></box></borealis>"""
    problems = [str(p) for p in plan(delay).problems]
    assert len(problems) == 1
    assert "delay box 'later' cannot read stream 'Dear': it is a changelog" in problems[0]
    assert "revisionfilter box 'split' revises its out rows as -old/+new" in problems[0]


def test_a_revision_box_reads_an_m3_view_s_changelog():
    text = HEAD + """<box name="view" type="m3"><in stream="Quotes"/><out stream="V"/>
        <parameter name="sql" value="SELECT time, quote, price FROM Quotes WHERE price &gt; 0"/></box>
      <box name="f" type="revisionfilter"><in stream="V"/><out stream="F"/>
        <parameter name="expression.0" value="price &gt; 5"/></box></borealis>"""
    assert plan(text).ok, plan(text).problems


@pytest.mark.parametrize("change, message", [
    (('value="UPSTREAM"', 'value="SOMETIMES"'),
     "revisionaggregate box 'sums': parameter 'processing-mode'='SOMETIMES' must be UPSTREAM or DOWNSTREAM"),
    (('value="price - 10"', 'value="cost - 10"'), "revisionmap box 'shift': parameter 'inverse.2'"),
    (('<parameter name="window-size-by" value="VALUES"/>', '<parameter name="window-size-by" value="TUPLES"/>'),
     "windows by TUPLES count rows as they arrive, which a revision cannot undo"),
])
def test_a_wrong_revision_parameter_is_refused_at_its_box(change, message):
    problems = [str(p) for p in plan((CHAIN + "</borealis>").replace(*change)).problems]
    assert problems and problems[0].startswith("app.xml:"), problems
    assert message in problems[0]
    assert "/borealis/query/box[" in problems[0]


@pytest.mark.parametrize("box_type, reason", [
    ("merge", "whose code is not in the public Borealis sources"),
    ("concatenate", "it also reads array fields"),
    ("face_detect", "an application-specific box of Borealis's array demonstrations"),
    ("scontrol", "not a box of its own"),
    ("regrid", "an application-specific box of Borealis's array demonstrations"),
])
def test_a_borealis_box_type_boreas_does_not_run_is_refused_by_name_with_file_and_line(box_type, reason):
    text = HEAD + f"""<box name="b" type="{box_type}">
      <in stream="Quotes"/><out stream="Out"/></box></borealis>"""
    problems = [str(p) for p in plan(text).problems]
    assert len(problems) == 1
    assert problems[0].startswith("app.xml:7: /borealis/box: "), problems[0]
    assert f"box type {box_type!r} is not supported: " in problems[0] and reason in problems[0]
