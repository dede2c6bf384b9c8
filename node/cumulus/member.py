"""One member of a partitioned box, composed of the parts that own its state (docs/cumulus.md §3.5, §3.8).

:class:`Member` wires a member's parts and hands each message to the part
that owns what it changes; each part keeps its own state and its own keys
of the member's ``state()``:

==========================  ===========================================================
part                        owns
==========================  ===========================================================
:class:`MemberState`        its number, layout, roles, layout history, first epoch
:class:`Mailbox`            its inbox, and what one run sends and emits
:class:`Coordinator`        stamping input batches as versions (epoch, seq, holding)
:class:`Handing`            where each producer's batches go: stamped, forwarded, held (§6.5)
:class:`Applier`            the version order, pushes, held Work, stable-read horizon
:class:`LayoutChanges`      relayouts, cancels, the source's copy (:class:`Copier`)
:class:`Leader`             (member 0) ending epochs, the stable epoch
:class:`BulkLoads`          the bulk-load parts applied
==========================  ===========================================================

The box's own work -- splitting a version's rows, running the triggers,
emitting view changes -- is the :class:`~.applying.Writer`'s (the
:class:`~boreas.node.cumulus.part.PartOperator`), and which members share a
node is the :class:`~.hosting.Host`'s.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from boreas.m3.boxtype import BoxPlan

from ..operators.base import Emitted
from . import messages as msg
from .applying import Applier, Writer
from .coordinator import Coordinator
from .handing import Handing
from .leader import Leader
from .loading import BulkLoads
from .mailbox import Mailbox
from .membership import MemberState
from .messages import KeyCodecs
from .relayouts import LayoutChanges

log = logging.getLogger(__name__)

_HANDING = frozenset((msg.HANDOVER, msg.TAKEN, msg.FORWARD))  # handing.py's messages
_CHANGES = frozenset((msg.REQUEST, msg.RELAYOUT, msg.CHUNK, msg.COPIED, msg.FLIP, msg.CANCEL))  # relayouts.py's messages


class Member:
    """Member ``place.member`` of box ``box``: its parts, its messages, its steps (no I/O).

    ``neighbour(m)`` is the mailbox of member ``m`` if it is hosted on the
    same node; ``ordered``: the plan reads maps (versions apply in one order).
    """

    def __init__(self, box: str, place: MemberState, plan: BoxPlan, ordered: bool, leader: Leader | None,
                 neighbour: Callable[[int], Mailbox | None], writer: Writer, codecs: KeyCodecs, count: int = 1):
        self.box, self.place, self.leader = box, place, leader
        self.mailbox = Mailbox(neighbour)
        self.coordinator = Coordinator(place, plan, ordered, self.mailbox)
        self.changes = LayoutChanges(box, place, leader, self.mailbox)
        self.handing = Handing(place, self.coordinator, self.mailbox, lambda: self.changes.latest_layout, count)
        self.applier = Applier(place, ordered, self.mailbox, self.coordinator, self.changes, writer, codecs)
        self.loads = BulkLoads(box, place.member)

    # -- its steps (the host runs every member it hosts) -----------------------------------

    def tick(self, now: float) -> None:
        """The leader's clock: send the Advance that ends the epoch, if it is time; the coordinator's idle
        timers."""
        self.coordinator.poll(now)
        if self.leader is not None:
            advance = self.leader.tick(now, time.time())
            if advance is not None:
                self.changes.to_all(advance)

    def deadline(self) -> float | None:
        """When this member next needs :meth:`tick` or a copy step without a message (flow clock)."""
        copy = self.changes.copy_deadline()  # a segment being copied away: a step if no message comes
        lead = None if self.leader is None else self.leader.next_deadline()
        times = [t for t in (copy, lead, self.coordinator.idle_deadline()) if t is not None]
        return min(times) if times else None

    def run(self, now: float) -> Emitted:
        """Take every message queued for this member; what it sends to members on other nodes."""
        self.changes.begin_run()
        if self.changes.relayouts:  # a source that sent its final chunks switches now
            self.applier.progress()
        self._drain()
        if self.changes.copy_step(now):  # segments being copied away: a step after the box's own work
            self._drain()
        if self.leader is not None:
            self.leader.deadline(now)
        return self.mailbox.collect()

    def restart_clocks(self, now: float) -> None:
        """A guest taken over: its timers were on the failed node's flow clock; they start again on this one's."""
        if self.leader is not None:
            self.leader.restart_clock()
        self.changes.restart_clock(now)

    def _drain(self) -> None:
        inbox = self.mailbox.inbox
        while inbox:
            self._receive(inbox.popleft())
            self.applier.progress()

    def _receive(self, m: list) -> None:
        """One message, to the part that owns what it changes."""
        tag, leader = m[0], self.leader
        if tag == msg.WORK:
            self.applier.work(m)
        elif tag == msg.PUSH:
            self.applier.push(m)
        elif tag == msg.CLOSE:
            self.applier.close(m[1], m[2], m[4] if len(m) > 4 else None, m[5] if len(m) > 5 else None, len(m) > 5)
            if leader is not None:
                leader.closed(m[1], m[2], m[3])
        elif tag == msg.ADVANCE:
            if m[1] > self.coordinator.epoch:
                self._advance(m[1])
            horizon = self.applier.stable(m[2])
            if horizon is not None:
                self.place.forget_layouts(horizon)
        elif tag == msg.WAKE:
            if leader is not None:
                leader.woken(m[1])
        elif tag == msg.DONE:
            if leader is not None:
                leader.done(m[1], m[2])
        elif tag == msg.GATHERED:  # (only a window join's member 0 gathers: node/cumulus/gathering.py)
            gathered = getattr(self.applier.writer, "gathered", None)
            if gathered is not None:
                gathered(m[1], m[2], m[3])
            else:
                log.error("m3 box %r member %d: leaf rows gathered, but it joins no windows", self.box,
                          self.place.member)
        elif tag == msg.LOAD:
            self.loads.load(m, self.place.runtime, self.applier.decode_key, self.applier.at[0])
        elif tag in _HANDING:
            self.handing.receive(m)
        elif tag in _CHANGES:
            first = self.changes.receive(m)  # a Flip fixing the first epoch of a change that makes it a member
            if first is not None and self.place.join(first):
                self.applier.start_at(first)
                log.info("m3 box %r member %d joins the partition at epoch %d", self.box, self.place.member, first)
        else:
            log.error("m3 box %r member %d: unknown message %r ignored", self.box, self.place.member, tag)

    def _advance(self, epoch: int) -> None:
        """The coordinator closes its epoch and stamps with ``epoch``, under a change's layout from its first."""
        self.coordinator.advance(epoch)
        due = self.changes.due_layout(epoch)
        if due is not None and due.version > self.coordinator.routing:
            before = self.coordinator.layout
            self.coordinator.route(due)
            self.handing.switch(before, due, epoch)
        else:
            self.handing.advanced()

    # -- state ---------------------------------------------------------------------------

    def rehome(self, nodes: tuple[str, ...]) -> None:
        """Layouts restored from a state name the nodes members were on then; a failover since moved one."""
        self.place.rehome(nodes)
        self.changes.rehome(nodes)

    def state(self) -> dict:
        """Every part's state, each under its own keys."""
        return {**self.place.state(), **self.coordinator.state(), **self.applier.state(),
                "leader": None if self.leader is None else self.leader.state(), **self.loads.state(),
                **self.changes.state(), **self.handing.state()}

    def restore(self, state: dict, now: float | None = None) -> None:
        """Continue from :meth:`state` (the box's maps restored first); ``now``: the restoring node's flow clock
        (a windowed coordinator's idle timers continue on it)."""
        self.applier.restore(state)
        self.loads.restore(state)
        self.place.restore(state)
        self.changes.restore(state)
        self.coordinator.restore(state, [c.layout for c in self.changes.relayouts], now)
        self.handing.restore(state)
        if self.leader is not None and state.get("leader"):
            self.leader.restore(state["leader"])
