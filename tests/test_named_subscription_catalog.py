"""A named subscription in the catalog (issue 31 item 1): ``<subscribe stream endpoint name=>``, unique per
stream, so a subscriber that restarts (listening on a new port) replaces its old subscription in the same commit."""

from __future__ import annotations

from boreas.catalog import Catalog, plan_submission, read_document
from boreas.catalog.elements import catalog_from_elements, to_elements
from boreas.m3.boxtype import box_types

APP = """<borealis>
  <input stream="Packet" schema="P"/> <output stream="Average" schema="P"/>
  <schema name="P"> <field name="value" type="double"/> </schema>
  <query name="pass"> <box name="pass" type="filter"> <in stream="Packet"/> <out stream="Average"/>
    <parameter name="expression.0" value="value &gt;= 0"/> </box> </query>
</borealis>"""
DEPLOY = '<deploy> <node endpoint="localhost:15000" query="pass"/> </deploy>'
TYPES = box_types()


def submit(catalog: Catalog, *texts: str) -> Catalog:
    plan = plan_submission(catalog, [read_document(text, "sub.xml") for text in texts], TYPES)
    assert plan.ok, plan.problems
    return plan.catalog


def test_a_subscription_with_an_existing_name_replaces_it_and_others_stay():
    catalog = submit(Catalog(), APP, DEPLOY)
    catalog = submit(catalog, '<deploy><subscribe stream="Average" endpoint="localhost:31001" name="audit"/>'
                              '<subscribe stream="Average" endpoint="localhost:31002"/></deploy>')
    catalog = submit(catalog, '<deploy><subscribe stream="Average" endpoint="localhost:31003" name="audit"/></deploy>')
    subs = {s.endpoint: s.name for s in catalog.subscriptions.values()}
    assert subs == {"localhost:31002": None, "localhost:31003": "audit"}
    again = catalog_from_elements(to_elements(catalog))  # the name survives the stored form
    assert {s.endpoint: s.name for s in again.subscriptions.values()} == subs


def test_two_subscriptions_with_one_name_in_one_change_are_refused():
    catalog = submit(Catalog(), APP, DEPLOY)
    plan = plan_submission(catalog, [read_document(
        '<deploy><subscribe stream="Average" endpoint="localhost:31001" name="a"/>'
        '<subscribe stream="Average" endpoint="localhost:31002" name="a"/></deploy>', "sub.xml")], TYPES)
    assert not plan.ok
    assert "two subscriptions to 'Average' named 'a'" in plan.problems[0].reason
    assert plan.problems[0].file == "sub.xml"


def test_boreas_subscribe_refuses_what_a_named_subscription_cannot_do_before_subscribing(capsys, tmp_path):
    from boreas.cli.main import main

    head = ["--head", "http://localhost:9"]  # nothing listens there: refused before contacting anyone
    assert main(["subscribe", "S", "--name", "n", "--format", "parquet", "--output", str(tmp_path / "f"), *head]) == 2
    assert "--name cannot resume into a Parquet file" in capsys.readouterr().err
    assert main(["subscribe", "S", "--name", "n", "--on-slow", "drop", *head]) == 2
    assert "--on-slow does not apply to a named subscriber" in capsys.readouterr().err


def test_a_file_output_resumes_where_its_record_says(tmp_path):
    """``FILE.position`` is written with each checkpoint; reopened for the same stream and name, the file is cut
    back to the recorded length (a half-written line after it goes) and the positions come back."""
    from boreas.catalog.model import Field, FieldType, Schema
    from boreas.cli.subscribe_output import open_output, recorded_positions

    schema = Schema("P", (Field("value", FieldType("int")),))
    path = tmp_path / "out.csv"
    first = open_output("csv", str(path), schema, ("S", "n"))
    first.write([(1,), (2,)])
    first.checkpoint({"box~1": 1})
    first.write([(3,)])
    first.flush()  # written, not recorded: a crash now
    assert recorded_positions(str(path), "S", "n") == {"box~1": 1}
    assert recorded_positions(str(path), "S", "other") == {}
    again = open_output("csv", str(path), schema, ("S", "n"))
    again.write([(3,)])
    again.close()
    assert path.read_text() == "value\n1\n2\n3\n"
    fresh = open_output("csv", str(path), schema, ("S", "other"))  # another name: a new file
    fresh.close()
    assert path.read_text() == "value\n"
