"""The data plane benchmark's per-hop latency probes (``bench/dataplane.py --probe``).

Where does a stamped tuple's time go between the paced publisher handing it
over and the subscriber yielding it?  With ``--probe`` every process of the
latency runs records, for each stamped batch, when it passed each point of
its way (wall clock, microseconds; one machine, one clock), keyed by the
batch's ``sent`` stamp (every row of a latency batch carries the same one):

==============  =========  ====================================================
point           process    what
==============  =========  ====================================================
``pub.encode``  publisher  its link encodes the batch for ``send_bytes``
``node.recv``   node       the receiver has read and decoded the frame
``node.accept`` node       rows decoded, checked and queued for the box task
``node.take``   node       the box task takes the batch
``node.run``    node       the boxes have run it
``node.encode`` node       the link to the subscriber encodes the output
``node.ack``    node       the answer to the publisher is written
``sub.recv``    bench      the subscriber's receiver has read the frame
``sub.got``     bench      the bench's ``async for`` has the rows
==============  =========  ====================================================

Each process also records its garbage collections (start, length,
generation) and every event-loop callback that ran longer than
``SLOW_CALLBACK`` (start, length, what), so a slow batch can be matched with
what its processes were doing meanwhile.

None of this touches the production code: the probes are wrappers installed
by monkeypatching in the probed processes only -- the nodes run under this
file (``dataplane_probe.py node ARGS``, the ``boreas node`` command with the
probes installed), the paced publisher installs them with ``--probe``, the
bench process for its subscriber.  Each process writes its records as JSON
into the probe directory at exit; :func:`report` merges them.
"""

from __future__ import annotations

import asyncio
import atexit
import gc
import json
import math
import os
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import msgspec

PROBE_ENV = "BOREAS_BENCH_PROBE"  # the directory the probed processes write their records to
SLOW_CALLBACK = 0.0005  # seconds: event-loop callbacks at least this long are recorded
LATENCY_STREAMS = ("lat1_", "lat2_")

POINTS = ("sent", "pub.encode", "node.recv", "node.accept", "node.take", "node.run", "node.encode",
          "sub.recv", "sub.got")
HOPS = {
    "publisher: hand-over -> frame written": ("sent", "pub.encode"),
    "socket + node wake-up -> frame read": ("pub.encode", "node.recv"),
    "node: decode, check, queue": ("node.recv", "node.accept"),
    "node: queued -> box task takes it": ("node.accept", "node.take"),
    "node: boxes run": ("node.take", "node.run"),
    "node: outbox -> link writes it": ("node.run", "node.encode"),
    "socket + subscriber wake-up -> frame read": ("node.encode", "sub.recv"),
    "subscriber: decode, queue -> reader has it": ("sub.recv", "sub.got"),
}


def now_us() -> int:
    return time.time_ns() // 1000


class Recorder:
    """One process's probe records: points on the way of stamped batches, GC passes, slow callbacks."""

    def __init__(self, role: str, directory: Path):
        self.role = role
        self.path = directory / f"{role}-{os.getpid()}.json"
        self.points: list[tuple[str, str, int, int]] = []  # (point, stream prefix, sent, at)
        self.gcs: list[tuple[int, int, int]] = []  # (start, microseconds, generation)
        self.gc_counts = [0, 0, 0]
        self.slow: list[tuple[int, int, int, str]] = []  # (start, microseconds, CPU microseconds, callback)
        self.keys: dict[tuple[str, str, int], int] = {}  # (stream, producer, seq) -> sent
        self._gc_start = 0

    def mark(self, point: str, stream: str, sent: int, at: int | None = None) -> None:
        self.points.append((point, stream[:5], sent, now_us() if at is None else at))

    def on_gc(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._gc_start = time.perf_counter_ns()
            return
        took = (time.perf_counter_ns() - self._gc_start) // 1000
        self.gc_counts[info["generation"]] += 1
        self.gcs.append((now_us() - took, took, info["generation"]))

    def dump(self) -> None:
        if not self.path.parent.exists():  # the run is over and its directory gone
            return
        self.path.write_text(json.dumps({"role": self.role, "points": self.points, "gcs": self.gcs,
                                         "gc_counts": self.gc_counts, "slow": self.slow,
                                         "gc_threshold": gc.get_threshold(), "gc_frozen": gc.get_freeze_count(),
                                         "objects": len(gc.get_objects())}))


def _sent_of(rows: Any) -> int | None:
    """The ``sent`` stamp of a latency batch's first row (raw msgpack or decoded rows)."""
    if isinstance(rows, msgspec.Raw):
        rows = msgspec.msgpack.decode(bytes(rows))
    if rows and len(rows[0]) >= 4 and isinstance(rows[0][3], int):
        return rows[0][3]
    return None


def _is_latency(stream: str) -> bool:
    return stream.startswith(LATENCY_STREAMS)


def install(role: str, directory: Path | None = None) -> Recorder | None:
    """Install the probes in this process (the directory from ``$BOREAS_BENCH_PROBE`` unless given)."""
    where = directory or (Path(os.environ[PROBE_ENV]) if os.environ.get(PROBE_ENV) else None)
    if where is None:
        return None
    rec = Recorder(role, where)
    gc.callbacks.append(rec.on_gc)
    atexit.register(rec.dump)

    import asyncio.events

    from boreas.wire import links, receiver
    from boreas.wire.frames import Batch

    original_run = asyncio.events.Handle._run

    def timed_run(handle: asyncio.events.Handle) -> None:
        started, cpu = time.perf_counter_ns(), time.thread_time_ns()
        original_run(handle)
        took = (time.perf_counter_ns() - started) // 1000
        if took >= SLOW_CALLBACK * 1e6:  # CPU far below wall time: the process lost its core meanwhile
            rec.slow.append((now_us() - took, took, (time.thread_time_ns() - cpu) // 1000, repr(handle._callback)[:120]))

    asyncio.events.Handle._run = timed_run  # type: ignore[method-assign]

    link_encode = links.encode
    side = role.split("-")[0]

    def encode_probe(frame: Any) -> bytes:
        if isinstance(frame, Batch) and _is_latency(frame.stream):
            sent = _sent_of(frame.rows)
            if sent is not None:
                rec.mark(f"{side}.encode", frame.stream, sent)
        return link_encode(frame)

    links.encode = encode_probe

    receiver_decode = receiver.decode

    def decode_probe(data: bytes) -> Any:
        frame = receiver_decode(data)
        if isinstance(frame, Batch) and _is_latency(frame.stream):
            sent = _sent_of(frame.rows)
            if sent is not None:
                rec.mark(f"{side}.recv", frame.stream, sent)
                rec.keys[(frame.stream, frame.producer, frame.seq)] = sent
        return frame

    receiver.decode = decode_probe

    send_replies = receiver.DataReceiver._send_replies

    async def send_replies_probe(self: Any, ws: Any, ready: list) -> bool:
        answered = await send_replies(self, ws, ready)
        at = now_us()
        for reply in ready:
            sent = rec.keys.pop((reply.stream, reply.producer, reply.seq), None)
            if sent is not None:
                rec.mark(f"{side}.ack", reply.stream, sent, at)
        return answered

    receiver.DataReceiver._send_replies = send_replies_probe  # type: ignore[method-assign]

    if side == "node":
        from boreas.node.box_task import BoxTask
        from boreas.node.intake import Intake

        accept, take = Intake.accept, BoxTask.take

        async def accept_probe(self: Any, batch: Any) -> Any:
            reply = await accept(self, batch)
            if _is_latency(batch.stream):
                sent = _sent_of(batch.rows)
                if sent is not None:
                    rec.mark("node.accept", batch.stream, sent)
            return reply

        async def take_probe(self: Any, item: tuple) -> None:
            sent = _sent_of(item[1]) if item and _is_latency(item[0]) else None
            if sent is not None:
                rec.mark("node.take", item[0], sent)
            await take(self, item)
            if sent is not None:
                rec.mark("node.run", item[0], sent)

        Intake.accept = accept_probe  # type: ignore[method-assign]
        BoxTask.take = take_probe  # type: ignore[method-assign]
    return rec


def cpu_profile(role: str) -> None:
    """``$BOREAS_BENCH_CPU_PROFILE=DIR``: cProfile this process by CPU time (not wall), written to DIR at exit."""
    where = os.environ.get("BOREAS_BENCH_CPU_PROFILE")
    if not where:
        return
    import cProfile

    profiler = cProfile.Profile(time.thread_time)
    profiler.enable()
    atexit.register(lambda: (profiler.disable(), profiler.dump_stats(f"{where}/{role}-{os.getpid()}.prof")))


def use_loop() -> None:
    """``$BOREAS_BENCH_LOOP=uvloop``: this process's event loop is uvloop's (an experiment)."""
    if os.environ.get("BOREAS_BENCH_LOOP") == "uvloop":
        import uvloop

        asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())


# -- the analysis ------------------------------------------------------------------------


def _pct(values: list[float], p: float) -> float:
    if not values:
        return math.nan
    s = sorted(values)
    return s[max(1, math.ceil(p / 100 * len(s))) - 1]


def report(directory: Path, prefix: str, warmup_us: int = 1_000_000) -> str:
    """The per-hop profile of the stamped batches of chain ``prefix`` (``lat1_``) from every process's records."""
    files = [json.loads(p.read_text()) for p in sorted(directory.glob("*.json"))]
    at: dict[int, dict[str, int]] = defaultdict(dict)
    gcs: list[tuple[str, int, int, int]] = []  # (role, start, us, gen)
    slow: list[tuple[str, int, int, int, str]] = []
    lines = [f"per-hop latency profile of {prefix[:-1]} (microseconds; one machine, one clock)"]
    if prefix != "lat1_":
        lines.append("  (two nodes: the node.* points are the first node's; the second node is inside the hop after)")
    for f in files:
        role = f["role"]
        for point, stream, sent, t in f["points"]:
            if stream == prefix[:5] and point not in at[sent]:
                at[sent][point] = t
        gcs += [(role, *g) for g in f["gcs"]]
        slow += [(role, *s) for s in f["slow"]]
        lines.append(f"  {role}: {f['objects']:,} GC-tracked objects at exit, frozen {f['gc_frozen']:,}, "
                     f"threshold {tuple(f['gc_threshold'])}, collections by generation {f['gc_counts']}")
    if not at:
        return "\n".join([*lines, "  no stamped batches recorded"])
    first = min(at)
    batches = {s: p for s, p in at.items() if s - first >= warmup_us and "sub.got" in p}
    for s, p in batches.items():
        p["sent"] = s
    e2e = {s: p["sub.got"] - s for s, p in batches.items()}
    lines.append(f"  {len(batches)} batches after the warm-up; end to end p50 {_pct(list(e2e.values()), 50):,.0f}, "
                 f"p99 {_pct(list(e2e.values()), 99):,.0f}, max {max(e2e.values()):,.0f}")
    lines.append(f"  {'hop':<46}{'p50':>8}{'p90':>8}{'p99':>8}{'max':>9}{'mean':>8}")
    for label, (a, b) in HOPS.items():
        d = [p[b] - p[a] for p in batches.values() if a in p and b in p]
        if d:
            lines.append(f"  {label:<46}{_pct(d, 50):>8,.0f}{_pct(d, 90):>8,.0f}{_pct(d, 99):>8,.0f}"
                         f"{max(d):>9,.0f}{sum(d) / len(d):>8,.0f}")
    acks = [p["node.ack"] - p["node.recv"] for p in batches.values() if "node.ack" in p and "node.recv" in p]
    if acks:
        lines.append(f"  {'(node: frame read -> its answer written)':<46}{_pct(acks, 50):>8,.0f}"
                     f"{_pct(acks, 90):>8,.0f}{_pct(acks, 99):>8,.0f}{max(acks):>9,.0f}")
    cut = _pct(list(e2e.values()), 99)
    tail = sorted((s for s in batches if e2e[s] >= cut), key=lambda s: -e2e[s])
    shares: dict[str, float] = defaultdict(float)
    lines.append(f"  the slowest 1% ({len(tail)} batches, >= {cut:,.0f} us): hops, and what ran meanwhile")
    for s in tail:
        p = batches[s]
        hops = {label: p[b] - p[a] for label, (a, b) in HOPS.items() if a in p and b in p}
        for label, d in hops.items():
            shares[label] += d
        end = p["sub.got"]
        during_gc = [f"{r} gen{g} {us:,}us" for r, t, us, g in gcs if t < end and t + us > s and us >= 200]
        during_slow = [f"{r} callback {us:,}us (CPU {cpu:,}us) {what[:50]}" for r, t, us, cpu, what in slow
                       if t < end and t + us > s]
        worst = max(hops, key=hops.get) if hops else "?"
        lines.append(f"    {e2e[s]:>7,} us: worst hop {worst} ({hops.get(worst, 0):,});"
                     f" {' '.join(f'{v:,}' for v in hops.values())}")
        for item in (during_gc + during_slow)[:4]:
            lines.append(f"        meanwhile: {item}")
    total = sum(shares.values()) or 1
    lines.append("  share of the slowest 1%'s time by hop: "
                 + ", ".join(f"{label} {v / total:.0%}" for label, v in sorted(shares.items(), key=lambda x: -x[1])))
    begin, end = min(batches), max(p["sub.got"] for p in batches.values())
    seconds = (end - begin) / 1e6
    lines.append(f"  during the measured {seconds:.1f} s, per process:")
    for role in sorted({r for r, *_ in gcs} | {r for r, *_ in slow}):
        mine = [(us, g) for r, t, us, g in gcs if r == role and begin <= t <= end]
        by_gen = [[us for us, g in mine if g == k] for k in range(3)]
        calls = sorted(((us, cpu) for r, t, us, cpu, _ in slow if r == role and begin <= t <= end), reverse=True)
        lines.append(f"    {role}: GC gen0/1/2 {'/'.join(str(len(b)) for b in by_gen)} passes, longest "
                     f"{'/'.join(str(max(b, default=0)) for b in by_gen)} us, {sum(us for us, _ in mine) / 1000:.1f} ms "
                     f"in all; {len(calls)} callbacks >= {SLOW_CALLBACK * 1e6:.0f} us, longest (wall, CPU) "
                     f"{', '.join(f'{w:,}/{c:,}' for w, c in calls[:4])}")
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    """``dataplane_probe.py node ARGS``: ``boreas node ARGS`` with the probes installed;
    ``dataplane_probe.py report DIR PREFIX``: the profile of records already written."""
    if argv and argv[0] == "report":
        print(report(Path(argv[1]), argv[2]))
        return 0
    install(f"node-{os.getpid()}")
    use_loop()
    cpu_profile(f"node-{os.getpid()}")
    from boreas.cli.main import main as boreas_main

    return boreas_main(argv)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
