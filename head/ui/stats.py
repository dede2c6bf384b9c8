"""Rates, counters and state sizes for the web UI, polled from the nodes in the background.

``GET /ui/stats`` answers at once from what the last poll found; it never
waits for a node.  The first request starts a poller task on the Head's
loop, which reads every node's ``GET /status`` each :data:`INTERVAL`
seconds (each read bounded by :data:`TIMEOUT`, all nodes concurrently, so
a slow or dead node only makes its own figures stale), and every
:data:`BOX_EVERY` polls the state size of each ``m3`` box (``GET
/query/{box}/maps`` on its node; ``GET /segments/{box}`` on every member of
a partitioned one), at most :data:`MAX_BOX_READS` boxes.  Once no one has
asked for :data:`IDLE` seconds the poller stops, and the next request
starts it again.

The answer::

    {"polled": unix time of the last poll, "interval": s,
     "nodes": {endpoint: {"ok", "error", "rows_in", "rows_out", "batches_in" (per second),
                          "totals": {...}, "streams_in", "streams_routed": {stream: tuples/s},
                          "streams_out": {stream: batches/s},
                          "links": {target: {"batches", "bytes" (per second),
                          "connected", "connects"}}, "box_counters", "box_entries" (every box's
                          state size here: groups, buffered tuples, map entries), "broken", "task_errors",
                          "move_pauses", "recovery", "boxes"}},
     "boxes": {box: {"entries", "maps": {map: entries}, "segments": {seg: entries}, "node"}},
     "errors": [{"time", "node", "box", "message"}, ...]}   # newest last, at most MAX_ERRORS

Errors are what the nodes report as broken (boxes, tasks, a node that does not answer) and, one
entry per box whose count grows, the late tuples a box dropped (``late_tuples`` of its counters).

Rates are differences of the nodes' counters over the last :data:`RATE_WINDOW` seconds.  Per
stream they come from each node's ``GET /metrics`` (read alongside
``/status``, parsed on a thread of the poller's own): ``streams_in`` -- tuples per second
of each stream entering the node (from a publisher or another node),
``streams_routed`` -- tuples per second of each stream the node routes
(entered, or written by one of its boxes), ``streams_out`` -- batches per
second each stream is written by the node's boxes.  ``/status`` adds rows per node and batches and bytes per link.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from boreas.wire.addressing import endpoint_url
from boreas.wire.client import PeerClient, PeerError, PeerRefused
from prometheus_client.parser import text_string_to_metric_families

from ..context import HeadContext

log = logging.getLogger(__name__)

INTERVAL = 1.0
TIMEOUT = 1.5
BOX_EVERY = 3
MAX_BOX_READS = 64
IDLE = 15.0
#: Seconds rates are averaged over.
RATE_WINDOW = 5.0
MAX_ERRORS = 50


def _rate(now: dict[str, Any], before: dict[str, Any] | None, key: str, seconds: float) -> float | None:
    if before is None or seconds <= 0 or key not in now or key not in before:
        return None
    return max(0.0, (float(now[key]) - float(before[key])) / seconds)


#: A node's entry before it ever answered.
_EMPTY: dict[str, Any] = {"incarnation": None, "version": None, "boxes": [], "totals": {}, "links": {},
                          "box_counters": {}, "broken": {}, "task_errors": {}, "move_pauses": {}, "recovery": None,
                          "regions": None}


def stream_counters(text: str) -> dict[str, dict[str, float]]:
    """Per stream, from a node's Prometheus exposition: tuples that entered it, batches its boxes wrote.

    >>> stream_counters('boreas_stream_tuples_in_total{stream="S"} 7.0\\n'
    ...                 'boreas_box_batches_out_total{box="b",stream="T"} 3.0\\n')
    {'tuples_in': {'S': 7.0}, 'tuples_routed': {}, 'batches_out': {'T': 3.0}}
    """
    found: dict[str, dict[str, float]] = {"tuples_in": {}, "tuples_routed": {}, "batches_out": {}}
    try:
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                stream = sample.labels.get("stream")
                if stream is None:
                    continue
                if sample.name == "boreas_stream_tuples_in_total":
                    found["tuples_in"][stream] = found["tuples_in"].get(stream, 0.0) + sample.value
                elif sample.name == "boreas_stream_tuples_routed_total":
                    found["tuples_routed"][stream] = found["tuples_routed"].get(stream, 0.0) + sample.value
                elif sample.name == "boreas_box_batches_out_total":
                    found["batches_out"][stream] = found["batches_out"].get(stream, 0.0) + sample.value
    except ValueError as exc:  # not the exposition format: no per-stream figures
        log.debug("ui stats: unreadable /metrics: %s", exc)
    return found


class NodeStats:
    """The last poll's figures; :meth:`view` is the ``/ui/stats`` answer."""

    def __init__(self, head: HeadContext, peers: PeerClient):
        self.head = head
        self.peers = peers
        self.nodes: dict[str, dict[str, Any]] = {}
        self.boxes: dict[str, dict[str, Any]] = {}
        self.errors: deque[dict[str, Any]] = deque(maxlen=MAX_ERRORS)
        self.polled = 0.0
        self.polls = 0
        self._raw: dict[str, deque[tuple[float, dict[str, Any]]]] = {}  # endpoint -> (monotonic, /status) samples
        self._active: set[tuple[str, str, str]] = set()  # errors seen in the last poll: (node, box, message)
        self._late: dict[tuple[str, str], tuple[int, dict[str, Any]]] = {}  # (node, box) -> (count, its entry)
        self._wanted = 0.0
        self._task: asyncio.Task | None = None
        # parsing /metrics runs on a thread of its own, not the default executor the store's calls use
        self._parser = ThreadPoolExecutor(max_workers=1, thread_name_prefix="ui-stats")

    def view(self) -> dict[str, Any]:
        self._wanted = time.monotonic()
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._run(), name="ui stats")
        return {"polled": self.polled, "interval": INTERVAL, "nodes": self.nodes, "boxes": self.boxes,
                "errors": list(self.errors)}

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task
        self._parser.shutdown(wait=False, cancel_futures=True)

    async def _run(self) -> None:
        while time.monotonic() - self._wanted < IDLE:
            started = time.monotonic()
            try:
                await self.poll()
            except Exception:  # a bug here must not end the UI's figures for good
                log.exception("ui stats: poll failed")
            await asyncio.sleep(max(0.1, INTERVAL - (time.monotonic() - started)))

    async def poll(self) -> None:
        head = self.head
        endpoints = sorted(set(head.syncs) | set(head.membership.known()))
        results = await asyncio.gather(*(self._get(e, "/status") for e in endpoints),
                                       *(self._metrics(e) for e in endpoints))
        seen: set[tuple[str, str, str]] = set()
        nodes = {}
        for endpoint, (status, error), streams in zip(endpoints, results, results[len(endpoints):]):
            nodes[endpoint] = self._node(endpoint, status, error, streams, seen)
        self.nodes = nodes
        if self.polls % BOX_EVERY == 0:
            self.boxes = await self._box_sizes()
        self.polls += 1
        self.polled = time.time()
        for node, box, message in sorted(seen - self._active):
            self.errors.append({"time": self.polled, "node": node, "box": box or None, "message": message})
        self._active = seen

    async def _get(self, endpoint: str, path: str) -> tuple[dict[str, Any] | None, str | None]:
        try:
            return await self.peers.call("GET", endpoint_url(endpoint, path), timeout=TIMEOUT), None
        except PeerRefused as exc:
            return None, exc.payload.get("error") or str(exc)
        except PeerError as exc:
            return None, str(exc)

    async def _metrics(self, endpoint: str) -> dict[str, dict[str, float]]:
        """The node's per-stream counters from its ``/metrics`` (empty if it has none or does not answer)."""
        try:
            code, body = await self.peers.request("GET", endpoint_url(endpoint, "/metrics"), timeout=TIMEOUT)
        except PeerError:
            return {}
        if code != 200:
            return {}
        text = body.decode("utf-8", "replace")
        return await asyncio.get_running_loop().run_in_executor(self._parser, stream_counters, text)

    def _node(self, endpoint: str, status: dict[str, Any] | None, error: str | None,
              streams: dict[str, dict[str, float]], seen: set[tuple[str, str, str]]) -> dict[str, Any]:
        now = time.monotonic()
        previous = self.nodes.get(endpoint)
        if status is None:  # what the last answer said, marked as not current
            seen.add((endpoint, "", f"status unavailable: {error}"))
            stale = {**_EMPTY, **(previous or {})}
            stale.update(ok=False, error=error, rows_in=None, rows_out=None, batches_in=None, streams_in={},
                         streams_routed={}, streams_out={})
            return stale
        data = status.get("data") or {}
        flow, links = data.get("flow") or {}, data.get("links") or {}
        samples = self._raw.setdefault(endpoint, deque())
        if samples and samples[-1][1].get("incarnation") != status.get("incarnation"):
            samples.clear()  # restarted: its counters started again
        samples.append((now, {**status, "streams": streams}))
        while len(samples) > 2 and samples[1][0] <= now - RATE_WINDOW:
            samples.popleft()  # the oldest sample kept is the newest at least RATE_WINDOW old
        before_at, before = samples[0] if len(samples) > 1 else (now, None)
        seconds = now - before_at
        old = (before or {}).get("data") or {}
        old_flow, old_links = old.get("flow") or {}, old.get("links") or {}
        broken = data.get("broken_boxes") or {}
        for box, why in broken.items():
            seen.add((endpoint, box, f"box broken: {why}"))
        task_errors = {name: t.get("last_error") for name, t in (status.get("tasks") or {}).items()
                       if isinstance(t, dict) and t.get("last_error")}
        for name, why in task_errors.items():
            seen.add((endpoint, "", f"task {name}: {why}"))
        self._late_tuples(endpoint, data.get("box_counters") or {})
        return {
            "ok": True, "error": None, "incarnation": status.get("incarnation"),
            "version": status.get("version"), "boxes": status.get("boxes", []),
            "rows_in": _rate(flow, old_flow if before else None, "rows_in", seconds),
            "rows_out": _rate(flow, old_flow if before else None, "rows_out", seconds),
            "batches_in": _rate(flow, old_flow if before else None, "batches_in", seconds),
            "totals": {**flow, "refused_rows": (data.get("in") or {}).get("refused_rows", 0)},
            "links": {target: {"batches": _rate(link, old_links.get(target) if before else None, "batches_sent",
                                                seconds),
                               "bytes": _rate(link, old_links.get(target) if before else None, "bytes_sent", seconds),
                               "connected": link.get("connected"), "connects": link.get("connects")}
                      for target, link in links.items()},
            "streams_in": {name: _rate(streams.get("tuples_in", {}), (before or {}).get("streams", {}).get("tuples_in"),
                                       name, seconds) for name in streams.get("tuples_in", {})},
            "streams_routed": {name: _rate(streams.get("tuples_routed", {}),
                                           (before or {}).get("streams", {}).get("tuples_routed"), name, seconds)
                               for name in streams.get("tuples_routed", {})},
            "streams_out": {name: _rate(streams.get("batches_out", {}),
                                        (before or {}).get("streams", {}).get("batches_out"), name, seconds)
                            for name in streams.get("batches_out", {})},
            "box_counters": data.get("box_counters") or {}, "box_entries": data.get("box_entries") or {},
            "broken": broken, "task_errors": task_errors,
            "move_pauses": data.get("move_pauses") or {}, "recovery": status.get("recovery"),
            "regions": status.get("regions"),
        }

    def _late_tuples(self, endpoint: str, box_counters: dict[str, dict[str, int]]) -> None:
        """One problem per box that drops late tuples, moved to the newest place whenever its count grows.

        Late tuples keep coming while the input is out of order: one entry per
        box with the count so far says it without crowding out every other
        problem (an entry per poll would).
        """
        for box, counts in sorted(box_counters.items()):
            late = counts.get("late_tuples", 0) if isinstance(counts, dict) else 0
            known = self._late.get((endpoint, box))
            if not late or (known is not None and known[0] == late):
                continue
            if known is not None and known[1] in self.errors:
                self.errors.remove(known[1])
            entry = {"time": time.time(), "node": endpoint, "box": box,
                     "message": f"{late} late tuples dropped so far (their window had already closed; "
                                f"see the box's slack)"}
            self.errors.append(entry)
            self._late[(endpoint, box)] = (late, entry)

    async def _box_sizes(self) -> dict[str, dict[str, Any]]:
        """Map entries of every ``m3`` box (the state size the UI shows), read where the boxes run."""
        catalog = self.head.catalog
        reads: list[tuple[str, str, str]] = []  # (box, endpoint, path)
        for name, box in sorted(catalog.boxes.items()):
            if box.type != "m3":
                continue
            part = catalog.partitions.get(name)
            if part is not None:
                reads += [(name, member, f"/segments/{name}") for member in dict.fromkeys(part.nodes)]
            elif box.node:
                reads.append((name, box.node, f"/query/{name}/maps"))
            if len(reads) >= MAX_BOX_READS:
                break
        answers = await asyncio.gather(*(self._get(endpoint, path) for _, endpoint, path in reads))
        boxes: dict[str, dict[str, Any]] = {}
        for (name, endpoint, _), (answer, error) in zip(reads, answers):
            entry = boxes.setdefault(name, {"entries": 0, "maps": {}, "segments": {}, "errors": {}})
            if answer is None:
                entry["errors"][endpoint] = error
                continue
            if "segments" in answer and isinstance(answer["segments"], dict):  # a member of a partitioned box
                for seg, per_map in answer["segments"].items():
                    if seg == "-1":  # replicated maps: every member holds all of them, counted once
                        for map_name, n in per_map.items():
                            entry["entries"] += n - entry["maps"].get(map_name, 0)
                            entry["maps"][map_name] = n
                        continue
                    entry["segments"][seg] = {"node": endpoint, "entries": sum(per_map.values())}
                    for map_name, n in per_map.items():
                        entry["maps"][map_name] = entry["maps"].get(map_name, 0) + n
                        entry["entries"] += n
            else:
                entry["node"] = endpoint
                for map_name, info in (answer.get("maps") or {}).items():
                    entry["maps"][map_name] = info.get("entries", 0)
                    entry["entries"] += info.get("entries", 0)
        return boxes
