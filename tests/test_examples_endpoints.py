"""The examples name no endpoint that nothing serves (issue 31, item 8).

A deployment's ``<subscribe endpoint=...>`` makes the producing node connect
to that listener, and a ``<region>`` makes its nodes reflect to that regional
component; either one retries for as long as nothing answers, and the web UI
draws a subscriber that is not there.  So:

* statically, no example deployment names a subscriber or client, and one
  that names a region is submitted only by the README's tour, after the
  ``boreas region`` that serves it, and never by ``examples/demo.sh``;
* for real, the examples ``make demo`` submits leave every node's links
  pointing at other nodes only, no reflection to any region, and no
  subscriber or client in the Head's catalog (what the UI draws).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from boreas.catalog import read_file
from boreas.catalog.documents import Deployment
from prometheus_client.parser import text_string_to_metric_families

from support.cluster import EXAMPLES, http, wait_until

ROOT = EXAMPLES.parents[1]
README = (ROOT / "README.md").read_text()
DEMO = (ROOT / "examples" / "demo.sh").read_text()
DEPLOYMENTS = sorted(EXAMPLES.glob("*_deploy.xml"))
#: What examples/demo.sh submits: its loop's applications, then Q3.
DEMO_APPS = ("sensor_chain", "packet_aggregate", "trade_join", "tpch_q3")


def deployment(path: Path) -> Deployment:
    doc = read_file(path)
    assert isinstance(doc, Deployment), path
    return doc


def test_the_demo_submits_the_examples_this_test_submits():
    loop = re.search(r"for app in ([\w ]+); do", DEMO)
    assert loop and tuple(loop.group(1).split()) == DEMO_APPS[:-1]
    assert "submit examples/xml/tpch_q3.xml examples/xml/tpch_q3_deploy.xml" in DEMO


@pytest.mark.parametrize("path", DEPLOYMENTS, ids=lambda p: p.name)
def test_no_example_deployment_names_a_subscriber_or_client(path):
    doc = deployment(path)
    assert [s.endpoint for s in doc.subscriptions] == []
    assert [c.endpoint for c in doc.clients] == []
    assert [p.client for p in doc.publications if p.client] == []


@pytest.mark.parametrize("path", [p for p in DEPLOYMENTS if deployment(p).regions], ids=lambda p: p.name)
def test_a_region_is_named_only_where_its_component_runs_first(path):
    relative = str(path.relative_to(ROOT))
    assert relative not in DEMO and path.name not in DEMO
    tour = README[README.index("\n## A cluster"):README.index("\n## Layout")]
    submitted = tour.find(f"boreas submit {relative}")
    assert submitted > 0, f"{relative} is submitted nowhere in the README's tour"
    for region in deployment(path).regions:
        port = region.endpoint.rsplit(":", 1)[1]
        started = tour.find(f"boreas region --endpoint localhost:{port} &")
        assert 0 < started < submitted, f"boreas region on :{port} is not started before {relative}"


def metric_labels(endpoint: str, prefix: str, label: str) -> set[str]:
    status, body = http("GET", f"http://{endpoint}/metrics", token=None)
    assert status == 200
    return {sample.labels[label] for family in text_string_to_metric_families(body.decode())
            if family.name.startswith(prefix) for sample in family.samples if label in sample.labels}


@pytest.mark.slow
def test_the_demo_examples_leave_no_link_to_an_endpoint_nothing_serves(cluster_factory):
    cluster = cluster_factory()
    cluster.start_head()
    nodes = [cluster.start_node() for _ in range(3)]  # one at a time: each within start-up's bound on a busy machine
    ports = dict(zip((15000, 15001, 15002), nodes))
    for app in DEMO_APPS:
        cluster.submit(EXAMPLES / f"{app}.xml", cluster.example(f"{app}_deploy.xml", ports))
    # the chain's links between its nodes exist: the metrics below are not empty by accident
    wait_until(lambda: metric_labels(nodes[0], "boreas_link_connected", "peer") == {nodes[1]},
               what="node #0's link to node #1")
    for node in nodes:
        assert metric_labels(node, "boreas_link_", "peer") <= set(nodes), node
        assert metric_labels(node, "boreas_reflect_", "region") == set(), node
    catalog = cluster.head_catalog()
    assert (catalog.subscriptions, catalog.clients) == ({}, {})
