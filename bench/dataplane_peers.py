"""The data plane benchmark's stream-processor peers beside Spark: Flink (JVM path and Python UDFs) and Bytewax.

:func:`measure_peers` runs them after Boreas and Spark, with the machine to
themselves, each in its own child process (bench/dataplane_flink.py,
bench/dataplane_bytewax.py); every peer's windows are checked against the
expected ones and then against Boreas's own, window by window.
:func:`report_peers` prints one table of every peer beside Boreas (one node)
with the ratios, and the issue's verdicts.  A peer that is not installed, or
cannot run here, is printed as "not available: <reason>" and the rest of the
run goes on.
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path
from typing import Any

from dataplane_bytewax import measure_bytewax
from dataplane_data import LATENCY_RATE, Windows
from dataplane_flink import VARIANTS, measure_flink
from dataplane_spark import STREAM
from procs import BenchError, Processes

#: The peers in the order they run and print: key -> label.
PEERS = {"flink-sql": VARIANTS["sql"], "flink-udf": VARIANTS["udf"], "bytewax": "Bytewax (one worker)"}


FLINK_SQL_FACTOR = 10  # issue 30: one node at least 10x Flink SQL's JVM path


def measure_peers(procs: Processes, tmp: Path, args: argparse.Namespace, expected: Windows) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if args.no_flink:
        out["flink-sql"] = out["flink-udf"] = {"unavailable": "--no-flink"}
    else:
        flink = measure_flink(procs, tmp, args, expected)
        out["flink-sql"], out["flink-udf"] = flink["sql"], flink["udf"]
    out["bytewax"] = {"unavailable": "--no-bytewax"} if args.no_bytewax else measure_bytewax(procs, tmp, args, expected)
    return out


def check_against_boreas(boreas: dict[str, Any], peers: dict[str, Any]) -> None:
    """Each peer's windows equal Boreas's (one node), window by window."""
    by_key = {(w[0], w[1]): w for w in boreas["one"]["windows"]}
    for name, r in peers.items():
        if "unavailable" in r:
            continue
        for w in [*r["throughput"]["windows"], *r.get("generated", {}).get("windows", [])]:
            mine = by_key[(w[0], w[1])]
            if mine[3] != w[3] or not math.isclose(mine[2], w[2], rel_tol=1e-9):
                raise BenchError(f"Boreas and {PEERS[name]} disagree on window {w[:2]}: {mine} vs {tuple(w)}")


def report_peers(args: argparse.Namespace, b: dict[str, Any], spark: dict[str, Any] | None,
                 peers: dict[str, Any]) -> None:
    one, p50, p99 = b["one"]["rate"], b["lat1"]["p50"], b["lat1"]["p99"]
    rows: list[tuple[str, ...]] = [("Boreas, one node", f"{one:,.0f}", "1x", f"{p50:.2f}", f"{p99:.2f}", "1x")]
    results: dict[str, tuple[float, float]] = {}  # peer -> (throughput, p99)
    if spark is not None:
        results["spark"] = (spark["throughput"][STREAM]["rate"], spark["latency"]["p99"])
        label = f"Spark Structured Streaming ({args.spark_file_rows:,}-row micro-batches)"
        rows.append((label, f"{results['spark'][0]:,.0f}", f"{one / results['spark'][0]:.2f}x",
                     f"{spark['latency']['p50']:.2f}", f"{spark['latency']['p99']:.2f}",
                     f"{p99 / spark['latency']['p99']:.2f}x"))
    else:
        rows.append(("Spark Structured Streaming", "not run (--no-spark)", "", "", "", ""))
    for name, label in PEERS.items():
        r = peers[name]
        if "unavailable" in r:
            rows.append((label, f"not available: {r['unavailable']}", "", "", "", ""))
            continue
        t, lat = r["throughput"]["rate"], r["latency"]
        results[name] = (t, lat["p99"])
        rows.append((f"{label} {r['version']}", f"{t:,.0f}", f"{one / t:.2f}x", f"{lat['p50']:.2f}",
                     f"{lat['p99']:.2f}", f"{p99 / lat['p99']:.2f}x"))
        if "generated" in r:
            g = r["generated"]["rate"]
            rows.append(("  information: the same SQL, readings generated in its JVM (no socket, no parsing)",
                         f"{g:,.0f}", f"{one / g:.2f}x", "", "", ""))
    head = ("engine (filter -> map -> 60 s windowed average per sensor)", "tuples/s", "Boreas/peer",
            f"p50 ms @ {LATENCY_RATE:,}/s", "p99 ms", "Boreas/peer p99")
    print()
    print("Every peer beside Boreas, measured in this run (the same data; every peer's windows checked equal to "
          "Boreas's):")
    short = [r for r in rows if not r[1].startswith("not ")]
    widths = [max(len(r[i]) for r in [head, *short]) for i in range(len(head))]
    for row in [head, *rows]:
        if row[1].startswith("not "):
            print(f"{row[0].ljust(widths[0])}  {row[1]}")
            continue
        print("  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths))).rstrip())
    print("(Boreas/peer: above 1x Boreas is faster on throughput; below 1x Boreas has the lower p99 latency)")
    for name, label in PEERS.items():
        r = peers[name]
        if "unavailable" in r:
            continue
        t, lat = r["throughput"], r["latency"]
        extra = (f"; warm-up job first ({r['warmup']['rate']:,.0f} tuples/s), job submission "
                 f"({t['submit']:.1f} s) not counted") if "warmup" in r else ""
        print(f"  {label}: {t['tuples']:,} tuples in {t['elapsed']:.2f} s{extra}; latency over {lat['count']:,} "
              f"tuples sent at {lat['rate']:,.0f}/s (sender at most {lat['lag_max']:.1f} ms behind), max "
              f"{lat['max']:.2f} ms")

    print()
    verdicts = []
    for name in ("flink-udf", "bytewax"):
        if name in results:
            verdicts.append((f"throughput ahead of {PEERS[name]}", one > results[name][0],
                             f"{one:,.0f} vs {results[name][0]:,.0f} tuples/s ({one / results[name][0]:.2f}x)"))
    if "flink-sql" in results:  # issue 30's target: ten times Flink SQL's JVM path, in the same run
        t = results["flink-sql"][0]
        verdicts.append((f"throughput >= {FLINK_SQL_FACTOR}x Flink SQL's JVM path", one >= FLINK_SQL_FACTOR * t,
                         f"{one:,.0f} vs {t:,.0f} tuples/s ({one / t:.2f}x)"))
    for name, (_, peer_p99) in results.items():
        label = "Spark Structured Streaming" if name == "spark" else PEERS[name]
        verdicts.append((f"p99 latency ahead of {label}", p99 < peer_p99, f"{p99:.2f} vs {peer_p99:.2f} ms"))
    for what, ok, value in verdicts:
        print(f"{'meets ' if ok else 'MISSES'}  {what}: {value}")
    if "flink-sql" in results:
        t, lat99 = results["flink-sql"]
        g = peers["flink-sql"]["generated"]["rate"]
        print(f"report: with the readings generated inside its JVM (information, not the peer) Flink's SQL runs at "
              f"{g:,.0f} tuples/s: " + (f"{g / one:.2f}x Boreas" if g > one else f"Boreas still {one / g:.2f}x ahead"))
        tp = (f"Flink's JVM path leads on throughput by {t / one:.2f}x ({t:,.0f} vs {one:,.0f} tuples/s)" if t > one
              else f"Boreas leads Flink's JVM path on throughput by {one / t:.2f}x ({one:,.0f} vs {t:,.0f} tuples/s)")
        lat = (f"Flink's JVM path leads on p99 latency by {p99 / lat99:.2f}x ({lat99:.2f} vs {p99:.2f} ms)"
               if lat99 < p99 else
               f"Boreas leads Flink's JVM path on p99 latency by {lat99 / p99:.2f}x ({p99:.2f} vs {lat99:.2f} ms)")
        print(f"report: {tp}; {lat}")
