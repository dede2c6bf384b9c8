"""Property tests: random valid topologies round-trip.

A strategy (``support/topologies.py``) builds random *valid* topologies as
(application XML, deployment XML) text.  Each must plan without problems,
survive export and re-import, survive the store's element encoding, and
commit to a store that reloads it unchanged.

That broken input fails cleanly (mutated submissions, random documents) is
``test_properties_broken_input.py``.  Library bugs the properties found are
pinned at the end of this file as regression tests.

``BOREAS_PROPERTY_SCALE=20`` multiplies every example count for a deeper run.
"""

from __future__ import annotations

import pytest
from boreas.catalog import (
    Catalog,
    ValidationFailed,
    apply_submission,
    catalog_from_snapshot,
    diff,
    open_store,
    read_document,
)
from boreas.catalog.elements import catalog_from_elements, to_elements
from boreas.catalog.export import export_application, export_deployment
from hypothesis import given, settings
from support.property_scale import SETTINGS, examples
from support.topologies import Topology, plan_pair, plan_problems, topologies

# =============================================================================
# Random valid topologies
# =============================================================================


@pytest.mark.slow  # make test-fast: the three properties below plan generated topologies too
@settings(max_examples=examples(80), **SETTINGS)
@given(topologies())
def test_generated_topology_plans_withoutplan_problems(topo: Topology):
    plan = plan_pair(topo.app, topo.dep)
    assert plan.ok, f"{plan_problems(plan)}\n{topo.app}\n{topo.dep}"
    assert plan.catalog.boxes and all(b.node in plan.catalog.nodes for b in plan.catalog.boxes.values())


@settings(max_examples=examples(50), **SETTINGS)
@given(topologies())
def test_generated_topology_survives_export_and_reimport(topo: Topology):
    plan = plan_pair(topo.app, topo.dep)
    assert plan.ok, plan_problems(plan)
    app2, dep2 = export_application(plan.catalog), export_deployment(plan.catalog)
    again = plan_pair(app2, dep2)
    assert again.ok, f"{plan_problems(again)}\n{app2}\n{dep2}"
    assert again.catalog == plan.catalog, f"{app2}\n{dep2}"


@settings(max_examples=examples(50), **SETTINGS)
@given(topologies())
def test_generated_topology_survives_store_elements(topo: Topology):
    plan = plan_pair(topo.app, topo.dep)
    assert plan.ok, plan_problems(plan)
    elements = to_elements(plan.catalog)
    assert catalog_from_elements(elements) == plan.catalog
    assert catalog_from_elements(elements, version=7).version == 7


@settings(max_examples=examples(40), **SETTINGS)
@given(topologies())
def test_generated_topology_commits_and_reloads(topo: Topology):
    plan = plan_pair(topo.app, topo.dep)
    assert plan.ok, plan_problems(plan)
    assert diff(plan.catalog, plan.catalog) == []
    with open_store("memory://") as store:
        applied = apply_submission(store, [read_document(topo.app, "app.xml"),
                                           read_document(topo.dep, "deploy.xml")])
        assert applied.commit.version == store.version() == 1
        assert applied.after == plan.catalog
        assert applied.before == Catalog()
        stored = catalog_from_snapshot(store.snapshot())
        assert stored == plan.catalog
        assert stored.version == 1
        assert len(applied.commit.changes) == len(to_elements(plan.catalog))
        assert diff(stored, plan.catalog) == []
        # Submitting the same application again is refused and changes nothing.
        before = store.snapshot()
        with pytest.raises(ValidationFailed):
            apply_submission(store, [read_document(topo.app, "app.xml")])
        assert store.snapshot() == before



# =============================================================================
# Library bugs found by the properties (above and in test_properties_broken_input.py): minimal reproducers
# =============================================================================
#
# The regression tests below were bugs when these properties were first run
# (at 0c16533); they have been fixed since and must stay fixed.

_ONE_FILTER = """<borealis>
  <schema name="S"><field name="x" type="int"/></schema>
  <input stream="A" schema="S"/>
  <box name="b" type="filter"><in stream="A"/><out stream="B"/>
    <parameter name="expression.0" value="EXPR"/></box>
</borealis>"""
_ONE_NODE = '<deploy><node endpoint=":15000" query="b"/></deploy>'


def _submit(app: str, dep: str = _ONE_NODE):
    with open_store("memory://") as store:
        return apply_submission(store, [read_document(app, "app.xml"), read_document(dep, "d.xml")])


def _round_trip(app: str, dep: str) -> tuple[Catalog, Catalog]:
    plan = plan_pair(app, dep)
    assert plan.ok, plan_problems(plan)
    again = plan_pair(export_application(plan.catalog), export_deployment(plan.catalog))
    assert again.ok, plan_problems(again)
    return plan.catalog, again.catalog


# Was: _Reader.decode returned None for a bad name= and the replica_set
# branch used it unchecked, raising AttributeError.
@pytest.mark.parametrize("name", ["", "a b"])
def test_replica_set_with_bad_name_is_refused(name):
    with pytest.raises(ValidationFailed):
        read_document(f'<deploy><replica_set name="{name}"><node endpoint=":15000"/>'
                      f'</replica_set></deploy>', "d.xml")


# Was: sqlglot's TokenError (an unterminated quote) escaped parse_expression,
# so plan/apply_submission raised it instead of ValidationFailed.
@pytest.mark.parametrize("expr", ["x &gt; 'abc", "&quot;x", "x = '"])
def test_expression_tokenizer_error_is_a_validation_failure(expr):
    with pytest.raises(ValidationFailed) as info:
        _submit(_ONE_FILTER.replace("EXPR", expr))
    assert all(d.file == "app.xml" and d.reason for d in info.value.diagnostics)


# Was: an empty name passed the XSD and every check, became an empty store
# key, and Change() raised ValueError("element key must not be empty").
@pytest.mark.parametrize("app", [
    _ONE_FILTER.replace("EXPR", "x &gt; 1").replace('"S"', '""'),       # schema name=""
    _ONE_FILTER.replace("EXPR", "x &gt; 1").replace('"A"', '""'),       # input stream=""
    _ONE_FILTER.replace("EXPR", "x &gt; 1").replace(
        "</borealis>", '<type name="" array="byte"/></borealis>'),       # type name=""
    _ONE_FILTER.replace("EXPR", "x &gt; 1").replace("<box", '<query name=""><box').replace(
        "</box>", "</box></query>"),                                     # query name=""
], ids=["schema", "input", "type", "query"])
def test_empty_name_is_a_validation_failure(app):
    with pytest.raises(ValidationFailed):
        _submit(app)


# Was: a box whose name has a space was accepted inside a <query>; the stored
# query lists members space-separated, so it reloaded as boxes ('b', 'c') and
# every later submission was refused ("query 'q' lists unknown box 'b'").
def test_query_member_name_with_whitespace_is_refused_or_reloads():
    app = _ONE_FILTER.replace("EXPR", "x &gt; 1").replace('name="b"', 'name="b c"')
    app = app.replace("<box", '<query name="q"><box').replace("</box>", "</box></query>")
    dep = '<deploy><node endpoint=":15000" query="q"/></deploy>'
    with open_store("memory://") as store:
        try:
            applied = apply_submission(store, [read_document(app), read_document(dep)])
        except ValidationFailed:
            return  # refusing the name is the fix
        assert catalog_from_snapshot(store.snapshot()) == applied.after
        apply_submission(store, [read_document('<deploy><node endpoint=":15100"/></deploy>')])


# Was: export_deployment wrote a <client> only when a subscription went inside.
def test_export_keeps_client_without_subscriptions():
    dep = ('<deploy><client endpoint=":25000"><publish stream="A"/></client>'
           '<node endpoint=":15000" query="b"/></deploy>')
    before, after = _round_trip(_ONE_FILTER.replace("EXPR", "x &gt; 1"), dep)
    assert after == before
    assert list(after.clients) == ["localhost:25000"]


# Was: export_application encoded inputs and outputs with with_node=False.
def test_export_keeps_input_and_output_node():
    app = _ONE_FILTER.replace("EXPR", "x &gt; 1").replace(
        '<input stream="A" schema="S"/>', '<input stream="A" schema="S" node=":15000"/>'
        '<output stream="B" node=":15000"/>')
    before, after = _round_trip(app, _ONE_NODE)
    assert after == before
    assert after.inputs["A"].node == after.outputs["B"].node == "localhost:15000"


# Was: <size value=""/> was decoded as size None and exported as <size/>,
# which the XSD refuses, so the exported application could not be read back.
def test_view_with_empty_size_is_refused_or_round_trips():
    app = _ONE_FILTER.replace("EXPR", "x &gt; 1").replace(
        '<in stream="A"/>', '<in stream="A" connection_point_view="v"/>').replace(
        "</borealis>", '<connection_point_view name="v" stream="A"><size value=""/>'
                       "</connection_point_view></borealis>")
    try:
        plan_pair(app, _ONE_NODE)
    except ValidationFailed:
        return  # refusing the empty size is the fix
    before, after = _round_trip(app, _ONE_NODE)
    assert after == before


# Was: export_application wrote a query only when a box or table was inside,
# so an empty query vanished (and a <replica_set query=...> naming it failed).
def test_export_keeps_empty_query():
    app = _ONE_FILTER.replace("EXPR", "x &gt; 1").replace("</borealis>",
                                                          '<query name="q"/></borealis>')
    dep = _ONE_NODE.replace("</deploy>", '<replica_set name="r" query="q">'
                                         '<node endpoint=":15000"/></replica_set></deploy>')
    before, after = _round_trip(app, dep)
    assert after == before
    assert "q" in after.queries


# Was: <connect> took its box as el[0], the first child *node*, so a comment
# before the <box> (which the XSD allows) failed with "<<cyfunction Comment
# at 0x...>> is not a catalog declaration".
def test_connect_with_leading_comment_reads():
    doc = read_document(
        '<update><connect box="b" port="0"><!-- the new filter -->'
        '<box name="f" type="filter"><in stream="A"/><out stream="C"/>'
        '<parameter name="expression.0" value="x &gt; 1"/></box></connect></update>', "u.xml")
    assert [type(item).__name__ for item in doc.items] == ["Connect"]


# Was: some libxml2 messages end with a newline, which was kept, so the
# diagnostic was not the promised one line.
def test_malformed_xml_reason_is_one_line():
    with pytest.raises(ValidationFailed) as info:
        read_document(b"<borealis>\x00</borealis>", "nul.xml")
    assert all("\n" not in d.reason for d in info.value.diagnostics)


# Was: <order field=""/> decoded as order_field "" but was encoded only
# ``if obj.order_field``, so the store reloaded the view with None.
def test_view_with_empty_order_field_reloads_unchanged():
    app = _ONE_FILTER.replace("EXPR", "x &gt; 1").replace(
        '<in stream="A"/>', '<in stream="A" connection_point_view="v"/>').replace(
        "</borealis>", '<connection_point_view name="v" stream="A"><size value="5"/>'
                       '<order field=""/></connection_point_view></borealis>')
    with open_store("memory://") as store:
        try:
            applied = apply_submission(store, [read_document(app), read_document(_ONE_NODE)])
        except ValidationFailed:
            return  # refusing an empty field name is a fix too
        assert catalog_from_snapshot(store.snapshot()) == applied.after
