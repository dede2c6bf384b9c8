"""``bench/cumulus.py``'s report: the table, the ratios to one node (per round and their median), the other parts.

Apart from the driver so each stays one concept: what is measured and how
(``cumulus.py``, ``cumulus_scaling.py``, ...) and what is made of the figures.
"""

from __future__ import annotations

import argparse
import os
import statistics
from typing import Any

from cumulus_q3 import RANDOM_TARGET, STREAMS, TARGET


def report(args: argparse.Namespace, results: list[dict], peers: list[dict], summary: dict) -> None:
    if not results and not peers:
        return
    r0 = (results or peers)[0]
    print(f"\nQ3 partitioned over member node processes on loopback ({os.cpu_count()} cores; "
          f"{'durable' if args.durable else 'memory-only'} nodes; {args.segments} segments; "
          f"replicated: {args.replicate or 'none'}; {args.sources} sources; "
          f"{r0['events']:,} events, {args.producers * len(STREAMS)} publishers, batches of {args.batch}; "
          f"view {r0['view_rows']:,} rows)\n")
    head = (f"{'round':>5} {'nodes':>5} {'sources':>7} {'seconds':>8} {'events/s':>9} {'msgs/ev':>8} {'bytes/ev':>9} "
            f"{'busiest us/ev':>13} {'sum us/ev':>10} {'per node us/ev':22} {'entries per node':28} {'Head s':>7} "
            f"{'client s':>8} {'load':>9}")
    print(head)
    for r in [*peers, *results]:
        per_node = " ".join(f"{c:.1f}" for c in r["node_cpu_us_per_event"])
        entries = " ".join(f"{e:,}" for e in r["entries"])
        load = "/".join(f"{x:.1f}" for x in r["load_average"])
        print(f"{r.get('round', 0) + 1:>5} {r['members'] if r['partitioned'] else 'plain':>5} {r.get('sources', '-'):>7} {r['seconds']:>8.1f} {r['events_per_s']:>9,.0f} {r['messages_per_event']:>8.4f} "
              f"{r['bytes_per_event']:>9.1f} {r['busiest_cpu_us_per_event']:>13.2f} "
              f"{r['total_node_cpu_us_per_event']:>10.2f} {per_node:22} {entries:28} {r['head_cpu_s']:>7.1f} "
              f"{r['client_cpu_s']:>8.1f} {load:>9}")
    print("\n(us/ev: CPU microseconds per event of the node processes; msgs/ev and bytes/ev: batches and bytes on "
          "the links between members; seconds: first batch sent until the merged read equals the runtime's view; "
          "client: this process, the publishers and reads; load: the machine's 1-minute load average before/after; "
          "plain: the peer, q3 as an ordinary m3 box on one node, not partitioned)")
    if summary.get("ratios"):
        print()
        for m, ratio in summary["ratios"].items():
            line = f"busiest node's CPU per event, {m.split()[0]} nodes / 1 node ({summary['sources_of'][m]} sources): {ratio:.2f}x"
            each = summary["ratios_each"][m]
            if len(each) > 1:
                line += f" (median of {len(each)} rounds: {' '.join(f'{x:.2f}' for x in each)})"
            if m == summary.get("judged"):
                line += f"   target <= {TARGET:.2f}x: {'met' if ratio <= TARGET else 'NOT met'}"
            if summary["sources_of"][m] == "random" and m.split()[0] == "4":
                line += f"   issue 30's target <= {RANDOM_TARGET:.2f}x: {'met' if ratio <= RANDOM_TARGET else 'NOT met'}"
            print(line)
        for m, ratio in summary["speedups"].items():
            print(f"events/s, {m.split()[0]} nodes / 1 node ({summary['sources_of'][m]} sources): {ratio:.2f}x")
    if "partition_overhead" in summary:
        print(f"one member's CPU per event / the plain box's (the peer): {summary['partition_overhead']:.2f}x; "
              f"events/s {summary['partition_speed']:.2f}x")
    if summary.get("ratios_to_plain"):
        print("busiest node's CPU per event / the plain box's: "
              + ", ".join(f"{m} nodes {ratio:.2f}x" for m, ratio in summary["ratios_to_plain"].items()))


def met(ok: bool | None) -> str:
    return "met" if ok else "NOT met"


def report_more(args: argparse.Namespace, move: dict | None, stream: dict | None, ages: dict | None,
                load: dict | None) -> None:
    if move is not None:
        m = move
        print(f"\nMove of segment g/{m['segment']} ({m['entries_moved']:,} entries; box g = {m['sql']!r} over 2 "
              f"members, 2 segments, {m['entries_total']:,} entries bulk-loaded) from member 1 to member 0 (the leader) while "
              f"publishers stream {m['rate_rows_per_s']:,} rows/s over all {m['keys']:,} keys (batches of "
              f"{m['batch']})")
        print(f"  leader's answer: {m['leader_seconds']:.2f} s from its decision until every member switched and the "
              f"segment's entries were in (the call, with the Head's commit: {m['call_seconds']:.2f} s)")
        print(f"  pause seen by the stream: {m['pause_seconds']:.2f} s, the longest gap between consecutive view "
              f"changes of the moving segment's keys on out stream G (a Subscriber), from {m['pause_began_after_call_s']:+.2f} s "
              f"after the call; before the move the longest was {m['gap_before_move_s']:.2f} s, the other segment's "
              f"during it {m['other_segment_gap_s']:.2f} s   target < {m['target_seconds']:g} s: {met(m['target_met'])}")
        print(f"  throughput (view changes/s on G): {m['rows_per_s_before']:,.0f} before, {m['rows_per_s_during']:,.0f} "
              f"from the call to the answer ({(m['dip'] or 0) * 100:.0f}% dip), lowest 250 ms "
              f"{m['lowest_250ms_rows_per_s']:,.0f}; publishers fell behind schedule by up to "
              f"{m['publisher_behind_s']:.2f} s (before the move {m['publisher_behind_before_move_s']:.2f} s)")
    if ages is not None and stream is not None:
        a = ages
        print(f"\nStable age: q3 over 2 members, {stream['events']:,} rows published at the default, saturating load "
              f"({args.producers * len(STREAMS)} publishers, batches of {args.batch}; {stream['events_per_s']:,.0f} "
              f"rows/s); READ_STABLE of one view key every {a['every_s'] * 1000:.0f} ms, epoch {a['epoch_ms']} ms")
        if not a["reads"]:
            print("  no stable read answered while the publishers ran (too few --load-rows for a stable epoch)")
        else:
            print(f"  saturated (overload, not judged): age p50 {a['p50_epochs']:.2f} / p95 {a['p95_epochs']:.2f} / max "
                  f"{a['max_epochs']:.2f} epochs ({a['reads']} reads, {a['stable_epochs_seen']} stable epochs seen; a "
                  f"read took {a['read_ms_p50']:.1f} ms p50, {a['read_ms_max']:.0f} ms max)")
        q = a.get("paced")
        if q and q["reads"]:
            print(f"  under load, {q['rate_rows_per_s']:,} lineitems/s ({q['share_of_saturated']:.0%} of the saturated "
                  f"rows/s) for {q['seconds']:g} s into the same box: age p50 {q['p50_epochs']:.2f} / p95 "
                  f"{q['p95_epochs']:.2f} / max {q['max_epochs']:.2f} epochs ({q['reads']} reads; a read took "
                  f"{q['read_ms_p50']:.1f} ms p50)   target < {q['target_epochs']:g} epochs: p95 {met(q['target_met'])}, "
                  f"max {met(q['max_under_target'])}; publishers behind schedule by up to "
                  f"{q['publisher_behind_s']:.2f} s")
    if load is not None and stream is not None:
        lo = load
        ratio = lo["rows_per_s"] / stream["events_per_s"]
        print(f"\nSpark bulk load vs streaming: the same {lo['rows']:,} rows of customer, orders and lineitem "
              f"(--load-rows; at this rate the issue's 10M would take about {10_000_000 / lo['rows_per_s']:.0f} s) "
              f"into an empty q3 over 2 members, each timed until the merged view equals the runtime's")
        print(f"  Spark load_view ({lo['spark_master']}, tables cached in Spark): {lo['seconds']:.1f} s, "
              f"{lo['rows_per_s']:,.0f} rows/s ({lo['entries']:,} map entries; load_view returned after "
              f"{lo['load_view_seconds']:.1f} s; not counted: the Spark session's start, "
              f"{lo['session_start_seconds']:.1f} s, reading the CSV files into its cache, {lo['cache_seconds']:.1f} s, "
              f"and a warm-up running each map's query into the Python workers once, {lo['warm_up_seconds']:.1f} s)")
        print(f"    CPU: Spark's JVM {lo['jvm_cpu_s']:.1f} s and Python workers {lo['spark_cpu_s'] - lo['jvm_cpu_s']:.1f} s, "
              f"the driver {lo['driver_cpu_s']:.1f} s, "
              f"the nodes {' + '.join(f'{c:.1f}' for c in lo['node_cpu_s'])} s")
        print(f"  streaming ({args.producers * len(STREAMS)} publishers): {stream['seconds']:.1f} s, "
              f"{stream['events_per_s']:,.0f} rows/s (with the stable-age reads above)")
        print(f"    CPU: the publishers {stream['client_cpu_s']:.1f} s, the nodes "
              f"{' + '.join(f'{c:.1f}' for c in stream['node_cpu_s'])} s")
        print(f"  bulk load / streaming: {ratio:.2f}x the rows per second   target >= 1.00x (issue 30: load_view at "
              f"least as fast as streaming the same rows): {met(ratio >= 1.0)}")


def summarise(results: list[dict], peers: list[dict]) -> dict:
    """Ratios against one node, each round's runs against that round's one-node run, and their medians.

    On a shared 2-core machine the one-node figure alone moves by a quarter
    between runs; rounds of every member count, one after the other, and
    the median of their ratios keep one slow or fast run from deciding the
    target."""
    firsts = [r for r in results if r.get("round", 0) == 0]
    one = next((r for r in firsts if r["members"] == 1), None)
    out: dict[str, Any] = {"ratios": {}, "ratios_each": {}, "speedups": {}, "sources_of": {}}
    if peers:
        plain = peers[0]["busiest_cpu_us_per_event"]
        out["ratios_to_plain"] = {str(r["members"]): r["busiest_cpu_us_per_event"] / plain for r in firsts}
    if one is not None and peers:
        out["partition_overhead"] = one["busiest_cpu_us_per_event"] / peers[0]["busiest_cpu_us_per_event"]
        out["partition_speed"] = one["events_per_s"] / peers[0]["events_per_s"]
    speedups: dict[str, list[float]] = {}
    for k in sorted({r.get("round", 0) for r in results}):
        runs = [r for r in results if r.get("round", 0) == k]
        single = next((r for r in runs if r["members"] == 1), None)
        if single is None:
            continue
        for r in runs:
            if r["members"] != 1:
                key = f"{r['members']} {r['sources']}"  # e.g. "4 keyed"
                out["ratios_each"].setdefault(key, []).append(
                    r["busiest_cpu_us_per_event"] / single["busiest_cpu_us_per_event"])
                speedups.setdefault(key, []).append(r["events_per_s"] / single["events_per_s"])
                out["sources_of"][key] = r["sources"]
    out["ratios"] = {key: statistics.median(each) for key, each in out["ratios_each"].items()}
    out["speedups"] = {key: statistics.median(each) for key, each in speedups.items()}
    # judged: 4 nodes fed by keyed sources (input partitioned like the view), else by random ones
    out["judged"] = next((k for k in ("4 keyed", "4 random") if k in out["ratios"]), None)
    four = out["ratios"].get(out["judged"]) if out["judged"] else None
    out["target"] = TARGET
    out["target_met"] = None if four is None else four <= TARGET
    return out
