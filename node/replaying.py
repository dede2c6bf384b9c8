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
(receivers drop those they already have).  Output batches close at the
same records too: a snapshot closes every open batch before its marker, the
replay closes them when it meets one, and the log's ``Batching`` records say
the limits the node ran with (a log without one was written before batching:
every emit a batch).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable

from boreas.wire.tuples import RowType

from .box_state import BoxStates
from .coalescer import UNBATCHED, BatchLimits
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
                 timers: Timers, router: Router, row_type: Callable[[str, str | None], RowType | None],
                 wake: Callable[[], None] = lambda: None):
        self.states = states
        self.out = out
        self.journal = journal
        self.clock = clock
        self.lock = lock  # the box task's: records are processed between its batches
        self.timers = timers
        self.router = router
        self.row_type = row_type  # how a logged stream decodes (None: it no longer enters here)
        self.wake = wake  # the box task's: it sends what a snapshot's closing produced

    def capture(self, snapshot: int) -> dict:
        """Everything the node's boxes remember, at the log position where a marker now goes.

        The caller holds the lock, so this falls between two batches: the
        state covers exactly the log records before the marker.  Every open
        output batch closes first (at the marker's clock value, as the replay
        closes them), so no state captured holds half a batch; the box task
        sends them.  Operator ``state()`` returns fresh containers, so the
        caller may encode and write the result off the event loop while the
        boxes go on.
        """
        now = self.clock.now()
        if self.router.coalescer.held():
            self.clock.set_current(now)
            self.router.close_all()
            self.wake()
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
        live = self.router.coalescer.limits
        self.router.coalescer.limits = UNBATCHED  # until the log says otherwise (a log from before batching)
        for _, payload in entries:
            record = records.decode(payload)
            if isinstance(record, records.Batching):
                self.router.coalescer.limits = BatchLimits(record.rows, record.ms)
                continue
            async with self.lock:
                if isinstance(record, records.Marker):
                    self.clock.set_current(record.now)
                    self.router.close_all()
                elif isinstance(record, records.Tick) and record.close:
                    self.timers.close(record.close, record.now, record=False)
                elif isinstance(record, records.Tick):
                    await self.timers.fire(record.now, record=False)
                elif (row_type := self.row_type(record.stream, record.box)) is not None:  # else: no longer enters here
                    self.clock.set_current(record.now)
                    rows = row_type.decode_payload(record.rows, record.fmt)[0]
                    self.router.enter_now(record.stream, rows, record.producer, record.seq, record.box,
                                          record.digest, record.final)
                    replayed += 1
                last = max(last, record.now)
            if self.out.queued >= REPLAY_FLUSH:
                await self.out.flush()
        await self.out.flush()
        self.clock.catch_up(last)
        self.router.coalescer.limits = live  # (the journal records them as it is attached)
        return replayed
