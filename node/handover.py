"""Moving a box to another node while tuples flow: what the source hands the target.

Paper section 3.1, made exact.  Between two batches (the dataflow lock), the
source takes the box out of its dataflow and records everything the box's
future depends on: its operator state, the producer id and next sequence of
each of its output streams (so downstream receivers see one unbroken,
ordered sequence whichever node sends it), and, for each input stream, the
next sequence the box expects from each producer (so the target's
sequencer takes exactly the batches the box has not seen, in order, whether
they come forwarded by the source or straight from upstream once the Head
re-points it).  From then on the source forwards the box's input batches
unchanged (producer and sequence kept) over a dedicated link that starts
only once the target has taken the box; so nothing is lost, duplicated or
reordered, and only the moved box pauses.

>>> h = BoxHandover("f", "f~1", {"Out": 7}, [("In", "pub", 3)], {"count": 2}, 1700000000.0)
>>> BoxHandover.decode(h.encode()) == h
True
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from dataclasses import replace
from typing import Any

from boreas.catalog.document_model import Delete, Unsubscribe
from boreas.catalog.model import (
    Box,
    Catalog,
    Input,
    Node,
    Output,
    Publication,
    Subscription,
)
from boreas.wire.links import OutboundLink
from boreas.wire.supervisor import Supervisor

from .box_state import BoxHandover
from .dataflow import Dataflow

log = logging.getLogger(__name__)

#: How long a source keeps forwarding a moved box's inputs after the move.
FORWARD_FOR = 60.0


async def detach(flow: Dataflow, names: list[str], target: str) -> list[BoxHandover]:
    """Take boxes ``names`` out of the source's dataflow between two batches; their inputs now go to ``target``.

    All of them under one hold of the dataflow lock: boxes that share a
    ``<table>`` (one copy of its rows on a node) then hand over the same
    version of it, with no batch applied to it between two of them.  Their
    open output batches close first (logged, so a replay closes them at the
    same record): the numbers they take along then follow every batch they
    wrote here, and the rows they had produced leave from here.
    """
    handovers = []
    async with flow.lock:
        for name in names:
            box = flow.state.boxes[name]
            flow.timers.close(flow.router.open_streams(box.outputs), flow.clock.now(), record=True)
        for name in names:
            box = flow.state.boxes[name]
            handover = flow.state.take(name, flow.router.input_positions(name))
            handover.retained = flow.out.take_retained(box.outputs)  # named subscribers resume from its new node
            flow.router.remove_box(name)
            for port in box.inputs:
                row_type = flow.host.row_type(port.stream)
                link = flow.out.forward_to(port.stream, target, name, row_type)
                if link is not None:
                    handover.links.append(link)
            # Batches it held for a gap travel with it, ahead of the rest.
            held, handover.held = handover.held, []
            for stream, producer, seq, rows in held:
                await flow.out.forwards[stream].send(stream, rows, producer, seq, name)
            handovers.append(handover)
    await flow.release()  # what closing their batches produced
    return handovers


async def start_forwarding(flow: Dataflow, handover: BoxHandover, tasks: Supervisor, name: str) -> None:
    """The target has the box: deliver what was queued for it, and keep forwarding while it is used.

    Upstream nodes are re-pointed by the Head within moments, but a
    publisher keeps sending where the stream entered when it started; its
    batches go on being forwarded until none came for ``FORWARD_FOR`` s.
    The task that retires the links then is task ``name`` of the node's
    supervisor ``tasks``: held there, it is not collected while it sleeps,
    and a failure is logged; a stopping node (its supervisor closed) does not
    start it, since closing its dataflow closes the links.
    """
    for link in handover.links:
        await link.start()
    if not tasks.closed:
        tasks.spawn(name, functools.partial(_retire_when_idle, flow, handover.links), restart=False)


async def _retire_when_idle(flow: Dataflow, links: list[OutboundLink]) -> None:
    while flow.out.forwarding(links):
        idle = min(time.monotonic() - link.last_sent for link in links)
        if idle >= FORWARD_FOR:
            await flow.out.stop_forwarding(links)
            return
        await asyncio.sleep(FORWARD_FOR - idle + 0.1)


def attach(flow: Dataflow, handover: BoxHandover) -> list[OutboundLink]:
    """On the target, after the box's declaration was applied: continue where the source stopped.

    If the box once left this node, its inputs are still being forwarded from
    here: those forwarding links are returned, to be retired (their unsent
    batches are the box's again; what they already sent, the other node
    passes back).
    """
    flow.state.put(handover, flow.clock.now())
    flow.out.keep_retained(handover.retained)
    return flow.out.forwards_of(handover.box)


def target_items(local: Catalog, flow: Dataflow, boxes: list[Box], source: str, target: str) -> list[Any]:
    """Update XML for the target: the boxes, the schemas of their streams, the tables they access, where
    their streams come from and go."""
    items: list[Any] = []
    moving = {b.name for b in boxes}
    made_by_moving = {s for b in boxes for s in b.outputs}
    streams = [p.stream for b in boxes for p in b.inputs] + [s for b in boxes for s in b.outputs]
    tables = [local.tables[t] for t in dict.fromkeys(t for b in boxes for t in b.access) if t in local.tables]
    schemas = {flow.schemas[s].name: flow.schemas[s] for s in streams if s in flow.schemas}
    schemas.update({t.schema: local.schemas[t.schema] for t in tables if t.schema in local.schemas})
    items += list(schemas.values())
    items += [Node(source), Node(target)]
    items += [replace(t, node=target) if t.node else t for t in tables]
    readers = _Readers(local, flow)
    for box in boxes:
        for port in box.inputs:
            if port.stream not in made_by_moving:
                items.append(Input(port.stream, flow.schemas[port.stream].name, target))
                items.append(Publication(port.stream, target, source))
        items.append(Box(box.name, box.type, box.inputs, box.outputs, box.params, box.access, target, box.attrs))
        for stream in box.outputs:
            declared = local.outputs.get(stream)
            items.append(Output(stream, declared.schema if declared else flow.schemas[stream].name, target))
            kept = {sub.endpoint: sub for sub in readers.subscriptions(stream)}  # (names)
            endpoints = set(kept)
            if readers.boxes_besides(stream, moving):
                endpoints.add(source)
            items += [Node(e) for e in endpoints if e in local.nodes]
            items += [kept.get(e, Subscription(stream, e)) for e in sorted(endpoints)]
    return items


def source_items(local: Catalog, flow: Dataflow, boxes: list[Box], source: str, target: str) -> list[Any]:
    """The source's own change: the boxes go, and the tables only they accessed; their outputs still used
    here now come from the target."""
    moving = {b.name for b in boxes}
    items: list[Any] = [Delete(box=b.name) for b in boxes] + [Node(target)]
    if any(b.access for b in boxes):  # (a walk over every box only for a table box: companions move with it)
        used_here = {t for b in local.boxes.values() if b.name not in moving for t in b.access}
        items += [Delete(table=t) for t in dict.fromkeys(t for b in boxes for t in b.access)
                  if t in local.tables and t not in used_here]
    readers = _Readers(local, flow)
    for box in boxes:
        for stream in box.outputs:
            items += [Unsubscribe(stream, sub.endpoint) for sub in readers.subscriptions(stream)]
            if stream in local.outputs:
                items.append(Delete(output=stream))
            if readers.boxes_besides(stream, moving):
                items.append(Input(stream, flow.schemas[stream].name, source))
                items.append(Publication(stream, source, target))
    return items


class _Readers:
    """What reads a stream in the source's catalog: the boxes and subscriptions, by the node's index of that
    catalog (its references) when the index is of it, so a handover costs what the moved boxes' streams
    name, not a walk over every box and subscription the node holds (issue 37); else by such a walk."""

    def __init__(self, local: Catalog, flow: Dataflow):
        index = flow.host.index
        self.local = local
        self.index = index if index.catalog is local else None

    def boxes_besides(self, stream: str, moving: set[str]) -> bool:
        """Whether a box not among ``moving`` reads ``stream``."""
        if self.index is not None:
            return any(name not in moving for name in self.index.reading(stream, "boxes"))
        return any(p.stream == stream for b in self.local.boxes.values() if b.name not in moving for p in b.inputs)

    def subscriptions(self, stream: str) -> list[Subscription]:
        """The subscriptions to ``stream``, by key."""
        subs = self.local.subscriptions
        if self.index is not None:
            return [subs[key] for key in self.index.reading(stream, "subscriptions")]
        return [subs[key] for key in sorted(k for k, sub in subs.items() if sub.stream == stream)]
