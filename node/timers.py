"""The boxes' timers: when the next one is due, and firing those that are.

Operators keep their own deadlines (a window's close, a delay's release, an
epoch's end, a stable read); :class:`Timers` asks them
(:meth:`Timers.next_deadline`) for the box task's wait, and fires the due
ones at one flow clock value (:meth:`Timers.fire`), recorded in the input
log as a ``Tick`` so a replay fires them at the same time again and every
output comes out the same.  A box's output batch that is due (``T`` ms of
flow clock open, node/coalescer.py) is a timer too: its close is logged as a
``Tick`` and replayed as one.  A ``Tick`` that names streams
(:meth:`Timers.close`, a move's detach) closes those and fires nothing.
"""

from __future__ import annotations

from .box_state import BoxStates
from .flow_clock import FlowClock
from .journal import Journal
from .router import Router


class Timers:
    """Fires the operators' timers; the deadlines are the operators' own, the firing time the flow clock's."""

    def __init__(self, states: BoxStates, router: Router, journal: Journal, clock: FlowClock):
        self.states = states
        self.router = router
        self.journal = journal
        self.clock = clock

    def next_deadline(self, batches: bool = True) -> float | None:
        """The flow clock value the earliest timer of any box, or (with ``batches``) its oldest open batch, is
        due at (None: no timer is set and no batch is open)."""
        deadlines = [d for op in self.states.operators.values() if (d := op.next_deadline()) is not None]
        batch = self.router.batch_deadline() if batches else None
        if batch is not None:
            deadlines.append(batch)
        return min(deadlines) if deadlines else None

    async def fire(self, now: float, record: bool) -> None:
        """Fire every timer due at ``now`` (the caller holds the dataflow lock); with ``record``, log a
        ``Tick`` first (a replay passes the logged one's time and records nothing)."""
        due = [(name, op) for name, op in list(self.states.operators.items())
               if (deadline := op.next_deadline()) is not None and deadline <= now]
        if not due and not self.router.batches_due(now):
            return
        if record:
            self.journal.tick(now)
        self.clock.set_current(now)
        for name, op in due:
            self.router.produce(name, op.poll(now))
        self.router.close_due(now)

    def close(self, streams: list[str], now: float, record: bool) -> None:
        """Close the batches open on ``streams`` at ``now`` whatever their age (the caller holds the lock),
        logged (with ``record``) as a ``Tick`` naming them, so a replay closes them at the same record."""
        if not streams:
            return
        if record:
            self.journal.tick(now, streams)
        self.clock.set_current(now)
        self.router.close_streams(streams)

    def close_all(self, now: float, record: bool) -> None:
        """Close every open batch at ``now``, and what closing them produces, one logged round at a time
        (an idle box task, an update about to change the boxes)."""
        while held := self.router.coalescer.held():
            self.close(held, now, record)
