"""Issue 31's fault test: durable nodes killed with ``kill -9`` during a publish of two million rows, with a
default named subscriber (``boreas subscribe --name N --output FILE``, nothing else) writing into a file.

Three durable nodes (``--data-dir``) each run one filter of a chain that keeps every row, so what the
subscriber writes must be what was published: every row of each producer once, in that producer's order.
Two producers publish a million numbered rows each, as Arrow batches, while the nodes are killed one after
the other (six times, spread over the publish) and restarted from their data directories (snapshots are taken every second meanwhile, so a
restart restores one and replays the log after it, and re-sends what it had sent and nobody acknowledged).
The replay burst after a restart must never cut the subscriber off (the node judges it by its
acknowledgements), and the file must hold each row exactly once.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pytest
from boreas.client.publisher import Publisher
from support.cluster import TOKEN, free_port, get_json, wait_until

pytestmark = [pytest.mark.faults, pytest.mark.slow]

APP = """<borealis>
  <input stream="Packet" schema="P"/> <output stream="Result" schema="P"/>
  <schema name="P"> <field name="producer" type="int"/> <field name="n" type="int"/> </schema>
  <query name="q0"> <box name="keep0" type="filter"> <in stream="Packet"/> <out stream="Mid0"/>
    <parameter name="expression.0" value="n &gt;= 0"/> </box> </query>
  <query name="q1"> <box name="keep1" type="filter"> <in stream="Mid0"/> <out stream="Mid1"/>
    <parameter name="expression.0" value="n &gt;= 0"/> </box> </query>
  <query name="q2"> <box name="keep2" type="filter"> <in stream="Mid1"/> <out stream="Result"/>
    <parameter name="expression.0" value="n &gt;= 0"/> </box> </query>
</borealis>"""

#: rows per producer (two producers); BOREAS_KILL_ROWS scales it for a quick look
ROWS = int(os.environ.get("BOREAS_KILL_ROWS", "1000000"))
KILLS = 6


def start_durable(cluster, data_dir: Path, endpoint: str | None = None) -> str:
    """A durable node (again); a loaded machine may take longer than ``start_node`` waits to start one."""
    endpoint = endpoint or f"localhost:{free_port()}"
    try:
        return cluster.start_node(endpoint, data_dir=data_dir)
    except AssertionError:
        wait_until(lambda: up(endpoint), 120, f"node {endpoint} to listen", 0.2)
        wait_until(lambda: cluster.nodes().get(endpoint, {}).get("alive"), 60, f"{endpoint} alive at the Head", 0.2)
        return endpoint


def up(endpoint: str) -> bool:
    try:
        return bool(get_json(f"{endpoint}/status" if "://" in endpoint else f"http://{endpoint}/status"))
    except (OSError, AssertionError):
        return False


def chain(cluster) -> tuple[list[str], list[Path]]:
    try:
        cluster.start_head()
    except AssertionError:  # slow to start on a loaded machine: give it longer
        wait_until(lambda: up(cluster.head), 120, "the Head to listen", 0.2)
    dirs = [cluster.workdir / f"node{n}-data" for n in range(3)]
    nodes = [start_durable(cluster, d) for d in dirs]  # one after the other: a loaded machine starts them slowly
    app = cluster.write("app.xml", APP)
    placed = "".join(f'<node endpoint="{node}" query="q{n}"/>' for n, node in enumerate(nodes))
    dep = cluster.write("dep.xml", f'<deploy> <publish stream="Packet" node="{nodes[0]}"/> {placed} </deploy>')
    cluster.submit(app, dep)
    return nodes, dirs


def line_count(path: Path) -> int:
    if not path.exists():
        return 0
    with open(path, "rb") as f:
        return sum(chunk.count(b"\n") for chunk in iter(lambda: f.read(1 << 20), b""))


async def publish(pub: Publisher, producer: int, sent: list[int]) -> None:
    """``producer``'s rows, numbered from 0, through a started publisher; ``sent[0]`` counts rows handed to it."""
    try:
        for start in range(0, ROWS, 50_000):
            n = pa.array(range(start, min(start + 50_000, ROWS)), pa.int64())
            await pub.send(pa.table({"producer": pa.array([producer] * len(n), pa.int64()), "n": n}))
            sent[0] += len(n)
        await pub.flush()
    finally:
        await pub.close()


async def test_nodes_killed_during_a_two_million_row_publish_lose_and_repeat_nothing_for_a_named_subscriber(
        cluster_factory, tmp_path):
    cluster = cluster_factory(snapshot_interval=1.0)
    nodes, dirs = await asyncio.to_thread(chain, cluster)
    out = tmp_path / "out.jsonl"
    err = open(tmp_path / "subscriber.err", "w+")
    subscriber = subprocess.Popen([sys.executable, "-m", "boreas.cli.main", "subscribe", "Result", "--name", "audit",
                                   "--output", str(out)], env=cluster.env, stdout=subprocess.DEVNULL, stderr=err)
    try:
        await asyncio.to_thread(wait_until, lambda: any(s.name == "audit" for s in
                                                        cluster.head_catalog().subscriptions.values()),
                                60, "the named subscription to be committed")
        publishers = [Publisher(cluster.head, "Packet", TOKEN, producer=f"kill-{p}", batch_size=5_000) for p in (0, 1)]
        for pub in publishers:  # (routes asked before anything is killed)
            await pub.start()
        sent = [0]
        publishing = asyncio.gather(*(publish(pub, p, sent) for p, pub in enumerate(publishers)))
        publishing_when_killed = 0
        for kill in range(KILLS):  # spread over the publish: one each time another seventh of the rows was sent
            while sent[0] < (kill + 1) * 2 * ROWS // (KILLS + 1) and not publishing.done():
                await asyncio.sleep(0.1)
            publishing_when_killed += not publishing.done()  # (later ones: while the rows go down the chain)
            victim = kill % 3
            await asyncio.to_thread(cluster.stop, nodes[victim], True)
            await asyncio.to_thread(start_durable, cluster, dirs[victim], nodes[victim])
        await asyncio.wait_for(publishing, 300)
        assert publishing_when_killed >= 2, "the publish ended before the nodes were killed"
        await asyncio.to_thread(wait_until, lambda: line_count(out) >= 2 * ROWS or subscriber.poll() is not None,
                                240, "every row written", 0.5)
        await asyncio.sleep(2.0)  # anything more (a duplicate) would come now
        assert subscriber.poll() is None, "the subscriber stopped"
    finally:
        if subscriber.poll() is None:
            subscriber.send_signal(signal.SIGINT)
            await asyncio.to_thread(subscriber.wait, 30)
        err.seek(0)
        stderr = err.read()
    assert "Traceback" not in stderr, stderr
    got: dict[int, list[int]] = {0: [], 1: []}
    with open(out) as f:
        for line in f:
            row = json.loads(line)
            got[row["producer"]].append(row["n"])
    for producer in (0, 1):
        assert len(got[producer]) == ROWS, (producer, len(got[producer]), stderr[-2000:])
        assert got[producer] == list(range(ROWS)), producer  # each once, in the producer's order
