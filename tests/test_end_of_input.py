"""Windows at the edges, with real processes: late tuples reach the Head's list of problems and the
node's metrics (node/operators/late.py, head/ui/stats.py)."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest
from boreas.client.publisher import Publisher
from support.cluster import TOKEN, get_json, wait_until

APP = """<?xml version="1.0"?>
<borealis>
  <input stream="Reading" schema="ReadingTuple" />
  <output stream="PerTen" schema="CountTuple" />
  <schema name="ReadingTuple"><field name="time" type="int" /><field name="value" type="int" /></schema>
  <schema name="CountTuple"><field name="time" type="int" /><field name="n" type="int" /></schema>
  <query name="windows">
    <box name="per_ten" type="aggregate">
      <in stream="Reading" /><out stream="PerTen" />
      <parameter name="aggregate-function.0" value="count()" />
      <parameter name="aggregate-function-output-name.0" value="n" />
      <parameter name="window-size-by" value="VALUES" />
      <parameter name="window-size" value="10" />
      <parameter name="order-by" value="FIELD" />
      <parameter name="order-on-field" value="time" />
      <parameter name="independent-window-alignment" value="1" />
    </box>
  </query>
</borealis>
"""


def deploy(node: str) -> str:
    return (f'<?xml version="1.0"?><deploy><publish stream="Reading" node="{node}" />'
            f'<node endpoint="{node}" query="windows" /></deploy>')


def one_node_app(cluster) -> str:
    cluster.start_head()
    node = cluster.start_node()
    cluster.submit(cluster.write("app.xml", APP), cluster.write("deploy.xml", deploy(node)))
    return node


def publish(cluster, name: str, times: list[int], *extra: str) -> None:
    path: Path = cluster.write(name, "time,value\n" + "".join(f"{t},1\n" for t in times))
    result = cluster.boreas("publish", "Reading", "--file", path, *extra)
    assert result.returncode == 0, (result.stdout, result.stderr)


@pytest.mark.slow
def test_late_tuples_of_a_box_are_among_the_heads_problems_and_in_its_metric(cluster_factory):
    cluster = cluster_factory()
    node = one_node_app(cluster)
    publish(cluster, "readings.csv", [1, 5, 12, 25, 3, 4, 7])  # [0, 10) closed on 25: 3, 4 and 7 are late

    def late_problem() -> list[dict]:
        return [e for e in get_json(f"{cluster.head}/ui/stats")["errors"]
                if e["box"] == "per_ten" and e["node"] == node and "late" in e["message"]]

    problems = wait_until(late_problem, what="the late tuples among the Head's problems")
    assert problems[0]["message"].startswith("3 late tuples dropped")
    with urllib.request.urlopen(f"http://{node}/metrics") as resp:
        metrics = resp.read().decode()
    assert 'boreas_late_tuples_total{box="per_ten"} 3.0' in metrics
    assert "dropped 3 late tuples" in cluster.log(node)


async def producer_a_around(between, head: str) -> None:
    """Producer a publishes, ``between()`` runs (in a thread), then a publishes its last and ends."""
    a = Publisher(head, "Reading", TOKEN, producer="a")
    await a.start()
    try:
        await a.send([(1, 1), (5, 1), (12, 1), (14, 1)])
        await a.flush()
        await asyncio.to_thread(between)
        await a.send([(18, 1)])
    except BaseException:
        await a.abort()
        raise
    await a.close(final=True)


@pytest.mark.slow
def test_the_last_window_closes_once_every_producer_of_the_stream_published_with_final(cluster_factory):
    cluster = cluster_factory()
    one_node_app(cluster)
    out = cluster.workdir / "windows.jsonl"
    sub = subprocess.Popen([sys.executable, "-m", "boreas.cli.main", "subscribe", "PerTen", "--count", "2",
                            "--output", str(out)], env=cluster.env, stderr=subprocess.PIPE, text=True)
    try:
        wait_until(lambda: any(s.stream == "PerTen" for s in cluster.head_catalog().subscriptions.values()),
                   what="the subscription")
        # Without --final [10, 20) stays open, as before; b's end alone does not end the stream: a has not
        # ended.  Had it ended there, [10, 20) would be emitted with 3 tuples and 18 would be late.
        asyncio.run(producer_a_around(lambda: publish(cluster, "b.csv", [16], "--producer", "b", "--final"),
                                      cluster.head))
        assert sub.wait(timeout=60) == 0, sub.stderr.read()
    finally:
        if sub.poll() is None:
            sub.kill()
    assert [json.loads(line) for line in out.read_text().splitlines()] == [{"time": 0, "n": 2},
                                                                           {"time": 10, "n": 4}]


CHAIN = APP.replace("<output stream=\"PerTen\"", "<output stream=\"Kept\"").replace("</borealis>", """  <query name="after">
    <box name="keep" type="filter"> <in stream="PerTen" /><out stream="Kept" />
      <parameter name="expression.0" value="n &gt; 0" /> </box>
  </query>
</borealis>""")


@pytest.mark.slow
def test_the_end_goes_downstream_across_nodes_and_a_named_subscriber_writes_everything_and_exits_0(cluster_factory):
    """The aggregate's node ends PerTen once Reading ended; the filter on the other node takes that end as from a
    producer and ends Kept; the subscriber, told, writes the last window and exits 0, its subscription ended."""
    cluster = cluster_factory()
    cluster.start_head()
    nodes = [cluster.start_node(), cluster.start_node()]
    dep = (f'<deploy><publish stream="Reading" node="{nodes[0]}" /><node endpoint="{nodes[0]}" query="windows" />'
           f'<node endpoint="{nodes[1]}" query="after" /></deploy>')
    cluster.submit(cluster.write("app.xml", CHAIN), cluster.write("deploy.xml", dep))
    out = cluster.workdir / "kept.jsonl"
    sub = subprocess.Popen([sys.executable, "-m", "boreas.cli.main", "subscribe", "Kept", "--name", "w",
                            "--output", str(out)], env=cluster.env, stderr=subprocess.PIPE, text=True)
    try:
        wait_until(lambda: any(s.stream == "Kept" for s in cluster.head_catalog().subscriptions.values()),
                   what="the subscription")
        publish(cluster, "readings.csv", [1, 5, 12, 14, 21], "--final")
        _, err = sub.communicate(timeout=60)
    finally:
        if sub.poll() is None:
            sub.kill()
    assert sub.returncode == 0, err
    assert "Kept ended" in err and "3 tuples written" in err, err
    assert [json.loads(line) for line in out.read_text().splitlines()] == [
        {"time": 0, "n": 2}, {"time": 10, "n": 2}, {"time": 20, "n": 1}]  # [20, 30) closed by the end
    assert not cluster.head_catalog().subscriptions  # nothing more will come: the named subscription ended


@pytest.mark.slow
def test_producers_that_published_in_earlier_runs_end_later_by_end_or_by_the_same_file_again_with_final(
        cluster_factory):
    """``boreas publish --end --producer x`` ends x with no rows; y's file published again with ``--final`` under the
    same id is taken as a re-run (nothing twice) and ends y: then, and only then, the last window closes."""
    cluster = cluster_factory()
    one_node_app(cluster)
    sub = subprocess.Popen([sys.executable, "-m", "boreas.cli.main", "subscribe", "PerTen"], env=cluster.env,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_until(lambda: any(s.stream == "PerTen" for s in cluster.head_catalog().subscriptions.values()),
                   what="the subscription")
        publish(cluster, "x.csv", [1, 5], "--producer", "x")
        publish(cluster, "y.csv", [3, 12, 14], "--producer", "y")
        ended = cluster.boreas("publish", "Reading", "--end", "--producer", "x")
        assert ended.returncode == 0 and "ended producer 'x' of Reading" in ended.stderr, ended.stderr
        again = cluster.boreas("publish", "Reading", "--end", "--producer", "x")  # a repeated end changes nothing
        assert again.returncode == 0, again.stderr
        assert sub.poll() is None  # y has not ended: [10, 20) stays open
        publish(cluster, "y.csv", [3, 12, 14], "--producer", "y", "--final")
        out, err = sub.communicate(timeout=60)
    finally:
        if sub.poll() is None:
            sub.kill()
    assert sub.returncode == 0, err
    assert [json.loads(line) for line in out.splitlines()] == [{"time": 0, "n": 3}, {"time": 10, "n": 2}]
    refused = cluster.boreas("publish", "Reading", "--end")
    assert refused.returncode == 2 and "--end needs --producer" in refused.stderr, refused.stderr
