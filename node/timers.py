"""The boxes' timers: when the next one is due, and firing those that are.

Operators keep their own deadlines (a window's close, a delay's release, an
epoch's end, a stable read); :class:`Timers` asks them
(:meth:`Timers.next_deadline`) for the box task's wait, and fires the due
ones at one flow clock value (:meth:`Timers.fire`), recorded in the input
log as a ``Tick`` so a replay fires them at the same time again and every
output comes out the same.
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

    def next_deadline(self) -> float | None:
        """The flow clock value the earliest timer of any box is due at (None: no timer is set)."""
        deadlines = [d for op in self.states.operators.values() if (d := op.next_deadline()) is not None]
        return min(deadlines) if deadlines else None

    async def fire(self, now: float, record: bool) -> None:
        """Fire every timer due at ``now`` (the caller holds the dataflow lock); with ``record``, log a
        ``Tick`` first (a replay passes the logged one's time and records nothing)."""
        due = [(name, op) for name, op in list(self.states.operators.items())
               if (deadline := op.next_deadline()) is not None and deadline <= now]
        if not due:
            return
        if record:
            self.journal.tick(now)
        self.clock.set_current(now)
        for name, op in due:
            await self.router.emit(name, op.poll(now))
