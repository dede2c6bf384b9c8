"""Inserting and removing filter boxes on a running node (paper section 3.2).

``<connect box=SINK port=P [upstream=1]><box F>...</box></connect>`` goes to
the node holding the sink.  On the same node, F and its new out stream are
added and the sink's port P is rewired to it between two batches, the sink
keeping its state.  With ``upstream=1`` the stream must come from another
node U and feed only that one port here; this node then sends U
``<connect node=HERE>`` with the box, U adds F and sends the new stream in
place of the old one, and this node reconnects the port.

``<disconnect stream=NEW>`` undoes it: on one node directly, across two by
forwarding the disconnect to the node that runs the filter.

Exactness across two nodes comes from the link between them being ordered:
U switches between two batches, so every batch of the old stream reaches
this node before the first batch of the new one.  This node rewires the
port *before* asking U and keeps a :class:`~boreas.node.box_inputs.Bridge`
from the old stream to the port until the new stream's first batch, so no
batch of either stream finds nowhere to go.  If U refuses, this node puts
the port back.  The node that was asked reports the change to the Head,
which commits it to the global catalog; regions hear it by reflection.

Usage::

    connector = FilterConnector(node)
    await connector.connect(Connect(filter_box, sink="box1", port=0, upstream=True))
    await connector.disconnect("Filtered")
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from boreas.catalog.documents import (
    Connect,
    Delete,
    Disconnect,
    Unsubscribe,
    read_document,
)
from boreas.catalog.index import CatalogIndex
from boreas.catalog.model import Box, Catalog, Input, Output, Publication, Schema, Subscription
from boreas.catalog.replicate import UpdateRejected
from boreas.catalog.updates import update_document
from boreas.catalog.validate import stream_schemas
from boreas.wire.addressing import endpoint_url
from boreas.wire.client import PeerError, PeerRefused
from boreas.wire.move_report import Written

from .context import NodeContext
from .head_reports import head_reports

log = logging.getLogger(__name__)

#: How long a connect or disconnect waits for the Head to commit its report before answering.
REPORT_WAIT = 10.0


class ConnectRefused(ValueError):
    """The request cannot be carried out here; ``status`` is 409 (not here) or 422 (not valid)."""

    def __init__(self, message: str, status: int = 422):
        super().__init__(message)
        self.status = status


class FilterConnector:
    def __init__(self, node: NodeContext):
        self.node = node

    @property
    def local(self) -> Catalog:
        return self.node.local.catalog

    # -- connect ----------------------------------------------------------------

    async def connect(self, request: Connect) -> dict[str, Any]:
        """Carry out ``request`` on this node; the sink's node (no ``node``) or the filter's (``node``)."""
        if request.node:
            return await self._connect_upstream(request)
        sink, port, old, new = self._check_connect(request)
        if not request.upstream:
            written = await self._change([replace(request.box, node=self.node.endpoint), sink.rewired(port, new)],
                                         keep=sink.name, check=request.box.name)
            await self._report(Connect(replace(request.box, node=self.node.endpoint), sink.name, port), written)
            return {"inserted": request.box.name, "node": self.node.endpoint, "stream": new}
        upstream = self._upstream_of(old, sink.name)
        schema = self.local.inputs[old].schema
        prepared = [sink.rewired(port, new), Input(new, schema, self.node.endpoint),
                    Publication(new, self.node.endpoint, upstream)]
        await self._change(prepared, keep=sink.name, bridge=(old, sink.name, port, new))
        forwarded = Connect(request.box, node=self.node.endpoint)
        try:
            await self._send(upstream, forwarded)
        except ConnectRefused:
            await self._change([sink, Delete(input=new), Delete(publish=f"{new}|{self.node.endpoint}")],
                               keep=sink.name, unbridge=old)
            raise
        await self._report(Connect(replace(request.box, node=upstream), sink.name, port, upstream=True))
        return {"inserted": request.box.name, "node": upstream, "stream": new}

    def _check_connect(self, request: Connect) -> tuple[Box, int, str, str]:
        box, local = request.box, self.local
        sink = local.boxes.get(request.sink or "")
        if sink is None:
            raise ConnectRefused(f"box {request.sink!r} is not on node {self.node.endpoint}", 409)
        if not 0 <= request.port < len(sink.inputs):
            raise ConnectRefused(f"box {sink.name!r} has no in port {request.port} "
                                 f"(it has {len(sink.inputs)})")
        old = sink.inputs[request.port].stream
        if len(box.inputs) != 1 or len(box.outputs) != 1:
            raise ConnectRefused(f"box {box.name!r} must have one in and one out stream to be inserted")
        if box.inputs[0].stream != old:
            raise ConnectRefused(f"box {box.name!r} reads {box.inputs[0].stream!r}, but port {request.port} "
                                 f"of {sink.name!r} reads {old!r}")
        new = box.outputs[0]
        if box.name in local.boxes:
            raise ConnectRefused(f"a box named {box.name!r} is already on node {self.node.endpoint}")
        if new in self.node.dataflow.schemas or new in local.inputs or new in local.outputs:
            raise ConnectRefused(f"stream {new!r} already exists; the inserted box needs a new out stream")
        trial = local.copy()
        trial.boxes[box.name] = replace(box, node=self.node.endpoint)
        schemas = self._schemas(trial, box.name)
        if new not in schemas or old not in schemas or schemas[new].fields != schemas[old].fields:
            raise ConnectRefused(f"box {box.name!r} must not change the schema: its out stream {new!r} "
                                 f"must have the fields of {old!r}")
        return sink, request.port, old, new

    def _schemas(self, trial: Catalog, added: str) -> Mapping[str, Schema]:
        """The stream schemas of ``trial``, the node's catalog with box ``added`` written: derived from the
        node's index by that box when the index is of the catalog held and has no problems (as the node's
        reconfigure takes them), else inferred over every box (a connect typed all the node's boxes: issue
        37, 10,000 boxes a node at 40,000)."""
        index = self.node.dataflow.host.index
        if index.catalog is self.local and index.ok:
            derived = index.derive(trial, {"boxes": {added}})
            if derived.ok:
                return derived.stream_schemas  # (read only: the derived index's own mapping)
        return stream_schemas(trial, self.node.dataflow.box_types)

    def _upstream_of(self, stream: str, sink: str) -> str:
        """The node ``stream`` comes from, if an upstream insertion on it is possible."""
        local = self.local
        if stream not in local.inputs:
            raise ConnectRefused(f"stream {stream!r} is produced on this node; insert the box here "
                                 "(upstream=0)")
        sinks = [f"{b.name} port {i}" for b in local.boxes.values() for i, p in enumerate(b.inputs)
                 if p.stream == stream]
        onward = [s.endpoint for s in local.subscriptions.values() if s.stream == stream]
        if len(sinks) > 1 or onward:
            raise ConnectRefused(f"stream {stream!r} fans out to {', '.join(sinks + onward)} on node "
                                 f"{self.node.endpoint}; a box can be inserted upstream only on a stream "
                                 "with one sink here (paper 3.2.1)")
        nodes = [p.client for p in local.publications.values()
                 if p.stream == stream and p.client and p.client in local.nodes]
        if not nodes:
            raise ConnectRefused(f"stream {stream!r} comes from a client, not a node; insert the box here "
                                 "(upstream=0)")
        return nodes[0]

    async def _connect_upstream(self, request: Connect) -> dict[str, Any]:
        """The forwarded request (``node`` = the sink's node): add the box, send its stream instead."""
        box, local, downstream = request.box, self.local, request.node or ""
        old, new = box.inputs[0].stream, box.outputs[0]
        if Subscription(old, downstream).key not in local.subscriptions:
            raise ConnectRefused(f"node {self.node.endpoint} does not send {old!r} to {downstream}", 409)
        if box.name in local.boxes:
            raise ConnectRefused(f"a box named {box.name!r} is already on node {self.node.endpoint}")
        schema = self.node.dataflow.schemas[old].name
        await self._change([replace(box, node=self.node.endpoint), Output(new, schema, self.node.endpoint),
                            Subscription(new, downstream), Unsubscribe(old, downstream)], check=box.name)
        return {"inserted": box.name, "node": self.node.endpoint, "stream": new}

    # -- disconnect ----------------------------------------------------------------

    async def disconnect(self, stream: str) -> dict[str, Any]:
        """Remove the filter that writes ``stream`` and give its sink the filter's in stream back."""
        local = self.local
        ends = StreamEnds(local, self.node.dataflow.host.index)
        sinks, producer = ends.sinks(stream), ends.producer(stream)
        if not sinks and producer is not None:
            return await self._disconnect_upstream(producer, stream, ends)
        if len(sinks) != 1:
            raise ConnectRefused(f"stream {stream!r} has {len(sinks)} sinks on node {self.node.endpoint}; "
                                 "disconnect names the stream a connect added, which feeds one box", 409)
        sink, port = sinks[0]
        if producer is not None:
            old = self._filter_input(producer)
            written = await self._change([Delete(box=producer.name), sink.rewired(port, old)], keep=sink.name)
            await self._report(Disconnect(stream), written)
            return {"removed": producer.name, "node": self.node.endpoint, "stream": old}
        upstream = next((p.client for p in ends.publications(stream) if p.client in local.nodes), None)
        if upstream is None:
            raise ConnectRefused(f"stream {stream!r} was not added by inserting a box", 409)
        old = await self._upstream_filter_input(upstream, stream)
        schema = local.inputs[stream].schema
        prepared = [sink.rewired(port, old), Input(old, schema, self.node.endpoint),
                    Publication(old, self.node.endpoint, upstream)]
        await self._change(prepared, keep=sink.name, bridge=(stream, sink.name, port, old))
        try:
            reply = await self._send(upstream, Disconnect(stream))
        except ConnectRefused:
            await self._change([sink, Delete(input=old), Delete(publish=f"{old}|{self.node.endpoint}")],
                               keep=sink.name, unbridge=stream)
            raise
        await self._report(Disconnect(stream))
        return {**reply, "stream": old}

    async def _upstream_filter_input(self, upstream: str, stream: str) -> str:
        """The stream the filter on ``upstream`` reads: this node must expect it before the switch."""
        try:
            text = await self.node.peers.text(endpoint_url(upstream, "/catalog"), timeout=10.0)
        except PeerError as exc:
            raise ConnectRefused(f"cannot read node {upstream}'s catalog: {exc}", 502) from None
        doc = read_document(text.encode(), f"catalog of {upstream}")
        for item in doc.items:
            if isinstance(item, Box) and stream in item.outputs:
                return self._filter_input(item)
        raise ConnectRefused(f"no box on node {upstream} writes {stream!r}", 409)

    @staticmethod
    def _filter_input(box: Box) -> str:
        if len(box.inputs) != 1 or len(box.outputs) != 1:
            raise ConnectRefused(f"box {box.name!r} is not a one-in, one-out box inserted by connect")
        return box.inputs[0].stream

    async def _disconnect_upstream(self, producer: Box, stream: str, ends: StreamEnds) -> dict[str, Any]:
        """The forwarded disconnect: drop the filter, send its in stream where its out stream went."""
        old = self._filter_input(producer)
        local = self.local
        downstream = [s.endpoint for s in ends.subscriptions(stream)]
        items: list[Any] = [Delete(box=producer.name)]
        for endpoint in downstream:
            items += [Unsubscribe(stream, endpoint), Subscription(old, endpoint)]
        if stream in local.outputs:
            items.append(Delete(output=stream))
        await self._change(items)
        return {"removed": producer.name, "node": self.node.endpoint}

    # -- shared steps -------------------------------------------------------------

    async def _change(self, items: list[Any], keep: str | None = None, check: str | None = None,
                      bridge: tuple[str, str, int, str] | None = None, unbridge: str | None = None) -> Written:
        """Apply a local change between two batches; undo it if box ``check`` cannot run.  Returns what it
        wrote, with the serials (wire/move_report.py): a change made in one step is reported with it."""
        node, flow = self.node, self.node.dataflow
        async with node.update_lock, flow.lock:
            before, base = node.local.catalog, node.local.serial
            try:
                node.apply_local(items, keep_state=(keep,) if keep else ())
            except UpdateRejected as exc:
                raise ConnectRefused(f"node {node.endpoint}: {exc}") from None
            if check and check in flow.state.broken:
                reason = flow.state.broken[check]
                node.restore_local(before, keep_state=(keep,) if keep else ())
                raise ConnectRefused(f"box {check!r} cannot run: {reason}")
            if bridge:
                flow.bridge(*bridge)
            if unbridge:
                flow.router.unbridge(unbridge)
            return Written(node.endpoint, node.incarnation, base, node.local.serial, update_document(items))

    async def _send(self, node: str, item: Connect | Disconnect) -> dict[str, Any]:
        text = update_document([item], origin=self.node.endpoint)
        try:
            return await self.node.peers.post_update(node, text, timeout=30.0)
        except PeerRefused as exc:
            raise ConnectRefused(f"node {node}: {exc.payload.get('error') or exc}", exc.status) from None
        except PeerError as exc:
            raise ConnectRefused(str(exc), 502) from None

    async def _report(self, item: Connect | Disconnect, written: Written | None = None) -> None:
        """Optimizer changes are reflected to the Head (paper 2.2), which commits them.

        The report goes on the node's one ordered channel to the Head (after
        any move reported before it) and is retried while the Head is down.
        The request waits up to :data:`REPORT_WAIT` for the Head to commit it,
        so an optimizer that gets the answer finds the change in the global
        catalog; if the Head is slower, the report is delivered later.
        ``written``: what this node wrote for it in one step, which the Head
        patches its record of the node with (as a move's, wire/move_report.py).
        """
        reports = head_reports(self.node)
        if reports is None or not reports.report(item, written=[written] if written else None):
            return
        if not await reports.flush(REPORT_WAIT):
            log.warning("node %s: the Head has not taken the report of its %s yet; it will be delivered "
                        "when the Head answers", self.node.endpoint, type(item).__name__.lower())


class StreamEnds:
    """What writes and reads a stream in a node's catalog: by the node's index of that catalog (its references
    name the boxes, subscriptions and publications of each stream) when the index is of it, so a disconnect
    costs what the stream names, not a walk over every box the node holds (issue 37); else by such a walk
    (node/handover.py's readers do the same for a handover)."""

    def __init__(self, local: Catalog, index: CatalogIndex):
        self.local = local
        self.index = index if index.catalog is local else None

    def _keys(self, stream: str, kind: str) -> list[str]:
        if self.index is not None:
            return self.index.reading(stream, kind)
        return sorted(k for k, element in getattr(self.local, kind).items() if element.stream == stream)

    def sinks(self, stream: str) -> list[tuple[Box, int]]:
        """The boxes reading ``stream``, by name, each with every in port that reads it."""
        boxes = self.local.boxes
        names = (self.index.reading(stream, "boxes") if self.index is not None
                 else sorted(b.name for b in boxes.values() if any(p.stream == stream for p in b.inputs)))
        return [(boxes[name], i) for name in names for i, p in enumerate(boxes[name].inputs) if p.stream == stream]

    def producer(self, stream: str) -> Box | None:
        """The box writing ``stream`` (in a valid catalog at most one)."""
        if self.index is not None:
            found = self.index.stream_boxes(stream)[0]
            return found[0] if found else None
        return next((b for b in self.local.boxes.values() if stream in b.outputs), None)

    def subscriptions(self, stream: str) -> list[Subscription]:
        return [self.local.subscriptions[key] for key in self._keys(stream, "subscriptions")]

    def publications(self, stream: str) -> list[Publication]:
        return [self.local.publications[key] for key in self._keys(stream, "publications")]
