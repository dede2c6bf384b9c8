"""Global components (paper section 2.3) and pending requests (section 3.1.2) against real processes."""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys
from dataclasses import replace

import pytest
from support.cluster import EXAMPLES, TOKEN, get_json, http, wait_until

from boreas.catalog.replicate import update_items
from boreas.catalog.slices import node_slice
from boreas.catalog.updates import update_document
from boreas.regional.global_component import GlobalComponent

BOREALIS = EXAMPLES.parents[1] / "tests" / "data" / "borealis"


@pytest.mark.parametrize("store", ["sqlite",
                                   pytest.param("zookeeper", marks=[pytest.mark.zookeeper, pytest.mark.slow])])
async def test_global_component_joins_late_and_follows_every_change(cluster_factory, store):
    cluster = cluster_factory(store)
    nodes, ports = await asyncio.to_thread(cluster.sensor_chain)
    changes = []
    component = GlobalComponent(cluster.head, TOKEN, on_change=lambda v, items, c: changes.append(v))
    await component.start("localhost", 0)
    try:
        await asyncio.wait_for(component.ready.wait(), 10)
        head = await asyncio.to_thread(cluster.head_catalog)
        assert component.catalog == head and component.catalog.version == head.version
        assert component.endpoint in head.globals  # registration is in the global catalog

        await asyncio.to_thread(cluster.submit, EXAMPLES / "packet_aggregate.xml",
                                cluster.example("packet_aggregate_deploy.xml", ports))
        modify = cluster.write("m.xml", '<borealis><modify box="mybox">'
                                        '<parameter name="window-size" value="5"/></modify></borealis>')
        await asyncio.to_thread(cluster.submit, modify)
        head = await asyncio.to_thread(cluster.head_catalog)
        for _ in range(100):
            if component.catalog.version == head.version:
                break
            await asyncio.sleep(0.05)
        assert component.catalog == head
        assert changes == list(range(changes[0], head.version + 1))  # every version, in order
        assert component.catalog.boxes["mybox"].param("window-size") == "5"

        await component.register()  # asking again gets a fresh full copy
        for _ in range(100):
            if component.counters["full_copies"] == 2:
                break
            await asyncio.sleep(0.05)
        assert component.counters["full_copies"] == 2 and component.catalog == head
    finally:
        await component.close()
    status = await asyncio.to_thread(get_json, f"{cluster.head}/status")
    assert status["globals"] == []
    assert component.endpoint not in (await asyncio.to_thread(cluster.head_catalog)).globals


@pytest.mark.slow
def test_watch_prints_the_catalog_then_each_change(cluster_factory):
    cluster = cluster_factory()
    nodes, ports = cluster.sensor_chain()
    once = cluster.boreas("watch", "--once")
    assert once.returncode == 0, once.stderr
    assert "(full copy)" in once.stdout and f"node {nodes[2]}: per_sensor" in once.stdout

    watch = subprocess.Popen([sys.executable, "-m", "boreas.cli.main", "watch"], env=cluster.env,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_until(lambda: len(get_json(f"{cluster.head}/status")["globals"]) == 1, what="watch to register")
        cluster.submit(EXAMPLES / "packet_aggregate.xml", cluster.example("packet_aggregate_deploy.xml", ports))
        lines = []
        while not any("+ box mybox" in line for line in lines):
            line = watch.stdout.readline()
            assert line, watch.stderr.read()
            lines.append(line)
    finally:
        watch.send_signal(signal.SIGINT)
        out, err = watch.communicate(timeout=15)
    text = "".join(lines)
    assert "== version" in text and f"+ box mybox (aggregate) on {nodes[0]}" in text
    assert watch.returncode == 0, err
    assert get_json(f"{cluster.head}/status")["globals"] == []  # it said goodbye


def _simulate_move_away(cluster, box: str, source: str, target: str) -> None:
    """What the move protocol does at the nodes: the target declares the box, the source drops it."""
    moved = cluster.head_catalog()
    moved.boxes[box] = replace(moved.boxes[box], node=target)
    items = update_items(cluster.node_catalog(target), node_slice(moved, target))
    assert http("POST", f"http://{target}/update", update_document(items).encode())[0] == 200
    drop = f'<update><delete box="{box}"/></update>'.encode()
    assert http("POST", f"http://{source}/update", drop)[0] == 200


def _first_line(proc: subprocess.Popen) -> str:
    line = proc.stdout.readline()
    assert line, proc.stderr.read()
    return line


@pytest.mark.slow
def test_pending_request_follows_the_box_to_its_new_node(cluster_factory):
    cluster = cluster_factory()
    cluster.start_head()
    source, target = cluster.start_nodes(2)

    def local(name):
        return cluster.write(name, (BOREALIS / name).read_text().replace('":15000"', f'"{source}"'))

    cluster.submit(local("deploy_Deploy.xml"), local("deploy_DeployDeploy.xml"),
                   cluster.write("t.xml", f'<deploy><node endpoint="{target}" query=""/></deploy>'))
    _simulate_move_away(cluster, "box1", source, target)

    modify = cluster.write("m.xml", '<borealis><modify box="box1">'
                                    '<parameter name="expression.0" value="value &gt; 1.0"/></modify></borealis>')
    submit = subprocess.Popen([sys.executable, "-m", "boreas.cli.main", "submit", str(modify)],
                              env=cluster.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        submission_id = _first_line(submit).split()[1].rstrip(":")
        wait_until(lambda: cluster.submission(submission_id)["nodes"].get(source, {}).get("state") == "waiting",
                   what="the request to be pending")
        reason = cluster.submission(submission_id)["nodes"][source]["reason"]
        assert "box 'box1' is not on node" in reason and "waiting for its new location" in reason
        row = cluster.nodes()[source]
        assert row["pending"] and not row["failure"]

        # The source node reports the move (as it will in the dynamic-topology protocol).
        move = f'<update><move box="box1" node="{target}"/></update>'.encode()
        assert http("POST", f"{cluster.head}/update", move)[0] == 200
        out, err = submit.communicate(timeout=30)
    finally:
        if submit.poll() is None:
            submit.kill()
    assert submit.returncode == 0, (out, err)
    assert cluster.head_catalog().boxes["box1"].node == target
    assert cluster.node_catalog(target).boxes["box1"].param("expression.0") == "value > 1.0"
    assert "box1" not in cluster.node_catalog(source).boxes
    catalog = cluster.head_catalog()
    for node in (source, target):
        wait_until(lambda: cluster.node_catalog(node) == node_slice(catalog, node), what=f"{node} in its slice")
    assert not cluster.nodes()[source]["pending"]


@pytest.mark.slow
def test_pending_request_times_out_with_a_clear_error(cluster_factory):
    cluster = cluster_factory(pending_timeout=1.5)
    cluster.start_head()
    node = cluster.start_node()
    local = {name: cluster.write(name, (BOREALIS / name).read_text().replace('":15000"', f'"{node}"'))
             for name in ("deploy_Deploy.xml", "deploy_DeployDeploy.xml")}
    cluster.submit(*local.values())
    assert http("POST", f"http://{node}/update", b'<update><delete box="box1"/></update>')[0] == 200

    modify = cluster.write("m.xml", '<borealis><modify box="box1">'
                                    '<parameter name="expression.0" value="false"/></modify></borealis>')
    result = cluster.submit(modify, expect=1)
    assert f"deployment failed on node {node}: box 'box1' was not on node {node}" in result.stderr
    assert "did not learn where it went" in result.stderr
    # The Head then restores the node from the global catalog, modified box included.
    wait_until(lambda: "box1" in cluster.node_catalog(node).boxes, what="box1 restored")
    assert cluster.node_catalog(node).boxes["box1"].param("expression.0") == "false"
