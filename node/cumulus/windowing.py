"""A member of a partitioned ``m3`` box whose SQL reads its streams through TUMBLE or HOP (docs/cumulus.md §3.13).

Each member keeps the windows of the groups in its segments, as the one-node box
(node/operators/m3windows.py) keeps all of them: its coordinator gives each producer's rows their windows
and keeps the producers' watermarks, every coordinator's ``Close`` carries its watermarks to every member,
and a member passing a ``Close`` in the version order moves its frontier
(node/cumulus/event_marks.py), emits the closed windows' rows of its groups, once, as plain rows, and deletes
their entries.  A Work's copies of windows already closed are left out and counted late.

Windows are map entries keyed by their bounds, so a segment that moves (a relayout) or a member that recovers
takes its open windows with the maps; the per-window bookkeeping is the frontier, the same on every member,
and rides in each member's state (:class:`~.event_marks.EpochFrontier`, the coordinator's
:class:`~.event_marks.StampedTime`).  Entries of a window closed before they arrived (a segment's chunk
copied before its close, installed after) are deleted at the next close without being emitted again.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping

from boreas.catalog.boxtypes import BoxError
from boreas.catalog.model import Box, Input, Partition, Schema
from boreas.m3.boxtype import box_topn, box_windows
from boreas.wire.columns import Columns

from ..operators.base import Emitted, OperatorError
from ..operators.late import LateLog
from ..operators.m3closing import Closing
from ..operators.m3event_time import Windows, declare_inputs, windowed_ports
from .applying import Groups, Version
from .event_marks import EpochFrontier, StampedTime
from .hosting import Host
from .part import PartOperator
from .ranking import RankedPartOperator

log = logging.getLogger(__name__)


class WindowedPartOperator(PartOperator):
    """A member of a partitioned box over TUMBLE or HOP windows: its groups' windows, closed when the stream's
    watermark passes them (module docstring)."""

    def __init__(self, box: Box, inputs: list[Schema], outputs: list[Schema], partition: Partition, endpoint: str,
                 member: int | None = None, host: Host | None = None):
        super().__init__(box, inputs, outputs, partition, endpoint, member, host)
        self._idle = self.number("idle-timeout", None, positive=True)
        ports = windowed_ports(self.plan, self.inputs, self._idle)
        logged = LateLog(box.name, kind="m3", allowance="its stream's watermark delay")
        self.parts.coordinator.times = StampedTime(Windows(ports, logged=logged))
        self.event_time = EpochFrontier({port: wp.window.slide for port, wp in ports.items()})
        self._times = {port: wp.time for port, wp in ports.items()}  # each windowed port's event time column
        self.closing = Closing.of(self.plan, self.error)

    # -- the data plane --------------------------------------------------------------------

    def _clock(self, now: float) -> None:
        """The flow clock the hosted coordinators stamp at (their producers' idle timers)."""
        for op in self.hosted.values():
            op.parts.coordinator.clock = now

    def process(self, port: int, rows: list | Columns, now: float) -> Emitted:
        self._clock(now)
        return super().process(port, rows, now)

    def process_from(self, port: int, rows: list | Columns, now: float, origin: tuple[str, str, int]) -> Emitted:
        self._clock(now)
        return super().process_from(port, rows, now, origin)

    def poll(self, now: float) -> Emitted:
        self._clock(now)
        return super().poll(now)

    def producer_ended(self, port: int, producer: str, now: float) -> Emitted:
        """A producer's ``final``: +inf in its coordinator's watermark from the next Close on."""
        self._clock(now)
        return super().producer_ended(port, producer, now)

    def end_of_input(self, now: float, port: int | None = None) -> Emitted:
        self._clock(now)
        return super().end_of_input(now, port)

    def holds_end(self) -> bool:
        """Until the Closes carrying every coordinator's +inf passed every member hosted here (their last
        windows emitted), as well as the end (a plain box's rule), the box's out streams here do not end."""
        return super().holds_end() or any(op.event_time.closed != math.inf for op in self.hosted.values())

    def follow_inputs(self, inputs: Mapping[str, Input]) -> None:
        """The node's ``<input>`` declarations: a windowed stream's ``watermark`` and ``idle-timeout`` (as the
        one-node box's, node/operators/m3windows.py), for the coordinators hosted here."""
        for op in self.hosted.values():
            declare_inputs(self.box, op.parts.coordinator.times.windows.ports, inputs, self._idle)

    # -- writing (the applier's Writer) ---------------------------------------------------

    def work_groups(self, port: int, rows: list | bytes | Columns) -> Groups:
        """A Work's rows without the copies of closed windows (late rows counted), split as the box's."""
        time = self._times.get(port)
        if time is not None:
            rows = self.event_time.admit(port, rows, time)
            if not len(rows):
                return []
        return super().work_groups(port, rows)

    def write(self, version: Version, mine: Groups, pushed: dict) -> None:
        """Apply this member's share of a version; nothing is emitted until its windows close."""
        self.apply_share(version, mine, pushed)

    def passed_close(self, coordinator: int, marks: list) -> None:
        """The order passed a Close carrying ``coordinator``'s watermarks: emit the windows the frontier closes
        now, of this member's groups, and delete their entries."""
        frontier = self.event_time.heard(coordinator, marks, self.place.members)
        before = self.event_time.closed
        if frontier <= before:
            return
        closed = self.closing.closed_entries(self.runtime, frontier)
        for out, _, position, is_end, pairs in self.closing.rows(self.runtime, frontier, closed):
            pairs = [kv for kv in pairs if self.closing.end_of(kv[0], position, is_end) > before]
            if pairs:
                self.parts.mailbox.emit(out, self._emit[out](pairs))
        dropped = self.runtime.remove_at_most(self.closing.bounds(frontier))
        log.debug("m3 box %r member %d: windows up to %s closed, %d entries dropped", self.box.name, self.member,
                  frontier, dropped)
        self.event_time.closed = frontier

    # -- what it knows ---------------------------------------------------------------------

    def counters(self) -> dict[str, int]:
        """Late rows of the members hosted here: left out at the member, or without an event time at the
        coordinator."""
        late = sum(op.event_time.late + op.parts.coordinator.times.late for op in self.hosted.values())
        return {**super().counters(), "late_tuples": late}

    def member_state(self) -> dict:
        return {**super().member_state(), "event_time": self.event_time.state()}

    def restore_member(self, state: dict, now: float | None = None) -> None:
        super().restore_member(state, now)
        self.event_time.restore(state.get("event_time") or {})


def part_operator(box: Box, inputs: list[Schema], outputs: list[Schema], partition: Partition,
                  endpoint: str) -> PartOperator:
    """The member of ``box``'s partition on ``endpoint``: :class:`WindowedPartOperator` when its SQL reads a
    window, :class:`~.ranking.RankedPartOperator` when it ranks its view (a top-N), else
    :class:`~.part.PartOperator`."""
    try:
        windows, _ = box_windows(box)
        ranked = box_topn(box) is not None
    except BoxError as exc:
        raise OperatorError(str(exc)) from None
    kind = WindowedPartOperator if windows else RankedPartOperator if ranked else PartOperator
    return kind(box, inputs, outputs, partition, endpoint)
