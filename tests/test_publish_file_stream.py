"""``boreas publish`` of Parquet, CSV and JSON lines files into a node running a filter, end to end (issue 30).

The same random rows (seeded) in each format go through the real CLI, with
its default batches (about 4 MB, several to a file here), into a node whose
filter passes about a tenth of them; a subscriber must get exactly the rows
pyarrow's own filter over the files picks, each once: also when the first
publish of a file is killed (``kill -9``) part way and the same command is
run again, which continues where the node stopped taking batches.
"""

from __future__ import annotations

import csv
import json
import signal
import subprocess
import sys
import time

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pa_csv
import pyarrow.parquet as pq
import pytest
from support.cluster import wait_until

pytestmark = pytest.mark.slow

APP = """<borealis>
  <schema name="R"><field name="time" type="long"/><field name="sensor" type="int"/>
    <field name="value" type="double"/></schema>
  <input stream="In" schema="R"/>
  <box name="some" type="filter"><in stream="In"/><out stream="Out"/>
    <parameter name="expression.0" value="sensor &lt; 100"/></box>
</borealis>"""

ROWS = 300_000  # more than one default batch (209,715 rows of this schema)


def rows(offset: int, seed: int) -> pa.Table:
    rng = np.random.default_rng(seed)
    return pa.table({"time": pa.array(np.arange(offset, offset + ROWS), pa.int64()),
                     "sensor": pa.array(rng.integers(0, 1000, ROWS, dtype=np.int32)),
                     "value": pa.array(rng.standard_normal(ROWS) * 100)})


def passing_times(table: pa.Table) -> list[int]:
    return table.filter(pc.less(table["sensor"], 100))["time"].to_pylist()


def test_files_of_each_format_reach_a_subscriber_exactly_once_also_after_a_killed_publish(cluster_factory, tmp_path):
    cluster = cluster_factory()
    cluster.start_head()
    (node,) = cluster.start_nodes(1)
    cluster.submit(cluster.write("app.xml", APP), cluster.write(
        "dep.xml", f'<deploy><publish stream="In" node="{node}"/><node endpoint="{node}" query="some"/></deploy>'))
    parquet, text, lines = rows(0, 1), rows(10_000_000, 2), rows(20_000_000, 3)
    pq.write_table(parquet, tmp_path / "r.parquet", row_group_size=50_000)
    pa_csv.write_csv(text, tmp_path / "r.csv")
    (tmp_path / "r.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines.to_pylist()))
    want = sorted(passing_times(parquet) + passing_times(text) + passing_times(lines))

    before = len(cluster.head_catalog().subscriptions)
    out = tmp_path / "out.csv"
    subscriber = subprocess.Popen([sys.executable, "-m", "boreas.cli.main", "subscribe", "Out", "--format", "csv",
                                   "--output", str(out), "--count", str(len(want))],
                                  env=cluster.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_until(lambda: len(cluster.head_catalog().subscriptions) > before, what="the subscription")
        command = [sys.executable, "-m", "boreas.cli.main", "publish", "In", "--file", str(tmp_path / "r.parquet"),
                   "--batch-size", "10000"]
        first = subprocess.Popen(command, env=cluster.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        wait_until(lambda: first.poll() is not None or cluster.node_status(node)["data"]["in"].get("batches", 0) >= 3,
                   what="the first batches at the node")
        first.send_signal(signal.SIGKILL)  # (a crash, part way or just after the end)
        first.communicate(timeout=30)
        again = cluster.boreas(*command[3:], timeout=120)
        assert again.returncode == 0, again.stderr
        assert "already taken from producer" in again.stderr  # what the killed run had sent is skipped

        shown = cluster.boreas("publish", "In", "--file", tmp_path / "r.csv", "--progress", timeout=120)
        assert shown.returncode == 0 and shown.stdout == f"published {ROWS} rows to In\n", shown.stderr
        assert shown.stderr.splitlines()[-1].startswith(f"publishing to In: {ROWS:,}/{ROWS:,} rows (100%), ")

        result = cluster.boreas("publish", "In", "--file", tmp_path / "r.jsonl", timeout=120)
        assert result.returncode == 0 and result.stdout == f"published {ROWS} rows to In\n", result.stderr
        _, err = subscriber.communicate(timeout=120)
        assert subscriber.returncode == 0, err
    finally:
        if subscriber.poll() is None:
            subscriber.kill()
    with open(out, newline="") as f:
        got = [int(row[0]) for row in list(csv.reader(f))[1:]]
    assert sorted(got) == want  # every passing row once: none lost, none twice
    time.sleep(0.5)
    assert cluster.node_status(node)["data"]["flow"].get("rows_in", 0) == 3 * ROWS
