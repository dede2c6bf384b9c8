"""Benchmark: durability -- what the input log and snapshots cost, and how long a recovery takes.

Real processes on loopback (a Head with its embedded catalog, nodes), three
parts, each figure printed as a ratio against its peer measured in the same run:

(a) **ingest**: rows/s into one node running a filter box (half the rows
    pass; nothing subscribes to its output), published by this process with
    the Python Publisher and timed until every batch is acknowledged.  The
    peer is the same node without ``--data-dir``; the durable node logs
    every batch and acknowledges it once fsynced (group commit).  Several
    group commit settings (``--commit N/T``: fsync every N batches or T ms)
    run side by side, each on its own node, interleaved over ``--reps``
    rounds (order rotated), to choose the defaults by measurement.  The
    ratio is the median over rounds of durable / memory-only in the same
    round (so the machine's drift over the run cancels out).  Target: the
    default setting >= 0.8x.  Snapshots are off (``--snapshot-interval 0``)
    so only the log is measured.  The node's and the publisher's CPU shares
    say which side limited a round.
(b) **snapshots**: the filter -> map -> aggregate chain of
    tests/test_recovery.py, one box per durable node, end to end from the
    first row published until the subscriber has the last aggregate output
    (checked equal to what the operators compute in this process).  The
    same chain under a Head taking a snapshot every second against one
    under a Head taking none (``--snapshot-interval 0``), both up at once and
    measured back to back, round by round (ratio: the median of the rounds').
    Target overhead < 10% (ratio >= 0.9).
(c) **recovery**: a durable node whose input log holds 100k, 1M and 10M
    events (rows, in batches of ``--recovery-batch``; a filter that passes
    1%), one node per size, killed with SIGKILL and restarted with the same
    ``--data-dir``: first with log replay alone (no snapshot ever taken:
    everything since the node started is replayed), then -- ``--snap-reps``
    times -- with a snapshot taken just before the kill (``POST
    /snapshots``, the node hears it is complete and cuts its log, then a
    small fixed tail of ``--tail`` rows is published).  The figure is the
    node's own ``recovery_seconds`` (``GET /status``: from the start of its
    recovery to ready: log opened and validated, state restored, log
    replayed); the wall time from the restart to ``ready`` (Python start-up
    included) is printed too.  Target: with snapshots, flat within 2x from
    the smallest log to the largest.
(d) **replay of filter -> map -> aggregate**: one durable node running the
    data plane benchmark's chain (examples/xml/sensor_chain.xml) with a log
    of ``--chain-replay-events`` readings (default 10M, published as Arrow
    batches of ``--chain-replay-batch``), killed and restarted with replay
    alone; events/s = events / the node's ``replay_seconds`` (its
    ``recovery_seconds`` printed beside).  Target
    (issue 30): >= 5M events/s.  bench/recovery_chain_replay.py.

Timing never fails the run; the exit status is non-zero only on errors (a
process that will not start, refused rows, wrong or missing output, a
recovery that does not happen).  What looked wrong but did not stop the run
(warnings and errors in the processes' logs, a node that did not restore
from the snapshot or replayed an unexpected number of batches) is listed
after the table.  Progress goes to stderr, the results to stdout.

The parts live beside this script: bench/recovery_ingest.py (a),
bench/recovery_chain.py (b), bench/recovery_restart.py (c), bench/recovery_chain_replay.py (d), and what they
share (the apps deployed, node status, stopping, :class:`Findings`) in
bench/recovery_common.py; this script parses the options, runs them, reports.

Usage::

    .venv/bin/python bench/recovery.py [--quick] [--events 100000,1000000,10000000]
        [--commit 64/1,256/2,1024/5] [--capacity 256] [--ingest-rows 4000000] [--chain-rows 4000000]
        [--reps 7] [--tail 10000] [--snap-reps 3] [--chain-replay-events 10000000] [--chain-replay-batch 20000]
        [--only ingest|chain|recovery|replay] [--keep-logs]

The full run takes about 5 minutes on 2 cores; ``--quick`` (logs of 10k/100k/1M
events, 1M rows per round, 3 rounds) under a minute.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from procs import Run, progress, run_bench  # noqa: E402
from recovery_chain import measure_chain  # noqa: E402
from recovery_chain_replay import TARGET as REPLAY_TARGET  # noqa: E402
from recovery_chain_replay import measure_chain_replay  # noqa: E402
from recovery_common import DEFAULT_COMMIT, Findings  # noqa: E402
from recovery_ingest import commit_label, measure_ingest  # noqa: E402
from recovery_restart import measure_recovery  # noqa: E402

# -- the report -------------------------------------------------------------------------------------


def report(args: argparse.Namespace, r: dict[str, Any], findings: Findings) -> None:
    rows: list[tuple[str, str, str, str, str]] = []
    flat: float | None = None  # (c) with snapshots: largest / smallest

    def rate(v: float) -> str:
        return f"{v:,.0f} rows/s"

    if "ingest" in r:
        entries = r["ingest"]["entries"]
        memory = entries[0]
        for e in entries[1:]:
            per = f", {e['per_fsync']:.1f} batches/fsync" if e.get("per_fsync") else ""
            rows.append((f"(a) ingest, {commit_label(e['setting'])}{per}", rate(e["rate"]),
                         rate(memory["rate"]) + " (memory only)", f"{e['ratio']:.3f}x",
                         ">= 0.8x" if e["setting"] == DEFAULT_COMMIT else "-"))
    if "chain" in r:
        none, every = r["chain"]["no snapshots"], r["chain"]["snapshots every 1 s"]
        rows.append((f"(b) chain filter|map|aggregate, snapshots every 1 s ({every['snapshots']} taken)",
                     rate(every["rate"]), rate(none["rate"]) + " (no snapshots)",
                     f"{r['chain']['ratio']:.3f}x", ">= 0.9x"))
    if "recovery" in r:
        sizes = args.events
        small = sizes[0]
        snap = {s: statistics.median(x["recovery_seconds"] for x in r["recovery"]["snap"][s]) for s in sizes}
        replay = {s: r["recovery"]["replay"][s]["recovery_seconds"] for s in sizes}

        def secs(v: float) -> str:
            return f"{v:.3f} s"

        def ratio(a: float, b: float) -> str:
            return f"{a / b:.2f}x" if b > 0 else "-"

        for s in sizes:
            extra = f" (median of {len(r['recovery']['snap'][s])})" if len(r["recovery"]["snap"][s]) > 1 else ""
            rows.append((f"(c) recovery, snapshot + {args.tail:,}-row tail, log of {s:,} events{extra}",
                         secs(snap[s]), secs(replay[s]) + " (replay alone)", ratio(snap[s], replay[s]), "-"))
        flat = snap[sizes[-1]] / snap[small] if snap[small] > 0 else None
        rows.append((f"(c) recovery with snapshot: largest / smallest log ({sizes[-1]:,} / {small:,})",
                     secs(snap[sizes[-1]]), secs(snap[small]), ratio(snap[sizes[-1]], snap[small]), "<= 2x"))
        rows.append((f"(c) recovery by replay alone: largest / smallest log ({sizes[-1]:,} / {small:,})",
                     secs(replay[sizes[-1]]), secs(replay[small]), ratio(replay[sizes[-1]], replay[small]), "-"))
    if "replay" in r:
        d = r["replay"]
        rows.append((f"(d) replay alone, filter -> map -> aggregate, log of {d['events']:,} events",
                     f"{d['rate']:,.0f} ev/s", f"replay {d['recovery']['replay_seconds']:.3f} s", "-",
                     f">= {REPLAY_TARGET / 1e6:g}M/s"))
        rows.append(("(d) the same, events per second of the node's CPU in the replay", f"{d['cpu_rate']:,.0f} ev/s",
                     f"CPU {d['recovery']['replay_cpu_seconds']:.3f} s", "-", f">= {REPLAY_TARGET / 1e6:g}M/s"))

    width = max(len(row[0]) for row in rows)
    print(f"\ndurability: the input log, snapshots and recovery (2 cores, loopback; ratios against the "
          f"peer measured in this run{'; quick run' if args.quick else ''})\n")
    print(f"{'figure':{width}}  {'measured':>16}  {'peer':>34}  {'ratio':>7}  {'target':>7}")
    print(f"{'':{width}}  {'(median)':>16}  {'(median)':>34}  {'(*)':>7}")
    for name, measured, peer, ratio_, target in rows:
        print(f"{name:{width}}  {measured:>16}  {peer:>34}  {ratio_:>7}  {target:>7}")

    print("(*) ingest and chain: the median of the rounds' ratios (each round runs measured and peer back to "
          "back); recovery: of the medians")
    if "ingest" in r:
        entries = r["ingest"]["entries"]
        best = max(entries[1:], key=lambda e: e["ratio"])
        print(f"\n(a) best group commit setting by ingest rate against memory only: {commit_label(best['setting'])} "
              f"({best['ratio']:.2f}x; publisher capacity {args.capacity} batches of {args.ingest_batch:,} rows)")
        for e in entries:
            print(f"    {commit_label(e['setting']):40} rounds: {', '.join(f'{v:,.0f}' for v in e['rates'])} rows/s;"
                  f" node CPU {e['node_cpu']:.0%}, publisher CPU {e['publisher_cpu']:.0%}")
    if "chain" in r:
        for label, c in r["chain"].items():
            if label == "ratio":
                continue
            if label == "per_node":
                print("    snapshotting cluster: " + "; ".join(
                    f"{box}: {n} snapshots, {b / max(n, 1):,.0f} bytes each, log now {lb / 1e6:,.1f} MB"
                    for box, n, b, lb in c))
                continue
            print(f"(b) {label:22} rounds: {', '.join(f'{v:,.0f}' for v in c['rates'])} rows/s; "
                  f"{c['snapshots']} snapshots completed in {c['seconds']:.1f} s measured")
    if "recovery" in r:
        print("(c) recovery details (recovery_seconds as the node reports it; wall: SIGKILL to ready, "
              "interpreter start-up included):")
        for s in args.events:
            rp = r["recovery"]["replay"][s]
            print(f"    {s:>12,} events  replay alone: {rp['recovery_seconds']:.3f} s "
                  f"(wall {rp['wall_seconds']:.2f} s), {rp['replayed_batches']:,} batches replayed, "
                  f"log {rp['log_before']['disk_bytes'] / 1e6:,.1f} MB")
            for x in r["recovery"]["snap"][s]:
                sn = x["snapshot"]
                print(f"    {'':>12}         snapshot {sn['id']}: {x['recovery_seconds']:.3f} s "
                      f"(wall {x['wall_seconds']:.2f} s), {x['replayed_batches']:,} batches replayed, "
                      f"restored_from {x['restored_from']}, snapshot {sn['bytes']} bytes, pause "
                      f"{(sn['pause_seconds'] or 0) * 1e3:.1f} ms, log after the cut "
                      f"{sn['log_after_cut']['disk_bytes'] / 1e6:,.2f} MB")
        print("    (the node reports recovery_seconds rounded to the millisecond)")
    if "replay" in r:
        d = r["replay"]
        rec = d["recovery"]
        print(f"(d) filter -> map -> aggregate on one durable node, {d['events']:,} events published as Arrow batches "
              f"of {d['batch']:,} ({d['fill_rate']:,.0f} events/s, {d['windows']:,} windows out, checked), SIGKILL, "
              f"restart: {rec['replayed_batches']:,} batches replayed in {rec['replay_seconds']:.3f} s, recovery "
              f"{rec['recovery_seconds']:.3f} s (wall {rec['wall_seconds']:.2f} s, interpreter start-up included), log "
              f"{rec['log_before']['disk_bytes'] / 1e6:,.1f} MB")
    verdicts = []
    if "ingest" in r:
        default = next((e for e in r["ingest"]["entries"][1:] if e["setting"] == DEFAULT_COMMIT), None)
        if default is not None:
            verdicts.append(f"(a) durable ingest >= 0.8x: {'met' if default['ratio'] >= 0.8 else 'MISSED'}")
    if "chain" in r:
        verdicts.append(f"(b) snapshot overhead < 10%: {'met' if r['chain']['ratio'] >= 0.9 else 'MISSED'}")
    if "recovery" in r:
        verdicts.append(f"(c) recovery with snapshots flat within 2x: "
                        f"{'met' if flat is not None and flat <= 2 else 'MISSED'}")
    if "replay" in r:
        d = r["replay"]
        verdicts.append(f"(d) filter -> map -> aggregate replay >= {REPLAY_TARGET:,} events/s: "
                        f"{'met' if d['rate'] >= REPLAY_TARGET else 'MISSED'} (per CPU second: "
                        f"{'met' if d['cpu_rate'] >= REPLAY_TARGET else 'MISSED'})")
    print("\ntargets (timing never fails the run): " + "; ".join(verdicts))

    trouble = findings.log_trouble()
    if findings.notes or trouble:
        print("\nwhat looked wrong (the run went on):")
        for n in findings.notes:
            print(f"  - {n}")
        for line in trouble:
            print(f"  {line}")
    else:
        print("\nnothing looked wrong: no warnings or errors in the processes' logs")


# -- main -------------------------------------------------------------------------------------------


def parse_commit(text: str) -> list[tuple[int, float]]:
    out = []
    for item in text.split(","):
        every, _, ms = item.partition("/")
        out.append((int(every), float(ms or DEFAULT_COMMIT[1])))
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true",
                        help="a quick run: logs of 10k/100k/1M events, fewer rows and rounds")
    parser.add_argument("--events", type=lambda t: [int(x) for x in t.split(",")],
                        help="log sizes for (c), smallest first (default 100000,1000000,10000000)")
    parser.add_argument("--commit", type=parse_commit, default=parse_commit("64/1,256/2,1024/5"),
                        help="group commit settings N/T for (a) (default 64/1,256/2,1024/5)")
    parser.add_argument("--ingest-rows", type=int, help="rows per ingest round (default 4000000)")
    parser.add_argument("--ingest-batch", type=int, default=1000)
    parser.add_argument("--capacity", type=int, default=256,
                        help="the ingest publisher's outstanding batches (default 256, the Publisher's default)")
    parser.add_argument("--chain-rows", type=int, help="rows per chain round (default 4000000)")
    parser.add_argument("--chain-batch", type=int, default=1000)
    parser.add_argument("--reps", type=int, help="rounds per figure in (a) and (b) (default 7; quick 3)")
    parser.add_argument("--recovery-batch", type=int, default=2000)
    parser.add_argument("--tail", type=int, default=10_000, help="rows published after the snapshot (default 10000)")
    parser.add_argument("--snap-reps", type=int, default=3, help="kills after a snapshot per log size (default 3)")
    parser.add_argument("--chain-replay-events", type=int,
                        help="events in (d)'s log, replayed through filter -> map -> aggregate "
                             "(default 10000000; quick 1000000)")
    parser.add_argument("--chain-replay-batch", type=int, default=20_000,
                        help="rows per Arrow batch published into (d)'s log (default 20000)")
    parser.add_argument("--only", choices=["ingest", "chain", "recovery", "replay"], action="append",
                        help="run only these parts (repeatable)")
    parser.add_argument("--keep-logs", action="store_true")
    args = parser.parse_args()
    quick = args.quick
    args.events = args.events or ([10_000, 100_000, 1_000_000] if quick else [100_000, 1_000_000, 10_000_000])
    args.ingest_rows = args.ingest_rows or (1_000_000 if quick else 4_000_000)
    args.chain_rows = args.chain_rows or (1_000_000 if quick else 4_000_000)
    args.reps = args.reps or (3 if quick else 7)
    args.chain_replay_events = args.chain_replay_events or (1_000_000 if quick else 10_000_000)
    if quick:
        args.snap_reps = min(args.snap_reps, 2)
    if sorted(args.events) != args.events or len(args.events) < 2:
        parser.error("--events: two or more sizes, smallest first")
    parts = args.only or ["ingest", "chain", "recovery", "replay"]

    def body(run: Run) -> None:
        findings = Findings()

        async def everything() -> dict[str, Any]:
            out: dict[str, Any] = {}
            for part, fn in (("ingest", measure_ingest), ("chain", measure_chain), ("recovery", measure_recovery),
                             ("replay", measure_chain_replay)):
                if part in parts:
                    began = time.perf_counter()
                    out[part] = await fn(args, run, findings)
                    progress(f"  ({part}: {time.perf_counter() - began:.0f} s)")
            return out

        report(args, asyncio.run(everything()), findings)

    return run_bench("recovery", body, args.keep_logs)


if __name__ == "__main__":
    sys.exit(main())
