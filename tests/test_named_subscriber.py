"""Named subscribers that resume (issue 31 item 1): ``boreas subscribe --name N`` / ``Subscriber(name=)``.

The node keeps a named subscriber's batches until it acknowledges them, while
it is down too; one started again with the same name (a new process, a new
port) replaces the old subscription and gets what it had not acknowledged.
Into a file (``--output``) that is exactly once: the file records how far it
got, and a restart cuts it back there and drops what it already has.  One that
falls past what the node keeps is told how much it missed and exits 1.  An
unnamed subscriber is as it was: it unsubscribes when it stops.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from boreas.client.optimizer import Optimizer
from boreas.client.publisher import Publisher
from boreas.client.subscriber import Subscriber, SubscriberTooSlow
from support.cluster import TOKEN, get_json, wait_until
from support.streams import collect

APP = """<borealis>
  <input stream="Packet" schema="P"/> <output stream="Result" schema="P"/>
  <schema name="P"> <field name="value" type="double"/> <field name="time" type="int"/> </schema>
  <box name="pass" type="filter"> <in stream="Packet"/> <out stream="Result"/>
    <parameter name="expression.0" value="time &gt;= 0"/> </box>
</borealis>"""


def one_node(cluster, *extra: str) -> str:
    cluster.start_head()
    node = cluster.start_node(extra=extra)
    app = cluster.write("app.xml", APP)
    dep = cluster.write("dep.xml", f'<deploy> <publish stream="Packet" node="{node}"/>'
                                   f' <node endpoint="{node}" query="pass"/> </deploy>')
    cluster.submit(app, dep)
    return node


def two_nodes(cluster) -> list[str]:
    """The filter on the first of two nodes (started one after the other: a loaded machine starts them slowly)."""
    cluster.start_head()
    nodes = [cluster.start_node(), cluster.start_node()]
    app = cluster.write("app.xml", APP.replace('<box name="pass"', '<query name="box1"> <box name="box1"')
                        .replace("</box>", "</box> </query>"))
    dep = cluster.write("dep.xml", f'<deploy> <publish stream="Packet" node="{nodes[0]}"/>'
                                   f' <node endpoint="{nodes[0]}" query="box1"/> <node endpoint="{nodes[1]}" query=""/>'
                                   ' </deploy>')
    cluster.submit(app, dep)
    return nodes


def subscribe_cli(cluster, *args: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "boreas.cli.main", "subscribe", "Result", *args], env=cluster.env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def named_endpoint(cluster, name: str, other_than: str | None = None) -> str:
    """The endpoint of the subscription named ``name`` once it is committed (and is not ``other_than``)."""
    def found() -> str | None:
        return next((s.endpoint for s in cluster.head_catalog().subscriptions.values()
                     if s.name == name and s.endpoint != other_than), None)
    return wait_until(found, 60, f"subscription {name!r} to be committed")


def lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


async def paced(publisher: Publisher, rows: list[tuple], chunk: int = 200, pause: float = 0.05) -> None:
    for i in range(0, len(rows), chunk):
        await publisher.send(rows[i:i + chunk])
        await asyncio.sleep(pause)


@pytest.mark.slow
async def test_a_named_subscriber_killed_and_restarted_writes_every_row_once(cluster_factory, tmp_path):
    cluster = cluster_factory()
    await asyncio.to_thread(one_node, cluster)
    out = tmp_path / "out.jsonl"
    total = 20_000
    rows = [(1.0, n) for n in range(total)]
    first = subscribe_cli(cluster, "--name", "audit", "--output", str(out))
    second = None
    try:
        old = await asyncio.to_thread(named_endpoint, cluster, "audit")
        async with Subscriber(cluster.head, "Result", TOKEN) as unnamed, \
                Publisher(cluster.head, "Packet", TOKEN, producer="resume-test", batch_size=10) as publisher:
            reading = asyncio.create_task(collect(unnamed, total, timeout=120))
            publishing = asyncio.create_task(paced(publisher, rows))
            await asyncio.to_thread(wait_until, lambda: len(lines(out)) >= 2_000, 60, "the first rows written")
            first.send_signal(signal.SIGKILL)  # mid-stream, perhaps mid-line
            first.wait()
            written = len(lines(out))
            assert written < total
            second = subscribe_cli(cluster, "--name", "audit", "--output", str(out))
            new = await asyncio.to_thread(named_endpoint, cluster, "audit", old)
            await publishing
            assert await reading == rows  # an unnamed subscriber beside it: as before
            await asyncio.to_thread(wait_until, lambda: len(lines(out)) >= total, 90, "every row written")
            await asyncio.sleep(1.0)  # anything more would come now
        second.send_signal(signal.SIGINT)
        _, err = await asyncio.to_thread(second.communicate, timeout=30)
        assert "resuming" in err and "stays" in err, err
    finally:
        for proc in (first, second):
            if proc is not None and proc.poll() is None:
                proc.kill()
    got = [tuple(json.loads(line).values()) for line in lines(out)]
    assert got == rows  # every row once, in order, across the kill
    catalog = cluster.head_catalog()
    subs = {s.endpoint: s.name for s in catalog.subscriptions.values()}
    assert subs == {new: "audit"}  # the restart replaced the old subscription; the unnamed one unsubscribed
    assert old not in subs


@pytest.mark.slow
async def test_a_named_subscriber_past_retention_is_told_what_it_missed_and_exits_non_zero(cluster_factory, tmp_path):
    cluster = cluster_factory()
    node = await asyncio.to_thread(one_node, cluster, "--subscriber-buffer-mb", "0.05")
    out = tmp_path / "out.csv"
    first = subscribe_cli(cluster, "--name", "late", "--output", str(out), "--format", "csv")
    second = None
    try:
        old = await asyncio.to_thread(named_endpoint, cluster, "late")
        async with Publisher(cluster.head, "Packet", TOKEN, producer="late-test", batch_size=10) as publisher:
            await publisher.send([(1.0, n) for n in range(100)])
            await asyncio.to_thread(wait_until, lambda: len(lines(out)) == 101, 60, "the first rows written")
            first.send_signal(signal.SIGKILL)
            first.wait()
            await paced(publisher, [(1.0, n) for n in range(100, 20_100)], chunk=1000)
        await asyncio.to_thread(wait_until, lambda: get_json(f"http://{node}/status")["data"]["links"][old].get(
            "retention_drops"), 60, "the node to drop what it kept")
        second = subscribe_cli(cluster, "--name", "late", "--output", str(out), "--format", "csv")
        _, err = await asyncio.to_thread(second.communicate, timeout=120)
    finally:
        for proc in (first, second):
            if proc is not None and proc.poll() is None:
                proc.kill()
    assert second.returncode == 1, err
    assert "fell past what" in err and "rows) it had not acknowledged were dropped" in err, err
    assert "Traceback" not in err
    assert len(lines(out)) == 101  # what it had, nothing after the gap


@pytest.mark.slow
async def test_the_api_resumes_from_the_positions_it_kept(cluster_factory):
    """``Subscriber(name=, resume_from=)``: the batches read before close() are not given again, the rest are,
    including those produced while no subscriber of that name ran; close() leaves the subscription in place."""
    cluster = cluster_factory()
    await asyncio.to_thread(one_node, cluster)
    rows = [(1.0, n) for n in range(3_000)]
    async with Publisher(cluster.head, "Packet", TOKEN, producer="api-test", batch_size=100) as publisher:
        async with Subscriber(cluster.head, "Result", TOKEN, name="api") as first:
            await publisher.send(rows[:1_000])
            got = await collect(first, 1_000, timeout=60)
            kept = first.positions()
        assert any(s.name == "api" for s in cluster.head_catalog().subscriptions.values())
        await publisher.send(rows[1_000:])
    async with Subscriber(cluster.head, "Result", TOKEN, name="api", resume_from=kept) as second:
        got += await collect(second, 2_000, timeout=60)
        await second.unsubscribe()
    assert got == rows
    assert not cluster.head_catalog().subscriptions


@pytest.mark.slow
async def test_what_a_durable_node_keeps_for_a_named_subscriber_survives_its_kill(cluster_factory, tmp_path):
    """The batches kept for a named subscriber that is down are in the node's snapshot or its input log: the
    node killed with ``kill -9`` and restarted from its data directory still has them for it."""
    cluster = cluster_factory(snapshot_interval=1.0)
    cluster.start_head()
    data = tmp_path / "node"
    node = await asyncio.to_thread(cluster.start_node, data_dir=data)
    app = cluster.write("app.xml", APP)
    dep = cluster.write("dep.xml", f'<deploy> <publish stream="Packet" node="{node}"/>'
                                   f' <node endpoint="{node}" query="pass"/> </deploy>')
    await asyncio.to_thread(cluster.submit, app, dep)
    rows = [(1.0, n) for n in range(4_000)]
    async with Publisher(cluster.head, "Packet", TOKEN, producer="durable-test", batch_size=100) as publisher:
        async with Subscriber(cluster.head, "Result", TOKEN, name="keep") as first:
            await publisher.send(rows[:1_000])
            got = await collect(first, 1_000, timeout=60)
            kept = first.positions()
        await paced(publisher, rows[1_000:3_000], chunk=500, pause=0.5)  # snapshots are taken meanwhile
    await asyncio.sleep(1.5)
    await asyncio.to_thread(cluster.stop, node, True)
    await asyncio.to_thread(cluster.start_node, node, data_dir=data)
    async with Publisher(cluster.head, "Packet", TOKEN, producer="durable-test-2", batch_size=100) as publisher:
        await publisher.send(rows[3_000:])
    async with Subscriber(cluster.head, "Result", TOKEN, name="keep", resume_from=kept) as second:
        got += await collect(second, 3_000, timeout=90)
        taken = second.receiver.counters["batches"]  # (how many: adaptive batching may join the box's outputs)
        await asyncio.sleep(1.0)
        assert second.receiver.counters["batches"] == taken  # nothing more: each row once
    assert got == rows


@pytest.mark.slow
async def test_what_waits_for_a_named_subscriber_moves_with_the_box_that_produces_it(cluster_factory):
    """The producing box moves to another node while its named subscriber is down: what the old node kept for
    it goes along, and the subscriber resumes from the new node with nothing lost or repeated."""
    cluster = cluster_factory()
    nodes = await asyncio.to_thread(two_nodes, cluster)
    rows = [(float(n), n) for n in range(3_000)]
    async with Publisher(cluster.head, "Packet", TOKEN, producer="move-test", batch_size=100) as publisher:
        async with Subscriber(cluster.head, "Result", TOKEN, name="mover") as first:
            await publisher.send(rows[:1_000])
            got = await collect(first, 1_000, timeout=60)
            kept = first.positions()
        await publisher.send(rows[1_000:2_000])  # kept for it on the first node
        await publisher.flush()
        async with Optimizer(cluster.head, TOKEN) as optimizer:
            assert (await optimizer.move("box1", nodes[1])).source == nodes[0]
        await publisher.send(rows[2_000:])
    async with Subscriber(cluster.head, "Result", TOKEN, name="mover", resume_from=kept) as second:
        got += await collect(second, 2_000, timeout=90)
        taken = second.receiver.counters["batches"]  # (how many: adaptive batching may join the box's outputs)
        await asyncio.sleep(1.0)
        assert second.receiver.counters["batches"] == taken and second.failure is None  # nothing more
    assert got == rows
