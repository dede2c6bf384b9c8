"""One member of a partitioned ``m3`` box on this node (docs/cumulus.md §3.8, stage 1).

A box partitioned over *n* nodes runs as *n* :class:`PartOperator`\\s, one
per member, each holding the entries of the segments its member owns.
Every member is also a *coordinator*: batches published into the member
(a publisher picks one member per producer, so each producer's batches keep
their order) are split by the :class:`~boreas.m3.cumulus.member.Router`
into the rows each member must apply.  The member's own share is applied at
once; the others leave on **internal streams** ``{box}@{member}/{port}``,
one per (destination member, in port), carrying the rows unchanged (the in
stream's schema).  The dataflow wires them like catalog streams
(:meth:`~boreas.node.operators.base.Operator.internal_streams`), so links,
acknowledgements, resends, de-duplication, the input log, snapshots and
replay all apply; a member applies what arrives in arrival order, which is
exact in stage 1 because no statement reads another member's entries.

View changes leave each member on the box's out stream as its own producer
(its box id differs per node); together they are the box's changes.

>>> from boreas.catalog.model import Partition, SegmentPlacement
>>> part = Partition("v", ("n1", "n2"), (SegmentPlacement(0, 0, 2048, 0), SegmentPlacement(1, 2048, 4096, 1)),
...                  maps=(("Q1_total", "A", 0),), layout=1, id="c0ffee")
>>> lay = layout_of(part)
>>> lay.members, lay.column("Q1_total"), [s.member for s in lay.segments]
(('n1', 'n2'), 0, [0, 1])
>>> internal_stream("v", 1, 0)
'v@1/0'
"""

from __future__ import annotations

import logging

from boreas.catalog.model import Box, Partition, Schema
from boreas.m3.cumulus import Layout, LayoutError, Segment, classify, stage1_supported
from boreas.m3.cumulus.member import MemberRuntime, Router, group

from ..operators.base import Emitted, InternalStreams
from ..operators.m3box import M3Operator, date_of

log = logging.getLogger(__name__)


def internal_stream(box: str, member: int, port: int) -> str:
    """The stream carrying in port ``port``'s rows of ``box`` to member ``member``."""
    return f"{box}@{member}/{port}"


def layout_of(partition: Partition) -> Layout:
    """The :class:`~boreas.m3.cumulus.Layout` a committed ``<partition>`` describes."""
    return Layout(partition.box, partition.nodes,
                  tuple(Segment(s.id, s.lo, s.hi, s.member) for s in partition.segments),
                  tuple((name, position) for name, _, position in partition.maps),
                  version=partition.layout)


class PartOperator(M3Operator):
    """The member(s) of a partitioned ``m3`` box that ``endpoint`` hosts (stage 1: one)."""

    def __init__(self, box: Box, inputs: list[Schema], outputs: list[Schema], partition: Partition, endpoint: str):
        super().__init__(box, inputs, outputs)
        members = partition.member_of(endpoint)
        if not members:
            raise self.error(f"is partitioned over {', '.join(partition.nodes)}, not {endpoint}")
        if not partition.planned:
            raise self.error("is partitioned, but its partition has no segments yet (the Head plans them)")
        self.partition = partition
        self.member = members[0]
        try:
            self.layout = layout_of(partition).check_program(self.plan.program)
        except LayoutError as exc:
            raise self.error(f"has a partition that does not fit its program: {exc}") from None
        plan = classify(self.plan.program, dict(self.layout.maps), box.name)
        ok, why = stage1_supported(plan)
        if not ok:
            raise self.error(f"cannot run partitioned: {why}")
        self.runtime = MemberRuntime(self.plan.program, self.layout, self.member, plan)
        self.router = Router(plan, self.layout)
        self.rows_sent = 0  # rows this member coordinated and sent to other members
        n = len(box.inputs)
        self._dispatch = [self._dispatcher(port) for port in range(n)]
        others = [m for m in range(len(partition.nodes)) if m != self.member]
        outputs_ = tuple((internal_stream(box.name, m, p), partition.nodes[m]) for m in others for p in range(n))
        self._peer_port = {(m, p): len(box.outputs) + i
                           for i, (m, p) in enumerate((m, p) for m in others for p in range(n))}
        self._internal = InternalStreams(
            inputs={internal_stream(box.name, self.member, p): n + p for p in range(n)},
            outputs=outputs_,
            schemas={internal_stream(box.name, m, p): inputs[p] for m in range(len(partition.nodes)) for p in range(n)},
        )

    def internal_streams(self) -> InternalStreams:
        return self._internal

    def _dispatcher(self, port: int):
        """``rows -> {member: rows}`` for in port ``port`` (rows in the in stream's layout, sign field and all)."""
        pp = self.plan.ports[port]
        s = pp.sign_index
        picks = [i for i in range(len(pp.columns) + (s is not None)) if i != s]

        def getter(i: int):
            at = picks[i]
            if pp.columns[i][1] == "DATE":
                return lambda row: date_of(row[at])
            return lambda row: row[at]

        by_sign = {sign: self.router.dispatcher(pp.relation, sign, getter) for sign in (1, -1)}
        if s is None:
            inserts = by_sign[1]
            return lambda rows: group(inserts, rows)
        me = self.member

        def signed(row: tuple):
            found = by_sign.get(row[s])
            return me if found is None else found(row)  # a bad sign: counted as ignored where it is applied
        return lambda rows: group(signed, rows)

    # -- the data plane ------------------------------------------------------------

    def process(self, port: int, rows: list[tuple], now: float) -> Emitted:
        n = len(self.box.inputs)
        if port >= n:  # another member's share for us
            return super().process(port - n, rows, now)
        emitted: Emitted = []
        for member, share in self._dispatch[port](rows).items():
            if member == self.member:
                emitted.extend(super().process(port, share, now))
            else:
                self.rows_sent += len(share)
                emitted.append((self._peer_port[(member, port)], share))
        return emitted

    # -- state ------------------------------------------------------------------------

    def state(self) -> dict:
        return {**super().state(), "member": self.member, "layout": self.layout.version, "sent": self.rows_sent}

    def restore(self, state: dict, now: float | None = None) -> None:
        if state.get("member", self.member) != self.member:
            raise self.error(f"cannot take the state of member {state['member']} as member {self.member}")
        super().restore(state, now)
        self.rows_sent = int(state.get("sent", 0))

    # -- boreas segments ---------------------------------------------------------------

    def segment_entries(self) -> dict[int, dict[str, int]]:
        """Entries per segment and map on this member."""
        return self.runtime.segment_entries()
