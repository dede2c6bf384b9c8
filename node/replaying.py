"""A dataflow across a restart: its state at a snapshot, and the input log replayed since.

:class:`Replayer` owns nothing of its own: it gathers each owner's part of a
snapshot and hands each its part back.  A snapshot is
:meth:`Replayer.capture`: the boxes' state (:class:`~boreas.node.box_state.BoxStates`),
the flow clock, the log position of its marker (:class:`~boreas.node.journal.Journal`)
and the outputs no receiver acknowledged yet (:class:`~boreas.node.outputs.Outputs`),
taken between two batches.  A restart (or a failover's adopter) is
:meth:`Replayer.restore_capture` then :meth:`Replayer.replay_log`: the
records after the marker are processed again, with the clock values they
had, so the boxes end exactly as they were and produce the same outputs
(receivers drop those they already have).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable

from boreas.wire.tuples import RowType

from .box_state import BoxStates
from .flow_clock import FlowClock
from .journal import Journal
from .outputs import Outputs
from .recovery import records
from .router import Router
from .timers import Timers

#: Outputs a replay lets queue before it hands them to the links.
REPLAY_FLUSH = 64


class Replayer:
    """Captures a node's dataflow for a snapshot, and brings it back from one and the log since."""

    def __init__(self, states: BoxStates, out: Outputs, journal: Journal, clock: FlowClock, lock: asyncio.Lock,
                 timers: Timers, router: Router, row_type: Callable[[str], RowType | None]):
        self.states = states
        self.out = out
        self.journal = journal
        self.clock = clock
        self.lock = lock  # the box task's: records are processed between its batches
        self.timers = timers
        self.router = router
        self.row_type = row_type  # how a logged stream decodes (None: it no longer enters here)

    def capture(self, snapshot: int) -> dict:
        """Everything the node's boxes remember, at the log position where a marker now goes.

        The caller holds the lock, so this falls between two batches: the
        state covers exactly the log records before the marker.  Operator
        ``state()`` returns fresh containers, so the caller may encode and
        write the result off the event loop while the boxes go on.
        """
        now = self.clock.now()
        position = self.journal.marker(snapshot, now) or 0
        return {"snapshot": snapshot, "position": position, "clock": now,
                **self.states.capture(), "unacknowledged": self.out.unacknowledged()}

    def restore_capture(self, captured: dict) -> list[str]:
        """Continue from :meth:`capture` after a restart; returns the boxes that got their state back.

        The flow clock continues from the captured one, so timers and the
        clock values in the log keep their meaning.  Outputs no receiver had
        acknowledged at the snapshot go out again first (the replay starts
        after them, so it would not produce them).
        """
        self.clock.continue_from(float(captured["clock"]))
        restored = self.states.restore(captured)
        self.out.resend(captured.get("unacknowledged", []))  # ahead of what the replay produces again
        return restored

    async def replay_log(self, entries: Iterable[tuple[int, bytes]]) -> int:
        """Process the log's records again, with their clock values; returns how many batches.

        Outputs go out as they did the first time (same producer and
        sequence), so receivers that already have them drop them.
        """
        replayed = 0
        last = self.clock.now()
        for _, payload in entries:
            record = records.decode(payload)
            if isinstance(record, records.Marker):
                last = max(last, record.now)
                continue
            async with self.lock:
                if isinstance(record, records.Tick):
                    await self.timers.fire(record.now, record=False)
                elif (row_type := self.row_type(record.stream)) is not None:  # else: no longer enters here
                    self.clock.set_current(record.now)
                    rows = row_type.decode_payload(record.rows, record.fmt)[0]
                    await self.router.enter(record.stream, rows, record.producer, record.seq, record.box,
                                            record.digest, record.final)
                    replayed += 1
                last = max(last, record.now)
            if self.out.queued >= REPLAY_FLUSH:
                await self.out.flush()
        await self.out.flush()
        self.clock.catch_up(last)
        return replayed
