"""Head and nodes as real processes on loopback: deploy, extend, delete, modify, restart, auth.

Each node's local catalog must end equal to its slice of the Head's global
catalog (``node_slice``), which is the whole contract between them; the
counters nodes keep say which nodes were sent anything.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest
from support.cluster import EXAMPLES, TOKEN, free_consecutive_ports, free_port, get_json, http, wait_until

from boreas.catalog.slices import node_slice

STORES = ["sqlite", pytest.param("zookeeper", marks=[pytest.mark.zookeeper, pytest.mark.slow])]
BOREALIS = EXAMPLES.parents[1] / "tests" / "data" / "borealis"


def assert_nodes_hold_their_slices(cluster, nodes):
    catalog = cluster.head_catalog()
    for node in nodes:
        expected = node_slice(catalog, node)
        wait_until(lambda: cluster.node_catalog(node) == expected, timeout=10,
                   what=f"node {node} to hold its slice")
    return catalog


def applied(node: str) -> int:
    return get_json(f"http://{node}/status")["counters"].get("updates_applied", 0)


@pytest.mark.parametrize("store", STORES)
def test_deploy_extend_modify_delete(cluster_factory, store):
    cluster = cluster_factory(store)
    nodes, ports = cluster.three_nodes()
    app = EXAMPLES / "sensor_chain.xml"
    deploy = cluster.example("sensor_chain_deploy.xml", ports)

    result = cluster.submit(app, deploy)
    assert "deployed: 3 nodes acknowledged" in result.stdout
    for node in nodes:
        assert f"{node}: acknowledged" in result.stdout
    catalog = assert_nodes_hold_their_slices(cluster, nodes)
    assert cluster.node_catalog(nodes[1]).boxes.keys() == {"to_fahrenheit"}
    assert catalog.boxes["per_sensor"].node == nodes[2]

    # Extend: a second query on the first node only; the others are sent nothing.
    before = {n: applied(n) for n in nodes}
    cluster.submit(EXAMPLES / "packet_aggregate.xml", cluster.example("packet_aggregate_deploy.xml", ports))
    assert_nodes_hold_their_slices(cluster, nodes)
    assert applied(nodes[0]) == before[nodes[0]] + 1
    assert [applied(n) for n in nodes[1:]] == [before[n] for n in nodes[1:]]

    # Modify a box's parameters: only its node hears of it.
    modify = cluster.write("modify.xml", '<borealis><modify box="valid">'
                                         '<parameter name="expression.0" value="celsius &gt; -40.0"/>'
                                         '</modify></borealis>')
    before = {n: applied(n) for n in nodes}
    cluster.submit(modify)
    assert cluster.node_catalog(nodes[0]).boxes["valid"].param("expression.0") == "celsius > -40.0"
    assert [applied(n) for n in nodes] == [before[nodes[0]] + 1, before[nodes[1]], before[nodes[2]]]

    # Delete the whole chain: every node drops what it no longer needs.
    delete = cluster.write("delete.xml", '<borealis><delete query="summarise"/><delete query="convert"/>'
                                         '<delete query="cleanup"/></borealis>')
    cluster.submit(delete)
    assert_nodes_hold_their_slices(cluster, nodes)
    assert cluster.node_catalog(nodes[0]).boxes.keys() == {"mybox"}
    assert not cluster.node_catalog(nodes[1]).boxes
    assert not cluster.node_catalog(nodes[1]).schemas


@pytest.mark.slow
def test_borealis_deploy_then_add(cluster_factory):
    """The original Borealis deploy test: deploy_Deploy.xml, then deploy_Add.xml on top."""
    cluster = cluster_factory()
    cluster.start_head()
    node = cluster.start_node()

    def local(name):
        text = (BOREALIS / name).read_text().replace('":15000"', f'"{node}"')
        return cluster.write(name, text)

    cluster.submit(local("deploy_Deploy.xml"), local("deploy_DeployDeploy.xml"))
    assert cluster.node_catalog(node).boxes.keys() == {"box1"}
    cluster.submit(local("deploy_Add.xml"), local("deploy_AddDeploy.xml"))
    held = cluster.node_catalog(node)
    assert held.boxes.keys() == {"box1", "box2"}
    assert {(s.stream, s.endpoint) for s in held.subscriptions.values()} == {
        ("Result", "localhost:25000"), ("Result", "localhost:25100")}
    assert_nodes_hold_their_slices(cluster, [node])

    unsubscribe = cluster.write("unsub.xml", '<deploy><unsubscribe stream="Result" endpoint=":25100"/></deploy>')
    cluster.submit(unsubscribe)
    held = cluster.node_catalog(node)
    assert {(s.stream, s.endpoint) for s in held.subscriptions.values()} == {("Result", "localhost:25000")}


@pytest.mark.slow
def test_invalid_submission_changes_nothing_anywhere(cluster_factory):
    cluster = cluster_factory()
    nodes, ports = cluster.sensor_chain()
    version = cluster.head_catalog().version
    before = {n: (applied(n), cluster.node_catalog(n)) for n in nodes}

    # One good new box and one bad one, in one submission.
    bad = cluster.write("bad.xml", """<borealis>
  <box name="extra" type="filter"><in stream="Reading"/><out stream="Extra"/>
    <parameter name="expression.0" value="celsius &gt; 0.0"/></box>
  <box name="broken" type="fliter"><in stream="Reading"/><out stream="Broken"/></box>
</borealis>""")
    deploy = cluster.write("bad_deploy.xml", f'<deploy><node endpoint="{nodes[0]}" query="extra broken"/></deploy>')
    result = cluster.submit(bad, deploy, expect=2)
    assert f"{bad}:4: /borealis/box[2]: unknown box type" in result.stderr and "fliter" in result.stderr
    assert "nothing was changed" in result.stderr
    assert cluster.head_catalog().version == version
    assert {n: (applied(n), cluster.node_catalog(n)) for n in nodes} == before


@pytest.mark.slow
def test_unauthenticated_requests_are_refused(cluster_factory):
    cluster = cluster_factory()
    cluster.start_head()
    node = cluster.start_node()
    update = b'<update version="9"><schema name="S"><field name="a" type="int"/></schema></update>'
    for token in (None, "wrong-token"):
        assert http("POST", f"http://{node}/update", update, token=token)[0] == 401
        assert http("POST", f"{cluster.head}/update", b'<update><global endpoint=":25999"/></update>',
                    token=token)[0] == 401
        assert http("POST", f"{cluster.head}/members", b'{"endpoint": ":15999", "incarnation": "x"}',
                    token=token, content_type="application/json")[0] == 401
    result = cluster.submit(EXAMPLES / "trade_join.xml", expect=1, env={"BOREAS_TOKEN": "wrong-token"})
    assert "401" in result.stderr and "token" in result.stderr
    assert not cluster.node_catalog(node).schemas
    assert cluster.head_catalog().version == 0
    assert ":15999" not in json.dumps(get_json(f"{cluster.head}/nodes"))
    # Reads stay open, and a right token works.
    assert http("POST", f"http://{node}/update", update)[0] == 200


@pytest.mark.slow
@pytest.mark.parametrize("store", STORES)
def test_restarted_node_gets_its_slice_back(cluster_factory, store):
    cluster = cluster_factory(store)
    nodes, ports = cluster.sensor_chain()
    expected = cluster.node_catalog(nodes[1])
    incarnation = cluster.node_status(nodes[1])["incarnation"]

    cluster.stop(nodes[1], kill=True)
    cluster.wait_alive(nodes[1], alive=False)
    assert cluster.nodes()[nodes[1]]["registered"]
    cluster.start_node(nodes[1])
    assert cluster.node_status(nodes[1])["incarnation"] != incarnation
    wait_until(lambda: cluster.node_catalog(nodes[1]) == expected, what="the slice to be re-sent")
    cluster.wait_in_sync(*nodes)


@pytest.mark.slow
def test_update_for_a_down_node_is_delivered_when_it_returns(cluster_factory):
    cluster = cluster_factory()
    down = f"localhost:{free_port()}"  # not started yet: the Head is told it is one of its nodes
    cluster.start_head("--nodes", down)
    up = cluster.start_node()
    deploy = cluster.write("d.xml", f"""<deploy>
  <node endpoint="{up}" query="valid"/> <node endpoint="{down}" query="to_fahrenheit per_sensor"/>
</deploy>""")
    result = cluster.submit(EXAMPLES / "sensor_chain.xml", deploy, "--timeout", "5", expect=1)
    assert f"deployment failed on node {down}" in result.stderr and "unreachable" in result.stderr
    submission_id = result.stdout.split()[1].rstrip(":")
    status = cluster.submission(submission_id)
    assert status["nodes"][up]["state"] == "acknowledged"
    assert status["nodes"][down]["state"] == "failed"

    cluster.start_node(down)
    wait_until(lambda: cluster.submission(submission_id)["state"] == "deployed",
               what="the submission to be delivered to the returning node")
    assert cluster.node_catalog(down).boxes.keys() == {"to_fahrenheit", "per_sensor"}


@pytest.mark.slow
def test_static_deploy_to_listed_nodes(cluster_factory, tmp_path):
    cluster = cluster_factory()
    nodes = cluster.start_nodes(3, head=False)
    ports = dict(zip((15000, 15001, 15002), nodes))
    deploy = cluster.example("sensor_chain_deploy.xml", ports)
    result = cluster.boreas("deploy", EXAMPLES / "sensor_chain.xml", deploy)
    assert result.returncode == 0, result.stderr
    assert "deployed to 3 nodes" in result.stdout
    assert cluster.node_catalog(nodes[2]).boxes.keys() == {"per_sensor"}
    # Deploying again sends nothing new: the nodes already hold their slices.
    before = [applied(n) for n in nodes]
    assert cluster.boreas("deploy", EXAMPLES / "sensor_chain.xml", deploy).returncode == 0
    assert [applied(n) for n in nodes] == before
    cluster.stop(nodes[0])
    result = cluster.boreas("deploy", EXAMPLES / "sensor_chain.xml", deploy, "--timeout", "3")
    assert result.returncode == 1 and f"{nodes[0]}: FAILED" in result.stdout


@pytest.mark.slow
def test_nodes_and_catalog_show_through_the_head(cluster_factory):
    cluster = cluster_factory()
    nodes, ports = cluster.sensor_chain()
    result = cluster.boreas("nodes")
    assert result.returncode == 0, result.stderr
    for node in nodes:
        line = next(line for line in result.stdout.splitlines() if line.startswith(node))
        assert " up " in line and "in sync" in line
    result = cluster.boreas("catalog", "show", "--head", cluster.head)
    assert result.returncode == 0, result.stderr
    assert f"node {nodes[2]}: per_sensor" in result.stdout


@pytest.mark.slow
@pytest.mark.zookeeper
def test_nodes_hold_ephemeral_znodes(cluster_factory):
    from kazoo.client import KazooClient

    cluster = cluster_factory("zookeeper")
    cluster.start_head()
    nodes = cluster.start_nodes(2)
    hosts, _, chroot = cluster.store_url[len("zk://"):].partition("/")
    zk = KazooClient(hosts=hosts)
    zk.start(timeout=5)
    try:
        path = f"/{chroot}/nodes"
        wait_until(lambda: len(zk.get_children(path)) == 2, what="two membership znodes")
        owners = {zk.get(f"{path}/{child}")[1].ephemeralOwner for child in zk.get_children(path)}
        assert 0 not in owners  # ephemeral
        cluster.stop(nodes[0])  # a clean stop closes the session: the znode goes at once
        wait_until(lambda: len(zk.get_children(path)) == 1, what="the stopped node's znode to go")
        cluster.wait_alive(nodes[0], alive=False)
        assert cluster.nodes()[nodes[1]]["zookeeper"] is True
    finally:
        zk.stop()
        zk.close()


@pytest.mark.slow
def test_cluster_up_starts_and_stops_everything(tmp_path):
    head_port = free_port()
    base = free_consecutive_ports(2, avoid=(head_port,))
    ports = [base, base + 1]
    env = {k: v for k, v in os.environ.items() if k not in ("BOREAS_TOKEN", "BOREAS_HEAD")}
    proc = subprocess.Popen(
        [sys.executable, "-m", "boreas.cli.main", "cluster", "up", "--nodes", "2", "--head-port", str(head_port),
         "--base-port", str(base), "--catalog", f"sqlite:///{tmp_path}/c.db"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=tmp_path)
    try:
        lines = []
        while not any("press Ctrl-C" in line for line in lines):
            line = proc.stdout.readline()
            assert line, proc.stderr.read()
            lines.append(line)
        out = "".join(lines)
        token = next(line.split()[1] for line in lines if line.startswith("token"))
        assert f"localhost:{ports[0]}" in out and f"localhost:{ports[1]}" in out
        head = f"http://localhost:{head_port}"
        assert {r["endpoint"] for r in get_json(f"{head}/nodes")["nodes"]} == {f"localhost:{p}" for p in ports}
        submit = subprocess.run([sys.executable, "-m", "boreas.cli.main", "submit", EXAMPLES / "trade_join.xml",
                                 "--head", head, f"--token={token}"], capture_output=True, text=True, env=env)
        assert submit.returncode == 0, submit.stderr
        assert http("POST", f"http://localhost:{ports[0]}/update", b"<update/>", token=TOKEN)[0] == 401
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=30)
    assert proc.returncode == 0, proc.stderr.read()
    time.sleep(0.2)
    for port in (head_port, *ports):
        with pytest.raises(OSError):
            http("GET", f"http://localhost:{port}/status", token=None, timeout=1)


@pytest.mark.slow
def test_head_restart_resumes_without_resending(cluster_factory):
    cluster = cluster_factory()
    nodes, ports = cluster.sensor_chain()
    before = [applied(n) for n in nodes]
    cluster.stop("head")
    cluster.start_head()
    cluster.wait_alive(*nodes)
    cluster.wait_in_sync(*nodes)
    assert [applied(n) for n in nodes] == before  # they already hold their slices
    cluster.submit(EXAMPLES / "packet_aggregate.xml", cluster.example("packet_aggregate_deploy.xml", ports))
    assert applied(nodes[0]) == before[0] + 1
    assert_nodes_hold_their_slices(cluster, nodes)


@pytest.mark.slow
def test_commits_made_directly_to_the_store_reach_the_nodes(cluster_factory):
    cluster = cluster_factory()
    nodes, ports = cluster.three_nodes()
    result = cluster.boreas("catalog", "apply", "--catalog", cluster.store_url, EXAMPLES / "sensor_chain.xml",
                            cluster.example("sensor_chain_deploy.xml", ports))
    assert result.returncode == 0, result.stderr
    wait_until(lambda: cluster.node_catalog(nodes[2]).boxes.keys() == {"per_sensor"},
               what="the Head to push a commit it did not make")
    assert_nodes_hold_their_slices(cluster, nodes)
