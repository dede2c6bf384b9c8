"""Benchmark: the data plane -- filter -> map -> aggregate throughput and publish-to-subscriber latency.

It starts a real Head (embedded catalog in a temporary directory) and three
node processes on loopback, deploys ``examples/xml/sensor_chain.xml``
(filter ``valid`` -> map ``to_fahrenheit`` -> aggregate ``per_sensor``:
avg and count per sensor over tumbling windows of 60 time units) twice --
all three boxes on one node, and split over two nodes (filter + map on one,
the aggregate on the other, so ~95% of the tuples cross a node-to-node link)
-- plus a latency pipeline (the same filter and map, with a ``sent``
timestamp field passed through), and measures:

* **throughput** (tuples/s): N tuples published by publisher processes
  (the Python :class:`~boreas.client.publisher.Publisher`), as Arrow record
  batches of ``--arrow-batch`` rows made with numpy before the clock starts
  (issue 30: "publishers that send pre-encoded Arrow"; while the clock runs a
  publisher only hands each batch to pyarrow's IPC writer, no per-row work),
  and again, for information, as rows in batches of ``--batch`` (the row
  path at the API edge: the rows become columns in the client),
  divided by the time from "go" until the subscriber has received the last
  aggregate output.  The data is 10 sensors x T times (T a multiple of 60);
  a final tuple per sensor at time T closes the last window, so exactly
  10*T/60 windows come out, and their ``readings`` must add up to the
  tuples the filter passes (checked).  The publishers each own a subset of
  the sensors, so every group's tuples arrive in order.  Two publisher
  processes by default: one, with the Publisher's default ``capacity`` of
  16 outstanding batches, keeps the node only ~65% busy (neither process
  saturates; the acknowledgement round trips do), two keep it ~85-90%
  busy.  What the node itself achieved (its ``rows_in`` counter polled
  from ``/status``), the CPU each process used and the node's slowest
  ``/status`` answer are printed too, to say where the bottleneck is.
* **latency** (ms, p50/p99): one publisher process sends 10,000 tuples/s
  (batches of 100 every 10 ms), each stamped with ``time.time()`` in
  microseconds (a ``long`` field) when the batch is handed to the
  publisher; the subscriber (this process) records receive time - send
  time for every tuple.  Same machine, same clock.  The first second is
  warm-up and not counted.

The peer, measured in the same run after the Boreas processes are stopped,
is Spark Structured Streaming in ``local[2]`` on the same pipeline and data:

* throughput: the same N rows (identical values) as parquet files of
  ``--spark-file-rows`` rows read by the file source; filter -> select ->
  event-time tumbling window of 60 s on ``timestamp_seconds(time)`` with a
  0 s watermark, grouped by sensor, append mode (windows come out once
  closed, as Boreas emits them), into ``foreachBatch``; end to end from
  ``start()`` until the sink has the last window, after a warm-up query.
  Spark's throughput depends mostly on its micro-batch size, so it runs
  twice.  The peer is Spark run as a stream: ``maxFilesPerTrigger`` 1, a
  micro-batch of one file per trigger; every throughput verdict is taken
  against it.  For information only, the same query without it (Spark's
  default: every file already there in one micro-batch), which is one
  batch job over the whole data set rather than a stream.  Both outputs
  are compared with Boreas's (same windows, counts and averages).
* latency: a socket source fed by a process that sends the same stamped
  rows at 10,000 tuples/s; filter -> select; default trigger (the next
  micro-batch starts as soon as the last one ends, Spark's minimum);
  ``foreachBatch`` collects the rows and records receive time - send time.

The ratio column is always Boreas / Spark: higher is better for
throughput, lower for latency.  Timing never fails the run; the exit status
is non-zero only on errors (a process that will not start, refused rows,
outputs that are missing or wrong).  Every process is stopped and the
temporary directory removed on exit, Ctrl-C and SIGTERM included.

``--profile`` runs the nodes under bench/cpu_profile.py (cProfile by CPU
time, switched on from "go" until the last window of each Arrow throughput
run: node a's profile is the one-node run, b's and c's the two-node run)
and prints, after the report, where each node's time went (the figures of
such a run are slower).
``--probe`` records when each stamped batch of the latency runs passes
each hop and prints the per-hop latency profile (bench/dataplane_probe.py).

Then the other stream processors users would pick (issue 17), each in its
own child process after Spark, with the same data and pipeline, their
windows checked equal to Boreas's, throughput and p50/p99 latency at 10,000
tuples/s printed beside Boreas (one node) as ratios:

* Apache Flink through PyFlink on a local MiniCluster, once with the filter
  and map as Flink SQL built-in expressions (the JVM path) and once as
  Python UDFs; event-time tumbling windows (bench/dataplane_flink.py);
* Bytewax, a Python dataflow on a Rust engine (bench/dataplane_bytewax.py).

Their sources read the same readings as CSV lines from a socket
(bench/dataplane_sockets.py), all sent at once for throughput and at
10,000 tuples/s by the Spark peer's paced feeder for latency.  A peer that
is not installed (``make bench-setup`` installs them) or cannot run here is
printed as "not available: <reason>".

The pieces: bench/procs.py (the processes and the run), dataplane_data.py
(the data and the checks), dataplane_workers.py (publisher and feeder
processes), dataplane_boreas.py (the Boreas runs), dataplane_spark.py (the
Spark peer), dataplane_peers.py (the other peers and their table); this
file: the arguments, the order of the runs, the report.

Usage: .venv/bin/python bench/dataplane.py [--tuples 2000000] [--publishers 2] [--batch 2000] [--arrow-batch 20000]
           [--latency-seconds 8] [--spark-file-rows 100000] [--no-spark] [--no-flink] [--no-bytewax]
           [--only boreas] [--profile] [--probe] [--keep-logs]
"""

from __future__ import annotations

import argparse
import asyncio
import math
import os
import sys
from pathlib import Path
from typing import Any

from dataplane_boreas import measure_boreas
from dataplane_data import (
    LATENCY_BATCH,
    LATENCY_RATE,
    SENSORS,
    TARGET_P99_MS,
    TARGET_THROUGHPUT,
    WARMUP_S,
    WINDOW,
    expected_windows,
)
from dataplane_peers import check_against_boreas, measure_peers, report_peers
from dataplane_probe import PROBE_ENV, use_loop
from dataplane_probe import report as probe_report
from dataplane_spark import ONE_BATCH, STREAM, measure_spark
from procs import BenchError, Run, run_bench

# -- the report ---------------------------------------------------------------------------


def report(args: argparse.Namespace, b: dict[str, Any], s: dict[str, Any] | None) -> None:
    st = s["throughput"] if s else None
    sl = s["latency"] if s else None
    stream = st[STREAM]["rate"] if st else None  # the peer
    one_batch = st[ONE_BATCH]["rate"] if st else None  # information only
    micro = f"{args.spark_file_rows:,}-row micro-batches"

    def num(v: float | None, unit: str) -> str:
        if v is None or (isinstance(v, float) and math.isnan(v)):
            return "-"
        return f"{v:,.0f} {unit}" if unit == "tuples/s" else f"{v:.2f} {unit}"

    def ratio(x: float, y: float | None) -> str:
        return f"{x / y:.3g}x" if y else "-"

    lat = f"@ {LATENCY_RATE:,} tuples/s"
    rows = [
        (f"throughput, one node (Spark: {micro})", f">= {TARGET_THROUGHPUT:,} tuples/s",
         num(b["one"]["rate"], "tuples/s"), num(stream, "tuples/s"), ratio(b["one"]["rate"], stream)),
        ("  information: one node, rows publishers", "-", num(b["rows"]["rate"], "tuples/s"),
         num(stream, "tuples/s"), ratio(b["rows"]["rate"], stream)),
        (f"throughput, two nodes (Spark: {micro})", "-", num(b["two"]["rate"], "tuples/s"),
         num(stream, "tuples/s"), ratio(b["two"]["rate"], stream)),
        ("  information: Spark as one micro-batch (not the peer)", "-", num(b["one"]["rate"], "tuples/s"),
         num(one_batch, "tuples/s"), ratio(b["one"]["rate"], one_batch)),
        (f"latency p50 {lat}, one node", "-", num(b["lat1"]["p50"], "ms"), num(sl and sl["p50"], "ms"),
         ratio(b["lat1"]["p50"], sl and sl["p50"])),
        (f"latency p99 {lat}, one node", f"< {TARGET_P99_MS:g} ms", num(b["lat1"]["p99"], "ms"),
         num(sl and sl["p99"], "ms"), ratio(b["lat1"]["p99"], sl and sl["p99"])),
        (f"latency p50 {lat}, two nodes", "-", num(b["lat2"]["p50"], "ms"), num(sl and sl["p50"], "ms"),
         ratio(b["lat2"]["p50"], sl and sl["p50"])),
        (f"latency p99 {lat}, two nodes", "-", num(b["lat2"]["p99"], "ms"), num(sl and sl["p99"], "ms"),
         ratio(b["lat2"]["p99"], sl and sl["p99"])),
    ]
    head = ("figure", "target", "Boreas", "Spark peer", "ratio B/S")
    widths = [max(len(r[i]) for r in [head, *rows]) for i in range(len(head))]
    print()
    for row in [head, *rows]:
        print("  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths))).rstrip())
    print("(ratio B/S = Boreas / Spark: higher is better for throughput, lower is better for latency)")

    print()
    for key, label in (("one", "one node"), ("rows", "one node, rows publishers"), ("two", "two nodes")):
        r = b[key]
        how = "Arrow record batches (made before the clock; IPC-encoded by the Publisher)" if r["arrow"] else "rows"
        print(f"Boreas, {label}: {r['tuples']:,} tuples from {args.publishers} publisher process(es) as {how} in "
              f"batches of {r['batch']:,}; the entry node had acknowledged all after {r['published']:.2f} s "
              f"({r['publish_rate']:,.0f}/s), the subscriber had the last window after {r['elapsed']:.2f} s")
        for n, nr in r["nodes"].items():
            per = nr["cpu"] * r["elapsed"] / r["tuples"] * 1e6 if nr["cpu"] else None  # us of node CPU per tuple
            cpu = (f"; its CPU {nr['cpu'] * 100:.0f}% = {per:.3f} us per tuple (a whole core: "
                   f"{1e6 / per:,.0f} tuples/s)" if per else "")
            print(f"    node {n} took {nr['rows']:,} rows in {nr['seconds']:.2f} s = {nr['rate']:,.0f} rows/s "
                  f"(its /status rows_in, polled every 50 ms){cpu}; slowest /status answer "
                  f"{nr['status_max']:.0f} ms")
        print(f"    publisher CPU {', '.join(f'{c * 100:.0f}%' for c in r['publishers_cpu'])} "
              f"(% of one core while publishing; this machine has {os.cpu_count()} CPUs)")
    for key, label in (("lat1", "one node"), ("lat2", "two nodes")):
        r = b[key]
        print(f"Boreas latency, {label}: {r['count']:,} tuples (the first {WARMUP_S:g} s not counted), sent at "
              f"{r['rate']:,.0f}/s, the sender at most {r['lag_max']:.1f} ms behind its schedule; max {r['max']:.2f} ms")
        print(f"    CPU per batch of {LATENCY_BATCH} tuples, over the run: "
              + ", ".join(f"{name} {us:,.0f} us" for name, us in r["cpu_per_batch_us"].items()))
    if s:
        print(f"Spark {s['version']} local[2], the same {st[STREAM]['tuples']:,} rows as {st[STREAM]['files']} "
              f"parquet files, after a warm-up query; end to end = start() until foreachBatch has the last window:")
        labels = {STREAM: f"the peer, a stream: maxFilesPerTrigger 1 ({args.spark_file_rows:,} rows per micro-batch)",
                  ONE_BATCH: "information only: no maxFilesPerTrigger (every file in one micro-batch; Spark's default)"}
        for name, label in labels.items():
            r = st[name]
            print(f"    {label}: {r['rate']:,.0f} tuples/s over {r['elapsed']:.2f} s; by its progress reports "
                  f"{r['input_rows']:,} rows in {r['batches']} micro-batch(es), {r['engine_rate']:,.0f} rows per "
                  f"busy second" + ("" if r["progress_complete"] else " (the last 100 reports only)"))
        print("    (one micro-batch is not the peer: reading the whole data set, all there before the query "
              "starts, in one trigger is a batch job, not a stream processing data as it arrives)")
        print(f"Spark latency: socket source, default trigger (a micro-batch as soon as the last one ends), "
              f"foreachBatch collect(); {sl['count']:,} tuples (the first {WARMUP_S:g} s not counted) at "
              f"{sl['rate']:,.0f}/s; max {sl['max']:.2f} ms; mean non-empty micro-batch {sl['batch_ms']:.0f} ms")
        print("The aggregate outputs were checked: Boreas (both deployments) and Spark (both runs) give the same "
              "windows, counts and averages.")
    else:
        print("Spark peer not run (--no-spark)")

    print()
    one, p99 = b["one"]["rate"], b["lat1"]["p99"]
    verdicts = [
        (f"throughput >= {TARGET_THROUGHPUT:,} tuples/s on one node", one >= TARGET_THROUGHPUT,
         f"{one:,.0f} tuples/s"),
        (f"p99 latency < {TARGET_P99_MS:g} ms at {LATENCY_RATE:,} tuples/s", p99 < TARGET_P99_MS, f"{p99:.2f} ms"),
    ]
    if s:
        verdicts += [
            (f"throughput ahead of Spark Structured Streaming ({micro})", one > stream,
             f"{one:,.0f} vs {stream:,.0f} tuples/s"),
            ("p99 latency ahead of Spark Structured Streaming", p99 < sl["p99"], f"{p99:.2f} vs {sl['p99']:.2f} ms"),
        ]
    for what, ok, value in verdicts:
        print(f"{'meets ' if ok else 'MISSES'}  {what}: {value}")


def print_profiles(tmp: Path, nodes: list[str]) -> None:
    """The top of each node's cProfile (CPU time of the Arrow throughput runs), by own time and cumulative."""
    import io
    import pstats

    roles = ("filter->map->aggregate, the one-node Arrow run", "filter->map, the two-node Arrow run",
             "aggregate, the two-node Arrow run")
    for k, (node, role) in enumerate(zip(nodes, roles)):
        path = tmp / f"node-{'abc'[k]}.prof"
        if not path.exists():
            print(f"no profile for node {node}")
            continue
        text = io.StringIO()
        stats = pstats.Stats(str(path), stream=text)
        stats.strip_dirs().sort_stats("tottime").print_stats(22)
        stats.sort_stats("cumulative").print_stats(30)
        body = text.getvalue()
        print(f"\n=== cProfile of node {node} ({role}), by own time ===")
        print(body[body.index("   Ordered by"):].rstrip() if "   Ordered by" in body else body.rstrip())


# -- the run ---------------------------------------------------------------------------------


def measure(run: Run, args: argparse.Namespace) -> None:
    """Boreas, then (with the machine to itself) the Spark peer; both checked, then the report."""
    expected = expected_windows(args.times)
    print(f"filter -> map -> aggregate (examples/xml/sensor_chain.xml): {args.tuples + SENSORS:,} tuples "
          f"({SENSORS} sensors x {args.times:,} times + {SENSORS} closing), {len(expected):,} windows out",
          flush=True)
    args.probe = None
    if args.probe_hops:  # every probed process writes its records here (bench/dataplane_probe.py)
        args.probe = run.tmp / "probe"
        args.probe.mkdir()
        run.procs.env[PROBE_ENV] = str(args.probe)
    boreas = asyncio.run(measure_boreas(run.procs, run.tmp, run.token, args, expected))
    run.procs.stop()  # the peer gets the machine to itself
    if args.probe is not None:
        for prefix in ("lat1_", "lat2_"):
            print(probe_report(args.probe, prefix), flush=True)
    spark = None if args.no_spark else measure_spark(run.procs, run.tmp, args, expected)
    if spark is not None:  # each already matched the expected windows; now Boreas and Spark directly
        by_key = {(w[0], w[1]): w for w in boreas["one"]["windows"]}
        for w in (w for r in (STREAM, ONE_BATCH) for w in spark["throughput"][r]["windows"]):
            mine = by_key[(w[0], w[1])]
            if mine[3] != w[3] or not math.isclose(mine[2], w[2], rel_tol=1e-9):
                raise BenchError(f"Boreas and Spark disagree on window {w[:2]}: {mine} vs {w}")
    peers = measure_peers(run.procs, run.tmp, args, expected)
    check_against_boreas(boreas, peers)
    report(args, boreas, spark)
    report_peers(args, boreas, spark, peers)
    if args.profile:
        print_profiles(run.tmp, boreas["nodes"])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tuples", type=int, default=2_000_000,
                        help="tuples per throughput run (rounded to 10 sensors x a multiple of 60 times)")
    parser.add_argument("--publishers", type=int, default=2, help="publisher processes (default 2)")
    parser.add_argument("--batch", type=int, default=2000,
                        help="tuples per published batch of rows (the rows publishers' run; default 2000)")
    parser.add_argument("--arrow-batch", type=int, default=20_000,
                        help="tuples per published Arrow record batch (the headline runs; default 20000)")
    parser.add_argument("--capacity", type=int, default=16, help="batches a publisher may have outstanding")
    parser.add_argument("--latency-seconds", type=float, default=8.0, help="seconds of paced publishing")
    parser.add_argument("--spark-file-rows", type=int, default=100_000,
                        help="rows per Spark parquet file, so per micro-batch of the Spark peer (default 100000)")
    parser.add_argument("--no-spark", action="store_true", help="skip the Spark peer")
    parser.add_argument("--no-flink", action="store_true", help="skip the Flink peers (SQL built-ins, Python UDFs)")
    parser.add_argument("--no-bytewax", action="store_true", help="skip the Bytewax peer")
    parser.add_argument("--only", choices=["boreas"],
                        help="boreas: Boreas's runs alone, no peer (the same as every --no-<peer>; short runs to "
                             "compare two versions of Boreas back to back)")
    parser.add_argument("--profile", action="store_true",
                        help="run the nodes under cProfile and print where their time went (slows them down)")
    parser.add_argument("--probe", dest="probe_hops", action="store_true",
                        help="record when each stamped batch of the latency runs passes each hop (publisher, "
                             "node, subscriber), the processes' GC passes and slow event-loop callbacks, and print "
                             "the per-hop profile (bench/dataplane_probe.py; the throughput figures are slower)")
    parser.add_argument("--node-args", default="", metavar="'OPTIONS'",
                        help="more `boreas node` options for Boreas's nodes, e.g. '--batch-rows 1' (every batch a box "
                             "produces leaves as it is: no batching inside the cluster) to compare with the defaults")
    parser.add_argument("--keep-logs", action="store_true", help="keep the temporary directory and its logs")
    args = parser.parse_args()
    if args.only == "boreas":
        args.no_spark = args.no_flink = args.no_bytewax = True
    args.times = max(WINDOW, args.tuples // SENSORS // WINDOW * WINDOW)
    args.tuples = SENSORS * args.times
    if not 1 <= args.publishers <= SENSORS or SENSORS % args.publishers:
        parser.error(f"--publishers must divide {SENSORS}")
    use_loop()
    return run_bench("dataplane", lambda run: measure(run, args), args.keep_logs)


if __name__ == "__main__":
    sys.exit(main())
