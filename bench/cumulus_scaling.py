"""``bench/cumulus.py --parts scaling``: Q3 partitioned over 1, 2 and 4 members, CPU per event per node."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import math
import os
import sys
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from boreas.client.keyed import route_rows  # noqa: E402

from cumulus_sampling import Samplers  # noqa: E402
from cumulus_q3 import (  # noqa: E402
    READ_TIMEOUT,
    STREAMS,
    deployment,
    producers,
    same_view,
    signed_app,
)
from procs import (
    BenchError,
    Run,
    cpu_seconds,
    loopback_endpoints,
    progress,
    sqlite_catalog,
    start_head,
    start_node,
    wait_ready,
)

#: ``--sources keyed``: the column (after the sign) each relation's rows are routed by, the partition column
#: of the maps its rows write (Q3: order key, customer key)
KEYS = {"customer": 1, "orders": 1, "lineitem": 1}


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


def arrow_batches(schema, rows: list[list], size: int) -> list:
    """``rows`` of ``schema`` as pyarrow RecordBatches of ``size`` rows (``--arrow``: publishers that send columns)."""
    import pyarrow as pa

    from boreas.wire.columns import arrow_schema

    target = arrow_schema(schema)
    out = []
    for i in range(0, len(rows), size):
        part = rows[i:i + size]
        out.append(pa.RecordBatch.from_arrays([pa.array([r[j] for r in part], f.type) for j, f in enumerate(target)],
                                              schema=target))
    return out


async def measure(args: argparse.Namespace, run: Run, members: int, wire: dict[str, list[list]],
                  expected: dict[tuple, float], events: int, partitioned: bool = True, label: str | None = None,
                  sources: str = "random",
                  during: Callable[[str], Awaitable[Any]] | None = None,
                  after: Callable[[str, float], Awaitable[Any]] | None = None) -> dict[str, Any]:
    """One member count: publish ``wire`` into a fresh cluster until the merged view equals ``expected``.

    ``sources``: ``random`` (each producer's rows drawn at random; a member coordinates rows others own) or
    ``keyed`` (each row published by a producer of the member owning its key, as ``client.keyed`` routes).
    ``during(head)``, if given, runs while the publishers publish and is cancelled once every batch is
    acknowledged (the stable-age reads); ``after(head, rows_per_s)`` runs once the view is exact, before the processes
    stop (its answer is the result's ``after``)."""
    from boreas.client.publisher import Publisher
    from boreas.client.query import QueryClient
    from boreas.wire.client import PeerClient

    label = label or (f"{members}-{sources}" if partitioned else "plain")
    cluster = await start_cluster(args, run, label, members, signed_app(getattr(args, "backend", None)),
                                  lambda nodes: deployment(nodes, args.segments, partitioned, args.epoch_ms,
                                                                    args.replicate))
    head, nodes, head_proc, node_procs = cluster.head, cluster.nodes, cluster.head_proc, cluster.node_procs
    what = f"{members} node(s), {args.segments} segments" if partitioned else "the peer, q3 as a plain box on 1 node"
    progress(f"{what}: up and deployed; publishing {events:,} events")

    keyed = partitioned and members > 1 and sources == "keyed"
    if keyed:
        async with QueryClient(head, run.token) as client:
            layout = await client.layout_of("q3", fresh=True)
    pubs: list[tuple[Publisher, list[list]]] = []
    for stream, relation in STREAMS:
        names = producers(stream, members, args.producers) if partitioned else \
            [f"cumulus-{stream}-{i}" for i in range(args.producers)]
        if keyed:  # each row to a producer of the member owning its key (KEYS), as client.keyed routes it
            per = len(names) // members
            owned = route_rows(layout, KEYS[relation], wire[relation], members)
            shares = [owned.get(k // per, [])[k % per::per] for k in range(len(names))]
        else:
            shares = [wire[relation][k::len(names)] for k in range(len(names))]
        for producer, share in zip(names, shares, strict=True):
            pubs.append((Publisher(head, stream, run.token, producer=producer, batch_size=args.batch,
                                   capacity=args.window), share))
    for publisher, _ in pubs:
        await publisher.start()
    if getattr(args, "arrow", False):  # each batch made into Arrow columns now, before the clock starts
        pubs = [(p, arrow_batches(p.schema, rows, args.batch)) for p, rows in pubs]
    entered = {p.entries[0] for p, _ in pubs}
    if entered != set(nodes):
        raise BenchError(f"publishers reach {sorted(entered)}, not every member of {nodes}")

    async def publish(publisher: Publisher, rows: list, gate: Gate) -> None:
        node = publisher.entries[0]
        batches = rows if getattr(args, "arrow", False) else [rows[i:i + args.batch] for i in range(0, len(rows), args.batch)]
        for batch in batches:
            await gate.take(node)
            await publisher.send(batch)
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
        samplers = Samplers(args.sample, label, [p.pid for p in node_procs]) if args.sample else None
        began = time.perf_counter()
        side = asyncio.create_task(during(head)) if during is not None else None
        try:
            await asyncio.gather(*(publish(p, rows, gate) for p, rows in pubs))
        except BaseException:
            if samplers is not None:
                samplers.stop()
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
        if samplers is not None:
            samplers.stop()
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
    later = await after(head, events / seconds) if after is not None else None
    run.procs.stop([*node_procs, head_proc])
    return {
        "members": members, "partitioned": partitioned, "sources": sources if members > 1 else "-", "events": events, "seconds": seconds, "acked_seconds": acked, "reads": reads,
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
