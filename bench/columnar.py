"""Benchmark: Q3 as an ``m3`` box on one node, end to end, Arrow batches against rows (issue 30).

One workload (bench/cumulus_q3.py's ``workload``: 5% customers, 20% orders,
70% lineitems, 5% deletes of earlier lineitems; a sign field first in each
schema) is measured three ways in one run:

* **in process, native core**: the same program's ``Runtime`` on the native
  backend, fed the same batches as int64/double arrays
  (``apply_grouped_columns``, what the issue's 5.7M events/s is): the rate
  the system around the core is judged against;
* **end to end, Arrow**: a Head and one node process; three publishers (one
  per stream, customers then orders then lineitems) send pyarrow tables cut
  into ``--batch``-row batches; from the first send until the node has
  processed every event (its ``/status`` ``rows_in``), then the view read
  through the query API must equal the one the M3 runtime computes here
  (and DuckDB's, with ``--duckdb``);
* **end to end, rows**: the same with rows (msgpack), on fresh processes.

Printed: events/s of each, the node's CPU microseconds per event, this
process's while the events flow (the publishers', which share the
machine's cores with the node, and this process's ``/status`` polls), and the issue's targets: Arrow end to end at least 3M events/s and at least 50% of
the in-process native rate of the same run.

``--profile FILE`` profiles the Arrow run's node by CPU time while the
events flow (bench/cpu_profile.py; read it with ``pstats``), and
``--arrow-only`` skips the rows run.

Usage: ``python bench/columnar.py [--events 2000000] [--batch 20000] [--duckdb] [--profile FILE] [--arrow-only]``
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from cumulus_q3 import SQL, STREAMS, deployment, expected_view, on_the_wire, same_view, signed_app, workload  # noqa: E402
from procs import BenchError, Run, cpu_seconds, loopback_endpoints, progress, run_bench, sqlite_catalog, \
    start_head, start_node, wait_ready  # noqa: E402

TARGET_RATE = 3_000_000
TARGET_SHARE = 0.5
READ_TIMEOUT = 120.0  # seconds for reading the view back through the query API


def tables(data: dict[str, list[tuple]], fields: dict[str, list[str]]):
    """Each relation's events as one pyarrow table of its stream's schema (dates as timestamps)."""
    import pyarrow as pa

    from boreas.catalog.model import FieldType
    from boreas.wire.columns import ARROW_TYPES

    out = {}
    for stream, name in STREAMS:
        rows = on_the_wire(data[name])
        columns = list(zip(*rows))
        out[stream] = pa.table({f: pa.array(list(col), ARROW_TYPES[FieldType(t)])
                                for (f, t), col in zip(fields[stream], columns)})
    return out


def in_process_native(data: dict[str, list[tuple]], batch: int) -> tuple[float, float]:
    """(events/s, CPU microseconds per event) of the native core fed the workload's batches as arrays (after
    converting them, untimed)."""
    from array import array

    from boreas.m3 import Runtime, compile_sql

    rt = Runtime(compile_sql(SQL), backend="native")
    if rt.backend != "native":
        raise BenchError(f"no native backend here: {rt.backend_reason}")
    kinds = {"customer": ("INT", "STRING"), "orders": ("INT", "INT", "DATE", "INT"),
             "lineitem": ("INT", "FLOAT", "FLOAT", "DATE")}
    prepared = []
    for _, name in STREAMS:
        rows = data[name]
        for start in range(0, len(rows), batch):
            part = rows[start:start + batch]
            for sign in (1, -1):
                chosen = [r[1:] for r in part if r[0] == sign]
                if not chosen:
                    continue
                cols = []
                for kind, col in zip(kinds[name], zip(*chosen)):
                    if kind == "DATE":
                        cols.append(array("q", [d.toordinal() for d in col]))
                    elif kind == "FLOAT":
                        cols.append(array("d", col))
                    elif kind == "STRING":
                        cols.append(array("q", rt.string_ids(list(col))))
                    else:
                        cols.append(array("q", col))
                prepared.append((name, sign, cols))
    began, cpu = time.perf_counter(), time.process_time()
    for name, sign, cols in prepared:
        rt.apply_grouped_columns([(name, sign, cols)])
    seconds, cpu = time.perf_counter() - began, time.process_time() - cpu
    total = sum(len(rows) for rows in data.values())
    return total / seconds, cpu / total * 1e6


async def end_to_end(run: Run, label: str, data: dict[str, list[tuple]], batch: int, arrow: bool,
                     want: dict, profile: Path | None = None) -> tuple[float, float, float]:
    """(events/s, node CPU microseconds per event, this process's: the publishers') of one fresh Head and node
    (``profile``: the node's CPU time profile while the events flow is written there, bench/cpu_profile.py, and
    the view is not read)."""
    from boreas.client.publisher import Publisher
    from boreas.client.query import QueryClient
    from boreas.wire.client import PeerClient

    head_ep, node_ep = loopback_endpoints(2)
    head = start_head(run.procs, sqlite_catalog(run.tmp / f"{label}.db"), head_ep, name=f"head-{label}",
                      extra=["--snapshot-interval", "0"])
    if profile is None:
        node = start_node(run.procs, node_ep, head, name=f"node-{label}")
    else:  # profiled by CPU time while the events flow (bench/cpu_profile.py)
        node = run.procs.spawn(f"node-{label}", [str(Path(__file__).with_name("cpu_profile.py")), str(profile),
                                                 "node", "--endpoint", node_ep, "--head", head], daemon=True)
    await wait_ready(run.procs, head, [node_ep])
    from boreas.client.head_api import deploy_and_wait

    async with PeerClient(run.token, timeout=30.0) as peers:
        await deploy_and_wait(peers, head, signed_app(), f"app-{label}.xml", timeout=60.0)
        await deploy_and_wait(peers, head, deployment([node_ep], 0, partitioned=False), f"deploy-{label}.xml",
                              timeout=60.0)
    total = sum(len(rows) for rows in data.values())
    publishers = {}
    for stream, _ in STREAMS:
        publishers[stream] = Publisher(head, stream, run.token, producer=f"{label}-{stream}", batch_size=batch)
        await publishers[stream].start()
    payload = {}
    if arrow:
        fields = {s: [(f.name, f.type.value) for f in p.schema.fields] for s, p in publishers.items()}
        payload = tables(data, fields)
    else:
        payload = {stream: on_the_wire(data[name]) for stream, name in STREAMS}
    async with PeerClient(run.token) as peers:
        before = (await peers.call("GET", f"http://{node_ep}/status"))["data"]["flow"].get("rows_in", 0)
        if profile is not None:
            node.send_signal(signal.SIGUSR1)
        cpu0, own0 = cpu_seconds(node.pid), time.process_time()
        began = time.perf_counter()
        for stream, _ in STREAMS:
            await publishers[stream].send(payload[stream])
        for p in publishers.values():
            await p.flush()
        while (await peers.call("GET", f"http://{node_ep}/status"))["data"]["flow"].get("rows_in", 0) - before < total:
            await asyncio.sleep(0.005)
        seconds = time.perf_counter() - began
        cpu, own = cpu_seconds(node.pid) - cpu0, time.process_time() - own0
        if profile is not None:
            node.send_signal(signal.SIGUSR2)
            await asyncio.sleep(2.0)  # it writes the stats
    for p in publishers.values():
        await p.close()
    if profile is not None:  # the profile is of the events' way through (the view is read with no profile)
        run.procs.stop()
        return total / seconds, cpu / total * 1e6, own / total * 1e6
    import aiohttp

    reader = QueryClient(head, run.token)
    # a view of some 10^5 rows read on a loaded machine can take longer than the client's default 10 s
    reader.peers.timeout = aiohttp.ClientTimeout(total=READ_TIMEOUT, connect=3.0)
    async with reader as client:
        got = (await client.query("q3")).as_dict()
    if not same_view(got, want):
        raise BenchError(f"{label}: the view differs from the runtime's ({len(got)} vs {len(want)} rows)")
    run.procs.stop()
    return total / seconds, cpu / total * 1e6, own / total * 1e6


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=2_000_000)
    parser.add_argument("--batch", type=int, default=20_000)
    parser.add_argument("--duckdb", action="store_true", help="check the expected view against DuckDB too")
    parser.add_argument("--profile", type=Path,
                        help="profile the Arrow run's node by CPU time while the events flow, stats to this file")
    parser.add_argument("--arrow-only", action="store_true", help="skip the rows run (a profile, a quick look)")
    args = parser.parse_args(argv)

    def body(run: Run) -> None:
        progress(f"workload: {args.events:,} events")
        data = workload(args.events)
        want = expected_view(data)
        if args.duckdb:
            check_with_duckdb(data, want)
        native, native_cpu = in_process_native(data, args.batch)
        progress(f"in process, native core: {native:,.0f} events/s")
        arrow_rate, arrow_cpu, arrow_pub = asyncio.run(end_to_end(run, "arrow", data, args.batch, True, want, args.profile))
        progress(f"end to end, Arrow: {arrow_rate:,.0f} events/s")
        rows_rate, rows_cpu, rows_pub = (float("nan"),) * 3 if args.arrow_only else \
            asyncio.run(end_to_end(run, "rows", data, args.batch, False, want))
        share = arrow_rate / native
        print(f"\nQ3 as an m3 box on one node, {args.events:,} events, batches of {args.batch:,}")
        print(f"{'path':<34}{'events/s':>14}{'CPU us/event':>15}{'publishers us/event':>21}")
        print(f"{'in process, native core':<34}{native:>14,.0f}{native_cpu:>15.2f}")
        print(f"{'end to end, Arrow batches':<34}{arrow_rate:>14,.0f}{arrow_cpu:>15.2f}{arrow_pub:>21.3f}")
        print(f"{'end to end, rows (msgpack)':<34}{rows_rate:>14,.0f}{rows_cpu:>15.2f}{rows_pub:>21.3f}")
        print(f"\nArrow / rows end to end: {arrow_rate / rows_rate:.2f}x")
        met = "met" if arrow_rate >= TARGET_RATE else "NOT met"
        print(f"target: Arrow end to end >= {TARGET_RATE:,} events/s: {arrow_rate:,.0f} ({met})")
        met = "met" if share >= TARGET_SHARE else "NOT met"
        print(f"target: Arrow end to end >= {TARGET_SHARE:.0%} of the in-process native core: {share:.1%} ({met})")
        print(f"(by CPU time, what a shared machine leaves comparable: the node spends "
              f"{arrow_cpu / native_cpu:.2f}x the core's CPU per event, i.e. {native_cpu / arrow_cpu:.1%} of its rate)")

    return run_bench("columnar", body)


def check_with_duckdb(data: dict[str, list[tuple]], want: dict) -> None:
    """The runtime's view against DuckDB's over the same net rows (inserts less deletes)."""
    import collections

    import duckdb
    import pyarrow as pa

    con = duckdb.connect()
    for name, cols in (("customer", "c_custkey INT, c_mktsegment VARCHAR"),
                       ("orders", "o_orderkey INT, o_custkey INT, o_orderdate DATE, o_shippriority INT"),
                       ("lineitem", "l_orderkey INT, l_extendedprice DOUBLE, l_discount DOUBLE, l_shipdate DATE")):
        net = collections.Counter()
        for sign, *row in data[name]:
            net[tuple(row)] += sign
        con.execute(f"CREATE TABLE {name} ({cols})")
        rows = [r for r, n in net.items() for _ in range(n)]
        if rows:  # as one Arrow table: DuckDB's executemany takes minutes for a million rows
            con.register("net_rows", pa.table({f"c{i}": list(col) for i, col in enumerate(zip(*rows))}))
            con.execute(f"INSERT INTO {name} SELECT * FROM net_rows")
            con.unregister("net_rows")
    got = {tuple(r[:3]): r[3] for r in con.execute(SQL.split(";")[-1]).fetchall()}
    if not same_view(got, want):
        raise BenchError("the runtime's view differs from DuckDB's")


if __name__ == "__main__":
    sys.exit(main())
