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
