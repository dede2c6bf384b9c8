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

Then three more figures of issue 13, each on fresh processes (``--parts``
selects; the default measures all four parts in about 3-4 minutes on 2 cores):

* **move** -- the pause a segment move of ~1M entries causes (target under
  1 s).  Box ``g`` (``SELECT a, SUM(b) AS s, COUNT(*) AS n FROM R GROUP
  BY a``, two entries per key) over 2 members and 2 segments is filled by
  direct bulk-load POSTs (``/segments/g/load``, owners by
  ``Layout.owner``) until member 1's segment holds ``--move-entries``
  entries; two publishers stream ``--move-rate`` rows/s over every key;
  after ``--move-warmup`` s the segment moves to member 0, the leader
  (``relayout_box``; the leader's answer, decision to entries in, is
  reported -- a leader that gives the segment away answers before the target
  has it).  The pause is the longest gap between consecutive view changes of
  the moving segment's keys on the box's out stream ``G`` (a
  ``Subscriber``); the throughput is view changes per second on ``G``
  before, during (call to answer) and in the worst 250 ms.  Afterwards the
  COUNT and SUM over all keys must equal what was loaded and streamed;
* **age** -- READ_STABLE of one q3 view key every ``--age-every`` s while
  the twelve publishers stream ``--load-rows`` rows of the Q3 tables (no
  deletes) into a fresh q3 over 2 members at the default (saturating) load:
  the answers' ``age`` (seconds since the stable epoch ended) in epochs
  (``--epoch-ms``, default 100), p50/p95/max (target under 2 epochs); then,
  in the same box, the same reads while lineitems are paced at
  ``--age-rate`` rows/s for ``--age-seconds`` s, which separates the
  protocol's own delay from queueing under saturation;
* **load** -- ``boreas.spark.load_view`` of the same rows (CSV files read
  into Spark's cache, local ``[2,4]`` session) into a fresh, empty q3 over 2
  members, timed until the merged view equals the runtime's, against that
  streaming run (also timed until the view is exact): seconds, rows/s, their
  ratio, and the CPU seconds of Spark's JVM, its Python workers and the
  nodes.  The Spark session's start, the CSV read and one warm-up pass of
  every map's query are timed apart (fixed costs that a load of the issue's
  10M rows would pay once); ``--load-rows`` is 1M by default (10M takes
  minutes here).

Every figure printed is measured in this run; a table, then one JSON line
(``--json-only``: only that line on stdout).  On a machine with fewer cores
than processes the nodes share the cores, so events/s cannot scale with
members there; CPU per event per node is the figure that does not depend on
that (the machine's load average is printed beside each run: other work on
it moves every figure).

The publishers are held back by the bench (:class:`Gate`): each node's input
queue is kept under ``--max-queue`` batches, because a node acknowledges a
batch once queued, and members whose queues filled while they sent to each
other deadlocked before the node's own admission (``ADMIT`` in
node/dataflow.py: publishers wait once 256 versions wait in the box).  The gate polls every
node's ``/status`` about 10-50 times a second (~0.1 ms of node CPU each).
``--profile DIR`` runs the nodes under cProfile.

Usage::

    .venv/bin/python bench/cumulus.py [--parts scaling,move,age,load] [--members 1,2,4] [--events 1500000]
        [--segments 16] [--batch 500] [--window 4] [--max-queue 16] [--producers N] [--durable] [--no-peer]
        [--epoch-ms 100] [--move-entries 1000000] [--move-rate 20000] [--move-batch 200] [--move-warmup 3]
        [--move-after 2] [--load-rows 1000000] [--age-every 0.05] [--age-rate 20000] [--age-seconds 4]
        [--profile DIR] [--json-only] [--keep-logs]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime as dt
import functools
import itertools
import json
import math
import os
import random
import statistics
import sys
import time
import zlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from procs import (
    BenchError,
    Run,
    cpu_seconds,
    loopback_endpoints,
    progress,
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
MOVE_TARGET = 1.0  # seconds: the pause a segment move of 1M entries causes (issue 13)
AGE_TARGET = 2.0  # epochs: the age of stable reads under load (issue 13)
PARTS = ("scaling", "move", "age", "load")


def tree_cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process and its live descendants (Spark's JVM and its Python workers)."""
    parents: dict[int, int] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            parents[int(stat.parent.name)] = int(stat.read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
    tree, grew = {pid}, True
    while grew:
        more = {child for child, parent in parents.items() if parent in tree} - tree
        tree |= more
        grew = bool(more)
    return sum(cpu_seconds(p) for p in tree)


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


def deployment(nodes: list[str], segments: int, partitioned: bool = True, epoch_ms: int | None = None) -> str:
    """Box ``q3`` partitioned over ``nodes``, or (the peer) an ordinary box on the one node."""
    if not partitioned:
        (node,) = nodes
        publish = "".join(f'<publish stream="{s}" node="{node}"/>' for s, _ in STREAMS)
        return f'<deploy>{publish}<node endpoint="{node}" query="q3"/></deploy>'
    members = "".join(f'<node endpoint="{n}"/>' for n in nodes)
    publish = "".join(f'<publish stream="{s}"/>' for s, _ in STREAMS)
    epoch = "" if epoch_ms is None else f' epoch-ms="{epoch_ms}"'
    return f'<deploy>{publish}<partition box="q3" segments="{segments}"{epoch}>{members}</partition></deploy>'


def workload(events: int, seed: int = 13, deletes: int = 5) -> dict[str, list[tuple]]:
    """Per relation, ``(sign, *row)`` events with dates as ``datetime.date``; ``events`` in all, ``deletes``
    percent of them deletes of earlier lineitems (0: the rows of three tables)."""
    rnd = random.Random(seed)
    customers = max(1, events * 5 // 100)
    orders = max(1, events * 20 // 100)
    deletes = events * deletes // 100
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
    and the other members' messages), so publishers that outpace a member fill its queue; before
    the node's admission (``ADMIT`` in node/dataflow.py, 4eee471) two members each blocked sending
    to the other deadlocked the box.  Since then a run with ``--max-queue 0`` no longer does; the
    gate stays so the figures remain comparable with earlier runs (short input queues).  So
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


@dataclass
class Cluster:
    head: str  # the Head's URL
    nodes: list[str]  # the nodes' endpoints
    head_proc: Any
    node_procs: list[Any]


async def start_cluster(args: argparse.Namespace, run: Run, label: str, members: int, app: str,
                        deploy: Callable[[list[str]], str]) -> Cluster:
    """A fresh Head (its own catalog file) and ``members`` nodes, with ``app`` and ``deploy(nodes)`` deployed."""
    from boreas.client.head_api import deploy_and_wait
    from boreas.wire.client import PeerClient

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
            await deploy_and_wait(peers, head, app, f"app-{label}.xml", timeout=60.0)
            await deploy_and_wait(peers, head, deploy(nodes), f"deploy-{label}.xml", timeout=60.0)
        except Exception as exc:  # noqa: BLE001 -- any failure to deploy: say which, stop the run
            raise BenchError(f"deploying over {members} nodes ({label}): {exc}") from None
    return Cluster(head, nodes, head_proc, node_procs)


async def measure(args: argparse.Namespace, run: Run, members: int, wire: dict[str, list[list]],
                  expected: dict[tuple, float], events: int, partitioned: bool = True, label: str | None = None,
                  during: Callable[[str], Awaitable[Any]] | None = None,
                  after: Callable[[str], Awaitable[Any]] | None = None) -> dict[str, Any]:
    """One member count: publish ``wire`` into a fresh cluster until the merged view equals ``expected``.

    ``during(head)``, if given, runs while the publishers publish and is cancelled once every batch is
    acknowledged (the stable-age reads); ``after(head)`` runs once the view is exact, before the processes
    stop (its answer is the result's ``after``)."""
    from boreas.client.publisher import Publisher
    from boreas.client.query import QueryClient
    from boreas.wire.client import PeerClient

    label = label or (str(members) if partitioned else "plain")
    cluster = await start_cluster(args, run, label, members, signed_app(),
                                  lambda nodes: deployment(nodes, args.segments, partitioned, args.epoch_ms))
    head, nodes, head_proc, node_procs = cluster.head, cluster.nodes, cluster.head_proc, cluster.node_procs
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
        side = asyncio.create_task(during(head)) if during is not None else None
        try:
            await asyncio.gather(*(publish(p, rows, gate) for p, rows in pubs))
        except BaseException:
            for publisher, _ in pubs:
                await publisher.abort()
            if side is not None:
                side.cancel()
            raise
        acked = time.perf_counter() - began
        if side is not None:
            side.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await side  # an error in it is the run's
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
        after_status = await statuses(peers, nodes)
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
            for s0, s1 in zip(before, after_status, strict=True)]
    later = await after(head) if after is not None else None
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
        **({"after": later} if after is not None else {}),
    }


# -- stable age under load ------------------------------------------------------------------------


def percentile(values: list[float], p: float) -> float:
    """The ``p``-th percentile (nearest rank) of ``values``."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, math.ceil(p / 100 * len(ordered)) - 1))]


class StableAges:
    """READ_STABLE of one view key of ``box`` every ``every`` s (from the first publisher's batch until every
    batch is acknowledged); the ``age`` of each answer (seconds since its stable epoch ended)."""

    def __init__(self, token: str, box: str, keys: list[Any], every: float, delay: float = 0.0):
        self.token, self.box, self.keys, self.every, self.delay = token, box, keys, every, delay
        self.ages: list[float] = []
        self.latencies: list[float] = []  # seconds per read (leader's stable epoch, then the member's maps)
        self.epochs: list[int] = []
        self.began: float | None = None
        self.first: float | None = None  # seconds from the first read to the first stable epoch

    async def __call__(self, head: str) -> None:
        from boreas.client.query import QueryClient

        await asyncio.sleep(self.delay)
        async with QueryClient(head, self.token) as reader:
            self.began = time.perf_counter()
            while True:
                t0 = time.perf_counter()
                # waits (up to the client's moved_wait) while the box has no stable epoch yet
                result = await reader.query(self.box, keys=self.keys, stable=True)
                t1 = time.perf_counter()
                if self.first is None:
                    self.first = t1 - self.began
                self.ages.append(result.age or 0.0)
                self.latencies.append(t1 - t0)
                self.epochs.append(result.epoch)
                await asyncio.sleep(max(0.0, self.every - (time.perf_counter() - t0)))

    def summary(self, epoch_ms: int) -> dict[str, Any]:
        if not self.ages:  # a run too short for a stable epoch (the first takes a few epochs)
            return {"reads": 0, "epoch_ms": epoch_ms, "every_s": self.every, "target_epochs": AGE_TARGET,
                    "target_met": None, "max_under_target": None}
        per_epoch = [a * 1000 / epoch_ms for a in self.ages]
        return {"reads": len(self.ages), "epoch_ms": epoch_ms, "every_s": self.every,
                "p50_epochs": percentile(per_epoch, 50), "p95_epochs": percentile(per_epoch, 95),
                "max_epochs": max(per_epoch), "mean_epochs": statistics.fmean(per_epoch),
                "stable_epochs_seen": len(set(self.epochs)), "first_stable_s": self.first,
                "read_ms_p50": percentile(self.latencies, 50) * 1000, "read_ms_max": max(self.latencies) * 1000,
                "target_epochs": AGE_TARGET, "target_met": percentile(per_epoch, 95) < AGE_TARGET,
                "max_under_target": max(per_epoch) < AGE_TARGET}


async def paced_ages(args: argparse.Namespace, token: str, head: str, rows: list[list], key: list[Any]) -> dict:
    """Lineitems (``rows`` again) into q3 at ``--age-rate`` rows/s, by one producer per member, for
    ``--age-seconds``; the stable reads' ages meanwhile (from half a second in: an idle box's stable
    epoch is old)."""
    from boreas.client.publisher import Publisher

    ages = StableAges(token, "q3", key, args.age_every, delay=0.5)
    pubs = [Publisher(head, "Lineitem", token, producer=p, batch_size=args.batch, capacity=args.window)
            for p in producers("Lineitem-paced", 2, 2)]
    for p in pubs:
        await p.start()
    interval = args.batch / (args.age_rate / len(pubs))
    behind = [0.0]

    async def stream(publisher: Publisher, offset: int) -> None:
        t0, i = time.perf_counter(), 0
        while (due := t0 + i * interval) < t0 + args.age_seconds:
            delay = due - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            else:
                behind[0] = max(behind[0], -delay)
            start = (offset + i * args.batch) % max(1, len(rows) - args.batch)
            await publisher.send(rows[start:start + args.batch])
            i += 1
        await publisher.flush(timeout=60.0)

    sampling = asyncio.create_task(ages(head))
    await asyncio.gather(*(stream(p, k * len(rows) // 2) for k, p in enumerate(pubs)))
    sampling.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await sampling
    for p in pubs:
        await p.close()
    return {**ages.summary(args.epoch_ms), "rate_rows_per_s": args.age_rate, "seconds": args.age_seconds,
            "publisher_behind_s": behind[0]}


# -- a segment move of ~1M entries while a publisher streams --------------------------------------


GROUP_SQL = "SELECT a, SUM(b) AS s, COUNT(*) AS n FROM R GROUP BY a"
GROUP_APP = f"""<borealis>
  <input stream="R" schema="RT"/>
  <schema name="RT"><field name="a" type="int"/><field name="b" type="int"/></schema>
  <box name="g" type="m3">
    <in stream="R"/>
    <out stream="G"/>
    <parameter name="sql" value="{GROUP_SQL}"/>
  </box>
  <output stream="G"/>
</borealis>"""
GROUP_MAPS = ("Q1_s", "Q1_n")  # a's SUM(b) and COUNT(*): one entry each per distinct a
LOAD_CHUNK = 50_000  # entries per POST /segments/g/load


def gaps(times: list[float], lo: float, hi: float) -> tuple[float, float]:
    """The longest gap between consecutive ``times`` (sorted) that overlaps ``[lo, hi]``, and when it began."""
    best, at = 0.0, lo
    for t0, t1 in itertools.pairwise(times):
        if t1 >= lo and t0 <= hi and t1 - t0 > best:
            best, at = t1 - t0, t0
    return best, at


def rows_per_s(arrivals: list[tuple[float, int, int]], lo: float, hi: float) -> float:
    return sum(m + o for t, m, o in arrivals if lo <= t < hi) / max(hi - lo, 1e-9)


async def move_pause(args: argparse.Namespace, run: Run) -> dict[str, Any]:
    """Box ``g`` (GROUP BY a) over 2 members, 2 segments, bulk-loaded so member 1's segment holds
    ``--move-entries`` entries; publishers stream ``--move-rate`` rows/s over every key; the segment moves
    to member 0 (the leader).  Measured: the leader's answer, the longest gap between changes of the moving segment's
    keys on out stream G (what a subscriber sees paused), and the view changes per second."""
    import msgspec
    from boreas.cli.relayout import relayout_box
    from boreas.client.publisher import Publisher
    from boreas.client.query import QueryClient
    from boreas.client.subscriber import Subscriber
    from boreas.m3.cumulus import slot
    from boreas.wire.addressing import endpoint_url
    from boreas.wire.client import PeerClient

    def deploy(nodes: list[str]) -> str:
        members = "".join(f'<node endpoint="{n}"/>' for n in nodes)
        return (f'<deploy><publish stream="R"/><partition box="g" segments="2" epoch-ms="{args.epoch_ms}">'
                f'{members}</partition></deploy>')

    cluster = await start_cluster(args, run, "move", 2, GROUP_APP, deploy)
    head, nodes = cluster.head, cluster.nodes
    async with QueryClient(head, run.token) as reader:
        layout = await reader.layout_of("g", fresh=True)
        maps = (await reader.maps("g"))["maps"]
    if layout is None or sorted(maps) != sorted(GROUP_MAPS):
        raise BenchError(f"box g: expected a partitioned box with maps {GROUP_MAPS}, got {sorted(maps)}")
    # member 1's segment moves to member 0, the leader: its answer then comes once the entries are in (a
    # leader that gives a segment away answers once it sent it, before the target installed it)
    seg = next((s for s in layout.segments if s.member == 1), None)
    if seg is None or not any(s.member == 0 for s in layout.segments):
        raise BenchError(f"box g: expected a segment on each member, got {layout.to_dict()['segments']}")
    lo, hi = seg.lo, seg.hi

    # the keys: 0, 1, ... until the moving segment holds --move-entries entries (two per key)
    began = time.perf_counter()
    want, moving, a = args.move_entries // len(GROUP_MAPS), 0, 0
    owners = layout.owners
    per_member: list[list] = [[], []]
    while moving < want:
        s = slot(a)
        moving += lo <= s < hi
        entries = per_member[owners[s]]
        entries.append(["Q1_s", [a], a % 100 + 1])  # no zero: a zero entry is no entry
        entries.append(["Q1_n", [a], 1])
        a += 1
    keys = a
    encoder = msgspec.msgpack.Encoder()
    async with PeerClient(run.token, timeout=120.0) as peers:

        async def load(member: int) -> None:
            entries = per_member[member]
            for part, start in enumerate(range(0, len(entries), LOAD_CHUNK), 1):
                url = endpoint_url(layout.members[member], f"/segments/g/load?job=bench&part={part}")
                await peers.call("POST", url, data=encoder.encode(entries[start:start + LOAD_CHUNK]),
                                 content_type="application/msgpack")

        await asyncio.gather(load(0), load(1))
        total = sum(len(e) for e in per_member)
        deadline = time.monotonic() + 120
        while True:
            counted = [await peers.call("GET", f"http://{n}/segments/g") for n in nodes]
            held = {int(sid): sum(per_map.values()) for c in counted for sid, per_map in c["segments"].items()}
            if sum(held.values()) == total:
                break
            run.procs.check()
            if time.monotonic() > deadline:
                raise BenchError(f"box g: {sum(held.values()):,} of {total:,} bulk-loaded entries in after 120 s")
            await asyncio.sleep(0.2)
    per_member.clear()
    loaded_s = time.perf_counter() - began
    progress(f"move: {total:,} entries bulk-loaded ({keys:,} keys; segment g/{seg.id} holds {held[seg.id]:,}) "
             f"in {loaded_s:.1f} s; streaming {args.move_rate:,} rows/s, then moving g/{seg.id} to member 0")

    sub = Subscriber(head, "G", run.token, queue_batches=4096)
    await sub.start()
    arrivals: list[tuple[float, int, int]] = []  # (time, rows of the moving segment's keys, other rows)

    async def consume() -> None:
        async for rows in sub.batches():
            t = time.perf_counter()
            n = sum(1 for row in rows if lo <= slot(row[0]) < hi)
            arrivals.append((t, n, len(rows) - n))

    consuming = asyncio.create_task(consume())
    names = producers("R", 2, 2)
    pubs = [Publisher(head, "R", run.token, producer=p, batch_size=args.move_batch, capacity=args.window)
            for p in names]
    for p in pubs:
        await p.start()
    stop = asyncio.Event()
    sent = {"rows": 0, "b": 0}
    behind = [0.0]  # the most a publisher fell behind its schedule (its window full: the box held it back)

    async def stream(publisher: Publisher, seed: int) -> None:
        rnd = random.Random(seed)
        interval = args.move_batch / (args.move_rate / len(pubs))
        t0, i = time.perf_counter(), 0
        while not stop.is_set():
            delay = t0 + i * interval - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            else:
                behind[0] = max(behind[0], -delay)
            rows = [(rnd.randrange(keys), rnd.randrange(100)) for _ in range(args.move_batch)]
            sent["rows"] += len(rows)
            sent["b"] += sum(b for _, b in rows)
            await publisher.send(rows)
            i += 1

    streaming = [asyncio.create_task(stream(p, i)) for i, p in enumerate(pubs)]
    t_start = time.perf_counter()
    await asyncio.sleep(args.move_warmup)
    behind_before = behind[0]
    t_call = time.perf_counter()
    reply = await relayout_box(head, run.token, "g", {"move": [seg.id, layout.members[0]]}, timeout=120.0)
    t_reply = time.perf_counter()
    await asyncio.sleep(args.move_after)
    stop.set()
    await asyncio.gather(*streaming)
    for p in pubs:
        await p.flush(timeout=60.0)
    t_stop = time.perf_counter()
    # every row in the maps: the sums of both maps equal what was loaded and streamed
    want_n = keys + sent["rows"]
    want_s = sum(k % 100 + 1 for k in range(keys)) + sent["b"]
    async with QueryClient(head, run.token) as reader:
        deadline = time.monotonic() + 60
        while True:
            got_n = (await reader.query("g", map="Q1_n", agg="sum")).value
            got_s = (await reader.query("g", map="Q1_s", agg="sum")).value
            if (got_n, got_s) == (want_n, want_s):
                break
            if time.monotonic() > deadline:
                raise BenchError(f"box g after the move: COUNT {got_n:,} and SUM {got_s:,}, expected {want_n:,} "
                                 f"and {want_s:,}")
            await asyncio.sleep(0.2)
        _, answers = await reader.segments("g")
    await asyncio.sleep(0.3)
    consuming.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await consuming
    for p in pubs:
        await p.close()
    await sub.close()
    run.procs.stop([*cluster.node_procs, cluster.head_proc])

    moved = [list(m) for m in reply.get("moves", [])]
    if moved != [[seg.id, 1, 0]]:
        raise BenchError(f"the leader answered moves {moved}, not [[{seg.id}, 1, 0]]")
    after = {int(sid): sum(per_map.values()) for ans in answers for sid, per_map in ans["segments"].items()}
    times_moving = [t for t, m, _ in arrivals if m]
    times_other = [t for t, _, o in arrivals if o]
    window = (t_call, t_reply + args.move_after / 2)
    pause, pause_at = gaps(times_moving, *window)
    base_gap, _ = gaps(times_moving, t_start + 0.5, t_call)
    other_gap, _ = gaps(times_other, *window)
    base_rate = rows_per_s(arrivals, t_start + 0.5, t_call)
    during_rate = rows_per_s(arrivals, t_call, t_reply)
    lowest = min(rows_per_s(arrivals, t, t + 0.25) for t in
                 (t_call + 0.05 * i for i in range(max(1, int((window[1] - 0.25 - t_call) / 0.05)) + 1)))
    return {
        "box": "g", "sql": GROUP_SQL, "members": 2, "segment": seg.id, "from": layout.members[1], "to": layout.members[0],
        "entries_moved": after.get(seg.id, 0), "entries_total": total, "keys": keys, "load_seconds": loaded_s,
        "rate_rows_per_s": args.move_rate, "batch": args.move_batch, "streamed_rows": sent["rows"],
        "leader_seconds": reply["seconds"], "call_seconds": t_reply - t_call,
        "pause_seconds": pause, "pause_began_after_call_s": pause_at - t_call, "gap_before_move_s": base_gap,
        "other_segment_gap_s": other_gap,
        "rows_per_s_before": base_rate, "rows_per_s_during": during_rate, "lowest_250ms_rows_per_s": lowest,
        "dip": 1 - during_rate / base_rate if base_rate else None,
        "publisher_behind_s": behind[0], "publisher_behind_before_move_s": behind_before,
        "streamed_seconds": t_stop - t_start,
        "target_seconds": MOVE_TARGET, "target_met": pause < MOVE_TARGET and reply["seconds"] < MOVE_TARGET,
    }


# -- Spark bulk load against streaming the same rows ---------------------------------------------


SPARK_SCHEMAS = {
    "customer": "c_custkey INT, c_mktsegment STRING",
    "orders": "o_orderkey INT, o_custkey INT, o_orderdate DATE, o_shippriority INT",
    "lineitem": "l_orderkey INT, l_extendedprice DECIMAL(15,2), l_discount DECIMAL(15,2), l_shipdate DATE",
}


def write_tables(tables: dict[str, list[tuple]], folder: Path) -> dict[str, Path]:
    """The tables (``(sign, *row)`` rows) as CSV files without header (dates ISO), one per relation."""
    folder.mkdir(parents=True, exist_ok=True)
    paths = {}
    for name, rows in tables.items():
        path = paths[name] = folder / f"{name}.csv"
        with open(path, "w") as fh:
            fh.writelines(",".join(str(v) for v in row[1:]) + "\n" for row in rows)
    return paths


async def wait_view(head: str, token: str, expected: dict[tuple, float], timeout: float = READ_TIMEOUT) -> int:
    """Read the merged view until it equals ``expected``; how many reads it took."""
    from boreas.client.query import QueryClient

    deadline, reads = time.monotonic() + timeout, 0
    async with QueryClient(head, token) as reader:
        while True:
            got = (await reader.query("q3")).as_dict()
            reads += 1
            if same_view(got, expected):
                return reads
            if time.monotonic() > deadline:
                raise BenchError(f"the merged view of q3 still differs from the runtime's {timeout:g} s after the load")
            await asyncio.sleep(0.1)


def spark_load(args: argparse.Namespace, run: Run, paths: dict[str, Path], expected: dict[tuple, float],
               rows: int) -> dict[str, Any]:
    """``boreas.spark.load_view`` of the tables into a fresh, empty q3 over 2 members, timed until the
    merged view equals the runtime's (the Spark session's start is timed apart)."""
    from boreas.spark import load_view, plan_load
    from boreas.spark.load import _tag
    from boreas.spark.session import local_session

    began = time.perf_counter()
    spark = local_session()
    run.cleanups.insert(0, spark.stop)
    session_s = time.perf_counter() - began
    cluster = asyncio.run(start_cluster(args, run, "spark", 2, signed_app(),
                                        lambda nodes: deployment(nodes, args.segments, True, args.epoch_ms)))
    # the tables in Spark's memory first, as the publishers' rows are in this process's: neither side is
    # timed reading files
    began = time.perf_counter()
    frames = {name: spark.read.schema(SPARK_SCHEMAS[name]).csv(str(path)).cache() for name, path in paths.items()}
    cached = sum(frame.count() for frame in frames.values())
    if cached != rows:
        raise BenchError(f"Spark read {cached:,} rows from the CSV files, not {rows:,}")
    cache_s = time.perf_counter() - began
    # and Spark warmed up, as it would be a few seconds into a load of the 10M rows: every map's
    # query, sorted and handed to the Python workers as load_view does, once (the first run costs about
    # twice the next: code generation, JIT, the workers importing boreas)
    began = time.perf_counter()
    plan = plan_load("q3", cluster.head, run.token)
    for name, frame in frames.items():
        frame.createOrReplaceTempView(name)
    for i, m in enumerate(plan.program.maps):
        df = spark.sql(plan.sql[m.name])
        if m.keys:
            df = df.sortWithinPartitions(*[f"k{j}" for j in range(len(m.keys))])
        df.rdd.map(functools.partial(_tag, i)).count()
    warm_s = time.perf_counter() - began
    jvm = spark.sparkContext._gateway.proc.pid  # the JVM py4j started (its Python workers are its children)
    cpu0 = [cpu_seconds(p.pid) for p in cluster.node_procs]
    spark0, jvm0, own0 = tree_cpu_seconds(jvm), cpu_seconds(jvm), time.process_time()
    progress(f"load: Spark session up in {session_s:.1f} s, tables cached in {cache_s:.1f} s, warmed up in "
             f"{warm_s:.1f} s; load_view of {rows:,} rows into q3 over 2 nodes")
    t0 = time.perf_counter()
    counts = load_view("q3", frames, head=cluster.head, token=run.token, spark=spark, job="bench")
    t1 = time.perf_counter()
    spark_cpu, jvm_cpu, own_cpu = tree_cpu_seconds(jvm) - spark0, cpu_seconds(jvm) - jvm0, time.process_time() - own0
    reads = asyncio.run(wait_view(cluster.head, run.token, expected))
    t2 = time.perf_counter()
    cpu = [cpu_seconds(p.pid) - c for p, c in zip(cluster.node_procs, cpu0, strict=True)]
    run.procs.stop([*cluster.node_procs, cluster.head_proc])
    return {"rows": rows, "seconds": t2 - t0, "load_view_seconds": t1 - t0, "rows_per_s": rows / (t2 - t0),
            "session_start_seconds": session_s, "cache_seconds": cache_s, "warm_up_seconds": warm_s, "entries": sum(counts.values()), "entries_per_map": counts,
            "reads": reads, "node_cpu_s": cpu, "spark_cpu_s": spark_cpu, "jvm_cpu_s": jvm_cpu, "driver_cpu_s": own_cpu,
            "spark_master": spark.sparkContext.master}


# -- the report ----------------------------------------------------------------------------------


def report(args: argparse.Namespace, results: list[dict], peers: list[dict], summary: dict) -> None:
    if not results and not peers:
        return
    r0 = (results or peers)[0]
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
        print(f"\nStable age under load: q3 over 2 members, {stream['events']:,} rows published at the default load "
              f"({args.producers * len(STREAMS)} publishers, batches of {args.batch}; {stream['events_per_s']:,.0f} "
              f"rows/s); READ_STABLE of one view key every {a['every_s'] * 1000:.0f} ms, epoch {a['epoch_ms']} ms")
        if not a["reads"]:
            print("  no stable read answered while the publishers ran (too few --load-rows for a stable epoch)")
        else:
            print(f"  age p50 {a['p50_epochs']:.2f} / p95 {a['p95_epochs']:.2f} / max {a['max_epochs']:.2f} epochs "
                  f"({a['reads']} reads, {a['stable_epochs_seen']} stable epochs seen; a read took "
                  f"{a['read_ms_p50']:.1f} ms p50, {a['read_ms_max']:.0f} ms max)   target < {a['target_epochs']:g} "
                  f"epochs: p95 {met(a['target_met'])}, max {met(a['max_under_target'])}")
        q = a.get("paced")
        if q and q["reads"]:
            print(f"  paced, {q['rate_rows_per_s']:,} lineitems/s for {q['seconds']:g} s into the same box: age p50 "
                  f"{q['p50_epochs']:.2f} / p95 {q['p95_epochs']:.2f} / max {q['max_epochs']:.2f} epochs ({q['reads']} "
                  f"reads; a read took {q['read_ms_p50']:.1f} ms p50; publishers behind schedule by up to "
                  f"{q['publisher_behind_s']:.2f} s)")
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
        print(f"  bulk load / streaming: {ratio:.2f}x the rows per second")


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
    parser.add_argument("--parts", default=",".join(PARTS),
                        help="what to measure, comma separated (default all): scaling (Q3 over --members), move "
                             "(a segment move's pause), age (stable reads' age under load), load (Spark bulk load "
                             "vs streaming); age and load share one streaming run")
    parser.add_argument("--epoch-ms", type=int, default=100, help="epoch of the partitioned boxes (default 100)")
    parser.add_argument("--move-entries", type=int, default=1_000_000,
                        help="entries in the segment that moves (default 1,000,000)")
    parser.add_argument("--move-rate", type=int, default=20_000,
                        help="rows/s the publishers stream while the segment moves (default 20,000)")
    parser.add_argument("--move-batch", type=int, default=200, help="rows per batch then (default 200)")
    parser.add_argument("--move-warmup", type=float, default=3.0,
                        help="seconds of streaming before the move (default 3)")
    parser.add_argument("--move-after", type=float, default=2.0,
                        help="seconds of streaming after the leader answered (default 2)")
    parser.add_argument("--load-rows", type=int, default=1_000_000,
                        help="rows of the Q3 tables loaded by Spark and streamed (default 1,000,000; the issue "
                             "asks 10M)")
    parser.add_argument("--age-every", type=float, default=0.05, help="seconds between stable reads (default 0.05)")
    parser.add_argument("--age-rate", type=int, default=20_000,
                        help="rows/s of a second, paced phase of the stable-age reads (default 20,000; 0: none)")
    parser.add_argument("--age-seconds", type=float, default=4.0, help="seconds of that phase (default 4)")
    parser.add_argument("--keep-logs", action="store_true")
    args = parser.parse_args()
    parts = {x.strip() for x in args.parts.split(",") if x.strip()}
    if not parts or parts - set(PARTS):
        parser.error(f"--parts: some of {', '.join(PARTS)}")
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
    more: dict[str, dict | None] = {"move": None, "stream": None, "stable_age": None, "load": None}

    def body(run: Run) -> None:
        if "scaling" in parts:
            began = time.perf_counter()
            data = workload(args.events)
            expected = expected_view(data)
            wire = {rel: on_the_wire(rows) for rel, rows in data.items()}
            events = sum(len(rows) for rows in wire.values())
            progress(f"workload: {events:,} events, view of {len(expected):,} rows by the runtime "
                     f"({time.perf_counter() - began:.1f} s)")
            del data
            for members in ([0] if args.peer else []) + counts:
                r = asyncio.run(measure(args, run, max(1, members), wire, expected, events, partitioned=members > 0))
                (results if members else peers).append(r)
                progress(f"  {members or 'plain'}: {r['seconds']:.1f} s, {r['events_per_s']:,.0f} events/s, busiest "
                         f"node {r['busiest_cpu_us_per_event']:.1f} us CPU/event")
            del wire, expected
        if "move" in parts:
            more["move"] = m = asyncio.run(move_pause(args, run))
            progress(f"  move: leader {m['leader_seconds']:.2f} s, pause {m['pause_seconds']:.2f} s")
        if parts & {"age", "load"}:
            began = time.perf_counter()
            tables = workload(args.load_rows, seed=31, deletes=0)
            expected = expected_view(tables)
            rows = sum(len(t) for t in tables.values())
            progress(f"tables: {rows:,} rows, view of {len(expected):,} rows by the runtime "
                     f"({time.perf_counter() - began:.1f} s)")
            wire = {rel: on_the_wire(t) for rel, t in tables.items()}
            ages = paced = None
            if "age" in parts:
                key = [min(expected)[0], None, None]
                ages = StableAges(run.token, "q3", key, args.age_every)
                if args.age_rate > 0:
                    paced = functools.partial(paced_ages, args, run.token, rows=wire["lineitem"], key=key)
            more["stream"] = r = asyncio.run(measure(args, run, 2, wire, expected, rows, label="stream",
                                                     during=ages, after=paced))
            del wire
            progress(f"  streamed: {r['seconds']:.1f} s, {r['events_per_s']:,.0f} rows/s")
            if ages is not None:
                more["stable_age"] = a = {**ages.summary(args.epoch_ms), "paced": r.pop("after", None)}
                if a["reads"]:
                    progress(f"  stable age p50 {a['p50_epochs']:.2f} p95 {a['p95_epochs']:.2f} max "
                             f"{a['max_epochs']:.2f} epochs")
            if "load" in parts:
                paths = write_tables(tables, run.tmp / "tables")
                del tables
                more["load"] = lo = spark_load(args, run, paths, expected, rows)
                progress(f"  Spark load: {lo['seconds']:.1f} s, {lo['rows_per_s']:,.0f} rows/s")
        if not args.json_only:
            report(args, results, peers, summarise(results, peers))
            report_more(args, more["move"], more["stream"], more["stable_age"], more["load"])

    out = sys.stderr if args.json_only else sys.stdout
    with contextlib.redirect_stdout(out):
        code = run_bench("cumulus", body, args.keep_logs)
    if code == 0:
        load = more["load"]
        if load is not None and more["stream"] is not None:
            load = {**load, "streaming_seconds": more["stream"]["seconds"],
                    "streaming_rows_per_s": more["stream"]["events_per_s"],
                    "ratio": load["rows_per_s"] / more["stream"]["events_per_s"]}
        print(json.dumps({"bench": "cumulus", "cores": os.cpu_count(), "durable": args.durable,
                          "segments": args.segments, "batch": args.batch, "producers_per_stream": args.producers,
                          "epoch_ms": args.epoch_ms, "parts": sorted(parts),
                          "runs": results, "peer": peers[0] if peers else None, **summarise(results, peers),
                          "move": more["move"], "stable_age": more["stable_age"], "stream": more["stream"],
                          "load": load}))
    return code

if __name__ == "__main__":
    sys.exit(main())
