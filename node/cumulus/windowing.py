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
from boreas.m3 import M3Error
from boreas.m3.boxtype import BoxPlan, box_topn, box_windows, plan_box
from boreas.m3.compiler.sessionfn import Session
from boreas.m3.compiler.windowfn import Window
from boreas.m3.sessionheld import held_plan
from boreas.wire.columns import Columns, read_columns

from ..operators import m3columns
from ..operators.base import Emitted, OperatorError
from ..operators.late import LateLog
from ..operators.m3closing import Closing
from ..operators.m3event_time import Windows, declare_inputs, windowed_ports
from ..operators.m3winjoin import StageEmit
from . import messages as msg
from .applying import Groups, Version
from .event_marks import EpochFrontier, StampedTime
from .gathering import Gathered
from .hosting import Host
from .part import PartOperator
from .sessions import HeldSessions
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
        self.event_time = EpochFrontier({port: wp.window.slide if isinstance(wp.window, Window) else 0
                                         for port, wp in ports.items()})  # (a SESSION port has no copies)
        self._times = {port: wp.time for port, wp in ports.items()}  # each windowed port's event time column
        self.closing = Closing.of(self.plan, self.error)
        # a member a layout change adds starts from its sources' frontier (else its first epoch's rows, and the
        # entries copied to it, would be judged against -inf: late rows kept, closed windows emitted again)
        self.parts.changes.copier.carry = lambda: {"event_time": self.event_time.state()}
        self.parts.changes.take_carried = self._carried

    def _carried(self, carried: list[dict]) -> None:
        """The sources' frontiers of a layout change, before its entries merge here (and are indexed)."""
        for c in carried:
            self.event_time.join(c.get("event_time") or {})

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


class SessionPartOperator(WindowedPartOperator):
    """A member of a partitioned box over SESSION windows: its keys' open sessions held as entries of its held
    maps, folded into the view when the frontier closes them (node/cumulus/sessions.py, m3/sessionheld.py)."""

    def __init__(self, box: Box, inputs: list[Schema], outputs: list[Schema], partition: Partition, endpoint: str,
                 member: int | None = None, host: Host | None = None):
        super().__init__(box, inputs, outputs, partition, endpoint, member, host)
        self.sessions = HeldSessions.of(self.plan)
        if len(self.sessions.ports) != len(self._times):
            raise self.error("reads one stream through SESSION and another through TUMBLE or HOP; a box reads "
                             "through sessions or through fixed windows (use one box for each)")
        self._held = self.sessions.held_relations()

    def plan_of(self, box: Box, inputs: list[Schema]) -> BoxPlan:
        """The box's plan with its session ports feeding their held relations (m3/sessionheld.py)."""
        plan = super().plan_of(box, inputs)
        return held_plan(plan, [w for w in plan.windows if isinstance(w, Session)])

    def work_groups(self, port: int, rows: list | bytes | Columns) -> Groups:
        """A Work's rows of a session port, as rows (a session's index reads them); a deletion is refused."""
        if port not in self.sessions.ports:
            return super().work_groups(port, rows)
        if isinstance(rows, bytes):
            rows = read_columns(rows)
        if isinstance(rows, Columns):
            adds, takes = m3columns.by_sign(rows)
            groups = self._row_groups(port, self.plan.ports[port].relation, adds, takes)[0]
        else:
            inserts, deletes, _ = self._split[port](rows)
            groups = [g for g in ((self.plan.ports[port].relation, 1, inserts),
                                  (self.plan.ports[port].relation, -1, deletes)) if g[2]]
        if any(sign < 0 for _, sign, _ in groups):
            self.failed_batches += 1
            log.error("m3 box %r member %d: a SESSION window reads insertions only; the deletions on in port %d "
                      "are left out", self.box.name, self.member, port)
        return [g for g in groups if g[1] > 0]

    def _index(self) -> None:
        """Index the held rows again after a layout change or a restore (dropping those of closed sessions)."""
        if self.sessions.indexed_under is self.place.layout:
            return
        entries = {}
        for port, name in self.sessions.held_maps().items():
            arity = len(self.plan.program.map(name).keys)
            entries[port] = self.runtime.read(name, (None,) * arity)
        stale = self.sessions.rebuild(entries, self.event_time.closed)
        if stale:
            self._apply(stale)
        self.sessions.indexed_under = self.place.layout

    def _apply(self, groups: list) -> None:
        try:
            self.runtime.apply_with(groups, {})
        except (M3Error, ArithmeticError, TypeError, ValueError) as exc:  # rolled back by the runtime
            self.failed_batches += 1
            self.sessions.indexed_under = None  # (the index ran ahead of the maps: built again from them)
            log.error("m3 box %r member %d: sessions not applied: %s", self.box.name, self.member, exc)

    def write(self, version: Version, mine: Groups, pushed: dict) -> None:
        """Hold this member's rows of a version in their open sessions (late rows left out and counted)."""
        self._index()
        kept = []
        for relation, sign, rows in mine:
            port = self._held.get(relation)
            if port is not None:
                rows, late = self.sessions.admit(port, rows, self.event_time.closed)
                self.event_time.late += late
            if rows:
                kept.append((relation, sign, rows))
        if kept and not self.apply_share(version, kept, pushed):
            self.sessions.indexed_under = None

    def passed_close(self, coordinator: int, marks: list) -> None:
        """The frontier moved: fold the sessions it closes into the view, emit their rows, drop them."""
        frontier = self.event_time.heard(coordinator, marks, self.place.members)
        if frontier <= self.event_time.closed:
            return
        self._index()
        folded = self.sessions.close(frontier)
        if folded:
            self._apply(folded)
            closed = self.closing.closed_entries(self.runtime, frontier, everything=True)
            for out, _, _, _, pairs in self.closing.rows(self.runtime, frontier, closed, everything=True):
                if pairs:
                    self.parts.mailbox.emit(out, self._emit[out](pairs))
            self.runtime.remove_at_most(self.closing.bounds(frontier, everything=True))
        self.event_time.closed = frontier

    def restore_member(self, state: dict, now: float | None = None) -> None:
        super().restore_member(state, now)
        self.sessions.indexed_under = None


class JoinPartOperator(WindowedPartOperator):
    """A member of a partitioned window join: its leaves' closed rows gathered to member 0, which evaluates the
    stages above them per closed window and emits the query's rows (node/cumulus/gathering.py)."""

    def __init__(self, box: Box, inputs: list[Schema], outputs: list[Schema], partition: Partition, endpoint: str,
                 member: int | None = None, host: Host | None = None):
        super().__init__(box, inputs, outputs, partition, endpoint, member, host)
        assert self.plan.stages is not None
        self.stages = StageEmit(self.plan.stages, self.outputs[0])
        self.gather = Gathered.of(v for _, v, _, _ in self.closing.views)  # (member 0's; empty on the others)

    def passed_close(self, coordinator: int, marks: list) -> None:
        """The frontier moved: this member's closed leaf rows go to member 0 (its own are offered there), and
        their entries are deleted."""
        frontier = self.event_time.heard(coordinator, marks, self.place.members)
        before = self.event_time.closed
        if frontier <= before:
            return
        closed = self.closing.closed_entries(self.runtime, frontier)
        leaves = {}
        for _, view, position, is_end, pairs in self.closing.rows(self.runtime, frontier, closed):
            rows = [[end, list(key), list(value) if isinstance(value, tuple) else value] for key, value in pairs
                    if (end := self.closing.end_of(key, position, is_end)) > before]
            if rows:
                leaves[view.name] = rows
        self.runtime.remove_at_most(self.closing.bounds(frontier))
        self.event_time.closed = frontier
        leaves = self.gather.encode(leaves)  # (as a message carries them, and member 0's state)
        if self.member == 0:
            self.gather.offer(frontier, 0, leaves, members=self.place.members)
            self._evaluate()
        else:
            self.parts.mailbox.send(0, msg.gathered(frontier, self.member, leaves))

    def gathered(self, step: float, member: int, leaves: dict) -> None:
        """Member ``member``'s leaf rows of frontier ``step`` (member 0 only)."""
        self.gather.offer(float(step), member, leaves)
        self._evaluate()

    def _evaluate(self) -> None:
        for _, rows in self.gather.ready():
            joined = self.stages.rows(rows)
            if joined:
                self.parts.mailbox.emit(0, joined)

    def holds_end(self) -> bool:
        """Until member 0 evaluated every step (a member's rows of the last windows may still be on their way)."""
        return super().holds_end() or any(op.gather.waiting for op in self.hosted.values())

    def member_state(self) -> dict:
        return {**super().member_state(), "gathered": self.gather.state()}

    def restore_member(self, state: dict, now: float | None = None) -> None:
        super().restore_member(state, now)
        self.gather.restore(state.get("gathered") or {})


def part_operator(box: Box, inputs: list[Schema], outputs: list[Schema], partition: Partition,
                  endpoint: str) -> PartOperator:
    """The member of ``box``'s partition on ``endpoint``: :class:`WindowedPartOperator` when its SQL reads a
    window, :class:`~.ranking.RankedPartOperator` when it ranks its view (a top-N), else
    :class:`~.part.PartOperator`."""
    try:
        windows, _ = box_windows(box)
        ranked = box_topn(box) is not None
        joins = bool(windows) and plan_box(box, inputs).stages is not None
    except BoxError as exc:
        raise OperatorError(str(exc)) from None
    kind = (SessionPartOperator if any(isinstance(w, Session) for w in windows) else JoinPartOperator if joins
            else WindowedPartOperator if windows else RankedPartOperator if ranked else PartOperator)
    return kind(box, inputs, outputs, partition, endpoint)
