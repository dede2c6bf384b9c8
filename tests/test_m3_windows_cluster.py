"""A TUMBLE view on real Head and node processes: its closed windows reach a subscriber, once each, the late
row is in the node's late-tuple metric, and the end of input closes the last window (docs/m3.md, "Event time").
The operator fed by hand, against a reference: test_m3_windows.py."""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.request

import pytest
from support.cluster import wait_until

APP = """<?xml version="1.0"?>
<borealis>
  <input stream="Bid" schema="BidTuple" />
  <output stream="PerWindow" />
  <schema name="BidTuple">
    <field name="auction" type="int" /><field name="price" type="int" /><field name="ts" type="long" />
  </schema>
  <query name="windows">
    <box name="per_window" type="m3">
      <in stream="Bid" /><out stream="PerWindow" />
      <parameter name="sql"><![CDATA[
        SELECT auction, window_start, window_end, COUNT(*) AS n, SUM(price) AS total
        FROM TABLE(TUMBLE(TABLE Bid, DESCRIPTOR(ts), INTERVAL '10' SECOND))
        GROUP BY auction, window_start, window_end]]></parameter>
    </box>
  </query>
</borealis>
"""


def publish(cluster, name: str, rows: list[tuple[int, int, int]], *extra: str) -> None:
    path = cluster.write(name, "auction,price,ts\n" + "".join(f"{a},{p},{t}\n" for a, p, t in rows))
    result = cluster.boreas("publish", "Bid", "--file", path, *extra)
    assert result.returncode == 0, (result.stdout, result.stderr)


@pytest.mark.slow
def test_a_tumble_views_closed_windows_reach_a_subscriber_once_and_the_end_closes_the_last(cluster_factory):
    cluster = cluster_factory()
    cluster.start_head()
    node = cluster.start_node()
    dep = f'<deploy><publish stream="Bid" node="{node}" /><node endpoint="{node}" query="windows" /></deploy>'
    cluster.submit(cluster.write("app.xml", APP), cluster.write("deploy.xml", dep))
    out = cluster.workdir / "windows.jsonl"
    sub = subprocess.Popen([sys.executable, "-m", "boreas.cli.main", "subscribe", "PerWindow", "--count", "4",
                            "--output", str(out)], env=cluster.env, stderr=subprocess.PIPE, text=True)
    try:
        wait_until(lambda: any(s.stream == "PerWindow" for s in cluster.head_catalog().subscriptions.values()),
                   what="the subscription")
        publish(cluster, "x.csv", [(1, 10, 1000), (1, 20, 5000), (2, 5, 12000), (1, 1, 25000)], "--producer", "x")
        # [0, 10s) and [10s, 20s) closed on x's 25000: y's bid at 3000 is late, never folded in; x holds the
        # watermark at 25000 until it ends, and then the end of input closes [30s, 40s)
        publish(cluster, "y.csv", [(1, 100, 3000), (2, 7, 31000)], "--producer", "y", "--final")
        result = cluster.boreas("publish", "Bid", "--end", "--producer", "x")
        assert result.returncode == 0, result.stderr
        assert sub.wait(timeout=60) == 0, sub.stderr.read()
    finally:
        if sub.poll() is None:
            sub.kill()
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [(r["auction"], r["window_start"], r["window_end"], r["n"], r["total"]) for r in rows] == [
        (1, 0, 10000, 2, 30), (2, 10000, 20000, 1, 5), (1, 20000, 30000, 1, 1), (2, 30000, 40000, 1, 7)]
    with urllib.request.urlopen(f"http://{node}/metrics") as resp:
        assert 'boreas_late_tuples_total{box="per_window"} 1.0' in resp.read().decode()
