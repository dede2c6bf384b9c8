"""The M3 benchmarks' measuring code runs on small data (a bench that crashes is found here, not in a release run).

``bench/m3.py``'s native phases called the runtime's native entry with an
old signature and raised ``TypeError`` from the INT-overflow change on:
nothing ran them but the benchmark.  These run those phases, and
``bench/m3_nested.py``'s measurement of each view beside DuckDB, on a few
thousand events, and check what they return.
"""

from __future__ import annotations

import pytest
from support.bench import bench_importable

pytestmark = pytest.mark.slow


@pytest.fixture
def bench(monkeypatch):
    yield from bench_importable(monkeypatch, ("m3", "m3_workload", "m3_native", "m3_nested"))


def test_the_native_phases_of_bench_m3_add_up_per_event(bench):
    import m3
    from boreas.m3 import compile_sql

    program = compile_sql(m3.SCHEMA + m3.QUERY)
    phases = m3.native_phases(program, m3.Stream(seed=1).take(3_000), 500)
    assert set(phases) == {"group + columns (Python)", "C triggers", "changes() (C journal -> Python rows)"}
    assert all(seconds > 0 for seconds in phases.values())


@pytest.mark.parametrize("view", ["tpch_q17", "vwap", "first_order_control"])
def test_bench_m3_nested_measures_each_view_beside_duckdb(bench, view):
    import m3_nested

    cost, backend, klass = m3_nested.measure_boreas(view, 500, 50, 1, 2)
    assert cost > 0 and backend in ("native", "python")
    assert klass == {"tpch_q17": "domain-bound per correlation key", "vwap": "domain-bound",
                     "first_order_control": "first-order"}[view]
    assert m3_nested.measure_duckdb(view, 500, 50, 1, 2) > 0


@pytest.fixture
def windows_bench(monkeypatch):
    yield from bench_importable(monkeypatch, ("m3_windows",))


def test_bench_m3_windows_peers_agree_on_the_windows_and_the_windowed_state_stays_flat(windows_bench):
    import m3_windows

    fed = m3_windows.batches(300_000, 10_000, 10, 300)  # 30 s of event time: 3 windows
    slack = 300 * m3_windows.EVENTS_PER_MS // 10
    _, aggregate_rows, _ = m3_windows.run(m3_windows.PEER, fed, 300, slack)
    _, tumble_rows, tumble_state = m3_windows.run("m3 TUMBLE 10s", fed, 300, slack)
    _, _, open_state = m3_windows.run("m3 never closed", fed, 300, slack)
    assert tumble_rows == aggregate_rows > 0  # each closed window's groups, once, from both
    assert max(tumble_state) < open_state[-1] and open_state == sorted(open_state)
