"""Republishing is safe (issue 31): an edited file is a new publish, and a reused producer id with other rows is
refused with a clear error and a non-zero exit; a true re-run of the same file says what was already taken."""

from __future__ import annotations

import os

import pytest

pytestmark = pytest.mark.slow


def published(result) -> str:
    assert "Traceback" not in result.stderr, result.stderr
    return result.stdout.strip().splitlines()[-1] if result.stdout.strip() else ""


def test_an_edited_file_is_published_whole_and_other_rows_under_one_producer_are_refused(cluster_factory):
    cluster = cluster_factory()
    nodes, _ = cluster.sensor_chain()
    path = cluster.write("r.csv", "sensor,time,celsius\n1,1,20.5\n2,2,21.5\n3,3,22.5\n")

    first = cluster.boreas("publish", "Reading", "--file", str(path))
    assert first.returncode == 0 and published(first) == "published 3 rows to Reading", first.stderr
    rerun = cluster.boreas("publish", "Reading", "--file", str(path))
    assert rerun.returncode == 0 and published(rerun) == "published 0 rows to Reading"
    assert "1 batch was already taken from producer 'Reading@" in rerun.stderr

    with open(path, "a") as f:  # edited: a new publish, every row is sent (as any console producer would)
        f.write("4,4,23.5\n")
    os.utime(path, ns=(os.stat(path).st_atime_ns, os.stat(path).st_mtime_ns + 1_000_000))
    edited = cluster.boreas("publish", "Reading", "--file", str(path))
    assert edited.returncode == 0 and published(edited) == "published 4 rows to Reading", edited.stderr

    mine = cluster.boreas("publish", "Reading", "--file", str(path), "--producer", "X")
    assert mine.returncode == 0 and published(mine) == "published 4 rows to Reading", mine.stderr
    other = cluster.write("other.csv", "sensor,time,celsius\n9,9,29.5\n8,8,28.5\n")
    refused = cluster.boreas("publish", "Reading", "--file", str(other), "--producer", "X")
    assert refused.returncode != 0
    assert "producer 'X' already published batch 0 of Reading with other rows" in refused.stderr
    assert "Traceback" not in refused.stderr
    status = cluster.node_status(nodes[0])
    assert status["data"]["in"]["conflicting_batches"] == 1
