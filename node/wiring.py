"""A dataflow's shape, from the local catalog: which boxes run, what feeds each, where their output goes.

A mixin of :class:`~boreas.node.dataflow.Dataflow`, which owns the state
these methods set (schemas, row types of the streams that enter, consumers,
producers, partitions, internal streams, bridges) and reads it to route
batches.  :meth:`Wiring.reconfigure` follows each new local catalog:
unchanged boxes keep their operators and state, new ones are built (a
partitioned box's member as a :class:`~boreas.node.cumulus.part.PartOperator`),
and the schemas of the streams between boxes are inferred with the same
rules the Head validated them with.  :meth:`Wiring.refusals` tells, before
anything changes, why an update's boxes could not run here.

A filter inserted or removed across two nodes switches a box's in port from
one stream to another; a :class:`~boreas.node.box_inputs.Bridge` keeps the
old stream feeding the port until the first batch of the new one arrives.
"""

from __future__ import annotations

import logging

from boreas.catalog.model import Box, Catalog, Partition, Schema
from boreas.catalog.validate import check_topology, stream_schemas
from boreas.wire.tuples import RowType

from .box_inputs import Bridge
from .cumulus.part import PartOperator
from .operators import Operator, build_operator

log = logging.getLogger("boreas.node.dataflow")  # the dataflow's records keep their logger


class Wiring:

    def reconfigure(self, catalog: Catalog, keep_state: tuple[str, ...] = ()) -> None:
        """Follow a new local catalog: keep unchanged boxes (and their state), build new ones.

        Boxes named in ``keep_state`` carry their state over even though their
        declaration changed (a box whose in port was rewired to a filter).
        """
        self.schemas = stream_schemas(catalog, self.box_types)
        changed = [name for name, part in catalog.partitions.items()
                   if self.partitions.get(name) != part and not self._runs(name, part)]
        self.partitions = dict(catalog.partitions)
        for name, why in self.state.follow(catalog.boxes, self.schemas, keep_state, self._build, changed).items():
            log.error("node %s cannot run box %r: %s", self.endpoint, name, why)
        self.internal = {name: found for name, op in self.state.operators.items()
                         if (found := op.internal_streams()) is not None}
        for streams in self.internal.values():
            self.schemas.update(streams.schemas)
        entering = [*catalog.inputs, *(s for streams in self.internal.values() for s in streams.inputs)]
        self.row_types = {s: _same_or_new(self.row_types.get(s), self.schemas[s]) for s in entering if s in self.schemas}
        for streams in self.internal.values():
            self.row_types.update(streams.decoders)
        self.coordinators = {p.stream: op for name, op in self.state.operators.items() if isinstance(op, PartOperator)
                             for p in self.state.boxes[name].inputs}
        self.producer_of = {s: name for name, box in self.state.boxes.items() for s in box.outputs}
        self.producer_of.update((s, name) for name, streams in self.internal.items() for s, _ in streams.outputs)
        self._wire_consumers()
        self.out.follow(catalog, {s: e for streams in self.internal.values() for s, e in streams.outputs})

    def _runs(self, box: str, partition: Partition) -> bool:
        """Whether box's member here already runs ``partition`` (a layout its members switched to themselves)."""
        op = self.state.operators.get(box)
        if not isinstance(op, PartOperator) or not op.follows(partition):
            return False
        op.partition = partition
        return True

    def _build(self, box: Box, inputs: list[Schema], outputs: list[Schema]) -> Operator:
        """An operator for ``box``: a member of its partition if it is partitioned, else the usual one."""
        partition = self.partitions.get(box.name)
        if partition is not None:
            return PartOperator(box, inputs, outputs, partition, self.endpoint)
        return build_operator(box, inputs, outputs)

    def refusals(self, candidate: Catalog, source: str, rules: bool = True) -> list[dict[str, object]]:
        """Why the boxes of an update (``source``: its document name) could not run here; [] if they can.

        The same topology checks the Head runs, on this node's slice (unless
        ``rules`` is False: a box moving in, whose slice is briefly both the
        stream's input and its producer until the Head re-syncs), then a
        trial build of every new or changed box: a problem found in the
        update refuses it whole, before anything changes.
        """
        report = check_topology(candidate, self.box_types)
        found: list[dict[str, object]] = [d.as_dict() for d in report.problems if d.file == source] if rules else []
        if not found:  # the rules passed; can each box really be built here?
            partitions, self.partitions = self.partitions, dict(candidate.partitions)
            try:
                reasons = self.state.check(candidate.boxes, report.stream_schemas, self._build)
            finally:
                self.partitions = partitions
            found = [{"file": source, "line": None, "path": f"box {name}", "reason": f"box {name!r}: {why}"}
                     for name, why in sorted(reasons.items())]
        return found

    def _wire_consumers(self) -> None:
        for old, bridge in list(self.bridges.items()):
            box = self.state.boxes.get(bridge.box)
            if box is None or bridge.port >= len(box.inputs) or box.inputs[bridge.port].stream == old:
                # The box is gone, or its port reads the old stream again (a filter removed before
                # any batch came through it): a bridge now would feed the port twice.
                del self.bridges[old]
        self.consumers = {}
        for name, box in self.state.boxes.items():
            for port, inport in enumerate(box.inputs):
                self.consumers.setdefault(inport.stream, []).append((self.state.operators[name], name, port))
        for name, streams in self.internal.items():
            for stream, port in streams.inputs.items():
                self.consumers.setdefault(stream, []).append((self.state.operators[name], name, port))
        for stream, bridge in self.bridges.items():
            if bridge.box in self.state.operators:
                self.consumers.setdefault(stream, []).append((self.state.operators[bridge.box], bridge.box, bridge.port))

    def bridge(self, old: str, box: str, port: int, new: str) -> None:
        """Until ``new`` first arrives, ``old`` still feeds ``box``'s ``port`` (the caller holds the lock)."""
        row_type = self.row_types.get(old) or RowType(self.schemas[old])
        self.bridges[old] = Bridge(box, port, new, row_type)
        self._wire_consumers()

    def unbridge(self, old: str) -> None:
        if self.bridges.pop(old, None) is not None:
            self._wire_consumers()

    def remove_box(self, name: str) -> None:
        """Stop routing to a box taken out (:meth:`BoxStates.take`); the caller holds the lock."""
        for stream, consumers in list(self.consumers.items()):
            self.consumers[stream] = [c for c in consumers if c[1] != name]
        self.producer_of = {s: b for s, b in self.producer_of.items() if b != name}

    def _cross_bridges(self, stream: str) -> None:
        """The first batch of a stream that replaced another: nothing more of the old one can come."""
        done = [old for old, bridge in self.bridges.items() if bridge.successor == stream]
        for old in done:
            log.info("node %s: %s replaced %s at %s port %d", self.endpoint, stream, old,
                     self.bridges[old].box, self.bridges[old].port)
            self.unbridge(old)


def _same_or_new(row_type: RowType | None, schema: Schema) -> RowType:
    return row_type if row_type is not None and row_type.schema == schema else RowType(schema)
