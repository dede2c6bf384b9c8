"""Which ports carry a partitioned box's messages between its members (docs/cumulus.md §3.5).

The members of a box talk over internal streams ``{box}@{member}`` that the
dataflow wires like declared ones (:class:`~boreas.node.operators.base.InternalStreams`).
A :class:`Ports` is the wiring of the members hosted on one node: the in port
each hosted member's stream arrives on, and the out port each member on
another node is reached by.  It is its own object because the wiring changes
as a whole -- a failover moves a member and every port is numbered afresh --
so one owner replaces it at once; the operator (:mod:`~boreas.node.cumulus.part`)
only asks which member an in port feeds.

>>> from boreas.catalog.model import Box, InPort, Partition, SegmentPlacement
>>> box = Box("v", "m3", inputs=(InPort("R"),), outputs=("V",))
>>> part = Partition("v", ("n1", "n2", "n3"), (SegmentPlacement(0, 0, 4096, 0),), maps=(), layout=1, id="c0ffee")
>>> ports = Ports.wire(box, part, [1])
>>> ports.inport, ports.outport, ports.streams.outputs
({1: 1}, {0: 1, 2: 2}, (('v@0', 'n1'), ('v@2', 'n3')))
>>> internal_stream("v", 1)
'v@1'
"""

from __future__ import annotations

from dataclasses import dataclass

from boreas.catalog.model import Box, Partition

from ..operators.base import InternalStreams
from .messages import MessageRows


def internal_stream(box: str, member: int) -> str:
    """The stream carrying messages of ``box`` to member ``member``."""
    return f"{box}@{member}"


@dataclass(frozen=True)
class Ports:
    """The wiring of the ``members`` of ``box`` hosted on one node, as :meth:`wire` numbers it."""

    inport: dict[int, int]  # in port -> the hosted member its internal stream feeds
    outport: dict[int, int]  # member on another node -> the out port its internal stream leaves on
    streams: InternalStreams  # what the dataflow wires

    @classmethod
    def wire(cls, box: Box, partition: Partition, members: list[int]) -> Ports:
        """In ports (after the declared ones) for the hosted ``members``, out ports for the members (and joining
        nodes) on other nodes."""
        others = [m for m in range(len(partition.nodes)) if m not in members]
        inport = {len(box.inputs) + i: m for i, m in enumerate(members)}
        streams = [internal_stream(box.name, m) for m in members]
        return cls(inport, {m: len(box.outputs) + i for i, m in enumerate(others)}, InternalStreams(
            inputs={stream: port for port, stream in zip(inport, streams)},
            outputs=tuple((internal_stream(box.name, m), partition.nodes[m]) for m in others),
            schemas={}, decoders={stream: MessageRows() for stream in streams}))
