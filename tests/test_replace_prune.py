"""A replacing submission removes what the same application no longer declares (issue 31 item 5).

Each query, box, table, input and output records the application that
declared it (``boreas submit --app NAME``, else the file's base name); the
stores keep it.  ``boreas submit --replace app.xml`` then removes, in the same
commit, what app.xml declared before and leaves out now, and never touches
another application's elements.  A stream that would go while something that
stays still reads it is refused, naming the reader.  A catalog stored before
applications were recorded replaces as before (nothing pruned) and says so.
"""

from __future__ import annotations

from dataclasses import replace

from boreas.catalog import Catalog, plan_submission, read_document
from boreas.catalog.elements import catalog_from_elements, diff, to_elements
from boreas.m3.boxtype import box_types

TYPES = box_types()

APP = """<borealis>
  <input stream="Reading" schema="R"/> <output stream="Hot"/> <output stream="Cold"/>
  <schema name="R"> <field name="sensor" type="int"/> <field name="celsius" type="double"/> </schema>
  <query name="hot">
    <box name="valid" type="filter"> <in stream="Reading"/> <out stream="Valid"/>
      <parameter name="expression.0" value="celsius &lt; 60.0"/> </box>
    <box name="hot" type="filter"> <in stream="Valid"/> <out stream="Hot"/>
      <parameter name="expression.0" value="celsius &gt; 40.0"/> </box>
  </query>
  <query name="cold">
    <box name="cold" type="filter"> <in stream="Reading"/> <out stream="Cold"/>
      <parameter name="expression.0" value="celsius &lt; 0.0"/> </box>
  </query>
</borealis>"""

#: The same application with query cold (and its output) deleted from the file.
NO_COLD = APP.replace('<output stream="Cold"/>', "").replace(APP[APP.index('  <query name="cold">'):
                                                                 APP.index("</borealis>")], "")

#: Another application reading app's stream Cold.
OTHER = """<borealis> <output stream="Freezing"/>
  <query name="freezing">
    <box name="freezing" type="filter"> <in stream="Cold"/> <out stream="Freezing"/>
      <parameter name="expression.0" value="celsius &lt; -20.0"/> </box>
  </query>
</borealis>"""


def submitted(catalog: Catalog, text: str, name: str, replacing: bool = False):
    return plan_submission(catalog, [read_document(text, name)], TYPES, replacing=replacing)


def committed(*apps: tuple[str, str]) -> Catalog:
    catalog = Catalog()
    for text, name in apps:
        plan = submitted(catalog, text, name)
        assert plan.ok, plan.problems
        catalog = plan.catalog
    return catalog


def test_a_query_deleted_from_the_file_goes_with_its_boxes_and_the_streams_only_it_produced():
    before = committed((APP, "apps/app.xml"))
    assert {b.app for b in before.boxes.values()} == {"app"}  # the file's base name
    plan = submitted(before, NO_COLD, "apps/app.xml", replacing=True)
    assert plan.ok, plan.problems
    assert "cold" not in plan.catalog.queries and "cold" not in plan.catalog.boxes
    assert "Cold" not in plan.catalog.outputs
    assert plan.changes.boxes["removed"] == ["cold"] and plan.changes.streams["removed"] == ["Cold"]
    assert plan.changes.boxes["kept"] == ["hot", "valid"]
    assert plan.catalog == committed((NO_COLD, "app.xml"))  # as if the new file had been submitted alone


def test_another_applications_elements_are_never_touched():
    before = committed((APP, "app.xml"), (OTHER.replace("Cold", "Hot"), "other.xml"))
    plan = submitted(before, NO_COLD, "app.xml", replacing=True)
    assert plan.ok, plan.problems
    assert plan.catalog.boxes["freezing"] == before.boxes["freezing"] and "freezing" in plan.catalog.queries
    assert plan.changes.boxes["removed"] == ["cold"]
    taken = submitted(before, OTHER.replace("Cold", "Hot"), "app.xml", replacing=True)
    assert not taken.ok  # app.xml declaring other's query is not a way to take it over
    assert "box 'freezing' belongs to application 'other', not 'app'" in "\n".join(p.reason for p in taken.problems)
    assert "--app other" in "\n".join(p.reason for p in taken.problems)


def test_the_app_name_can_be_given_instead_of_the_files():
    before = committed((APP, "app.xml"))
    renamed = read_document(NO_COLD, "app-v2.xml")
    renamed.name = "app"  # boreas submit --replace --app app app-v2.xml
    plan = plan_submission(before, [renamed], TYPES, replacing=True)
    assert plan.ok, plan.problems
    assert plan.changes.boxes["removed"] == ["cold"]


def test_a_left_out_stream_still_read_elsewhere_is_refused_naming_the_reader():
    before = committed((APP, "app.xml"), (OTHER, "other.xml"))
    plan = submitted(before, NO_COLD, "app.xml", replacing=True)
    assert not plan.ok
    reasons = [p for p in plan.problems if "stream 'Cold' would be removed" in p.reason]
    assert reasons and reasons[0].file == "app.xml"
    assert "box freezing still reads it" in reasons[0].reason
    subscribed = submitted(committed((APP, "app.xml")),
                           '<deploy><node endpoint="localhost:1" query="hot cold"/>'
                           '<subscribe stream="Cold" endpoint="localhost:9" name="alerts"/></deploy>', "d.xml")
    assert subscribed.ok, subscribed.problems
    plan = submitted(subscribed.catalog, NO_COLD, "app.xml", replacing=True)
    assert any("subscriber alerts still reads it" in p.reason for p in plan.problems)


def test_the_stores_keep_the_application_and_older_catalogs_still_load():
    catalog = committed((APP, "app.xml"))
    stored = to_elements(catalog)
    assert 'application="app"' in stored[("box", "cold")]
    loaded = catalog_from_elements(stored)
    assert loaded == catalog and loaded.boxes["cold"].app == "app"
    old = {key: text.replace(' application="app"', "") for key, text in stored.items()}
    assert catalog_from_elements(old).boxes["cold"].app == ""


def _stored_before_applications(catalog: Catalog) -> Catalog:
    old = catalog.copy()
    for attr in ("queries", "boxes", "tables", "inputs", "outputs"):
        items = getattr(old, attr)
        for key, obj in items.items():
            items[key] = replace(obj, app="")
    return old


def test_an_old_catalog_replaces_as_before_saying_so_and_the_next_replace_prunes():
    old = _stored_before_applications(committed((APP, "app.xml")))
    plan = submitted(old, NO_COLD, "app.xml", replacing=True)
    assert plan.ok, plan.problems
    assert "cold" in plan.catalog.boxes and not plan.changes.boxes["removed"]  # nothing pruned
    assert plan.changes.boxes["kept"] == ["hot", "valid"]  # state kept: the recorded name changes no box
    assert any("before Boreas recorded applications" in line and "not removed" in line
               for line in plan.changes.lines())
    assert {c.key for c in diff(old, plan.catalog)} >= {"hot", "valid"}  # the store records the name now
    assert plan.catalog.boxes["hot"].app == "app" and plan.catalog.boxes["cold"].app == ""
    again = submitted(plan.catalog, NO_COLD, "app.xml", replacing=True)
    assert again.ok and not again.changes.boxes["removed"]  # cold was never recorded as app's
    assert not again.changes.notes


def test_the_heads_incremental_check_prunes_and_refuses_alike():
    """The Head plans with its CatalogIndex (only what a change touches is checked): same outcome."""
    from boreas.catalog.index import CatalogIndex

    for before, ok in ((committed((APP, "app.xml")), True), (committed((APP, "app.xml"), (OTHER, "other.xml")), False)):
        index = CatalogIndex.build(before, registry=TYPES)
        plan = plan_submission(before, [read_document(NO_COLD, "app.xml")], TYPES, index=index, replacing=True)
        whole = submitted(before, NO_COLD, "app.xml", replacing=True)
        assert plan.ok is ok and sorted(map(str, plan.problems)) == sorted(map(str, whole.problems))
        assert plan.catalog == whole.catalog and plan.changes.as_dict() == whole.changes.as_dict()
