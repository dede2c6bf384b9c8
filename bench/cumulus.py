"""Benchmark: a TPC-H Q3-shaped ``m3`` view partitioned over 1, 2 and 4 node processes (Cumulus).

For each member count it starts a fresh Head (embedded sqlite catalog) and
that many node processes on loopback, submits ``examples/xml/tpch_q3.xml``
(with a sign field first in each schema, so the stream carries deletes) and a
deployment partitioning box ``q3`` over the nodes in ``--segments``
segments, then publishes one fixed workload, generated deterministically
from ``--events``: 5% customers, 20% orders, 70% lineitems, 5% deletes of
earlier lineitems (prices multiples of 0.25: every sum is exact).  Four
producers per stream publish concurrently (twelve publishers), chosen so
every member coordinates the same number of them (a producer always sends
to member ``crc32(producer) % n``).  Measured per member count:

* **events/s end to end**: from the first batch sent until a merged read
  (``QueryClient.query("q3")``, every member asked) equals the view the M3
  ``Runtime`` computes in this process over the same events (computed once;
  a run whose view never gets there fails);
* **messages and bytes between members per event**: the ``batches_sent``
  and ``bytes_sent`` of each node's links to the other members (``GET
  /status``), after minus before;
* **CPU seconds per event of each node process** (``/proc/PID/stat`` user +
  system, after minus before; also the Head's and this process's, which
  runs the publishers), and the busiest node's figure as a ratio of the
  one-node figure.  Target (issue 13): at 4 nodes <= 0.35x.

The peer, measured first in the same run (``--no-peer`` skips it): the same
workload into ``q3`` as an ordinary, unpartitioned ``m3`` box on one node,
which says what the partitioning machinery costs a single member.

Every figure printed is measured in this run; a table, then one JSON line
(``--json-only``: only that line on stdout).  On a machine with fewer cores
than processes the nodes share the cores, so events/s cannot scale with
members there; CPU per event per node is the figure that does not depend on
that (the machine's load average is printed beside each run: other work on
it moves every figure).

The publishers are held back by the bench (:class:`Gate`): each node's input
queue is kept under ``--max-queue`` batches, because a node acknowledges a
batch once queued and members whose queues fill while they send to each
other deadlock (no admission control in the node yet).  The gate polls every
node's ``/status`` about 10-50 times a second (~0.1 ms of node CPU each).
``--profile DIR`` runs the nodes under cProfile.

Usage::

    .venv/bin/python bench/cumulus.py [--members 1,2,4] [--events 1500000] [--segments 16]
        [--batch 500] [--window 4] [--max-queue 16] [--producers N] [--durable] [--no-peer]
        [--profile DIR] [--json-only] [--keep-logs]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime as dt
import json
import math
import os
import random
import sys
import time
import zlib
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from procs import (
    BenchError,
    Run,
    loopback_endpoints,
    run_bench,
    sqlite_catalog,
    start_head,
    start_node,
    wait_ready,
)

APP = Path(__file__).resolve().parents[1] / "examples" / "xml" / "tpch_q3.xml"
STREAMS = (("Customer", "customer"), ("Orders", "orders"), ("Lineitem", "lineitem"))
SQL = """CREATE STREAM customer(c_custkey INT, c_mktsegment VARCHAR(10));
CREATE STREAM orders(o_orderkey INT, o_custkey INT, o_orderdate DATE, o_shippriority INT);
CREATE STREAM lineitem(l_orderkey INT, l_extendedprice DECIMAL(15,2), l_discount DECIMAL(15,2), l_shipdate DATE);
SELECT l_orderkey, o_orderdate, o_shippriority, SUM(l_extendedprice * (1 - l_discount)) AS revenue
FROM customer, orders, lineitem
WHERE c_mktsegment = 'BUILDING' AND c_custkey = o_custkey AND l_orderkey = o_orderkey
  AND o_orderdate < DATE '1995-03-15' AND l_shipdate > DATE '1995-03-15'
GROUP BY l_orderkey, o_orderdate, o_shippriority"""
MARKET = ["BUILDING", "AUTOMOBILE", "MACHINERY", "HOUSEHOLD", "FURNITURE"]
DAY0 = dt.date(1995, 1, 15)  # dates over 120 days around the query's 1995-03-15
TARGET = 0.35  # the busiest node's CPU per event at 4 nodes / at 1 node
READ_TIMEOUT = 120.0  # seconds after the last acknowledgement for the view to be exact


def progress(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a live process, from /proc (0 if it is gone)."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            fields = fh.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return 0.0


# -- the application and the workload ------------------------------------------------------


def signed_app() -> str:
    """The Q3 example with an int ``sign`` field first in each in schema and the box told about it."""
    text = APP.read_text()
    for schema in ("CustomerTuple", "OrdersTuple", "LineitemTuple"):
        text = text.replace(f'<schema name="{schema}">', f'<schema name="{schema}">\n    <field name="sign" type="int" />')
    text = text.replace('<out stream="Revenue" />', '<out stream="Revenue" />\n    <parameter name="sign-field" value="sign" />')
    if text.count('<field name="sign"') != 3 or 'name="sign-field"' not in text:
        raise BenchError(f"{APP} no longer has the shape this benchmark edits (schemas, <out stream=\"Revenue\" />)")
    return text


def deployment(nodes: list[str], segments: int, partitioned: bool = True) -> str:
    """Box ``q3`` partitioned over ``nodes``, or (the peer) an ordinary box on the one node."""
    if not partitioned:
        (node,) = nodes
        publish = "".join(f'<publish stream="{s}" node="{node}"/>' for s, _ in STREAMS)
        return f'<deploy>{publish}<node endpoint="{node}" query="q3"/></deploy>'
    members = "".join(f'<node endpoint="{n}"/>' for n in nodes)
    publish = "".join(f'<publish stream="{s}"/>' for s, _ in STREAMS)
    return f'<deploy>{publish}<partition box="q3" segments="{segments}">{members}</partition></deploy>'


def workload(events: int, seed: int = 13) -> dict[str, list[tuple]]:
    """Per relation, ``(sign, *row)`` events with dates as ``datetime.date``; ``events`` in all."""
    rnd = random.Random(seed)
    customers = max(1, events * 5 // 100)
    orders = max(1, events * 20 // 100)
    deletes = events * 5 // 100
    items = max(1, events - customers - orders - deletes)
    day = lambda: DAY0 + dt.timedelta(days=rnd.randrange(120))
    out = {
        "customer": [(1, c, MARKET[rnd.randrange(5)]) for c in range(customers)],
        "orders": [(1, o, rnd.randrange(customers), day(), rnd.randrange(3)) for o in range(orders)],
        "lineitem": [(1, rnd.randrange(orders), rnd.randrange(4, 40_000) * 0.25, rnd.choice((0.0, 0.25, 0.5)), day())
                     for _ in range(items)],
    }
    out["lineitem"] += [(-1, *row[1:]) for row in rnd.sample(out["lineitem"], min(deletes, items))]
    return out


def expected_view(data: dict[str, list[tuple]]) -> dict[tuple, float]:
    """The view after every event, by the M3 runtime in this process (non-zero rows only)."""
    from boreas.m3 import Runtime, compile_sql

    rt = Runtime(compile_sql(SQL))
    rt.apply_grouped((rel, sign, [row[1:] for row in rows if row[0] == sign])
                     for rel, rows in data.items() for sign in (1, -1))
    return {tuple(k): v for k, v in rt.view("Q1").items() if v}


def on_the_wire(rows: list[tuple]) -> list[list]:
    """Rows as the streams carry them: dates as timestamps (microseconds)."""
    from boreas.node.operators.m3box import micros_of

    if not rows:
        return []
    dates = [i for i, v in enumerate(rows[0]) if isinstance(v, dt.date)]
    micros: dict[dt.date, int] = {}
    out = []
    for row in rows:
        wire = list(row)
        for i in dates:
            d = wire[i]
            wire[i] = micros[d] if d in micros else micros.setdefault(d, micros_of(d))
        out.append(wire)
    return out


def producers(stream: str, members: int, per_stream: int) -> list[str]:
    """``per_stream`` producer ids for ``stream``, ``per_stream / members`` sending to each member."""
    want = per_stream // members
    found: dict[int, list[str]] = {m: [] for m in range(members)}
    i = 0
    while any(len(v) < want for v in found.values()):
        name = f"cumulus-{stream}-{i}"
        bucket = found[zlib.crc32(name.encode()) % members]
        if len(bucket) < want:
            bucket.append(name)
        i += 1
    return [name for m in range(members) for name in found[m]]


def same_view(got: dict[tuple, Any], want: dict[tuple, float]) -> bool:
    got = {k: v for k, v in got.items() if v}
    return got.keys() == want.keys() and all(math.isclose(got[k], v, rel_tol=1e-9, abs_tol=1e-6)
                                             for k, v in want.items())


# -- one member count -------------------------------------------------------------------------


async def statuses(peers, nodes: list[str]) -> list[dict]:
    return list(await asyncio.gather(*(peers.call("GET", f"http://{n}/status") for n in nodes)))


def between_members(status: dict, nodes: list[str]) -> tuple[int, int]:
    """Batches and bytes a node has sent on its links to the other members."""
    links = status["data"]["links"]
    others = [e for e in links if e in nodes and e != status["endpoint"]]
    return (sum(links[e].get("batches_sent", 0) for e in others), sum(links[e].get("bytes_sent", 0) for e in others))


class Gate:
    """The bench's admission control, and a watch for a box that stopped.

    A node acknowledges a batch once it is in its input queue (64 batches, shared by publishers
    and the other members' messages), so publishers that outpace a member fill its queue; a node
    whose queue is full stops reading its links, members sending to it block on those links, and
    two members each blocked sending to the other deadlock the box (docs/cumulus.md §3.5's
    admission, ``part.admit()``, is not built yet; run with ``--max-queue 0`` to see it).  So
    this polls every node's ``GET /status`` (queue = ``data.in.batches - data.flow.batches_in``)
    every ``POLL`` s; until the next poll the publishers of a node may send ``high - queue``
    batches to it, and none may send while any node's queue is at ``high`` (every coordinator
    sends Work to every member, so a member behind is fed by all of them).

    It also says when the nodes look *quiet* (every queue empty and no batch processed since the
    last poll: worth reading the view) and notices a box that *stopped*: no batch processed on
    any node for ``STALL`` s.
    """

    POLL = 0.02
    STALL = 20.0

    def __init__(self, peers, nodes: list[str], high: int):
        self.peers, self.nodes, self.high = peers, nodes, high
        self.room = {n: 0 for n in nodes}  # batches a node's publishers may still send until the next poll
        self.polled = asyncio.Event()  # set by the next poll (then replaced)
        self.queued = {n: 0 for n in nodes}
        self.peak = {n: 0 for n in nodes}
        self.polls = 0
        self.failure: BenchError | None = None
        self.quiet = asyncio.Event()

    async def take(self, node: str) -> None:
        """Room for one batch to ``node``."""
        while self.high > 0 and self.room[node] <= 0 and self.failure is None:
            await self.polled.wait()
        if self.failure is not None:
            raise self.failure
        self.room[node] -= 1

    def _tell(self) -> None:
        polled, self.polled = self.polled, asyncio.Event()
        polled.set()

    async def watch(self) -> None:
        try:
            await self._watch()
        except Exception as exc:  # noqa: BLE001 -- the publishers must not wait for room nobody gives
            self.failure = BenchError(f"watching the nodes' input queues: {exc!r}")
        self._tell()  # every publisher waiting sees the failure
        self.quiet.set()

    async def _watch(self) -> None:
        processed, since = -1, time.monotonic()
        while True:
            got = await statuses(self.peers, self.nodes)
            self.polls += 1
            total = 0
            for n, st in zip(self.nodes, got, strict=True):
                queued = st["data"]["in"].get("batches", 0) - st["data"]["flow"].get("batches_in", 0)
                total += st["data"]["flow"].get("batches_in", 0)
                self.queued[n], self.peak[n] = queued, max(self.peak[n], queued)
            held = max(self.queued.values()) >= self.high
            self.room = {n: 0 if held else max(0, self.high - q) for n, q in self.queued.items()}
            self._tell()
            if total == processed and not any(self.queued.values()):
                self.quiet.set()
            else:
                self.quiet.clear()
            if total != processed:
                processed, since = total, time.monotonic()
            elif time.monotonic() - since > self.STALL:
                links = {st["endpoint"]: {e: link.get("batches_sent", 0) - link.get("acks", 0)
                                          for e, link in st["data"]["links"].items()} for st in got}
                self.failure = BenchError(
                    f"the box stopped: no node processed a batch for {self.STALL:g} s; input queues "
                    f"{self.queued} (of 64 batches), unacknowledged batches on links between members {links}")
                return
            await asyncio.sleep(self.POLL)


async def measure(args: argparse.Namespace, run: Run, members: int, wire: dict[str, list[list]],
                  expected: dict[tuple, float], events: int, partitioned: bool = True) -> dict[str, Any]:
    from boreas.client.head_api import deploy_and_wait
    from boreas.client.publisher import Publisher
    from boreas.client.query import QueryClient
    from boreas.wire.client import PeerClient

    label = str(members) if partitioned else "plain"
    head_ep, *nodes = loopback_endpoints(1 + members)
    head = start_head(run.procs, sqlite_catalog(run.tmp / f"catalog-{label}.db"), head_ep, name=f"head-{label}")
    head_proc = run.procs.children[-1].proc
    node_procs = [start_node(run.procs, n, head, name=f"node-{label}-{i}",
                             extra=["--data-dir", str(run.tmp / f"data-{label}-{i}")] if args.durable else None,
                             profile=args.profile / f"node-{label}-{i}.prof" if args.profile else None)
                  for i, n in enumerate(nodes)]
    await wait_ready(run.procs, head, nodes)
    async with PeerClient(run.token, timeout=60.0) as peers:
        try:
            await deploy_and_wait(peers, head, signed_app(), "q3.xml", timeout=60.0)
            await deploy_and_wait(peers, head, deployment(nodes, args.segments, partitioned), "q3_deploy.xml",
                                  timeout=60.0)
        except Exception as exc:  # noqa: BLE001 -- any failure to deploy: say which, stop the run
            raise BenchError(f"deploying q3 over {members} nodes: {exc}") from None
    what = f"{members} node(s), {args.segments} segments" if partitioned else "the peer, q3 as a plain box on 1 node"
    progress(f"{what}: up and deployed; publishing {events:,} events")

    pubs: list[tuple[Publisher, list[list]]] = []
    for stream, relation in STREAMS:
        names = producers(stream, members, args.producers) if partitioned else \
            [f"cumulus-{stream}-{i}" for i in range(args.producers)]
        for k, producer in enumerate(names):
            pubs.append((Publisher(head, stream, run.token, producer=producer, batch_size=args.batch,
                                   capacity=args.window),
                         wire[relation][k::len(names)]))
    for publisher, _ in pubs:
        await publisher.start()
    entered = {p.entries[0] for p, _ in pubs}
    if entered != set(nodes):
        raise BenchError(f"publishers reach {sorted(entered)}, not every member of {nodes}")

    async def publish(publisher: Publisher, rows: list[list], gate: Gate) -> None:
        node = publisher.entries[0]
        for i in range(0, len(rows), args.batch):
            await gate.take(node)
            await publisher.send(rows[i:i + args.batch])
        while True:  # flush, but notice a stopped box instead of waiting for good
            try:
                await publisher.flush(timeout=1.0)
                return
            except TimeoutError:
                if gate.failure is not None:
                    raise gate.failure from None

    async with PeerClient(run.token, timeout=30.0) as peers, QueryClient(head, run.token) as reader:
        before = await statuses(peers, nodes)
        gate = Gate(peers, nodes, args.max_queue)
        watching = asyncio.create_task(gate.watch())
        cpu0 = [cpu_seconds(p.pid) for p in node_procs]
        head0, own0 = cpu_seconds(head_proc.pid), time.process_time()
        load0 = os.getloadavg()[0]
        began = time.perf_counter()
        try:
            await asyncio.gather(*(publish(p, rows, gate) for p, rows in pubs))
        except BaseException:
            for publisher, _ in pubs:
                await publisher.abort()
            raise
        acked = time.perf_counter() - began
        reads = 0
        while True:
            # read when the nodes look quiet (reads of the whole view cost the members), at least every second
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(gate.quiet.wait(), 1.0)
            got = (await reader.query("q3")).as_dict()
            reads += 1
            if same_view(got, expected):
                break
            run.procs.check()
            if gate.failure is not None:
                raise gate.failure
            if time.perf_counter() - began - acked > READ_TIMEOUT:
                wrong = sum(1 for k in expected.keys() | got.keys()
                            if not math.isclose(got.get(k, 0), expected.get(k, 0), rel_tol=1e-9, abs_tol=1e-6))
                raise BenchError(f"{members} node(s): the merged view still differs from the runtime's in {wrong} of "
                                 f"{len(expected)} rows {READ_TIMEOUT:g} s after every batch was acknowledged")
            await asyncio.sleep(0.05)
        seconds = time.perf_counter() - began
        cpu = [cpu_seconds(p.pid) - c for p, c in zip(node_procs, cpu0, strict=True)]
        head_cpu, own_cpu = cpu_seconds(head_proc.pid) - head0, time.process_time() - own0
        watching.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await watching
        after = await statuses(peers, nodes)
        entries = []
        for n in nodes:
            if partitioned:
                counted = await peers.call("GET", f"http://{n}/segments/q3")
                entries.append(sum(c for per_map in counted["segments"].values() for c in per_map.values()))
            else:
                maps = (await peers.call("GET", f"http://{n}/query/q3/maps"))["maps"]
                entries.append(sum(m["entries"] for m in maps.values()))
    for publisher, _ in pubs:
        await publisher.close()
    accepted = sum(p.accepted for p, _ in pubs)
    if accepted != events:
        raise BenchError(f"{members} node(s): the members accepted {accepted:,} of {events:,} events")
    sent = [tuple(a - b for a, b in zip(between_members(s1, nodes), between_members(s0, nodes), strict=True))
            for s0, s1 in zip(before, after, strict=True)]
    run.procs.stop([*node_procs, head_proc])
    return {
        "members": members, "partitioned": partitioned, "events": events, "seconds": seconds, "acked_seconds": acked, "reads": reads,
        "events_per_s": events / seconds,
        "messages_per_event": sum(b for b, _ in sent) / events,
        "bytes_per_event": sum(n for _, n in sent) / events,
        "node_cpu_s": cpu, "node_cpu_us_per_event": [c / events * 1e6 for c in cpu],
        "busiest_cpu_us_per_event": max(cpu) / events * 1e6,
        "total_node_cpu_us_per_event": sum(cpu) / events * 1e6,
        "head_cpu_s": head_cpu, "client_cpu_s": own_cpu,
        "entries": entries, "view_rows": len(expected),
        "peak_queue": [gate.peak[n] for n in nodes], "status_polls": gate.polls,
        "load_average": [load0, os.getloadavg()[0]],  # 1-minute, before and after: other work on the machine
    }


# -- the report ----------------------------------------------------------------------------------


def report(args: argparse.Namespace, results: list[dict], peers: list[dict], summary: dict) -> None:
    r0 = results[0]
    print(f"\nQ3 partitioned over member node processes on loopback ({os.cpu_count()} cores; "
          f"{'durable' if args.durable else 'memory-only'} nodes; {args.segments} segments; "
          f"{r0['events']:,} events, {args.producers * len(STREAMS)} publishers, batches of {args.batch}; "
          f"view {r0['view_rows']:,} rows)\n")
    head = (f"{'nodes':>5} {'seconds':>8} {'events/s':>9} {'msgs/ev':>8} {'bytes/ev':>9} "
            f"{'busiest us/ev':>13} {'sum us/ev':>10} {'per node us/ev':22} {'entries per node':28} {'Head s':>7} "
            f"{'client s':>8} {'load':>9}")
    print(head)
    for r in [*peers, *results]:
        per_node = " ".join(f"{c:.1f}" for c in r["node_cpu_us_per_event"])
        entries = " ".join(f"{e:,}" for e in r["entries"])
        load = "/".join(f"{x:.1f}" for x in r["load_average"])
        print(f"{r['members'] if r['partitioned'] else 'plain':>5} {r['seconds']:>8.1f} {r['events_per_s']:>9,.0f} {r['messages_per_event']:>8.4f} "
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
            line = f"busiest node's CPU per event, {m} nodes / 1 node: {ratio:.2f}x"
            if int(m) == 4:
                line += f"   target <= {TARGET:.2f}x: {'met' if ratio <= TARGET else 'NOT met'}"
            print(line)
        for m, ratio in summary["speedups"].items():
            print(f"events/s, {m} nodes / 1 node: {ratio:.2f}x")
    if "partition_overhead" in summary:
        print(f"one member's CPU per event / the plain box's (the peer): {summary['partition_overhead']:.2f}x; "
              f"events/s {summary['partition_speed']:.2f}x")
    if summary.get("ratios_to_plain"):
        print("busiest node's CPU per event / the plain box's: "
              + ", ".join(f"{m} nodes {ratio:.2f}x" for m, ratio in summary["ratios_to_plain"].items()))


def summarise(results: list[dict], peers: list[dict]) -> dict:
    one = next((r for r in results if r["members"] == 1), None)
    out: dict[str, Any] = {"ratios": {}, "speedups": {}}
    if peers:
        plain = peers[0]["busiest_cpu_us_per_event"]
        out["ratios_to_plain"] = {str(r["members"]): r["busiest_cpu_us_per_event"] / plain for r in results}
    if one is not None and peers:
        out["partition_overhead"] = one["busiest_cpu_us_per_event"] / peers[0]["busiest_cpu_us_per_event"]
        out["partition_speed"] = one["events_per_s"] / peers[0]["events_per_s"]
    if one is not None:
        for r in results:
            if r["members"] != 1:
                out["ratios"][str(r["members"])] = r["busiest_cpu_us_per_event"] / one["busiest_cpu_us_per_event"]
                out["speedups"][str(r["members"])] = r["events_per_s"] / one["events_per_s"]
    four = out["ratios"].get("4")
    out["target"] = TARGET
    out["target_met"] = None if four is None else four <= TARGET
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--members", default="1,2,4", help="member counts, comma separated (default 1,2,4)")
    parser.add_argument("--events", type=int, default=1_500_000, help="events per run (default 1,500,000)")
    parser.add_argument("--segments", type=int, default=16)
    parser.add_argument("--batch", type=int, default=500, help="rows per published batch (default 500)")
    parser.add_argument("--window", type=int, default=4,
                        help="batches each publisher keeps unacknowledged (default 4)")
    parser.add_argument("--max-queue", type=int, default=16,
                        help="keep each node's input queue under this many batches (default 16; "
                             "0: no limit, which can deadlock the box, see Gate)")
    parser.add_argument("--producers", type=int, default=0,
                        help="producers per stream (default: the least common multiple of the member counts, "
                             "at least 4)")
    parser.add_argument("--durable", action="store_true", help="nodes with --data-dir (input log, snapshots)")
    parser.add_argument("--no-peer", dest="peer", action="store_false",
                        help="skip the peer (q3 as an ordinary, unpartitioned m3 box on one node)")
    parser.add_argument("--json-only", action="store_true", help="print only the JSON line on stdout")
    parser.add_argument("--profile", type=Path, metavar="DIR",
                        help="run the nodes under cProfile, writing DIR/node-MEMBERS-I.prof (slower: CPU figures grow)")
    parser.add_argument("--keep-logs", action="store_true")
    args = parser.parse_args()
    if args.profile:
        args.profile = args.profile.resolve()
        args.profile.mkdir(parents=True, exist_ok=True)
    counts = [int(m) for m in args.members.split(",") if m.strip()]
    if not counts or min(counts) < 1:
        parser.error("--members: positive member counts, e.g. 1,2,4")
    lcm = math.lcm(*counts)
    if args.producers <= 0:
        args.producers = lcm * max(1, math.ceil(4 / lcm))
    elif args.producers % lcm:
        parser.error(f"--producers must be a multiple of {lcm}, so every member coordinates as many producers")

    results: list[dict] = []
    peers: list[dict] = []

    def body(run: Run) -> None:
        began = time.perf_counter()
        data = workload(args.events)
        expected = expected_view(data)
        wire = {rel: on_the_wire(rows) for rel, rows in data.items()}
        events = sum(len(rows) for rows in wire.values())
        progress(f"workload: {events:,} events, view of {len(expected):,} rows by the runtime "
                 f"({time.perf_counter() - began:.1f} s)")
        for members in ([0] if args.peer else []) + counts:
            r = asyncio.run(measure(args, run, max(1, members), wire, expected, events, partitioned=members > 0))
            (results if members else peers).append(r)
            progress(f"  {members or 'plain'}: {r['seconds']:.1f} s, {r['events_per_s']:,.0f} events/s, busiest node "
                     f"{r['busiest_cpu_us_per_event']:.1f} us CPU/event")
        if not args.json_only:
            report(args, results, peers, summarise(results, peers))

    out = sys.stderr if args.json_only else sys.stdout
    with contextlib.redirect_stdout(out):
        code = run_bench("cumulus", body, args.keep_logs)
    if code == 0:
        print(json.dumps({"bench": "cumulus", "cores": os.cpu_count(), "durable": args.durable,
                          "segments": args.segments, "batch": args.batch, "producers_per_stream": args.producers,
                          "runs": results, "peer": peers[0] if peers else None, **summarise(results, peers)}))
    return code


if __name__ == "__main__":
    sys.exit(main())
