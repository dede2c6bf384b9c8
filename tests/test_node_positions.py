"""Node positions and unknown nodes, read and resolved in process (issue 15, items 17 and 19).

* 17: deployment XML names nodes by position (``node="#0"``); the Head resolves
  positions against its nodes (``boreas head --nodes``, which ``cluster up``
  passes in port order, then the others in the order they registered), so the
  examples deploy to the cluster they are submitted to, whatever its ports.
* 19: a deployment naming a node the Head does not know is refused.

``boreas cluster up`` itself, with processes, is tests/test_cluster_cli.py.
"""

from __future__ import annotations

import doctest
import importlib
from pathlib import Path

import pytest
from boreas.catalog import (
    Catalog,
    ValidationFailed,
    apply_submission,
    open_store,
    read_document,
    read_file,
)
from boreas.catalog.deployment_model import Node
from boreas.catalog.positions import resolve_positions
from boreas.head.submissions import NodeOrder, check_submission
from support.cluster import EXAMPLES

ROOT = Path(__file__).resolve().parents[1]
BOREALIS = [*sorted((ROOT / "tests" / "data" / "borealis").glob("*.xml")),
            *sorted(Path("/work/shared/borealis").glob("*.xml"))]


@pytest.mark.parametrize("module", ["boreas.catalog.positions", "boreas.head.submissions",
                                    "boreas.catalog.endpoints"])
def test_doctests(module):
    result = doctest.testmod(importlib.import_module(module))
    assert result.failed == 0 and result.attempted > 0


# -- 17: positions, read and resolved ------------------------------------------------------------


DEPLOY = b"""<deploy>
  <publish stream="Reading" node="#0"/>
  <node endpoint="#0" query="cleanup"/> <node endpoint=" #1 " query="convert"/>
  <node endpoint="#2" query="summarise"/>
  <region endpoint=":30000" node="#1"/>
  <replica_set name="r"><node endpoint="#0"/><node endpoint="#2"/></replica_set>
  <move box="valid" node="#2"/>
</deploy>"""


def test_deployment_xml_names_nodes_by_position():
    dep = read_document(DEPLOY, "d.xml")
    assert [a.endpoint for a in dep.nodes] == ["#0", "#1", "#2"]
    nodes = ["localhost:16000", "localhost:16001", "localhost:16002"]
    (resolved,), problems = resolve_positions([dep], lambda n: nodes[n] if n < 3 else None)
    assert problems == []
    assert [a.endpoint for a in resolved.nodes] == nodes
    assert resolved.publications[0].node == nodes[0]
    assert resolved.regions[0].node == nodes[1] and resolved.regions[0].endpoint == "localhost:30000"
    assert resolved.replica_sets[0].nodes == (nodes[0], nodes[2])
    assert resolved.moves[0].node == nodes[2]
    assert dep.nodes[0].endpoint == "#0"  # the documents read are not changed


def test_positions_are_not_endpoints_anywhere_else():
    bad = read_error(b'<update version="1"><node endpoint="#0" query="q"/></update>')
    assert "update XML names nodes by endpoint" in bad
    # a subscriber's or region's own endpoint is not a node: "#0" there is a bad endpoint
    assert "bad host name" in read_error(b'<deploy><subscribe stream="S" endpoint="#0"/></deploy>')
    assert "bad host name" in read_error(b'<deploy><region endpoint="#0" node="#1"/></deploy>')


def read_error(data: bytes) -> str:
    with pytest.raises(ValidationFailed) as info:
        read_document(data, "x.xml")
    return str(info.value)


@pytest.mark.parametrize("path", BOREALIS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_real_borealis_files_are_read_as_before(path):
    doc = read_file(path)
    for assignment in getattr(doc, "nodes", []):
        assert assignment.endpoint.startswith("localhost:1")  # ":15000" -> an endpoint, not a position


def test_without_a_head_positions_are_the_default_layout(tmp_path):
    """boreas validate / catalog apply: #n = localhost:15000+n, the default cluster up layout."""
    docs = [read_file(EXAMPLES / "sensor_chain.xml"), read_file(EXAMPLES / "sensor_chain_deploy.xml")]
    with open_store("memory://") as store:
        after = apply_submission(store, docs).after
    assert {b.name: b.node for b in after.boxes.values()} == {
        "valid": "localhost:15000", "to_fahrenheit": "localhost:15001", "per_sensor": "localhost:15002"}


def test_the_head_orders_its_nodes_declared_first_then_as_they_registered():
    order = NodeOrder(["localhost:16001", "localhost:16000"])
    for node in ("localhost:17000", "localhost:16000", "localhost:15500"):
        order.registered(node)
    assert order.nodes() == ["localhost:16001", "localhost:16000", "localhost:17000", "localhost:15500"]
    order.registered("localhost:17000")  # a restarted node keeps its place
    assert order.nodes()[2] == "localhost:17000"


def test_a_position_past_the_last_node_is_refused_naming_the_nodes():
    order = NodeOrder(["localhost:16000", "localhost:16001"])
    docs = [read_file(EXAMPLES / "sensor_chain.xml"), read_file(EXAMPLES / "sensor_chain_deploy.xml")]
    with pytest.raises(ValidationFailed) as info:
        check_submission(docs, order, Catalog())
    (problem,) = info.value.diagnostics
    assert problem.line == 17 and problem.path == "/deploy/node[3]"
    assert problem.reason == ("no node at position #2: the Head has 2 nodes: #0 localhost:16000, "
                              "#1 localhost:16001")
    order.registered("localhost:16002")
    resolved = check_submission(docs, order, Catalog())
    assert [a.endpoint for a in resolved[1].nodes] == ["localhost:16000", "localhost:16001", "localhost:16002"]


# -- 19: unknown nodes ---------------------------------------------------------------------------------


def test_a_node_the_head_does_not_know_is_refused():
    order = NodeOrder()
    order.registered("localhost:16000")
    app = read_file(EXAMPLES / "trade_join.xml")
    ghost = read_document(b'<deploy>\n<node endpoint="localhost:16009" query="match"/></deploy>', "ghost.xml")
    with pytest.raises(ValidationFailed) as info:
        check_submission([app, ghost], order, Catalog())
    (problem,) = info.value.diagnostics
    assert (problem.file, problem.line) == ("ghost.xml", 2)
    assert "node 'localhost:16009' has not registered with the Head" in problem.reason
    assert "#0 localhost:16000" in problem.reason
    # known: registered, declared (boreas head --nodes), or already in the catalog
    assert check_submission([app, ghost], NodeOrder(["localhost:16009"]), Catalog())
    in_catalog = Catalog()
    in_catalog.nodes["localhost:16009"] = Node("localhost:16009")
    assert check_submission([app, ghost], order, in_catalog)
