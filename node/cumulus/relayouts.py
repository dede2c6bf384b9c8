"""Layout changes on a member of a partitioned box: moves, splits, rebalances while events flow (docs/cumulus.md §6).

:class:`LayoutChanges` owns one member's layout-change state and its part
of the member's ``state()``: the queue of changes announced here and not
done here (``relayouts``, :class:`~.change.Change` records), the leader's
newest decided layout (``requested``) and its last change until every member
switched (``settling``), chunks that came before their change was announced
here (``early``), the changes cancelled (:mod:`~.cancelling`) and the
source's copy clock (:mod:`~.copying`).  It switches the member's layout
through :meth:`MemberState.switch <.membership.MemberState.switch>`.
The protocol:

1. the leader takes a request (``x``, from ``POST /segments/{box}/relayout``)
   and announces ``Relayout`` to every member, *without* a first epoch when
   data moves;
2. each source member, once the change is the first in its queue, copies
   the entries of the slots leaving it to their targets in steps (one per
   :meth:`Copier.step <.copying.Copier.step>`: the operator's timer is due at once while a copy
   runs, so the dataflow interleaves the steps with the box's batches),
   noting the keys written meanwhile, then tells the leader ``Copied``;
3. once every source copied (and every earlier change has its epoch), the
   leader fixes the first epoch ``E`` of the new layout -- one no
   coordinator stamps with yet -- and announces ``Flip(E)`` before the
   Advance that starts ``E``; coordinators stamp with the new layout from
   ``E`` on;
4. each member, once it applied everything before ``E`` and its Advance(E)
   arrived, *flips*: a source sends the final chunk (the current values of
   its dirty keys) and drops the leaving entries, every member switches its
   layout, and a target applies nothing of ``E`` until every source's final
   chunk is in, then merges what it staged.  Moved entries are recorded as
   changes of ``E``, so stable reads of earlier epochs still find them where
   they were;
5. the leader reports the change pending until its stable epoch reaches
   ``E`` (every member switched), so the API answers once it is in place.

Changes announced while one is under way wait their turn on every member;
a source starts copying a change only when the changes before it are done
there (it copies from the layout they left).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import replace

from boreas.m3.cumulus import Layout, relayout

from ..gcpause import gc_paused
from . import messages as msg
from .cancelling import Cancelled
from .change import Change
from .copying import Copier
from .leader import Leader
from .mailbox import Mailbox
from .membership import MemberState, rehomed

log = logging.getLogger(__name__)


class LayoutChanges:
    """The layout changes member ``place.member`` of box ``box`` follows (``leader``: its own, on member 0)."""

    def __init__(self, box: str, place: MemberState, leader: Leader | None, mailbox: Mailbox):
        self.box, self.place, self.leader, self.mailbox = box, place, leader, mailbox
        self.copier = Copier(box, place.member, place.runtime, mailbox)
        self.relayouts: list[Change] = []  # announced here and not yet done here, in order (the first is under way)
        self.requested: Layout | None = None  # the leader's newest decided layout (reported to the Head)
        self.settling: Change | None = None  # leader: the last change done here, until its first epoch is stable
        self.early: list[list] = []  # chunks of changes whose Relayout has not come yet (another link carries it)
        self.cancelled = Cancelled()
        # the box's member taking what the sources' final chunks carried, before their entries merge (None: nothing)
        self.take_carried: Callable[[list[dict]], None] | None = None

    # -- what others ask -------------------------------------------------------------------

    @property
    def first(self) -> Change | None:
        """The change under way here (later ones wait their turn)."""
        return self.relayouts[0] if self.relayouts else None

    @property
    def pending(self) -> Change | None:
        """The layout change under way on this member; on the leader also the last one until every member
        switched (its stable epoch reached the change's first)."""
        if self.relayouts:
            return self.relayouts[0]
        s = self.settling
        return s if s is not None and self.leader is not None and self.leader.stable < s.first else None

    def moving_in(self, epoch: int) -> bool:
        """Whether Work of ``epoch`` must wait for the change under way: it runs under the new layout, and the
        member has not switched yet or segments are still moving in."""
        p = self.first
        return p is not None and p.first is not None and epoch >= p.first and (not p.flipped or p.waiting)

    def layout_change(self, change: str) -> Change | None:
        """The record of layout change ``change`` while it is under way here (None once it completed, was
        cancelled, or not yet heard of); public because the API waits on it to answer a cancel."""
        return next((r for r in self.relayouts if r.change == change), None)

    @property
    def latest_layout(self) -> Layout:
        """The newest layout decided: the one the next change starts from."""
        r, lay = self.requested, self.place.layout
        return r if r is not None and r.version > lay.version else lay

    def joinable_layout(self, nodes: tuple[str, ...]) -> Layout:
        """:attr:`latest_layout` with the partition's joining ``nodes`` as members (docs/cumulus.md §6.4): a
        change decided from it makes them members at its first epoch (a move or rebalance onto them)."""
        lay = self.latest_layout
        if len(nodes) <= len(lay.members):
            return lay
        return replace(lay, members=lay.members + nodes[len(lay.members):])

    def due_layout(self, epoch: int) -> Layout | None:
        """The layout of the last change whose first epoch is at or before ``epoch`` (the coordinator stamps
        with it from then on); None if none."""
        due = [r.layout for r in self.relayouts if r.first is not None and r.first <= epoch]
        return due[-1] if due else None

    def relayout_busy(self) -> str | None:
        """Why the leader cannot start a layout change now (None: it can)."""
        if self.leader is None:
            return (f"member {self.place.member} of box {self.box!r} is not its leader; ask member 0 "
                    f"({self.place.layout.members[0]})")
        if self.pending is not None or self.latest_layout.version > self.place.layout.version:
            return f"box {self.box!r} is changing its layout already; try again when it is done"
        return None

    def cancellable(self) -> str | None:
        """Leader: the change a cancel would drop now (the last announced, its first epoch not fixed); None."""
        last = self.relayouts[-1] if self.relayouts else None
        return last.change if self.leader is not None and last is not None and last.first is None else None

    # -- sending ------------------------------------------------------------------------------

    def reach(self) -> int:
        """Leader: how many members its messages go to: the current layout's, and those of every change
        announced (the nodes a change makes members hear of it, its flip, and each Advance from then on)."""
        reach = max(self.place.members, len(self.latest_layout.members), *(len(r.layout.members) for r in self.relayouts))
        return min(reach, self.mailbox.nodes)  # (a member retired, and gone from the catalog, has no link any more)

    def to_all(self, message: list) -> None:
        """Leader: to every member, and to the nodes a layout change announced makes members."""
        for m in range(self.reach()):
            self.mailbox.send(m, message)

    # -- messages ------------------------------------------------------------------------------

    def receive(self, m: list) -> int | None:
        """A layout change's message; for a ``Flip``, the first epoch it fixes (else None)."""
        tag = m[0]
        if tag == msg.REQUEST:
            self._request(m)
        elif tag == msg.RELAYOUT:
            self._relayout(m)
        elif tag == msg.CHUNK:
            self._chunk(m)
        elif tag == msg.CANCEL:
            self.cancel(m[1], bool(m[2]))
        elif tag == msg.COPIED:
            p = self.layout_change(m[1])
            if p is None and m[1] in self.cancelled:
                return None
            if p is None or self.leader is None:
                log.error("m3 box %r member %d: Copied of unknown change %s ignored", self.box, self.place.member, m[1])
            elif m[2] not in p.copied:
                p.copied.append(m[2])
        elif tag == msg.FLIP:
            p = self.layout_change(m[1])
            if p is None:
                log.error("m3 box %r member %d: Flip of unknown change %s ignored", self.box, self.place.member, m[1])
                return None
            p.first = int(m[2])
            return p.first if self.place.member < len(p.layout.members) else None
        return None

    def _request(self, m: list) -> None:
        """Leader: a move, split or rebalance asked for (checked by the API first); announce it."""
        if self.leader is None:
            log.error("m3 box %r member %d: layout change %s ignored (not the leader)", self.box, self.place.member,
                      m[1])
            return
        new, base = Layout.from_dict(m[2]), self.latest_layout
        if new.version != base.version + 1:
            log.error("m3 box %r: layout change %s to version %d ignored (the layout is at %d)", self.box,
                      m[1], new.version, base.version)
            return
        self.requested = new
        moves = [list(x) for x in relayout.moves(base, new)]
        self.to_all(msg.relayout(m[1], new.to_dict(), None, moves))

    def _relayout(self, m: list) -> None:
        self.relayouts.append(Change(m[1], Layout.from_dict(m[2]), None if m[3] is None else int(m[3]),
                                     [tuple(x) for x in m[4]], self.place.member))
        early = [c for c in self.early if c[1] == m[1]]
        if early:
            self.early = [c for c in self.early if c[1] != m[1]]
            for c in early:
                self._chunk(c)

    def _chunk(self, m: list) -> None:
        """Entries of a segment moving here: staged apart from the store until the flip (any time before)."""
        p = self.layout_change(m[1])
        if p is None and m[1] in self.cancelled:  # sent before the source heard of the cancel
            return
        if p is None:  # the source heard of the change before this member did
            self.early.append(m)
            return
        with gc_paused():
            p.staging.add_chunk(m[4], self.copier.codecs, self.place.runtime)
        if m[3] and m[2] not in p.finals:
            p.finals.append(m[2])
            if len(m) > 5:
                p.carried.append(m[5])

    def cancel(self, change: str, asked: bool) -> None:
        """Drop ``change`` (:mod:`~.cancelling`); ``asked``: a client's request, which the leader decides."""
        if asked:
            if self.leader is None:
                log.error("m3 box %r member %d: cancel of %s ignored (not the leader)", self.box, self.place.member,
                          change)
            elif self.cancellable() != change:
                log.warning("m3 box %r: change %s not cancelled: it is not the last announced, or its first "
                            "epoch is fixed", self.box, change)
            else:
                self.to_all(msg.cancel(change, False))
            return
        p = self.layout_change(change)
        self.cancelled.add(change)
        self.early = [c for c in self.early if c[1] != change]
        if p is None:
            return
        if p.first is not None:  # cannot happen: the leader sends no Flip after a Cancel
            log.error("m3 box %r member %d: change %s has its first epoch; cancel ignored", self.box,
                      self.place.member, change)
            return
        if p.copy is not None and self.first is p:
            self.place.runtime.on_write = None  # its copy stops noting dirty keys
        self.relayouts = [r for r in self.relayouts if r is not p]
        if self.leader is not None:
            self.requested = self.relayouts[-1].layout if self.relayouts else None
        log.info("m3 box %r member %d: layout change %s cancelled", self.box, self.place.member, change)

    # -- the steps -----------------------------------------------------------------------------

    def step(self, at: int, epoch: int) -> None:
        """Decide, flip and finish what can be (after every message, cheap when nothing is under way); ``at``:
        the epoch the member applies, ``epoch``: the one its coordinator stamps with."""
        if self.settling is not None and self.leader is not None and self.leader.stable >= self.settling.first:
            self.settling = None
        while self.relayouts:
            if self.leader is not None:
                self._decide()
            p = self.relayouts[0]
            self._maybe_flip(p, at, epoch)
            if not p.flipped or p.waiting:
                return
            if p.carried and self.take_carried is not None:
                self.take_carried(p.carried)
            with gc_paused():
                p.staging.merge(self.place.runtime, p.first)
            log.info("m3 box %r member %d: layout %d from epoch %d", self.box, self.place.member,
                     p.layout.version, p.first)
            self.relayouts.pop(0)
            if self.leader is not None:
                self.settling = p

    def _decide(self) -> None:
        """Leader: fix the first epoch of each change, in order, once its sources copied; announce it."""
        prev = self.place.history[-1][0]
        for p in self.relayouts:
            if p.first is None:
                if not {s for _, s, _ in p.moves} <= set(p.copied):
                    return
                # no coordinator stamps with it yet: only the leader's Advance starts it
                p.first = max(self.leader.epoch + 1, prev + 1)
                self.leader.woken(p.first)  # advance through it even if no input flows
                self.leader.resize(p.first, len(p.layout.members))  # (a change may add members)
                self.to_all(msg.flip(p.change, p.first))
            prev = p.first

    def _maybe_flip(self, p: Change, at: int, epoch: int) -> None:
        """Switch to the change's layout at the start of its first epoch (a source once its final chunks left)."""
        first = p.first
        if p.flipped or first is None or at < first or epoch < first:
            return
        if p.moves_from(self.place.member) and not self.copier.flip(p):
            return
        self.place.switch(first, p.layout)
        p.flipped = True

    def copy_deadline(self) -> float | None:
        """When the copy under way here next needs a step without a message (None: none runs here)."""
        return self.copier.deadline(self.first)

    def copy_step(self, now: float) -> bool:
        """A step of the copy under way here, if one is due by ``now``; whether one was taken."""
        return self.copier.step(self.first, now)

    def restart_clock(self, now: float) -> None:
        """A copy under way continues on this node's clock (a guest taken over: its clock was another's)."""
        self.copier.restart_clock(now)

    def begin_run(self) -> None:
        """A run of the member begins: final chunks a source sent in an earlier run have left."""
        self.copier.begin_run()

    def rehome(self, nodes: tuple[str, ...]) -> None:
        """The changes' layouts with the members' endpoints as ``nodes`` names them now (a failover)."""
        if self.requested is not None:
            self.requested = rehomed(self.requested, nodes)
        for r in self.relayouts:
            r.layout = rehomed(r.layout, nodes)
        if self.settling is not None:
            self.settling.layout = rehomed(self.settling.layout, nodes)

    # -- plain data ------------------------------------------------------------------------

    def state(self) -> dict:
        codecs, s = self.copier.codecs, self.settling
        with gc_paused():
            return {
                "requested": None if self.requested is None else self.requested.to_dict(),
                "relayouts": [r.state(codecs) for r in self.relayouts],
                "early": list(self.early), "copy_at": self.copier.copy_at,
                "settling": None if s is None else {"change": s.change, "first": s.first,
                                                    "layout": s.layout.to_dict()},
                "cancelled": self.cancelled.state(),
            }

    def restore(self, state: dict) -> None:
        if not state.get("layout_now"):
            return
        self.requested = Layout.from_dict(state["requested"]) if state.get("requested") else None
        runtime, me = self.place.runtime, self.place.member
        runtime.on_write = None
        with gc_paused():
            self.relayouts = [Change.of(r, me, runtime, self.copier.codecs) for r in state.get("relayouts", [])]
        self.early = [list(c) for c in state.get("early", [])]
        self.cancelled.restore(state.get("cancelled", []))
        self.copier.copy_at = float(state.get("copy_at", 0.0))
        s = state.get("settling")
        self.settling = None if s is None else Change(s["change"], Layout.from_dict(s["layout"]), int(s["first"]),
                                                      [], me, flipped=True)
