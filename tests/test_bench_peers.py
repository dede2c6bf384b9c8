"""The benchmarks' peer adapters give the same answers as Boreas's references, on small data (issue 17).

* Pathway (bench/m3_pathway.py) keeps the Q3 view of bench/m3.py under inserts and deletes, a
  fresh view after every batch: equal to DuckDB's result over the same events.
* Bytewax (bench/dataplane_bytewax.py) runs filter -> map -> per-sensor windowed average: its
  windows equal bench/dataplane_data.py's expected windows (what Boreas is checked against).

Each skips when its package is absent (``make bench-setup`` installs them).  The Flink adapter is
not tested here: a JVM and three jobs take about a minute; bench/dataplane.py checks its windows.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest
from support.bench import bench_importable

BENCH = Path(__file__).resolve().parents[1] / "bench"
BENCH_MODULES = ("procs", "dataplane_data", "m3", "m3_workload", "m3_native", "m3_pathway")

pytestmark = pytest.mark.slow


@pytest.fixture
def bench_modules(monkeypatch):
    """bench/ importable by its plain module names for this test only."""
    yield from bench_importable(monkeypatch, BENCH_MODULES)


def needs(package: str) -> None:
    if importlib.util.find_spec(package) is None:
        pytest.skip(f"{package} is not installed (make bench-setup)")


def test_pathway_keeps_the_q3_view_equal_to_duckdb(bench_modules, tmp_path):
    needs("pathway")
    import m3_pathway

    import m3

    stream = m3.Stream(seed=1)
    events, extra = stream.take(20_000), stream.take(2_000)
    _, _, _, expected = m3.naive(events + extra, 1000, 2)  # the result over exactly ``events``
    result = m3_pathway.run_child(["--seed", "1", "--events", "20000", "--extra", "2000", "--closed",
                                   "--rounds", "1", "--size", "2000"], tmp_path / "pathway.log", 300)
    assert m3_pathway.view_differences(result["view"], expected) == 0
    assert len(result["view"]) == sum(1 for v in expected.values() if abs(v) > 1e-6)
    # a fresh view after every batch: each commit (20 batches, the extra events, 2 round batches) its own update
    assert result["commits"] == result["timestamps"] == 20 + 1 + 2


def test_bytewax_windows_equal_the_expected_ones(bench_modules, tmp_path):
    needs("bytewax")
    from dataplane_data import check_windows, expected_windows

    times = 1200
    proc = subprocess.run([sys.executable, str(BENCH / "dataplane_bytewax.py"), "--times", str(times),
                           "--latency-seconds", "2", "--log", str(tmp_path / "feeder.log")],
                          capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    out: dict = {}
    for line in proc.stdout.splitlines():
        out.update(json.loads(line))
    check_windows("Bytewax", [tuple(w) for w in out["throughput"]["windows"]], expected_windows(times))
    assert out["latency"]["count"] > 0
