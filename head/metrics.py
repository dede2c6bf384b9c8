"""The Head's Prometheus metrics and readiness checks.

Like a node's (:mod:`boreas.node.metrics`), the Head's figures stay where
its code keeps them -- each node's :class:`~boreas.head.node_sync.NodeSync`
counters, membership, pending requests, global feeds, the snapshot
coordinator -- and :class:`HeadMetrics` reads them when ``/metrics`` is
scraped, so ``GET /status`` and ``GET /nodes`` show the same numbers.  Only
latencies live in the registry: how long a submission takes to be
validated and committed, and how long a reported topology change (a move,
a connect, a layout) takes to be learned.

Readiness (``GET /readyz``): the catalog store answers, and the catalog
was read from it and is being followed.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import boreas
from boreas.wire.health import Check
from boreas.wire.metrics import (
    LATENCY_BUCKETS,
    Families,
    View,
    counters_view,
    peers_view,
    sender_view,
    supervisor_view,
)
from prometheus_client import Histogram

_SYNC = {
    "updates_sent": ("boreas_head_node_updates_sent_total", "Update documents the Head sent a node."),
    "items_sent": ("boreas_head_node_update_items_sent_total", "Catalog items the Head sent a node."),
    "failures": ("boreas_head_node_sync_failures_total", "Failed attempts to bring a node to its slice."),
    "catalog_reads": ("boreas_head_node_catalog_reads_total", "Times the Head read what a node holds."),
    "pending_requests": ("boreas_head_node_pending_requests_total",
                         "Updates refused because a box moved, kept as pending requests."),
}
_FEED = {
    "updates_queued": ("boreas_head_global_updates_queued_total", "Commits queued for a global component."),
    "full_copies": ("boreas_head_global_full_copies_total", "Full copies of the catalog sent a global component."),
    "failures": ("boreas_head_global_failures_total", "Failed deliveries to a global component."),
    "copies_streamed": ("boreas_head_global_copies_streamed_total",
                        "Full copies streamed to a global component's POST /copy and taken."),
    "copies_refused": ("boreas_head_global_copies_refused_total",
                       "Full copies a global component refused or answered with an older version (not held)."),
}


class HeadMetrics:
    """The Head's views, registered in its server's registry, and its latency histograms."""

    def __init__(self, head: Any):
        self.head = head
        registry = head.server.registry
        self.submissions = Histogram(
            "boreas_head_submission_duration_seconds",
            "From a submission's request to its answer: reading, validating and committing, by outcome "
            "(committed, invalid, store_error, malformed).", ["outcome"], registry=registry, buckets=LATENCY_BUCKETS)
        self.learned = Histogram(
            "boreas_head_learn_duration_seconds",
            "From a node's report of a change it made (move, connect, disconnect, layout) or a component's "
            "registration (global, region) to its commit, by kind.", ["kind"], registry=registry,
            buckets=LATENCY_BUCKETS)
        registry.register(View(self.read))

    @contextmanager
    def timed_submission(self) -> Iterator[dict[str, str]]:
        """Time one submission; the caller sets ``outcome["outcome"]`` (default ``malformed``)."""
        outcome = {"outcome": "malformed"}
        started = time.perf_counter()
        try:
            yield outcome
        finally:
            self.submissions.labels(outcome["outcome"]).observe(time.perf_counter() - started)

    @contextmanager
    def timed_learning(self, kind: str) -> Iterator[None]:
        started = time.perf_counter()
        try:
            yield
        finally:
            self.learned.labels(kind).observe(time.perf_counter() - started)

    def read(self, f: Families) -> None:
        head = self.head
        f.info("boreas_component", "What this component is.", component="head",
               endpoint=head.server.endpoint if head.server.port is not None else "",
               version=boreas.__version__, store=head.store_url.split("://", 1)[0])
        f.gauge("boreas_catalog_version", "Version of the catalog this component holds (the Head: the global "
                "catalog it has processed).", head.catalog.version)
        f.counter("boreas_head_catalog_full_reads_total", "Whole-catalog reads from the store (one at start, "
                  "then only when the log cannot fill a gap).", head.catalog_full_reads)
        f.gauge("boreas_head_pending_requests", "Requests waiting for a box that moved.", len(head.pending))
        f.gauge("boreas_head_boxes", "Boxes in the global catalog.", len(head.catalog.boxes))
        now = time.monotonic()
        for endpoint in sorted(set(head.syncs) | set(head.membership.known())):
            sync = head.syncs.get(endpoint)
            f.gauge("boreas_head_node_alive", "1 while a node's heartbeats arrive.",
                    1 if head.membership.alive(endpoint, now) else 0, node=endpoint)
            f.gauge("boreas_head_node_in_sync", "1 when a node acknowledged its slice of the current catalog.",
                    1 if sync is not None and sync.in_sync else 0, node=endpoint)
            f.gauge("boreas_head_node_boxes", "Boxes in a node's slice.", len(sync.desired.boxes) if sync else 0,
                    node=endpoint)
            f.gauge("boreas_head_node_acked_version", "The catalog version a node last acknowledged.",
                    sync.acked_version if sync else -1, node=endpoint)
            counters_view(f, sync.counters if sync else {}, _SYNC, node=endpoint)
        for endpoint, feed in sorted(head.feeds.items()):
            feed_view(f, feed, endpoint)
        snapshots = head.snapshots
        f.gauge("boreas_snapshot_completed_id", "The last snapshot complete on every node.", snapshots.complete_id)
        if snapshots.complete:
            f.gauge("boreas_snapshot_completed_timestamp_seconds", "When the last complete snapshot was started "
                    "(Unix time).", snapshots.complete.get("time", 0))
        last = snapshots.last_attempt or {}
        if last:
            f.gauge("boreas_snapshot_last_attempt_duration_seconds", "How long the last snapshot attempt took.",
                    last.get("seconds", 0))
            f.gauge("boreas_snapshot_last_attempt_complete", "1 when the last snapshot attempt completed.",
                    1 if last.get("complete") else 0)
        for endpoint, state in sorted(head.failover.state.items()):
            f.gauge("boreas_head_failed_over", "1 for a node whose boxes were adopted by another node.",
                    1 if state.get("state") == "failed over" else 0, node=endpoint)
        tasks = getattr(head, "tasks", None)
        if tasks is not None:
            supervisor_view(f, tasks)
        peers_view(f, head.peers)


def feed_view(f: Families, feed: Any, endpoint: str) -> None:
    """A :class:`~boreas.head.global_feed.GlobalFeed`'s figures: its counters (copies included) and sender."""
    counters_view(f, feed.counters, _FEED, component=endpoint)
    sender_view(f, feed.sender, "boreas_head_global", component=endpoint)


def head_checks(head: Any) -> dict[str, Check]:
    """The Head is ready when its store answers and its catalog was loaded and is being followed."""

    async def store() -> str | None:
        if head.store is None:
            return f"catalog store {head.store_url} not opened yet"
        try:
            await asyncio.to_thread(head.store.version)
        except Exception as exc:
            return f"catalog store {head.store_url} does not answer: {exc}"
        return None

    def catalog() -> str | None:
        if head.catalog_full_reads == 0:
            return "the catalog has not been read from the store yet"
        tasks = getattr(head, "tasks", None)
        follower = tasks.status().get("commits") if tasks is not None else None
        if follower is None or follower["state"] != "running":
            why = f" ({follower['last_error']})" if follower and follower.get("last_error") else ""
            return f"the Head is not following the store's commits{why}"
        return None

    return {"store": store, "catalog": catalog}
