"""``boreas publish`` streams CSV, JSON lines and Parquet through pyarrow's readers; ``boreas subscribe`` writes
JSON lines, CSV or Parquet; ``Subscriber.arrow()`` gives Arrow batches (issue 30, item 5).

All against a real cluster: what was published is what a subscriber writes, refused rows are named by
their row in the file, a bad header or Parquet file is refused before anything is sent, and a large file
is published in bounded memory (the ``boreas publish`` process's peak RSS, read from /proc).
"""

from __future__ import annotations

import asyncio
import csv
import datetime as dt
import json
import subprocess
import sys
import time

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from boreas.client.publisher import Publisher
from boreas.client.subscriber import Subscriber
from support.cluster import TOKEN, wait_until

APP = """<borealis>
  <schema name="Event">
    <field name="id" type="int"/><field name="name" type="string" size="8"/>
    <field name="at" type="timestamp"/><field name="x" type="double"/>
  </schema>
  <input stream="In" schema="Event"/>
  <box name="pass" type="filter"><in stream="In"/><out stream="Out"/>
    <parameter name="expression.0" value="id &gt;= 0"/></box>
</borealis>"""

NAMES = ["id", "name", "at", "x"]
EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)


def micros(text: str) -> int:
    return (dt.datetime.fromisoformat(text) - EPOCH) // dt.timedelta(microseconds=1)


def deploy(cluster) -> str:
    cluster.start_head()
    (node,) = cluster.start_nodes(1)
    cluster.submit(cluster.write("app.xml", APP), cluster.write(
        "dep.xml", f'<deploy><publish stream="In" node="{node}"/><node endpoint="{node}" query="pass"/></deploy>'))
    return node


def subscribe(cluster, *args: str) -> subprocess.Popen:
    before = len(cluster.head_catalog().subscriptions)
    proc = subprocess.Popen([sys.executable, "-m", "boreas.cli.main", "subscribe", "Out", *args],
                            env=cluster.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    wait_until(lambda: len(cluster.head_catalog().subscriptions) > before, what="the subscription")
    return proc


CSV_TEXT = ("x,at,name,id\n"                      # another order than the schema's
            "1.5,1970-01-01T00:00:01Z,alpha,1\n"   # ISO 8601 with a zone
            "2.5,2000000,beta,2\n"                 # microseconds
            "warm,3000000,gamma,3\n"               # line 4: not a double, refused here
            '3.5,4000000,"tw\nlines",4\n'          # a quoted value over lines 5-6
            "4.5,5000000\n"                        # line 7: the wrong width
            "\n"
            "5.5,2024-05-01 12:00:00,toolongname,5\n"  # line 9: too long
            "6.5,2024-05-01 12:00:00.25,eta,6\n")    # naive ISO 8601: UTC
CSV_ROWS = [(1, "alpha", 1_000_000, 1.5), (2, "beta", 2_000_000, 2.5), (4, "tw\nlines", 4_000_000, 3.5),
            (6, "eta", micros("2024-05-01T12:00:00.250+00:00"), 6.5)]

JSONL_TEXT = ('{"id": 10, "name": "a", "at": 10, "x": 1.0}\n'
              "[11, \"b\", 11, 2.0]\n"                 # an array in field order
              "\n"
              '{"id": 12, "name": "c", "x": 3.0}\n'    # line 4: a missing field
              '{"id": 13, "name": "d", "at": 13, "x": "hot"}\n'  # line 5: the node refuses it
              '{"id": 14, "name": "e", "at": 14, "x": 5}\n')
JSONL_ROWS = [(10, "a", 10, 1.0), (11, "b", 11, 2.0), (14, "e", 14, 5.0)]

PARQUET_ROWS = [(20 + i, f"p{i}", 1_700_000_000_000_000 + i, i / 4) for i in range(2500)]


def test_csv_jsonl_and_parquet_published_and_subscribed_as_csv_and_parquet(cluster_factory, tmp_path):
    cluster = cluster_factory()
    deploy(cluster)
    expected = CSV_ROWS + JSONL_ROWS + PARQUET_ROWS
    as_csv = subscribe(cluster, "--format", "csv", "--output", str(tmp_path / "out.csv"),
                       "--count", str(len(expected)))
    as_parquet = subscribe(cluster, "--format", "parquet", "--output", str(tmp_path / "out.parquet"),
                           "--count", str(len(expected)))
    as_jsonl = subscribe(cluster, "--count", str(len(CSV_ROWS)))
    try:
        result = cluster.boreas("publish", "In", "--file", cluster.write("events.csv", CSV_TEXT), "--batch-size", "2")
        assert result.returncode == 1, result.stderr
        assert result.stdout == "published 4 rows to In; 3 refused\n"
        path = cluster.workdir / "events.csv"
        assert result.stderr.splitlines() == [
            f"{path}: row 4: x: 'warm' is not a double",
            f"{path}: row 7: row has 2 values; the header has 4 columns",
            f"{path}: row 9: name: string longer than 8 characters"]

        result = cluster.boreas("publish", "In", "--file", cluster.write("events.jsonl", JSONL_TEXT))
        assert result.returncode == 1 and result.stdout == "published 3 rows to In; 2 refused\n", result.stderr
        path = cluster.workdir / "events.jsonl"
        lines = result.stderr.splitlines()
        assert lines[0].startswith(f"{path}: row 4: missing field 'at'"), lines
        assert lines[1].startswith(f"{path}: row 5: field 'x': expected double"), lines

        table = pa.table({"x": [r[3] for r in PARQUET_ROWS], "id": [r[0] for r in PARQUET_ROWS],
                          "name": [r[1] for r in PARQUET_ROWS],
                          "at": pa.array([r[2] for r in PARQUET_ROWS], pa.timestamp("us", "UTC"))})
        pq.write_table(table, cluster.workdir / "events.parquet", row_group_size=700)
        result = cluster.boreas("publish", "In", "--file", cluster.workdir / "events.parquet",
                                "--batch-size", "1000", "--progress")
        assert result.returncode == 0 and result.stdout == "published 2500 rows to In\n", result.stderr
        assert result.stderr.startswith("publishing to In: 2,500/2,500 rows (100%)")
        rerun = cluster.boreas("publish", "In", "--file", cluster.workdir / "events.parquet", "--batch-size", "1000")
        assert rerun.stdout == "published 0 rows to In\n"  # the same batches: all skipped
        outs = []
        for proc in (as_csv, as_parquet, as_jsonl):
            out, err = proc.communicate(timeout=60)
            assert proc.returncode == 0, err
            outs.append(out)
    finally:
        for proc in (as_csv, as_parquet, as_jsonl):
            if proc.poll() is None:
                proc.kill()
    with open(tmp_path / "out.csv", newline="") as f:
        got = list(csv.reader(f))
    assert got[0] == NAMES
    assert [(int(i), n, int(a), float(x)) for i, n, a, x in got[1:]] == expected
    assert [tuple(r.values()) for r in pq.read_table(tmp_path / "out.parquet").to_pylist()] == expected
    assert [json.loads(line) for line in outs[2].splitlines()] == [dict(zip(NAMES, r)) for r in CSV_ROWS]
    # the CSV written by subscribe publishes again as it is
    result = cluster.boreas("publish", "In", "--file", tmp_path / "out.csv")
    assert result.returncode == 0 and result.stdout == f"published {len(expected)} rows to In\n", result.stderr


def test_help_does_not_import_pyarrow():
    for argv in (["--help"], ["publish", "--help"], ["subscribe", "--help"]):
        code = (f"import sys\nfrom boreas.cli.main import main\ntry:\n    main({argv!r})\nexcept SystemExit:\n    pass\n"
                "assert 'pyarrow' not in sys.modules, 'pyarrow imported'")
        result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
        assert result.returncode == 0, result.stderr
        assert "usage: boreas" in result.stdout


def test_a_bad_header_or_parquet_file_is_refused_before_anything_is_sent(cluster_factory):
    cluster = cluster_factory()
    node = deploy(cluster)
    result = cluster.boreas("publish", "In", "--file", cluster.write("bad.csv", "id,name,when,x\n1,a,2,3\n"))
    assert result.returncode == 2 and result.stdout == ""
    assert "unknown column 'when'" in result.stderr and "missing column 'at'" in result.stderr
    pq.write_table(pa.table({"id": [1], "name": ["a"], "x": [1.0], "note": ["n"]}), cluster.workdir / "bad.parquet")
    result = cluster.boreas("publish", "In", "--file", cluster.workdir / "bad.parquet")
    assert result.returncode == 2 and result.stdout == ""
    assert "missing column 'at'" in result.stderr and "unknown column 'note'" in result.stderr
    assert cluster.node_status(node)["data"]["in"].get("batches", 0) == 0
    result = cluster.boreas("subscribe", "Out", "--format", "parquet")
    assert result.returncode == 2 and "--format parquet needs --output FILE" in result.stderr


async def test_subscriber_arrow_gives_record_batches_however_they_came(cluster_factory):
    cluster = cluster_factory()
    await asyncio.to_thread(deploy, cluster)
    rows = [(i, f"n{i}", i * 10, i / 2) for i in range(300)]
    async with Subscriber(cluster.head, "Out", TOKEN) as arrow, Subscriber(cluster.head, "Out", TOKEN) as plain:
        async with Publisher(cluster.head, "In", TOKEN, batch_size=100) as publisher:
            await publisher.send(rows[:150])  # as rows
            await publisher.send(pa.table({n: [r[i] for r in rows[150:]] for i, n in enumerate(NAMES)}))  # as Arrow
        batches: list[pa.RecordBatch] = []
        got: list[tuple] = []

        async def read() -> None:
            async for batch in arrow.arrow():
                batches.append(batch)
                if sum(b.num_rows for b in batches) >= len(rows):
                    return

        async def read_rows() -> None:
            async for some in plain.batches():
                got.extend(some)
                if len(got) >= len(rows):
                    return

        await asyncio.wait_for(asyncio.gather(read(), read_rows()), 60)
    assert all(isinstance(b, pa.RecordBatch) and b.schema.names == NAMES for b in batches)
    assert batches[0].schema.field("at").type == pa.int64()
    assert [tuple(r.values()) for b in batches for r in b.to_pylist()] == rows
    assert got == rows


@pytest.mark.slow
def test_a_large_csv_is_published_in_bounded_memory(cluster_factory, tmp_path):
    cluster = cluster_factory()
    deploy(cluster)
    path = tmp_path / "big.csv"
    line = "{},name{},{},{}.25\n"
    with open(path, "w") as f:
        f.write("id,name,at,x\n")
        block = 100_000
        n = 0
        while f.tell() < 450 << 20:
            f.write("".join(line.format(i, i % 100, 1_700_000_000_000_000 + i, i) for i in range(n, n + block)))
            n += block
    size = path.stat().st_size
    proc = subprocess.Popen([sys.executable, "-m", "boreas.cli.main", "publish", "In", "--file", str(path)],
                            env=cluster.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    peak = 0
    while proc.poll() is None:
        try:
            with open(f"/proc/{proc.pid}/status") as status:
                for field in status:
                    if field.startswith("VmHWM:"):
                        peak = max(peak, int(field.split()[1]) * 1024)
        except (FileNotFoundError, ProcessLookupError):
            break
        time.sleep(0.2)
    out, err = proc.communicate(timeout=600)
    assert proc.returncode == 0, err
    assert out == f"published {n} rows to In\n"
    print(f"{size / 2**20:.0f} MB, {n:,} rows: peak RSS {peak / 2**20:.0f} MB")
    # Bounded by the reader's block and the batches in flight (16 MB of them, cli/file_batches.py), not by the
    # file: about 92 MB of it is the interpreter with pyarrow loaded, whatever the file (docs/dataplane.md,
    # "Memory": about 208 MB with the window kept full).  The bound is the (300 MB, for a 5 GB file as for this one), below the
    # file's own size, which reading it whole would exceed.
    assert 0 < peak < 300 << 20 < size
