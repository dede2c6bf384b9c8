"""Array fields end to end with real processes (issue 35 item 4).

Frames with a ``byte(0...1, 0...2)`` and a ``double(0...*)`` field are
published as CSV (``boreas publish``: the arrays as JSON), as rows and as a
pyarrow table; they go through a filter, a map that passes the arrays on
whole, and a union with a second input, to ``boreas subscribe`` (which
prints them as JSON lists) and to a Python subscriber (which gets lists).
The durable node is killed with ``kill -9`` between two publications: it
replays its logged batches (arrays included) and the subscriber then gets
the rest exactly once.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys

import pyarrow as pa
import pytest
from boreas.client.publisher import Publisher
from boreas.client.subscriber import Subscriber
from support.cluster import TOKEN, wait_until
from support.streams import collect

pytestmark = pytest.mark.slow

APP = """<borealis>
    <schema name="Frame">
        <field name="time" type="int"/>
        <field name="k"    type="int"/>
        <field name="px"   type="byte(0...1, 0...2)"/>
        <field name="v"    type="double(0...*)"/>
    </schema>
    <input stream="Frames" schema="Frame"/>
    <input stream="More" schema="Frame"/>
    <query name="frames">
    <box name="keep" type="filter"><in stream="Frames"/><out stream="Kept"/>
        <parameter name="expression.0" value="k &lt; 2"/></box>
    <box name="both" type="union"><in stream="Kept"/><in stream="More"/><out stream="Both"/></box>
    <box name="shape" type="map"><in stream="Both"/><out stream="Shaped"/>
        <parameter name="expression.0" value="time"/><parameter name="output-field-name.0" value="time"/>
        <parameter name="expression.1" value="px"/><parameter name="output-field-name.1" value="px"/>
        <parameter name="expression.2" value="v"/><parameter name="output-field-name.2" value="v"/>
    </box>
    </query>
    <output stream="Shaped"/>
</borealis>"""


def frame(n: int) -> tuple:
    return (n, n % 3, [[n % 100, -1, 2], [3, -(n % 100), 127]], [float(i) + 0.5 for i in range(n % 4)])


def shaped(rows: list[tuple]) -> list[tuple]:
    return [(r[0], r[2], r[3]) for r in rows]


async def test_arrays_flow_from_publishers_through_boxes_to_subscribers_across_a_kill(cluster_factory):
    cluster = cluster_factory()
    cluster.start_head()
    data_dir = cluster.workdir / "node-data"
    node = cluster.start_node(data_dir=data_dir)
    cluster.submit(cluster.write("app.xml", APP), cluster.write(
        "dep.xml", f'<deploy><publish stream="Frames" node="{node}"/><publish stream="More" node="{node}"/>'
                   f'<node endpoint="{node}" query="frames"/></deploy>'))
    csv_rows = [frame(n) for n in range(30)]
    kept = [r for r in csv_rows if r[1] < 2]
    printed = subprocess.Popen([sys.executable, "-m", "boreas.cli.main", "subscribe", "Shaped", "--count",
                                str(len(kept))], env=cluster.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True, cwd=cluster.workdir)
    try:
        wait_until(lambda: any(s.stream == "Shaped" for s in cluster.head_catalog().subscriptions.values()),
                   what="boreas subscribe's subscription")
        async with Subscriber(cluster.head, "Shaped", TOKEN) as subscriber:
            text = "time,k,px,v\n" + "".join(f'{t},{k},"{json.dumps(px)}","{json.dumps(v)}"\n'
                                             for t, k, px, v in csv_rows)
            result = cluster.boreas("publish", "Frames", "--file", cluster.write("frames.csv", text))
            assert result.returncode == 0, result.stderr
            assert await collect(subscriber, len(kept), timeout=30) == shaped(kept)
            out, err = printed.communicate(timeout=30)
            assert printed.returncode == 0, err
            assert [json.loads(line) for line in out.splitlines()] == [
                {"time": t, "px": px, "v": v} for t, px, v in shaped(kept)]

            more = [frame(n) for n in range(100, 140)]
            async with Publisher(cluster.head, "More", TOKEN, batch_size=7, producer="rows") as publisher:
                await publisher.send(more)
                await publisher.flush()
            assert publisher.accepted == len(more) and not publisher.refused
            assert await collect(subscriber, len(more), timeout=30) == shaped(more)

            await asyncio.to_thread(cluster.stop, node, True)  # kill -9: the log holds the array batches
            await asyncio.to_thread(cluster.start_node, node, True, data_dir)
            late = [frame(n) for n in range(200, 260)]
            table = pa.table({"time": [r[0] for r in late], "k": [r[1] for r in late],
                              "px": [r[2] for r in late], "v": [r[3] for r in late]})
            async with Publisher(cluster.head, "Frames", TOKEN, batch_size=16, producer="table") as publisher:
                await publisher.send(table)
                await publisher.flush()
            assert publisher.accepted == len(late) and not publisher.refused
            late_kept = [r for r in late if r[1] < 2]
            assert await collect(subscriber, len(late_kept), timeout=60) == shaped(late_kept)
    finally:
        if printed.poll() is None:
            printed.kill()
