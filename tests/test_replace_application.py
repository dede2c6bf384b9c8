"""Replacing a running application (issue 31 item 5, the edit loop): ``boreas submit --replace``.

Resubmitting an edited application replaces it in one commit: boxes declared
as they were keep running with their state, changed ones are built again,
boxes a query no longer holds go, and only the nodes whose part changed are
sent an update.  What cannot change in place (a stream's schema under a
reader that stays, an ``m3`` box's program) is refused, naming where and why,
and nothing is applied.  The plan-level tests run in process; the cluster
tests (slow) run real Head and node processes and a real subscriber.
"""

from __future__ import annotations

import asyncio
import re

import pytest
from boreas.catalog import Catalog, plan_submission, read_document
from boreas.catalog.elements import diff
from boreas.m3.boxtype import box_types
from support.cluster import EXAMPLES

TYPES = box_types()

APP = """<borealis>
  <input stream="Reading" schema="R"/> <output stream="Average" schema="A"/>
  <schema name="R"> <field name="sensor" type="int"/> <field name="time" type="int"/>
    <field name="celsius" type="double"/> </schema>
  <schema name="A"> <field name="sensor" type="int"/> <field name="time" type="int"/>
    <field name="celsius" type="double"/> <field name="readings" type="int"/> </schema>
  <query name="cleanup">
    <box name="valid" type="filter"> <in stream="Reading"/> <out stream="Valid"/>
      <parameter name="expression.0" value="celsius &lt; 60.0"/> </box>
  </query>
  <query name="summarise">
    <box name="per_sensor" type="aggregate"> <in stream="Valid"/> <out stream="Average"/>
      <parameter name="aggregate-function.0" value="avg(celsius)"/>
      <parameter name="aggregate-function-output-name.0" value="celsius"/>
      <parameter name="aggregate-function.1" value="count()"/>
      <parameter name="aggregate-function-output-name.1" value="readings"/>
      <parameter name="window-size-by" value="VALUES"/> <parameter name="window-size" value="60"/>
      <parameter name="advance" value="60"/> <parameter name="order-by" value="FIELD"/>
      <parameter name="order-on-field" value="time"/> <parameter name="group-by" value="sensor"/>
      <parameter name="independent-window-alignment" value="1"/>
    </box>
  </query>
</borealis>"""

WIDER = APP.replace("celsius &lt; 60.0", "celsius &lt; 70.0")
#: The same application with a second filter in query cleanup.
HOT = APP.replace("</query>", """  <box name="hot" type="filter"> <in stream="Reading"/> <out stream="Hot"/>
      <parameter name="expression.0" value="celsius &gt; 40.0"/> </box>
  </query>""", 1)
#: Reading gets another schema (one field more) while valid, unchanged, still reads it.
RESHAPED = APP.replace('<input stream="Reading" schema="R"/>', '<input stream="Reading" schema="R2"/>').replace(
    "</borealis>", """  <schema name="R2"> <field name="sensor" type="int"/> <field name="time" type="int"/>
    <field name="celsius" type="double"/> <field name="humidity" type="double"/> </schema>
</borealis>""")


def committed(text: str, name: str = "app.xml") -> Catalog:
    plan = plan_submission(Catalog(), [read_document(text, name)], TYPES)
    assert plan.ok, plan.problems
    return plan.catalog


def replaced(catalog: Catalog, text: str, name: str = "app.xml"):
    return plan_submission(catalog, [read_document(text, name)], TYPES, replacing=True)


def test_the_same_application_again_keeps_everything_and_changes_nothing():
    before = committed(APP)
    plan = replaced(before, APP)
    assert plan.ok, plan.problems
    assert diff(before, plan.catalog) == []
    assert plan.changes.boxes["kept"] == ["per_sensor", "valid"]
    assert plan.changes.streams["kept"] == ["Average", "Reading", "Valid"]
    assert not plan.changes.boxes["changed"] and not plan.changes.boxes["added"]


def test_without_replace_a_resubmission_is_still_a_duplicate():
    plan = plan_submission(committed(APP), [read_document(WIDER, "app.xml")], TYPES)
    assert not plan.ok and "duplicate input stream 'Reading'" in plan.problems[0].reason


def test_a_changed_predicate_changes_that_box_only():
    before = committed(APP)
    plan = replaced(before, WIDER)
    assert plan.ok, plan.problems
    assert plan.changes.boxes["changed"] == ["valid"] and plan.changes.boxes["kept"] == ["per_sensor"]
    assert [c.key for c in diff(before, plan.catalog)] == ["valid"]
    assert plan.catalog.boxes["valid"].param("expression.0") == "celsius < 70.0"


def test_boxes_added_to_a_query_and_taken_out_again():
    before = committed(APP)
    grown = replaced(before, HOT)
    assert grown.ok, grown.problems
    assert grown.changes.boxes["added"] == ["hot"] and grown.changes.streams["added"] == ["Hot"]
    assert grown.catalog.queries["cleanup"].boxes == ("valid", "hot")
    deployed = plan_submission(before, [read_document(
        '<deploy><node endpoint="localhost:1" query="cleanup"/><node endpoint="localhost:2" query="summarise"/>'
        '</deploy>', "d.xml")], TYPES).catalog
    assert replaced(deployed, HOT).catalog.boxes["hot"].node == "localhost:1"  # where the rest of its query runs
    shrunk = replaced(grown.catalog, APP)
    assert shrunk.ok, shrunk.problems
    assert shrunk.changes.boxes["removed"] == ["hot"] and shrunk.changes.streams["removed"] == ["Hot"]
    assert shrunk.catalog == before


def test_a_schema_change_under_a_reader_that_stays_is_refused_where_it_is_asked_for():
    plan = replaced(committed(APP, "edited.xml"), RESHAPED, "edited.xml")
    assert not plan.ok
    problem, passed_on = plan.problems
    assert (problem.file, problem.line) == ("edited.xml", 2)
    assert "stream 'Reading' would change its schema" in problem.reason and "box valid still reads it" in problem.reason
    assert (passed_on.file, passed_on.line) == ("edited.xml", 8)  # valid's <box>, whose out stream changes too
    assert "stream 'Valid' would change its schema" in passed_on.reason and "box per_sensor" in passed_on.reason


def test_a_schema_is_never_redefined_under_its_name():
    plan = replaced(committed(APP), APP.replace('<field name="celsius" type="double"/> </schema>',
                                                '<field name="celsius" type="float"/> </schema>', 1))
    assert not plan.ok and "schema 'R' is already defined differently" in plan.problems[0].reason
    assert "give the new one another name" in plan.problems[0].reason


def test_an_m3_box_whose_program_changes_is_refused():
    q3 = (EXAMPLES / "tpch_q3.xml").read_text()
    before = plan_submission(Catalog(), [read_document(q3, "q3.xml")], TYPES)
    assert before.ok, before.problems
    plan = replaced(before.catalog, q3.replace("LIMIT", "LIMIT").replace("'BUILDING'", "'MACHINERY'"), "q3.xml")
    assert not plan.ok
    assert any(re.search(r"m3 box '\w+' cannot change in place: its maps hold every row", p.reason)
               for p in plan.problems), plan.problems


def test_a_box_moved_by_the_document_is_refused_as_a_move():
    before = committed(APP)
    deployed = plan_submission(before, [read_document(
        '<deploy><node endpoint="localhost:1" query="cleanup summarise"/></deploy>', "d.xml")], TYPES)
    assert deployed.ok, deployed.problems
    plan = plan_submission(deployed.catalog, [read_document(WIDER, "app.xml"), read_document(
        '<deploy><node endpoint="localhost:2" query="cleanup summarise"/></deploy>', "d.xml")], TYPES,
        replacing=True)
    assert not plan.ok and "already on node 'localhost:1'; use <move>" in plan.problems[0].reason


def test_the_deployment_may_come_along_unchanged():
    chain, deploy = (EXAMPLES / "sensor_chain.xml").read_text(), (EXAMPLES / "sensor_chain_deploy.xml").read_text()
    first = plan_submission(Catalog(), [read_document(chain, "a.xml"), read_document(deploy, "d.xml")], TYPES)
    assert first.ok, first.problems
    edited = chain.replace("celsius &lt; 60.0", "celsius &lt; 45.0")
    plan = plan_submission(first.catalog, [read_document(edited, "a.xml"), read_document(deploy, "d.xml")], TYPES,
                           replacing=True)
    assert plan.ok, plan.problems
    assert [c.key for c in diff(first.catalog, plan.catalog)] == ["valid"]
    assert plan.catalog.boxes["valid"].node == first.catalog.boxes["valid"].node


# -- on a cluster ------------------------------------------------------------------------------------------


def two_node_app(cluster):
    cluster.start_head()
    nodes = [cluster.start_node(), cluster.start_node()]  # one after the other: a loaded machine starts them slowly
    app = cluster.write("app.xml", APP)
    dep = cluster.write("dep.xml", f'<deploy> <publish stream="Reading" node="{nodes[0]}"/>'
                                   f' <node endpoint="{nodes[0]}" query="cleanup"/>'
                                   f' <node endpoint="{nodes[1]}" query="summarise"/> </deploy>')
    cluster.submit(app, dep)
    return nodes, app


@pytest.mark.slow
def test_a_replace_keeps_the_aggregate_state_and_loses_no_row_in_flight(cluster_factory):
    """The filter changes while rows flow; the aggregate on the other node keeps its open window."""
    from boreas.client.publisher import Publisher
    from boreas.client.subscriber import Subscriber
    from support.cluster import TOKEN
    from support.streams import collect

    cluster = cluster_factory()
    nodes, app = two_node_app(cluster)
    app.write_text(WIDER)  # the edit: 60 -> 70

    async def main() -> tuple[list[tuple], str]:
        async with Subscriber(cluster.head, "Average", token=TOKEN) as subscriber:
            async with Publisher(cluster.head, "Reading", token=TOKEN) as publisher:
                async def flow() -> None:  # 600 rows of sensor 1's first minute, old and new filter pass them
                    for i in range(60):
                        await publisher.send([(1, i // 2, 20.0 + i % 10) for _ in range(10)])
                        await asyncio.sleep(0.05)

                flowing = asyncio.create_task(flow())
                result = await asyncio.to_thread(cluster.boreas, "submit", "--replace", str(app))
                await flowing
                assert result.returncode == 0, result.stdout + result.stderr
                await publisher.send([(1, 40, 65.0)] * 100)  # only the new filter passes these
                await publisher.send([(1, 60, 20.0)])  # the first minute closes
                rows = await collect(subscriber, 1, timeout=60)
        return rows, result.stdout

    rows, printed = asyncio.run(main())
    sensor, start, _, readings = rows[0]
    assert (sensor, start, readings) == (1, 0, 700)  # 600 before and during the replace, 100 only it lets in
    assert "kept: box per_sensor" in printed and "changed: box valid" in printed
    submission = re.search(r"submission ([\w-]+): committed", printed).group(1)
    assert list(cluster.submission(submission)["nodes"]) == [nodes[0]]  # the aggregate's node was sent nothing


@pytest.mark.slow
def test_a_refused_replace_changes_nothing_and_the_cli_says_what_a_replace_did(cluster_factory):
    cluster = cluster_factory()
    nodes, app = two_node_app(cluster)
    before = cluster.head_catalog()
    edited = cluster.write("edited.xml", RESHAPED)
    refused = cluster.boreas("submit", "--replace", "--app", "app", str(edited))  # app.xml's new version
    assert refused.returncode == 2
    assert re.search(r"edited\.xml:2: .*stream 'Reading' would change its schema .* box valid still reads it",
                     refused.stderr), refused.stderr
    after = cluster.head_catalog()
    assert after.version == before.version and after == before
    grown = cluster.submit("--replace", "--app", "app", cluster.write("hot.xml", HOT))
    assert "added: box hot; stream Hot" in grown.stdout and "kept: boxes per_sensor, valid" in grown.stdout
    cluster.wait_in_sync(*nodes)
    assert "hot" in cluster.node_catalog(nodes[0]).boxes
    shrunk = cluster.submit("--replace", str(app))
    assert "removed: box hot; stream Hot" in shrunk.stdout
    cluster.wait_in_sync(*nodes)
    assert set(cluster.node_catalog(nodes[0]).boxes) == {"valid"}
    # Query summarise deleted from the file: it goes, with its box and its stream, on its node too.
    no_summary = APP[:APP.index('  <query name="summarise">')].replace('<output stream="Average" schema="A"/>', "")
    pruned = cluster.submit("--replace", cluster.write("app.xml", no_summary + "</borealis>"))
    assert "removed: box per_sensor; stream Average" in pruned.stdout, pruned.stdout
    cluster.wait_in_sync(*nodes)
    assert not cluster.node_catalog(nodes[1]).boxes and "summarise" not in cluster.head_catalog().queries
