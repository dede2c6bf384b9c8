"""The native (C) backend's part of bench/m3.py: the Q3 stream fed as rows and as columns, and its report.

bench/m3.py measures the Python runtime against DuckDB and hands the native
backend the same events (:mod:`m3_workload`); what only the native backend
needs (the batches as column arrays, its per-event cost fed columns, where
its time goes, its rows and ratios against the issue 17 targets) is here.
"""

from __future__ import annotations

import gc
import statistics
import time
from array import array

from boreas.m3 import Runtime
from m3_workload import COLUMN_KINDS, Stream, preload, run_incremental


def columnar(events: list[tuple], batch: int) -> list[list[tuple]]:
    """The events as a columnar source delivers them: per batch, per (relation, sign), one array per column
    (INT and DATE as int64 — dates as day numbers —, FLOAT as double, STRING as the strings).  Untimed: the
    format the stream arrives in, not work of the runtime."""
    out = []
    for i in range(0, len(events), batch):
        groups: dict[tuple, list] = {}
        for rel, sign, row in events[i:i + batch]:
            groups.setdefault((rel, sign), []).append(row)
        parts = []
        for (rel, sign), rows in groups.items():
            cols = []
            for j, col in enumerate(zip(*rows)):
                kind = COLUMN_KINDS[rel][j]
                cols.append(array("q", (d.toordinal() for d in col)) if kind == "DATE" else
                            array("d", col) if kind == "FLOAT" else array("q", col) if kind == "INT" else list(col))
            parts.append((rel, sign, cols))
        out.append(parts)
    return out


def run_columns(rt: Runtime, batches: list[list[tuple]]) -> float:
    """Seconds to apply columnar ``batches`` (one atomic batch each, the view's changes read after each)."""
    apply = rt.apply_grouped_columns
    gc.collect()
    gc.disable()
    try:
        t0 = time.perf_counter()
        for parts in batches:
            apply(parts)
            rt.changes()
        return time.perf_counter() - t0
    finally:
        gc.enable()


def native_cost(rt: Runtime, stream: Stream, batch: int, rounds: int, size: int) -> float:
    """:func:`m3.per_event_cost` for the native backend fed columns."""
    costs = []
    for _ in range(rounds):
        events = stream.take(size)
        costs.append(run_columns(rt, columnar(events, batch)) / len(events))
    return statistics.median(costs)


def native_phases(program, events: list[tuple], batch: int) -> dict[str, float]:
    """Where the native backend's time goes, seconds per event: rows grouped and turned into columns
    (Python), the C triggers (one crossing per relation and sign), and the view changes read back."""
    rt = Runtime(program, backend="native")
    native = rt._native
    t = {"group + columns (Python)": 0.0, "C triggers": 0.0, "changes() (C journal -> Python rows)": 0.0}
    gc.collect()
    gc.disable()
    try:
        for i in range(0, len(events), batch):
            t0 = time.perf_counter()
            groups: dict[tuple, list] = {}
            for rel, sign, row in events[i:i + batch]:
                groups.setdefault((rel, sign), []).append(row)
            prepared = [native.prepare(rel, sign, list(zip(*rows)), len(rows)) for (rel, sign), rows in groups.items()]
            t1 = time.perf_counter()
            batches = [(rel, sign, rows) for (rel, sign), rows in groups.items()]
            rt._apply_native(native, prepared, lambda: batches)
            t2 = time.perf_counter()
            rt.changes()
            t3 = time.perf_counter()
            t["group + columns (Python)"] += t1 - t0
            t["C triggers"] += t2 - t1
            t["changes() (C journal -> Python rows)"] += t3 - t2
    finally:
        gc.enable()
    return {k: v / len(events) for k, v in t.items()}


def native_measure(program, events, extra, expected, batch, rounds, size, scale, n) -> dict:
    """The native backend on the stream of the Python measurement: from empty to 1x (rows in, columns in),
    its view checked against DuckDB's, per-event cost at 1x and at ``scale``x (columns in), and the phases."""
    probe = Runtime(program)
    if probe.backend != "native":
        return {"unavailable": f"the native backend cannot run here: {probe.backend_reason}"}
    out: dict = {}
    rt = Runtime(program, backend="native")
    out["rows_1x"] = len(events) / run_incremental(rt, events, batch)
    del rt
    cols = columnar(events, batch)
    rt = Runtime(program, backend="native")
    out["cols_1x"] = len(events) / run_columns(rt, cols)
    del cols
    view = rt.view("Q1")
    wrong = [k for k, v in expected.items() if abs(v) > 1e-6 and abs(view.get(k, 0) - v) > 1e-6 * max(1, abs(v))]
    out["wrong"] = len(wrong) + len([k for k in view if k not in expected])
    rt.apply_batch(extra)
    stream = Stream(seed=1)
    stream.take(len(events) + len(extra))  # the same continuation as the Python runtime's rounds
    out["cost_1x"] = native_cost(rt, stream, batch, rounds, size)
    out["entries_1x"] = rt.entries()
    del rt
    gc.collect()
    big = Runtime(program, backend="native")
    stream10 = Stream(seed=2)
    preload(big, stream10, scale * n)
    out["entries_10x"] = big.entries()
    out["cost_10x"] = native_cost(big, stream10, batch, rounds, size)
    del big
    gc.collect()
    out["phases"] = native_phases(program, events[: min(len(events), 200_000)], batch)
    out["rounds"], out["size"], out["events"] = rounds, size, len(events)
    return out


def native_report(nat: dict, pathway: dict, eps_naive: float, per_batch: float, rows_loaded: int, eps_dbt: float,
                  scale: int, batch: int) -> None:
    """The native backend's rows and ratios against its targets (issue 17 item 4)."""
    print()
    if "unavailable" in nat:
        print(f"native backend: not available ({nat['unavailable']})")
        return
    print("| native (C) backend | events/s | us/event |")
    print("|---|---:|---:|")
    print(f"| rows in (apply_batch), empty -> 1x | {nat['rows_1x']:,.0f} | {1e6 / nat['rows_1x']:.3f} |")
    print(f"| columns in (apply_grouped_columns), empty -> 1x | {nat['cols_1x']:,.0f} | {1e6 / nat['cols_1x']:.3f} |")
    for label, key, entries in (("1x", "cost_1x", nat["entries_1x"]), (f"{scale}x", "cost_10x", nat["entries_10x"])):
        print(f"| columns in, {label} loaded ({entries:,} map entries): median of {nat['rounds']} rounds of "
              f"{nat['size']:,} | {1 / nat[key]:,.0f} | {1e6 * nat[key]:.3f} |")
    wrong = nat["wrong"]
    print(f"check: the native view equals DuckDB's result at 1x: {'yes' if not wrong else f'NO, {wrong} groups differ'}")
    print()
    print("| where the native backend's time goes (rows in, 200,000 events) | ns/event |")
    print("|---|---:|")
    for phase, sec in nat["phases"].items():
        print(f"| {phase} | {1e9 * sec:.0f} |")
    eps_1x, flat = nat["cols_1x"], nat["cost_10x"] / nat["cost_1x"]
    eps_at_1m = 1 / nat["cost_1x"]
    print()
    print("| native ratio | value | target | met |")
    print("|---|---:|---:|---|")
    print(f"| native events/s, columns in (empty -> 1x) | {eps_1x:,.0f} | >= 5,000,000 | {'yes' if eps_1x >= 5e6 else 'NO'} |")
    print(f"| native events/s, rows in (empty -> 1x) | {nat['rows_1x']:,.0f} | (same API as the Python backend) | |")
    print(f"| native / DBToaster's published figure (not measured here) | {eps_1x / eps_dbt:.2f}x | >= 2x | "
          f"{'yes' if eps_1x / eps_dbt >= 2 else 'NO'} |")
    if "unavailable" not in pathway:
        pe = pathway["1x"]["from_empty"]["events"] / pathway["1x"]["from_empty"]["seconds"]
        print(f"| native / Pathway events/s (empty -> 1x, same run) | {eps_1x / pe:,.1f}x | >= 5x | "
              f"{'yes' if eps_1x / pe >= 5 else 'NO'} |")
        print(f"| native / Pathway per-event cost at {scale}x | {pathway['cost_10x'] / nat['cost_10x']:,.1f}x | | |")
    else:
        print(f"| native / Pathway | not available ({pathway['unavailable']}) | >= 5x | |")
    print(f"| native per-event cost {scale}x / 1x loaded | {flat:.2f} | within 1.20 | {'yes' if flat <= 1.2 else 'NO'} |")
    print(f"| native at 1x loaded / naive DuckDB re-evaluation at {rows_loaded:,} rows | {eps_at_1m / eps_naive:,.0f}x | "
          f">= 200x | {'yes' if eps_at_1m / eps_naive >= 200 else 'NO'} |")

