"""Layout changes on a member of a partitioned box: moves, splits, rebalances while events flow (docs/cumulus.md §6).

A mixin of :class:`~boreas.node.cumulus.part.PartOperator`, which owns the
state (its ``relayouts`` queue, ``routing``, ``history``, ``held``, the
layout and runtime); this module holds the protocol's steps:

1. the leader takes a request (``x``, from ``POST /segments/{box}/relayout``),
   fixes the first epoch ``E`` of the new layout (one no coordinator stamps
   with yet) and announces ``Relayout`` to every member before the Advance
   that starts ``E``;
2. each coordinator stamps with the new layout from ``E`` on;
3. each member, once it applied everything before ``E`` and its Advance(E)
   arrived, *flips*: it sends the entries of segments leaving it (as of the
   end of ``E - 1``) in chunks, switches its layout, and applies nothing of
   ``E`` until the chunks of segments coming to it are in.  Moved entries are
   recorded as changes of epoch ``E``, so stable reads of earlier epochs
   still find them where they were.

Changes announced while one is under way wait their turn on every member.
"""

from __future__ import annotations

import logging

from boreas.catalog.model import Partition
from boreas.m3.cumulus import Layout, relayout
from boreas.m3.cumulus.roles import Roles

from ..gcpause import gc_paused
from . import messages as msg

log = logging.getLogger(__name__)


class LayoutChanges:

    def _gated(self, epoch: int) -> bool:
        """Whether Work of ``epoch`` must wait: its epoch has not begun here (the Advance that starts it,
        and every layout change decided before it, has not arrived), or segments are still moving in."""
        if epoch > self.epoch:
            return True
        p = self.pending
        return p is not None and epoch >= p["first"] and (not p["flipped"] or bool(p["waiting"]))

    def _release_held(self) -> None:
        if self.held:
            ready = [w for w in self.held if not self._gated(w[1])]
            if ready:
                self.held = [w for w in self.held if self._gated(w[1])]
                for work in ready:
                    self._write(work, {})

    def _request(self, m: list) -> None:
        """Leader: a move, split or rebalance asked for (checked by the API first); decide when it happens."""
        if self.leader is None or self.relayouts:
            log.error("m3 box %r member %d: layout change %s ignored (%s)", self.box.name, self.member, m[1],
                      "not the leader" if self.leader is None else "another change is under way")
            return
        new = Layout.from_dict(m[2])
        if new.version != self.layout.version + 1:
            log.error("m3 box %r: layout change %s to version %d ignored (the layout is at %d)", self.box.name,
                      m[1], new.version, self.layout.version)
            return
        first = self.leader.epoch + 1  # no coordinator stamps with it yet: only the leader's Advance starts it
        self.leader.woken(first)  # advance through the change's first epoch even if no input flows
        self.requested = new
        moves = [list(x) for x in relayout.moves(self.layout, new)]
        self._to_all(msg.relayout(m[1], new.to_dict(), first, moves))

    @property
    def pending(self) -> dict | None:
        """The layout change under way on this member (later ones wait their turn)."""
        return self.relayouts[0] if self.relayouts else None

    def _relayout(self, m: list) -> None:
        self.relayouts.append({"change": m[1], "layout": Layout.from_dict(m[2]), "first": int(m[3]),
                               "moves": [tuple(x) for x in m[4]], "flipped": False, "waiting": [], "chunks": []})

    def _maybe_flip(self) -> None:
        p = self.pending
        if p is None or p["flipped"] or self.at[0] < p["first"] or self.epoch < p["first"]:
            return
        new, first, me = p["layout"], p["first"], self.member
        enc = self._encode_key
        for seg_id, source, target in p["moves"]:
            if source != me:
                continue
            seg = next(s for s in new.segments if s.id == seg_id)
            with gc_paused():  # a large segment: millions of new live containers, no garbage
                entries = [[name, enc(name, key), value] for name, key, value in self.runtime.extract(seg.lo, seg.hi, first)]
            step = msg.CHUNK_ENTRIES
            for start in range(0, max(1, len(entries)), step):
                final = start + step >= len(entries)
                self._alone.append((target, msg.chunk(p["change"], seg_id, final, entries[start:start + step])))
        self.layout = new
        self.runtime.set_layout(new, self._plan)
        self.roles = Roles(self._plan, new)
        self.history.append((first, new))
        p["flipped"] = True
        p["waiting"] = sorted(seg for seg, _, target in p["moves"] if target == me)
        for early in p.pop("chunks"):
            self._chunk(early)
        self._maybe_finish()

    def _chunk(self, m: list) -> None:
        p = next((r for r in self.relayouts if r["change"] == m[1]), None)
        if p is None:
            log.error("m3 box %r member %d: a chunk of layout change %s came outside it; dropped",
                      self.box.name, self.member, m[1])
            return
        if not p["flipped"]:  # installing now would mix it with versions of the old layout
            p["chunks"].append(m)
            return
        dec = self._decode_key
        with gc_paused():
            self.runtime.install(((name, dec(name, key), value) for name, key, value in m[4]), p["first"])
        if m[3] and m[2] in p["waiting"]:
            p["waiting"].remove(m[2])
        self._maybe_finish()

    def _maybe_finish(self) -> None:
        p = self.pending
        if p is not None and p["flipped"] and not p["waiting"]:
            log.info("m3 box %r member %d: layout %d from epoch %d", self.box.name, self.member,
                     p["layout"].version, p["first"])
            self.relayouts.pop(0)

    def follows(self, partition: Partition) -> bool:
        """Whether ``partition`` is this box's as it runs here: the same incarnation and members, a layout
        it already switched to (the catalog learns a relayout after the members made it)."""
        mine = self.partition
        return (partition.id == mine.id and partition.nodes == mine.nodes and partition.epoch_ms == mine.epoch_ms
                and partition.maps == mine.maps and partition.layout <= self.layout.version)

    def layout_at(self, epoch: int) -> Layout:
        """The layout versions of ``epoch`` ran under."""
        for first, lay in reversed(self.history):
            if first <= epoch:
                return lay
        return self.history[0][1]

    def backlog(self) -> int:
        """Versions and messages waiting here: while many wait, the coordinator takes no more input."""
        return sum(len(q) for q in self.works.values()) + len(self.held) + len(self.pushes)

    def relayout_busy(self) -> str | None:
        """Why the leader cannot start a layout change now (None: it can)."""
        if self.leader is None:
            return f"member {self.member} of box {self.box.name!r} is not its leader; ask member 0 ({self.layout.members[0]})"
        if self.relayouts or (self.requested is not None and self.requested.version > self.layout.version):
            return f"box {self.box.name!r} is changing its layout already; try again when it is done"
        return None
