"""A node's routing table: which (operator, box, in port) consume each stream, which local box writes each.

:class:`~boreas.node.router.Router` pushes batches along these routes;
:class:`Routes` is the one owner of the table and of what it was built from
(stream -> the boxes reading it, box -> the streams it reads and writes), so
that an update which adds, removes, moves or rewires one box routes again
only the streams that box reads and writes (:meth:`Routes.wire_changed`),
not every box the node holds (issue 37: a node of a 100,000-box catalog
holds 5,000, and routing them all again was half of a one-box update).  The
order of a stream's consumers is the order a whole wiring gives
(:meth:`Routes.wire_whole`, the boxes in :attr:`BoxStates.boxes
<boreas.node.box_state.BoxStates.boxes>` order, ports ascending), kept by
:attr:`BoxStates.rank <boreas.node.box_state.BoxStates.rank>`: batches reach
a stream's consumers, depth first, in the same order as after a whole
rewiring of the boxes held.  Not always in the order a node built afresh
on the same slice (a restart's replay) gives: a box moved out and back
ranks last here, while a ``Layered`` catalog mapping (512 boxes and more)
keeps a key written again in its old place.

The dicts are changed in place, never replaced: the router holds them.

>>> from boreas.catalog.model import Box, Field, FieldType, InPort, Schema
>>> from boreas.node.box_state import BoxStates
>>> schema = Schema("T", (Field("x", FieldType.INT),))
>>> states = BoxStates()
>>> f = Box("f", "filter", (InPort("S"),), ("O",), (("expression.0", "x > 1"),))
>>> g = Box("g", "filter", (InPort("S"),), ("P",), (("expression.0", "x > 2"),))
>>> states.follow({"f": f}, {"S": schema, "O": schema})
{}
>>> routes = Routes()
>>> routes.produce_whole(states, {}); routes.wire_whole(states, {}, {})
>>> states.follow({"f": f, "g": g}, {"S": schema, "O": schema, "P": schema}, only=["g"])
{}
>>> routes.wire_changed(states, ["g"])
>>> [name for _, name, _ in routes.consumers["S"]], routes.producer_of
(['f', 'g'], {'O': 'f', 'P': 'g'})
"""

from __future__ import annotations

from collections.abc import Collection, Mapping

from .box_inputs import Bridge
from .box_state import BoxStates
from .operators import Operator
from .operators.base import InternalStreams


class Routes:
    """Owns the consumers and producers of each stream on a node, and the index that rewires one box."""

    def __init__(self) -> None:
        self.consumers: dict[str, list[tuple[Operator, str, int]]] = {}  # stream -> (op, box, port)
        self.producer_of: dict[str, str] = {}  # stream -> the local box that writes it
        self._readers: dict[str, set[str]] = {}  # stream -> the boxes reading it
        self._reads: dict[str, tuple[str, ...]] = {}  # box -> the streams it reads, as routed
        self._writes: dict[str, tuple[str, ...]] = {}  # box -> the streams it writes, as routed

    def wire_whole(self, states: BoxStates, internal: Mapping[str, InternalStreams],
                   bridges: Mapping[str, Bridge]) -> None:
        """Every route again: the boxes ``states`` holds, then ``internal`` streams (box -> streams between
        its parts on other nodes), then ``bridges`` (old stream -> the port it still feeds)."""
        operators = states.operators
        self.consumers.clear()
        self._readers.clear()
        self._reads.clear()
        self._writes.clear()
        for name, box in states.boxes.items():
            for port, inport in enumerate(box.inputs):
                self.consumers.setdefault(inport.stream, []).append((operators[name], name, port))
                self._readers.setdefault(inport.stream, set()).add(name)
            self._reads[name] = tuple(dict.fromkeys(p.stream for p in box.inputs))
            self._writes[name] = box.outputs
        for name, streams in internal.items():
            for stream, port in streams.inputs.items():
                self.consumers.setdefault(stream, []).append((operators[name], name, port))
        for stream, bridge in bridges.items():
            if bridge.box in operators:
                self.consumers.setdefault(stream, []).append((operators[bridge.box], bridge.box, bridge.port))

    def produce_whole(self, states: BoxStates, internal: Mapping[str, InternalStreams]) -> None:
        """Every stream's local producer again (the last box writing it, then ``internal`` ones)."""
        self.producer_of.clear()
        self.producer_of.update((s, name) for name, box in states.boxes.items() for s in box.outputs)
        self.producer_of.update((s, name) for name, streams in internal.items() for s, _ in streams.outputs)

    def wire_changed(self, states: BoxStates, changed: Collection[str]) -> None:
        """Route again only what ``changed`` boxes read and write: each is gone, new, rebuilt or rewired
        since the last wiring, and no internal stream or bridge is routed (the router wires those whole)."""
        streams: set[str] = set()
        for name in changed:
            self._unroute(name, streams)
        boxes, operators = states.boxes, states.operators
        for name in changed:
            box = boxes.get(name)
            if box is None or name not in operators:
                continue
            self._writes[name] = box.outputs
            self.producer_of.update((s, name) for s in box.outputs)
            self._reads[name] = reads = tuple(dict.fromkeys(p.stream for p in box.inputs))
            for stream in reads:
                self._readers.setdefault(stream, set()).add(name)
                streams.add(stream)
        for stream in streams:
            self._route_readers(states, stream)

    def remove(self, name: str, plain: bool = False) -> None:
        """Stop routing to box ``name`` (taken out: :meth:`BoxStates.take`).

        ``plain``: no internal stream or bridge routes to or from it (the
        router's word), so only the streams it reads and writes, as routed,
        name it: those alone are changed (a box moving out of a node holding
        10,000 walked every stream's consumers, issue 37).  Otherwise, or if
        it was never routed, every stream's are looked at.
        """
        routed = name in self._reads
        streams: set[str] = set()
        self._unroute(name, streams)
        for stream in streams if plain and routed else list(self.consumers):
            consumers = self.consumers.get(stream)
            if consumers and any(c[1] == name for c in consumers):
                self.consumers[stream] = [c for c in consumers if c[1] != name]
        if not (plain and routed):  # (else _unroute dropped each stream it wrote that it was the producer of)
            for stream in [s for s, b in self.producer_of.items() if b == name]:
                del self.producer_of[stream]

    def _unroute(self, name: str, streams: set[str]) -> None:
        """Forget what ``name`` was routed by; the streams it read are added to ``streams``."""
        for stream in self._writes.pop(name, ()):
            if self.producer_of.get(stream) == name:
                del self.producer_of[stream]
        for stream in self._reads.pop(name, ()):
            readers = self._readers.get(stream)
            if readers is not None:
                readers.discard(name)
            streams.add(stream)

    def _route_readers(self, states: BoxStates, stream: str) -> None:
        """``stream``'s consumers from its readers, in the boxes' order, ports ascending."""
        readers = self._readers.get(stream)
        if not readers:
            self._readers.pop(stream, None)
            self.consumers.pop(stream, None)
            return
        operators, boxes, rank = states.operators, states.boxes, states.rank
        self.consumers[stream] = [(operators[name], name, port) for name in sorted(readers, key=rank.__getitem__)
                                  for port, inport in enumerate(boxes[name].inputs) if inport.stream == stream]
