"""A node's Prometheus metrics: views of the figures its ``GET /status`` shows, plus what only metrics show.

The node's counters stay where its code counts them (the local catalog's,
the dataflow's, the receiver's and each link's ``counters``, the boxes'
state, the durability's status).  :class:`NodeMetrics` reads them when
``/metrics`` is scraped, so ``/status`` and ``/metrics`` always agree.
What nothing counted before is only in the registry: the tuples and
batches that enter per stream (counted where the receiver hands a batch to
the dataflow), how long moves and filter insertions take (timed around the
calls in :mod:`boreas.node.api`), and each snapshot's pause and
duration (from the answer the node sends the Head).

Labels are box, stream, region and peer endpoints: all bounded by the
local catalog, never by row values or producer ids.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from contextlib import contextmanager
from typing import Any, Iterator

import boreas
from boreas.m3.runtime.program import Runtime
from boreas.wire.frames import Ack, Batch, Refused
from boreas.wire.metrics import (
    LATENCY_BUCKETS,
    Families,
    View,
    counters_view,
    peers_view,
    sender_view,
    supervisor_view,
)
from boreas.wire.receiver import Deferred
from prometheus_client import Counter, Histogram

from .cumulus.part import PartOperator

#: A stream that does not enter this node: refused batches of it are counted under this label.
UNKNOWN_STREAM = "(unknown)"

_UPDATES = {
    "updates_received": ("boreas_node_updates_received_total", "Update documents this node was sent."),
    "updates_applied": ("boreas_node_updates_applied_total", "Update documents applied to the local catalog."),
    "updates_rejected": ("boreas_node_updates_rejected_total", "Update documents refused (nothing applied)."),
    "items_applied": ("boreas_node_update_items_applied_total", "Catalog items applied by updates."),
    "updates_invalid": ("boreas_node_updates_invalid_total", "Update documents that were not valid update XML."),
    "updates_too_slow": ("boreas_node_updates_too_slow_total", "Update documents over the validation budget."),
    "boxes_moved_out": ("boreas_node_box_moves_total{direction=out}", "Boxes moved to or from this node."),
    "boxes_moved_in": ("boreas_node_box_moves_total{direction=in}", "Boxes moved to or from this node."),
}
_FLOW = {
    "batches_in": ("boreas_dataflow_batches_in_total", "Batches the dataflow took from its input queue."),
    "rows_in": ("boreas_dataflow_tuples_in_total", "Tuples the dataflow took from its input queue."),
    "rows_out": ("boreas_dataflow_tuples_out_total", "Tuples handed to links to other nodes and clients."),
    "refused_batches": ("boreas_dataflow_refused_batches_total", "Batches refused whole (stream or box not here)."),
    "refused_rows": ("boreas_dataflow_refused_tuples_total", "Tuples refused for not matching their schema."),
    "batches_unrouted": ("boreas_dataflow_unrouted_batches_total", "Produced batches with nowhere to go."),
    "batches_for_absent_box": ("boreas_dataflow_absent_box_batches_total",
                               "Batches for a box that left and has no forward."),
    "forwards_retired": ("boreas_dataflow_forwards_retired_total", "Forwards of moved boxes retired."),
}
_RECEIVER = {
    "connections": ("boreas_receiver_connections_total", "Data connections (WebSockets) accepted."),
    "batches": ("boreas_receiver_batches_total", "Batches accepted from publishers and upstream nodes."),
    "rows": ("boreas_receiver_tuples_total", "Tuples accepted from publishers and upstream nodes."),
    "refused_rows": ("boreas_receiver_refused_tuples_total", "Tuples refused (named in the acknowledgement)."),
    "refused_batches": ("boreas_receiver_refused_batches_total", "Batches refused whole."),
    "duplicate_batches": ("boreas_receiver_duplicate_batches_total", "Batches received again and dropped."),
    "held_batches": ("boreas_receiver_held_batches_total", "Batches that arrived ahead of a gap and were held."),
    "bad_frames": ("boreas_receiver_bad_frames_total", "Frames that could not be decoded."),
    "goodbyes": ("boreas_receiver_goodbyes_total", "Senders that closed on purpose."),
    "unauthenticated": ("boreas_receiver_unauthenticated_total", "Data connections refused for the token."),
}
_LINK = {
    "connects": ("boreas_link_connects_total", "Connections made; more than one means reconnects."),
    "disconnects": ("boreas_link_disconnects_total", "Connections lost or closed."),
    "batches_sent": ("boreas_link_batches_sent_total", "Batches sent (resends included)."),
    "bytes_sent": ("boreas_link_sent_bytes_total", "Frame bytes sent."),
    "resent_batches": ("boreas_link_resent_batches_total", "Unacknowledged batches sent again after a reconnect."),
    "acks": ("boreas_link_acks_total", "Acknowledgements received."),
    "refused_batches": ("boreas_link_refused_batches_total", "Batches the receiver refused whole."),
    "refused_rows": ("boreas_link_refused_tuples_total", "Tuples the receiver refused."),
    "dropped_batches": ("boreas_link_dropped_batches_total", "Batches dropped (a client absent or too slow)."),
    "queued_while_down": ("boreas_link_queued_while_down_batches_total",
                          "Batches queued beyond capacity while the receiver was down."),
    "redirected_batches": ("boreas_link_redirected_batches_total", "Batches handed to another link (a move)."),
}
_DURABILITY = {
    "snapshots": ("boreas_snapshots_written_total", "Snapshots this node wrote."),
    "snapshot_bytes": ("boreas_snapshot_written_bytes_total", "Bytes of snapshots written."),
    "snapshots_deleted": ("boreas_snapshots_deleted_total", "Snapshots deleted once a newer one completed."),
    "log_segments_truncated": ("boreas_input_log_segments_truncated_total", "Input log segments deleted."),
}
_LOG = {
    "appends_total": ("boreas_input_log_appends_total", "Records appended to the input log."),
    "flushes_total": ("boreas_input_log_flushes_total", "Group commits (write and fsync) of the input log."),
    "bytes_total": ("boreas_input_log_written_bytes_total", "Bytes written to the input log."),
    "records_replayed_total": ("boreas_input_log_replayed_records_total", "Records replayed at recovery."),
}
_RECOVERY_STATES = ("recovering", "ready", "adopted")


class NodeMetrics:
    """The node's views, registered in its server's registry, and the figures only metrics keep."""

    def __init__(self, node: Any):
        self.node = node
        registry = node.server.registry
        self.stream_batches = Counter("boreas_stream_batches_in_total", "Batches accepted per entering stream.",
                                      ["stream"], registry=registry)
        self.stream_tuples = Counter("boreas_stream_tuples_in_total", "Tuples accepted per entering stream.",
                                     ["stream"], registry=registry)
        self.stream_refused = Counter("boreas_stream_refused_tuples_total", "Tuples refused per entering stream.",
                                      ["stream"], registry=registry)
        self.stream_refused_batches = Counter("boreas_stream_refused_batches_total",
                                              "Batches refused whole per stream.", ["stream"], registry=registry)
        self.changes = Histogram("boreas_node_topology_change_duration_seconds",
                                 "Moves, filter connects and disconnects this node was asked for, from request "
                                 "to answer, by kind and outcome.", ["kind", "outcome"],
                                 registry=registry, buckets=LATENCY_BUCKETS)
        self.snapshot_pause = Histogram("boreas_snapshot_pause_seconds", "How long the boxes paused (between two "
                                        "batches) while a snapshot captured their state.", registry=registry,
                                        buckets=LATENCY_BUCKETS)
        self.snapshot_duration = Histogram("boreas_snapshot_duration_seconds", "From a snapshot request to the "
                                           "snapshot written and synced.", registry=registry, buckets=LATENCY_BUCKETS)
        self.move_pause = Histogram("boreas_box_move_pause_seconds", "How long a box that moved here was paused, "
                                    "from leaving its source to taking its first batch here.", registry=registry,
                                    buckets=LATENCY_BUCKETS)
        node.dataflow.state.pause_observers.append(lambda box, seconds: self.move_pause.observe(seconds))
        registry.register(View(self.read))

    # -- counted here -------------------------------------------------------------

    def counting(self, accept: Callable[[Batch], Awaitable[Ack | Refused | Deferred]]
                 ) -> Callable[[Batch], Awaitable[Ack | Refused | Deferred]]:
        """``accept`` counting each batch's tuples under its stream (a stream not here: ``(unknown)``)."""

        per_stream: dict[str, tuple[Any, Any]] = {}

        async def counted(batch: Batch) -> Ack | Refused | Deferred:
            reply = await accept(batch)
            ack = reply.reply if isinstance(reply, Deferred) else reply
            if isinstance(ack, Refused):
                known = self.node.dataflow.row_type(batch.stream) is not None
                self.stream_refused_batches.labels(batch.stream if known else UNKNOWN_STREAM).inc()
            else:
                counters = per_stream.get(batch.stream)
                if counters is None:  # the labelled children, looked up once per stream (the hot path)
                    counters = per_stream[batch.stream] = (self.stream_batches.labels(batch.stream),
                                                           self.stream_tuples.labels(batch.stream))
                counters[0].inc()
                counters[1].inc(ack.accepted)
                if ack.errors:
                    self.stream_refused.labels(batch.stream).inc(len(ack.errors))
            return reply

        return counted

    def screening(self, screen: Callable[[Batch], Refused | None]) -> Callable[[Batch], Refused | None]:
        """``screen`` (the receiver's check before a batch is ordered) counting what it refuses: a stream that does
        not enter here, under ``(unknown)`` as :meth:`counting` counts it."""

        def counted(batch: Batch) -> Refused | None:
            refused = screen(batch)
            if refused is not None:
                self.stream_refused_batches.labels(UNKNOWN_STREAM).inc()
            return refused

        return counted

    def snapshot_taken(self, taken: dict[str, Any]) -> None:
        """A snapshot this node wrote (``Durability.snapshot``'s answer): its pause and duration."""
        self.snapshot_pause.observe(float(taken.get("pause_seconds", 0.0)))
        self.snapshot_duration.observe(float(taken.get("seconds", 0.0)))

    @contextmanager
    def timed(self, kind: str) -> Iterator[dict[str, str]]:
        """Time a topology change; the caller sets ``outcome["outcome"]`` (default ``failed``)."""
        outcome = {"outcome": "failed"}
        started = time.perf_counter()
        try:
            yield outcome
        finally:
            self.changes.labels(kind, outcome["outcome"]).observe(time.perf_counter() - started)

    # -- read when scraped ----------------------------------------------------------

    def read(self, f: Families) -> None:
        node = self.node
        flow = node.dataflow
        f.info("boreas_component", "What this component is.", component="node", endpoint=node.endpoint,
               version=boreas.__version__)
        f.gauge("boreas_catalog_version", "Version of the catalog this component holds (a node: its local "
                "catalog's).", node.local.version)
        f.gauge("boreas_node_boxes", "Boxes in the local catalog.", len(node.local.catalog.boxes))
        counters_view(f, node.local.counters, _UPDATES)
        counters_view(f, flow.counters, _FLOW)
        counters_view(f, node.receiver.counters, _RECEIVER)
        f.gauge("boreas_dataflow_outbox_batches", "Produced batches waiting to be handed to links.", flow.out.queued)
        f.gauge("boreas_dataflow_input_queue_batches", "Batches accepted and waiting for the dataflow.", flow.queued)
        for stream in sorted(flow.stream_batches):
            f.counter("boreas_stream_batches_routed_total", "Batches of a stream routed here (entered the node, "
                      "or produced by a box here).", flow.stream_batches[stream], stream=stream)
            f.counter("boreas_stream_tuples_routed_total", "Tuples of a stream routed here (entered the node, "
                      "or produced by a box here).", flow.stream_rows[stream], stream=stream)
        f.gauge("boreas_dataflow_forwards", "Forwarding links of boxes that moved away.", len(flow.out.forwards))
        for endpoint, link in sorted(flow.out.links.items()):
            counters_view(f, link.counters, _LINK, peer=endpoint)
            f.gauge("boreas_link_connected", "1 while the link is connected.", 1 if link.connected else 0,
                    peer=endpoint)
            f.gauge("boreas_link_queued_batches", "Batches queued or unacknowledged on the link.", link.in_flight,
                    peer=endpoint)
        self._boxes(f, flow)
        self._recovery(f)
        for region, stats in sorted(node.reflector.stats().items()):
            f.gauge("boreas_reflect_queued_documents", "Reflections queued for a region.", stats["queued"],
                    region=region)
            f.counter("boreas_reflect_sent_documents_total", "Reflections delivered to a region.", stats["sent"],
                      region=region)
            f.counter("boreas_reflect_retries_total", "Reflections retried.", stats["retries"], region=region)
        if node.head_reports is not None:
            sender_view(f, node.head_reports.sender, "boreas_head_reports")
        f.gauge("boreas_node_registered", "1 once the Head answered a heartbeat.", 1 if node.registered.is_set() else 0)
        supervisor_view(f, node.tasks)
        peers_view(f, node.peers)

    def _boxes(self, f: Families, flow: Any) -> None:
        state = flow.state
        for name, op in sorted(flow.operators.items()):
            box = state.boxes.get(name)
            f.counter("boreas_box_batches_processed_total", "Batches a box's operator processed here.",
                      flow.box_batches.get(name, 0), box=name)
            f.counter("boreas_box_process_seconds_total", "Seconds a box's operator spent on the batches it "
                      "processed here (over batches: its mean batch latency; an m3 box's is its batch latency).",
                      flow.box_seconds.get(name, 0.0), box=name)
            for stream in box.outputs if box is not None else ():
                f.counter("boreas_box_batches_out_total", "Batches a box wrote on a stream over its life (its "
                          "output sequence: carried with it by moves and recovery).",
                          state.out_seq.get(stream, 0), box=name, stream=stream)
            entries = op.state_entries()
            if entries is not None:
                f.gauge("boreas_box_state_entries", "Entries a box's state holds (groups, buffered tuples, map "
                        "entries).", entries, box=name)
            dropped = op.counters()
            for reason, n in sorted(dropped.items()):
                f.counter("boreas_box_dropped_tuples_total", "Tuples a box dropped, by reason.", n, box=name,
                          reason=reason)
            if "late_tuples" in dropped:  # the one figure to watch for out-of-order input (node/operators/late.py)
                f.counter("boreas_late_tuples_total", "Tuples a box dropped because their window had already "
                          "closed (beyond its slack).", dropped["late_tuples"], box=name)
            runtime = getattr(op, "runtime", None)
            if isinstance(runtime, Runtime):
                f.counter("boreas_m3_batches_total", "Batches an m3 box applied to its maps (over its life).",
                          runtime.version, box=name)
                failed = getattr(op, "failed_batches", None)
                if isinstance(failed, int):
                    f.counter("boreas_m3_failed_batches_total", "Batches an m3 box could not apply (rolled "
                              "back).", failed, box=name)
                for m in runtime.program.maps:
                    f.gauge("boreas_m3_map_entries", "Entries of an m3 box's map held here (a partitioned "
                            "box: this member's).", runtime.store.size(m.name), box=name, map=m.name)
            if isinstance(op, PartOperator):  # a member of a partitioned box
                f.gauge("boreas_m3_member_completed_epoch", "The last epoch this member applied completely.",
                        op.completed, box=name)
                f.gauge("boreas_m3_member_waiting_versions", "Versions waiting to be applied at this member.",
                        op.backlog(), box=name)
        for name in sorted(state.broken):
            f.gauge("boreas_box_broken", "1 for a box of the local catalog that could not be built.", 1, box=name)
        for name, pauses in sorted(state.move_pauses.items()):
            if pauses:
                f.gauge("boreas_box_last_move_pause_seconds", "How long a box that moved here was paused, "
                        "from leaving its source to taking its first batch here.", pauses[-1], box=name)

    def _recovery(self, f: Families) -> None:
        durable = self.node.durability
        f.gauge("boreas_node_durable", "1 when the node runs with a data dir (logs its input, snapshots).",
                1 if durable is not None else 0)
        if durable is None:
            return
        status = durable.status()
        for state in _RECOVERY_STATES:
            f.gauge("boreas_recovery_state", "1 for the node's recovery state.", 1 if status["state"] == state else 0,
                    state=state)
        f.gauge("boreas_recovery_duration_seconds", "How long the last recovery took.",
                status["recovery_seconds"] or 0)
        f.gauge("boreas_recovery_replayed_batches", "Batches the last recovery replayed from the input log.",
                status["replayed_batches"] or 0)
        f.gauge("boreas_snapshot_last_id", "The last snapshot this node wrote.", status["last_snapshot"] or 0)
        f.gauge("boreas_snapshot_completed_id", "The last snapshot complete on every node.",
                status["completed_snapshot"] or 0)
        counters_view(f, status, _DURABILITY)
        counters_view(f, status["log"], _LOG)
        f.gauge("boreas_input_log_size_bytes", "Bytes of input log kept on disk.", status["log"]["size_bytes"])
