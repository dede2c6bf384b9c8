"""Borealis's fault-tolerance boxes at submission (issue 35 item 2): what is accepted, what is refused, why.

The applications are written for these tests in the shape of Borealis's
fault tests: two inputs through an sunion to an aggregate and to an sjoin,
each ending in an soutput, with the control streams declared as outputs of
a schema with no fields.
"""

from __future__ import annotations

import pytest
from boreas.catalog import Catalog, plan_submission, read_document
from boreas.catalog.changelog import changelog_streams
from boreas.catalog.schemas_of import schemas_of
from boreas.m3.boxtype import box_types

HEAD = """<borealis>
  <input stream="Ticks" schema="Tick"/><input stream="Tocks" schema="Tick"/>
  <schema name="Nothing"/>
  <schema name="Tick"><field name="at" type="int"/><field name="key" type="int"/></schema>
  <schema name="Pair"><field name="at1" type="int"/><field name="at2" type="int"/><field name="key" type="int"/></schema>
  <output stream="Signal" schema="Nothing"/>
"""

DIAGRAM = HEAD + """<output stream="Pairs" schema="Pair"/>
  <box name="serial" type="sunion">
    <in stream="Ticks"/><in stream="Tocks"/>
    <parameter name="location" value="input"/><parameter name="interval" value="250"/>
    <parameter name="stagger" value="0"/>
    <parameter name="max-delay.0" value="1500"/><parameter name="max-delay.1" value="1500"/>
    <out stream="Signal"/><out stream="Left"/><out stream="Right"/>
  </box>
  <box name="pairs" type="sjoin">
    <in stream="Left"/><in stream="Right"/><out stream="Joined"/>
    <parameter name="predicate" value="left.key = right.key"/>
    <parameter name="left-order-by" value="VALUES"/><parameter name="right-order-by" value="VALUES"/>
    <parameter name="left-order-on-field" value="at"/><parameter name="right-order-on-field" value="at"/>
    <parameter name="left-buffer-size" value="2"/><parameter name="right-buffer-size" value="2"/>
    <parameter name="out-field.0" value="left.at"/><parameter name="out-field-name.0" value="at1"/>
    <parameter name="out-field.1" value="right.at"/><parameter name="out-field-name.1" value="at2"/>
    <parameter name="out-field.2" value="left.key"/><parameter name="out-field-name.2" value="key"/>
  </box>
  <box name="last" type="soutput"><in stream="Joined"/><out stream="Done"/><out stream="Pairs"/></box>
"""


def plan(text: str):
    return plan_submission(Catalog(), [read_document(text, "app.xml")], box_types())


def test_a_fault_tolerant_diagram_is_accepted_and_writes_changelogs():
    planned = plan(DIAGRAM + "</borealis>")
    assert planned.ok, planned.problems
    assert set(changelog_streams(planned.catalog)) >= {"Signal", "Left", "Right", "Joined", "Done", "Pairs"}
    schemas = schemas_of(planned.catalog)
    assert schemas["Signal"].fields == () and schemas["Done"].fields == ()
    assert [f.name for f in schemas["Left"].fields] == ["at", "key"]


def test_one_data_stream_merges_and_a_tentative_field_is_appended():
    text = HEAD + """<box name="serial" type="sunion"><in stream="Ticks"/><in stream="Tocks"/>
      <parameter name="interval" value="250"/><parameter name="max-delay.0" value="10"/>
      <parameter name="max-delay.1" value="10"/><parameter name="tentative-field" value="guess"/>
      <out stream="Signal"/><out stream="Merged"/></box></borealis>"""
    planned = plan(text)
    assert planned.ok, planned.problems
    assert [f.name for f in schemas_of(planned.catalog)["Merged"].fields] == ["at", "key", "guess"]


def test_an_sunion_s_changelog_does_not_feed_a_delay():
    text = DIAGRAM + """<box name="later" type="delay"><in stream="Left"/><out stream="Late"/>
      <parameter name="delay-ms" value="5"/></box></borealis>"""
    problems = [str(p) for p in plan(text).problems]
    assert len(problems) == 1
    assert "delay box 'later' cannot read stream 'Left': it is a changelog" in problems[0]
    assert "sunion box 'serial' revises its out rows" in problems[0]


@pytest.mark.parametrize("change, message", [
    ('<out stream="Right"/>', "has 3 data out streams (after the control stream, port 0): it needs 1 (its in "
                              "streams merged) or 2"),
    ('<parameter name="max-delay.1" value="1500"/>', "needs parameter 'max-delay.1'"),
    ('<parameter name="stagger" value="0"/>', ""),  # absent: 1, as in Borealis
    ('name="stagger" value="0"', "parameter 'stagger'='2' must be one of 0, 1"),
    ('name="location" value="input"', "parameter 'location'='edge' must be one of input, middle"),
    ('name="interval" value="250"', "parameter 'interval'='0' must be greater than 0"),
    ('<parameter name="left-order-by" value="VALUES"/>', "parameter 'left-order-by' must be VALUES"),
])
def test_a_wrong_fault_box_parameter_is_refused_at_its_box(change, message):
    replacement = {'<out stream="Right"/>': '<out stream="Right"/><out stream="Extra"/>',
                   'name="stagger" value="0"': 'name="stagger" value="2"',
                   'name="location" value="input"': 'name="location" value="edge"',
                   'name="interval" value="250"': 'name="interval" value="0"'}.get(change, "")
    problems = [str(p) for p in plan((DIAGRAM + "</borealis>").replace(change, replacement)).problems]
    if not message:
        assert problems == []
        return
    assert problems and problems[0].startswith("app.xml:"), problems
    assert message in problems[0]
    assert "/borealis/box[" in problems[0]


def test_should_reconcile_0_is_refused_with_the_reason():
    text = (DIAGRAM + "</borealis>").replace('<parameter name="stagger" value="0"/>',
                                             '<parameter name="should-reconcile" value="0"/>')
    problems = [str(p) for p in plan(text).problems]
    assert len(problems) == 1 and "Boreas always corrects" in problems[0]
