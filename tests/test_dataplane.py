"""Tuples flowing through real node processes: pipelines across nodes, order, exactly-once, back-pressure."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from collections import defaultdict

import pytest
from boreas.client.head_api import UnknownStream
from boreas.client.publisher import Publisher
from boreas.client.subscriber import Subscriber
from support.cluster import EXAMPLES, TOKEN, get_json, wait_until
from support.streams import collect

BOREALIS = EXAMPLES.parents[1] / "tests" / "data" / "borealis"


def readings():
    """Three sensors, times 0..299, some readings out of range (the filter drops them)."""
    rows = []
    for time in range(300):
        for sensor in (1, 2, 3):
            celsius = 100.0 if (time * sensor) % 17 == 0 else (time % 50) - 10 + sensor / 4
            rows.append((sensor, time, celsius))
    rows += [(sensor, 301, 0.0) for sensor in (1, 2, 3)]  # closes each sensor's last window
    return rows


def expected_averages(rows):
    """The example's VALUES windows: aligned (``independent-window-alignment``), each sensor's minutes
    start at multiples of 60, although its first valid reading is at time 1."""
    valid = [(s, t, c * 9.0 / 5.0 + 32.0) for s, t, c in rows if -90.0 < c < 60.0 and t <= 300]
    first = {s: min(t for vs, t, _ in valid if vs == s) for s in (1, 2, 3)}
    assert set(first.values()) == {1}
    groups = defaultdict(list)
    for sensor, time, fahrenheit in valid:
        start = time // 60 * 60
        groups[(sensor, start)].append(fahrenheit)
    return {key: (sum(v) / len(v), len(v)) for key, v in groups.items()}


@pytest.mark.slow
async def test_pipeline_across_three_nodes_matches_a_hand_computed_result(cluster_factory):
    cluster = cluster_factory()
    await asyncio.to_thread(cluster.sensor_chain)
    expected = expected_averages(readings())
    async with Subscriber(cluster.head, "Average", TOKEN) as subscriber:
        async with Publisher(cluster.head, "Reading", TOKEN, batch_size=97) as publisher:
            await publisher.send(readings())
        got = await collect(subscriber, len(expected))
    assert publisher.accepted == len(readings()) and not publisher.refused
    by_key = {(sensor, start): (avg, n) for sensor, start, avg, n in got}
    assert by_key.keys() == expected.keys()
    for key, (avg, n) in expected.items():
        assert by_key[key][1] == n and by_key[key][0] == pytest.approx(avg)
    for sensor in (1, 2, 3):  # each group's windows arrive in time order
        starts = [start for s, start, _, _ in got if s == sensor]
        assert starts == sorted(starts)


@pytest.mark.slow
async def test_ten_thousand_tuples_cross_nodes_once_and_in_order(cluster_factory):
    """box1 on one node feeds box2 on another (the Borealis deploy test); every tuple arrives once, in order."""
    cluster = cluster_factory()

    def deploy() -> list[str]:
        cluster.start_head()
        nodes = cluster.start_nodes(2)
        files = []
        for name, node in (("deploy_Deploy.xml", nodes[0]), ("deploy_DeployDeploy.xml", nodes[0]),
                           ("deploy_Add.xml", nodes[1]), ("deploy_AddDeploy.xml", nodes[1])):
            files.append(cluster.write(name, (BOREALIS / name).read_text().replace('":15000"', f'"{node}"')))
        cluster.submit(*files[:2])
        cluster.submit(*files[2:])
        return nodes

    nodes = await asyncio.to_thread(deploy)
    rows = [(float(n), n) for n in range(10_000)]
    async with Subscriber(cluster.head, "Add", TOKEN) as subscriber:
        async with Publisher(cluster.head, "Packet", TOKEN, batch_size=250) as publisher:
            await publisher.send(rows)
        got = await collect(subscriber, len(rows))
    assert got == rows
    status = await asyncio.to_thread(cluster.node_status, nodes[0])
    assert status["data"]["links"][nodes[1]]["connected"]


@pytest.mark.slow
async def test_schema_violations_are_reported_and_the_node_keeps_running(cluster_factory):
    cluster = cluster_factory()
    nodes, _ = await asyncio.to_thread(cluster.sensor_chain)
    rows = [(1, 1, 20.0), (1, "two", 20.0), (1, 3), {"sensor": 1, "time": 4, "celsius": "hot"}, (2**40, 5, 1.0),
            (1, 6, 21.0)]
    async with Publisher(cluster.head, "Reading", TOKEN) as publisher:
        await publisher.send(rows)
    assert publisher.accepted == 2
    assert [(e.row, e.field) for e in publisher.refused] == [(1, "time"), (2, ""), (3, "celsius"), (4, "sensor")]
    assert "expected int" in publisher.refused[0].reason and "out of range" in publisher.refused[3].reason
    status = await asyncio.to_thread(cluster.node_status, nodes[0])
    assert status["data"]["flow"]["refused_rows"] == 4
    with pytest.raises(UnknownStream, match="no stream 'Nope'"):
        await Publisher(cluster.head, "Nope", TOKEN).start()
    with pytest.raises(UnknownStream, match="not an input stream"):
        await Publisher(cluster.head, "Average", TOKEN).start()


@pytest.mark.slow
async def test_a_stalled_subscriber_holds_publishers_back_with_bounded_memory(cluster_factory):
    cluster = cluster_factory()

    def deploy() -> str:
        cluster.start_head()
        node = cluster.start_node()
        files = [cluster.write(n, (BOREALIS / n).read_text().replace('":15000"', f'"{node}"'))
                 for n in ("deploy_Deploy.xml", "deploy_DeployDeploy.xml")]
        cluster.submit(*files)
        return node

    node = await asyncio.to_thread(deploy)
    pid = cluster.procs[node].pid

    def rss_mb() -> float:
        with open(f"/proc/{pid}/status") as fh:
            return next(int(line.split()[1]) for line in fh if line.startswith("VmRSS")) / 1024

    total = 400_000
    # on-slow="block": this subscriber asks for back-pressure rather than being disconnected
    async with Subscriber(cluster.head, "Result", TOKEN, queue_batches=2, on_slow="block") as subscriber:
        publisher = Publisher(cluster.head, "Packet", TOKEN, batch_size=1000, capacity=4)
        await publisher.start()
        sending = asyncio.create_task(publisher.send((float(n), n) for n in range(total)))
        await asyncio.sleep(2.0)  # nobody reads: the subscriber's queue, the node's link and inbox fill up
        before = rss_mb()
        await asyncio.sleep(1.0)
        assert not sending.done()  # the publisher is held back
        assert rss_mb() - before < 20  # and the node is not buffering what it cannot deliver
        got = await collect(subscriber, total, timeout=120)  # reading again lets everything through
        await sending
        await publisher.close()
    assert [n for _, n in got] == list(range(total))


@pytest.mark.slow
def test_publish_and_subscribe_from_the_command_line(cluster_factory, tmp_path):
    cluster = cluster_factory()
    cluster.sensor_chain()
    csv = tmp_path / "readings.csv"
    csv.write_text("sensor,time,celsius\n" + "".join(f"1,{t},{t % 40}.5\n" for t in range(120)) + "1,120,0\n")
    jsonl = tmp_path / "bad.jsonl"
    jsonl.write_text('{"sensor": 1, "time": 501, "celsius": 1.0}\n[1, 502, "warm"]\n')
    sub = subprocess.Popen([sys.executable, "-m", "boreas.cli.main", "subscribe", "Average", "--count", "2"],
                           env=cluster.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_until(lambda: any(s.endpoint != "localhost:25000" for s in cluster.head_catalog().subscriptions.values()),
                   what="the subscription")
        result = cluster.boreas("publish", "Reading", "--file", csv)
        assert result.returncode == 0, result.stderr
        assert "published 121 rows to Reading" in result.stdout, result.stdout
        out, err = sub.communicate(timeout=30)
    finally:
        if sub.poll() is None:
            sub.kill()
    lines = [json.loads(line) for line in out.splitlines()]
    assert [(r["sensor"], r["time"], r["readings"]) for r in lines] == [(1, 0, 60), (1, 60, 60)]
    result = cluster.boreas("publish", "Reading", "--file", jsonl)
    assert result.returncode == 1 and "row 2: field 'celsius'" in result.stderr
    assert "published 1 row to" in result.stdout
    result = cluster.boreas("publish", "Nope", "--file", jsonl)
    assert result.returncode == 1 and "no stream 'Nope'" in result.stderr
    bad = cluster.write("bad.csv", "sensor,time,kelvin\n1,1,293.0\n")
    result = cluster.boreas("publish", "Reading", "--file", str(bad))  # refused before anything is sent
    assert result.returncode == 2 and "kelvin" in result.stderr
    assert "Unclosed client session" not in result.stderr and "Traceback" not in result.stderr
    assert get_json(f"{cluster.head}/streams/Reading")["entries"]


async def test_a_stream_fans_out_to_local_and_remote_boxes_and_a_client(cluster_factory):
    cluster = cluster_factory()
    app = cluster.write("fan.xml", """<borealis>
  <schema name="T"><field name="n" type="int"/></schema>
  <input stream="In" schema="T"/>
  <box name="pass" type="filter"><in stream="In"/><out stream="Mid"/>
    <parameter name="expression.0" value="n &gt;= 0"/></box>
  <box name="twice" type="map"><in stream="Mid"/><out stream="A"/>
    <parameter name="expression.0" value="n * 2"/><parameter name="output-field-name.0" value="n"/></box>
  <box name="thrice" type="map"><in stream="Mid"/><out stream="B"/>
    <parameter name="expression.0" value="n * 3"/><parameter name="output-field-name.0" value="n"/></box>
</borealis>""")

    def deploy() -> list[str]:
        cluster.start_head()
        nodes = cluster.start_nodes(2)
        dep = cluster.write("fan_deploy.xml", f"""<deploy>
  <publish stream="In" node="{nodes[0]}"/>
  <node endpoint="{nodes[0]}" query="pass twice"/> <node endpoint="{nodes[1]}" query="thrice"/>
</deploy>""")
        cluster.submit(app, dep)
        return nodes

    await asyncio.to_thread(deploy)
    n = 5000
    async with Subscriber(cluster.head, "A", TOKEN) as a, Subscriber(cluster.head, "B", TOKEN) as b, \
            Subscriber(cluster.head, "Mid", TOKEN) as mid:
        async with Publisher(cluster.head, "In", TOKEN, batch_size=128) as publisher:
            await publisher.send((i,) for i in range(n))
        got_a, got_b, got_mid = await asyncio.gather(collect(a, n), collect(b, n), collect(mid, n))
    assert got_mid == [(i,) for i in range(n)]
    assert got_a == [(2 * i,) for i in range(n)]
    assert got_b == [(3 * i,) for i in range(n)]
