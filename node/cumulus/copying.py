"""A source member's side of a layout change: its pre-copy in steps, then its final chunks (docs/cumulus.md §6.2).

:class:`Copier` owns when the next step of the copy under way on this
member is due (``copy_at``, on the flow clock and in the member's state, so
replay steps where the first run did) and whether the final chunks left in
the current run.  It works on the first change of the member's queue
(:class:`~.change.Change`, whose copy and flags it advances); the layout
change (:mod:`~boreas.node.cumulus.relayouts`) asks it when to step and
when the source may switch.  Chunks leave in frames of their own.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from boreas.m3.cumulus.member import MemberRuntime

from ..gcpause import gc_paused
from . import messages as msg
from . import precopy
from .change import Change
from .mailbox import Mailbox
from .native_copy import source_copy
from .precopy import Codecs

log = logging.getLogger(__name__)

#: Seconds from one step of a copy to the next (flow clock); a step of :data:`~.precopy.COPY_STEP` keys takes
#: about 5 ms, so the box keeps at least half of its time, and a segment of a million entries is copied in ~0.5 s.
COPY_PAUSE = 0.007


class Copier:
    """The copy steps and final chunks of member ``me`` as a source (``box``: its name, for the log)."""

    def __init__(self, box: str, me: int, runtime: MemberRuntime, mailbox: Mailbox):
        self.box, self.me, self.runtime, self.mailbox = box, me, runtime, mailbox
        self.codecs = Codecs(runtime.store)
        self.copy_at = 0.0  # flow-clock time the next copy step is due (while a copy runs)
        self.sent_final = False  # final chunks were sent in this run (the source switches in the next)
        # what the box's member puts in its final chunks for a target to start from (None: nothing)
        self.carry: Callable[[], dict] | None = None

    def begin_run(self) -> None:
        """A run of the member begins: final chunks sent in an earlier run have left."""
        self.sent_final = False

    def restart_clock(self, now: float) -> None:
        """A copy under way continues on this node's clock (a guest taken over: its clock was another's)."""
        if self.copy_at:
            self.copy_at = now

    def due(self, p: Change | None) -> bool:
        """Whether this member is copying segments away for change ``p`` (the first of its queue)."""
        return (p is not None and not p.flipped and (p.copy is None or not p.copy.done) and p.moves_from(self.me))

    def switching(self, p: Change | None) -> bool:
        """Whether this member sent its final chunks and switches in its next run (its timer is due at once)."""
        return p is not None and p.final_sent and not p.flipped

    def deadline(self, p: Change | None) -> float | None:
        """When a step of the copy under way here is due if no message comes first (None: no copy runs here).

        Steps follow the member's messages (:meth:`step`, at most one per
        :data:`COPY_PAUSE`) and, without any, this timer: it is set a pause
        later than the next step may run, because the dataflow takes no input
        while a timer is overdue, and a step takes a few milliseconds."""
        if self.switching(p):
            return 0.0
        return self.copy_at + COPY_PAUSE if self.due(p) else None

    def step(self, p: Change | None, now: float, budget: int | None = None) -> bool:
        """One step of the pre-copy of ``p``, if one is due by ``now``: at most one per :data:`COPY_PAUSE`, so
        copying takes at most about half of the member's time."""
        if p is None or now < self.copy_at or not self.due(p):
            return False
        self.copy_at = now + COPY_PAUSE
        with gc_paused():
            if p.copy is None:
                p.copy = source_copy(self.runtime, p.layout, p.moves, self.me)
                p.copy.start(self.runtime)
            copy = p.copy
            chunks = copy.step(self.runtime, precopy.COPY_STEP if budget is None else budget)
            sends = [(target, precopy.chunk_entries(payload, self.runtime)) for target, payload in chunks.items()]
        for target, entries in sends:
            self.mailbox.send_alone(target, msg.chunk(p.change, self.me, False, entries))
        p.steps += 1
        if p.copy_from is None:
            p.copy_from = now
        if copy.done:
            self.mailbox.send(0, msg.copied(p.change, self.me))
            log.info("m3 box %r member %d: change %s copied (%d keys in %d steps, %.2f s); %d dirty so far",
                     self.box, self.me, p.change, copy.counts()[0], p.steps, now - p.copy_from, copy.counts()[1])
        return True

    def flip(self, p: Change) -> bool:
        """A source at the first epoch of ``p``: whether it may switch now.

        It does so in two runs: the first sends the final chunks and ends
        (so they leave at once), the next drops the leaving entries.
        Meanwhile it is a member that has not flipped yet (reads see the old
        layout, with its entries; nothing of the new epoch is applied), and
        dropping a million entries is off the target's wait."""
        if not p.final_sent:
            copy = p.copy
            if copy is None or not copy.done:  # not in this protocol (the leader waits for Copied); still exact
                log.error("m3 box %r member %d: change %s flips before its copy is done; copying the rest now",
                          self.box, self.me, p.change)
                while self.step(p, self.copy_at, 1 << 62):
                    pass
                copy = p.copy
            with gc_paused():
                finals = copy.final(self.runtime)
            carried = None if self.carry is None else self.carry()  # (at the first epoch: every Close before passed)
            for target, payload in finals.items():  # dirty keys: bounded chunks too, the last one final
                cut = precopy.pieces(payload, precopy.COPY_STEP)
                for i, piece in enumerate(cut, 1):
                    final = i == len(cut)
                    with gc_paused():
                        entries = precopy.chunk_entries(piece, self.runtime)
                    self.mailbox.send_alone(target, msg.chunk(p.change, self.me, final, entries,
                                                              carried if final else None))
            p.final_sent = self.sent_final = True
            return False
        if self.sent_final:  # in this run: the final chunks leave first
            return False
        with gc_paused():
            p.copy.take_out(self.runtime, p.first)
        p.copy = None
        return True
