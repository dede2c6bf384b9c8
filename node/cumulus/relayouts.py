"""Layout changes on a member of a partitioned box: moves, splits, rebalances while events flow (docs/cumulus.md §6).

A mixin of :class:`~boreas.node.cumulus.part.PartOperator`.  It owns the
operator's layout-change state (set up by :meth:`_init_changes`, saved by
:meth:`_changes_state`): the queue of changes announced here and not done
here (``relayouts``), the layouts of recent epochs (``history``), the
coordinator's ``routing``, Work ``held`` until its epoch begins here, and
the data of segments on the move (:mod:`~boreas.node.cumulus.precopy`).
The protocol:

1. the leader takes a request (``x``, from ``POST /segments/{box}/relayout``)
   and announces ``Relayout`` to every member, *without* a first epoch when
   data moves;
2. each source member, once the change is the first in its queue, copies
   the entries of the slots leaving it to their targets in steps (one per
   :meth:`_copy_step`: the operator's timer is due at once while a copy
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

from boreas.m3.cumulus import Layout, relayout
from boreas.m3.cumulus.roles import Roles

from ..gcpause import gc_paused
from . import messages as msg
from . import precopy
from .precopy import Codecs, SourceCopy, Staging

log = logging.getLogger(__name__)

#: Seconds from one step of a copy to the next (flow clock); a step of :data:`~.precopy.COPY_STEP` keys takes
#: about 5 ms, so the box keeps at least half of its time, and a segment of a million entries is copied in ~0.5 s.
COPY_PAUSE = 0.007


class LayoutChanges:

    def _init_changes(self) -> None:
        self.relayouts: list[dict] = []  # announced here and not yet done here, in order (the first is under way)
        self.routing = self.layout.version  # the layout version the coordinator stamps Work with
        self.held: list = []  # Work this member may not apply yet (its epoch has not begun here)
        self.history: list[tuple[int, Layout]] = [(0, self.layout)]
        self.requested: Layout | None = None  # the leader's newest decided layout (reported to the Head)
        self.settling: dict | None = None  # leader: the last change done here, until its first epoch is stable
        self.early: list = []  # chunks of changes whose Relayout has not come yet (another link carries it)
        self.copy_at = 0.0  # flow-clock time the next copy step is due (while a copy runs)
        self._sent_final = False  # final chunks were sent in this call (the source switches in the next)
        self._alone: list[tuple[int, list]] = []  # messages that go in a frame of their own (chunks)
        self._codecs = Codecs(self.runtime.store)
        self.cancelled: list[str] = []  # the last changes cancelled (cancelling.py)

    # -- what waits for a change ------------------------------------------------------------

    @property
    def pending(self) -> dict | None:
        """The layout change under way on this member (later ones wait their turn); on the leader also the
        last one until every member switched (its stable epoch reached the change's first)."""
        if self.relayouts:
            return self.relayouts[0]
        s = self.settling
        return s if s is not None and self.leader is not None and self.leader.stable < s["first"] else None

    @staticmethod
    def _waiting(p: dict) -> bool:
        """Whether a flipped change still waits for a source's final chunk."""
        return not set(p["sources"]) <= set(p["finals"])

    def _gated(self, epoch: int) -> bool:
        """Whether Work of ``epoch`` must wait: its epoch has not begun here (the Advance that starts it,
        and every layout change decided before it, has not arrived), or segments are still moving in."""
        if epoch > self.epoch:
            return True
        p = self.relayouts[0] if self.relayouts else None
        return (p is not None and p["first"] is not None and epoch >= p["first"]
                and (not p["flipped"] or self._waiting(p)))

    def _release_held(self) -> None:
        if self.held:
            ready = [w for w in self.held if not self._gated(w[1])]
            if ready:
                self.held = [w for w in self.held if self._gated(w[1])]
                for work in ready:
                    self._write(work, {})

    # -- messages ------------------------------------------------------------------------------

    def _change_message(self, m: list) -> None:
        tag = m[0]
        if tag == msg.REQUEST:
            self._request(m)
        elif tag == msg.RELAYOUT:
            self._relayout(m)
        elif tag == msg.CHUNK:
            self._chunk(m)
        elif tag == msg.CANCEL:
            self._cancel(m)  # (cancelling.py)
        elif tag == msg.COPIED:
            p = self.layout_change(m[1])
            if p is None and m[1] in self.cancelled:
                return
            if p is None or self.leader is None:
                log.error("m3 box %r member %d: Copied of unknown change %s ignored", self.box.name, self.member, m[1])
            elif m[2] not in p["copied"]:
                p["copied"].append(m[2])
        elif tag == msg.FLIP:
            p = self.layout_change(m[1])
            if p is None:
                log.error("m3 box %r member %d: Flip of unknown change %s ignored", self.box.name, self.member, m[1])
            else:
                p["first"] = int(m[2])
                if self.joined is None and self.member < len(p["layout"].members):  # (docs/cumulus.md §6.4)
                    self.joined, self.at = p["first"], [p["first"], 0]
                    log.info("m3 box %r member %d joins the partition at epoch %d", self.box.name, self.member,
                             p["first"])

    def layout_change(self, change: str) -> dict | None:
        """The record of layout change ``change`` while it is under way here (None once it completed, was
        cancelled, or not yet heard of); public because the API waits on it to answer a cancel."""
        return next((r for r in self.relayouts if r["change"] == change), None)

    def _request(self, m: list) -> None:
        """Leader: a move, split or rebalance asked for (checked by the API first); announce it."""
        if self.leader is None:
            log.error("m3 box %r member %d: layout change %s ignored (not the leader)", self.box.name, self.member, m[1])
            return
        new, base = Layout.from_dict(m[2]), self.latest_layout
        if new.version != base.version + 1:
            log.error("m3 box %r: layout change %s to version %d ignored (the layout is at %d)", self.box.name,
                      m[1], new.version, base.version)
            return
        self.requested = new
        moves = [list(x) for x in relayout.moves(base, new)]
        self._to_all(msg.relayout(m[1], new.to_dict(), None, moves))

    def _relayout(self, m: list) -> None:
        moves = [tuple(x) for x in m[4]]
        self.relayouts.append({
            "change": m[1], "layout": Layout.from_dict(m[2]), "first": None if m[3] is None else int(m[3]),
            "moves": moves, "flipped": False, "sources": sorted({s for _, s, t in moves if t == self.member}),
            "finals": [], "copied": [], "copy": None, "staging": Staging(), "final_sent": False})
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
            p["staging"].add(m[4], self._codecs)
        if m[3] and m[2] not in p["finals"]:
            p["finals"].append(m[2])

    # -- the steps -----------------------------------------------------------------------------

    def _relayouts_step(self) -> None:
        """Decide, flip and finish what can be (after every message, cheap when nothing is under way)."""
        if self.settling is not None and self.leader is not None and self.leader.stable >= self.settling["first"]:
            self.settling = None
        while self.relayouts:
            if self.leader is not None:
                self._decide()
            p = self.relayouts[0]
            self._maybe_flip(p)
            if not p["flipped"] or self._waiting(p):
                return
            with gc_paused():
                p["staging"].merge(self.runtime, p["first"])
            log.info("m3 box %r member %d: layout %d from epoch %d", self.box.name, self.member,
                     p["layout"].version, p["first"])
            self.relayouts.pop(0)
            if self.leader is not None:
                self.settling = {"change": p["change"], "first": p["first"], "layout": p["layout"]}

    def _decide(self) -> None:
        """Leader: fix the first epoch of each change, in order, once its sources copied; announce it."""
        prev = self.history[-1][0]
        for p in self.relayouts:
            if p["first"] is None:
                if not {s for _, s, _ in p["moves"]} <= set(p["copied"]):
                    return
                # no coordinator stamps with it yet: only the leader's Advance starts it
                p["first"] = max(self.leader.epoch + 1, prev + 1)
                self.leader.woken(p["first"])  # advance through it even if no input flows
                self.leader.resize(p["first"], len(p["layout"].members))  # (a change may add members)
                self._to_all(msg.flip(p["change"], p["first"]))
            prev = p["first"]

    def _maybe_flip(self, p: dict) -> None:
        """Switch to the change's layout at the start of its first epoch.

        A source does it in two calls: the first sends the final chunks and
        ends (so they leave at once), the next drops the leaving entries and
        switches.  Meanwhile it is a member that has not flipped yet (reads
        see the old layout, with its entries; nothing of ``E`` is applied),
        and dropping a million entries is off the target's wait."""
        first, me = p["first"], self.member
        if p["flipped"] or first is None or self.at[0] < first or self.epoch < first:
            return
        if any(source == me for _, source, _ in p["moves"]):
            if not p["final_sent"]:
                copy = p["copy"]
                if copy is None or not copy.done:  # not in this protocol (the leader waits for Copied); still exact
                    log.error("m3 box %r member %d: change %s flips before its copy is done; copying the rest now",
                              self.box.name, me, p["change"])
                    while self._copy_step(self.copy_at, 1 << 62):
                        pass
                    copy = p["copy"]
                with gc_paused():
                    finals = copy.final(self.runtime, self._codecs)
                for target, payload in finals.items():  # dirty keys: bounded chunks too, the last one final
                    cut = precopy.pieces(payload, precopy.COPY_STEP)
                    for i, piece in enumerate(cut, 1):
                        self._alone.append((target, msg.chunk(p["change"], me, i == len(cut), piece)))
                p["final_sent"] = self._sent_final = True
                return
            if self._sent_final:  # in this call: the final chunks leave first
                return
            with gc_paused():
                p["copy"].take_out(self.runtime, first)
            p["copy"] = None
        new = p["layout"]
        self.layout = new
        self.runtime.set_layout(new, self._plan)
        self.roles = Roles(self._plan, new)
        self.history.append((first, new))
        p["flipped"] = True

    def _switching(self) -> bool:
        """Whether this member sent its final chunks and switches in its next call (its timer is due at once)."""
        p = self.relayouts[0] if self.relayouts else None
        return p is not None and p["final_sent"] and not p["flipped"]

    def copy_deadline(self) -> float | None:
        """When a step of the copy under way here is due if no message comes first (None: no copy runs here).

        Steps follow the member's messages (:meth:`_copy_step`, at most one
        per :data:`COPY_PAUSE`) and, without any, this timer: it is set a
        pause later than the next step may run, because the dataflow takes no
        input while a timer is overdue, and a step takes a few milliseconds.
        Times are on the flow clock and in :meth:`state`, like the leader's
        timer, so replay steps where the first run did."""
        if self._switching():
            return 0.0
        return self.copy_at + COPY_PAUSE if self.copy_due() else None

    def copy_due(self) -> bool:
        """Whether this member is copying segments away."""
        p = self.relayouts[0] if self.relayouts else None
        return (p is not None and not p["flipped"] and (p["copy"] is None or not p["copy"].done)
                and any(source == self.member for _, source, _ in p["moves"]))

    def _copy_step(self, now: float, budget: int | None = None) -> bool:
        """One step of the pre-copy under way here (listing first), if one is due by ``now``: at most one per
        :data:`COPY_PAUSE`, so copying takes at most about half of the member's time."""
        if now < self.copy_at or not self.copy_due():
            return False
        self.copy_at = now + COPY_PAUSE
        p = self.relayouts[0]
        with gc_paused():
            if p["copy"] is None:
                p["copy"] = SourceCopy(self.runtime, p["layout"], p["moves"], self.member)
                p["copy"].start(self.runtime)
            copy = p["copy"]
            chunks = copy.step(self.runtime, precopy.COPY_STEP if budget is None else budget, self._codecs)
        for target, payload in chunks.items():
            self._alone.append((target, msg.chunk(p["change"], self.member, False, payload)))
        p["steps"] = p.get("steps", 0) + 1
        p.setdefault("copy_from", now)
        if copy.done:
            self._send(0, msg.copied(p["change"], self.member))
            log.info("m3 box %r member %d: change %s copied (%d keys in %d steps, %.2f s); %d dirty so far",
                     self.box.name, self.member, p["change"], sum(map(len, copy.sent.values())), p["steps"],
                     now - p["copy_from"], sum(map(len, copy.dirty.values())))
        return True

    def _forget_layouts(self, horizon: int) -> None:
        """No stable read of an epoch up to ``horizon`` any more: drop the layouts only those ran under."""
        while len(self.history) > 1 and self.history[1][0] <= horizon + 1:
            self.history.pop(0)

    def _stamp_layout(self) -> None:
        """Coordinator, at a new epoch: stamp with a change's layout from its first epoch on."""
        due = [r["layout"] for r in self.relayouts if r["first"] is not None and r["first"] <= self.epoch]
        if due and due[-1].version > self.routing:
            self.routing = due[-1].version
            self._closing = len(due[-1].members)
            self._involved = [self._involvement(self._plan, port, due[-1]) for port in range(len(self.box.inputs))]

    # -- plain data ------------------------------------------------------------------------

    def _changes_state(self) -> dict:
        codecs = self._codecs

        def entry(r: dict) -> dict:
            return {**r, "layout": r["layout"].to_dict(), "moves": [list(x) for x in r["moves"]],
                    "copy": None if r["copy"] is None else r["copy"].state(codecs),
                    "staging": r["staging"].state(codecs)}

        s = self.settling
        with gc_paused():
            return {
                "layout_now": self.layout.to_dict(),
                "history": [[first, lay.to_dict()] for first, lay in self.history],
                "requested": None if self.requested is None else self.requested.to_dict(),
                "held": list(self.held),
                "relayouts": [entry(r) for r in self.relayouts],
                "routing": self.routing, "early": list(self.early), "copy_at": self.copy_at,
                "settling": None if s is None else {**s, "layout": s["layout"].to_dict()},
                "cancelled": list(self.cancelled),
            }

    def _restore_changes(self, state: dict) -> None:
        if not state.get("layout_now"):
            return
        self.layout = Layout.from_dict(state["layout_now"])
        self.runtime.set_layout(self.layout, self._plan)
        self.roles = Roles(self._plan, self.layout)
        self.history = [(int(f), Layout.from_dict(d)) for f, d in state.get("history", [])] or [(0, self.layout)]
        self.requested = Layout.from_dict(state["requested"]) if state.get("requested") else None
        self.held = [list(w) for w in state.get("held", [])]
        self.runtime.on_write = None
        with gc_paused():
            self.relayouts = [self._entry_of(r) for r in state.get("relayouts", [])]
        self.early = [list(c) for c in state.get("early", [])]
        self.cancelled = [str(c) for c in state.get("cancelled", [])]
        self.copy_at = float(state.get("copy_at", 0.0))
        s = state.get("settling")
        self.settling = None if s is None else {**s, "layout": Layout.from_dict(s["layout"])}
        self.routing = int(state.get("routing", self.layout.version))
        routing = next((r["layout"] for r in self.relayouts if r["layout"].version == self.routing), self.layout)
        self._closing = len(routing.members)
        self._involved = [self._involvement(self._plan, port, routing) for port in range(len(self.box.inputs))]

    def _entry_of(self, r: dict) -> dict:
        p = {**r, "layout": Layout.from_dict(r["layout"]), "moves": [tuple(x) for x in r["moves"]],
             "first": None if r.get("first") is None else int(r["first"]), "final_sent": bool(r.get("final_sent")),
             "staging": Staging.of(r.get("staging", []), self._codecs), "copy": None}
        if r.get("copy") is not None:
            p["copy"] = SourceCopy(self.runtime, p["layout"], p["moves"], self.member)
            p["copy"].restore(r["copy"], self.runtime, self._codecs)
        return p

    # -- what others ask -------------------------------------------------------------------

    def member_backlog(self) -> int:
        """Versions and messages waiting at this member: while many wait, the coordinator takes no more input.

        Public: the host sums it over every member it hosts (hosting.py).
        """
        return sum(len(q) for q in self.works.values()) + len(self.held) + len(self.pushes)

    def relayout_busy(self) -> str | None:
        """Why the leader cannot start a layout change now (None: it can)."""
        if self.leader is None:
            return f"member {self.member} of box {self.box.name!r} is not its leader; ask member 0 ({self.layout.members[0]})"
        if self.pending is not None or self.latest_layout.version > self.layout.version:
            return f"box {self.box.name!r} is changing its layout already; try again when it is done"
        return None
