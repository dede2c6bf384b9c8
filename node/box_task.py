"""The box task: the one task that runs a node's boxes, and the lock they run under.

All batches go through one task, in arrival order: it takes what the
:class:`~boreas.node.inbox.Inbox` holds for up to ``DRAIN`` seconds, records
each batch in the input log (:class:`~boreas.node.journal.Journal`) and
hands it to the :class:`~boreas.node.router.Router`, which pushes it through
every local box it reaches; then it waits once for the group's records to
be durable and sends what the group produced (output commit), and fires
the timers that are due (:class:`~boreas.node.timers.Timers`).  A group
that leaves the inbox empty closes the boxes' open output batches first
(:meth:`BoxTask.close_idle`): batching waits only while input waits.

:class:`BoxTask` owns that task (started by :meth:`BoxTask.start`, ended by
:meth:`BoxTask.close`; one that dies is logged critical and the node stops
processing batches rather than go on half-applied), the lock boxes run
under (a move, a snapshot, an update or a filter insertion happens between
two batches, holding it) and ``progress``, the condition notified after
every group (what a publisher held at admission waits for).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import Counter

from .flow_clock import FlowClock
from .inbox import Arrival, Inbox
from .journal import Journal
from .outputs import Outputs
from .router import Router
from .timers import Timers

log = logging.getLogger("boreas.node.dataflow")  # the dataflow's records keep their logger

#: Seconds of queued input the dataflow takes in one go before it sends, fires due timers and lets
#: other tasks (HTTP, links) run.
DRAIN = 0.02


class BoxTask:
    """Owns the task that runs the boxes, the lock they run under, and the progress it announces."""

    def __init__(self, endpoint: str, inbox: Inbox, router: Router, timers: Timers, journal: Journal,
                 clock: FlowClock, out: Outputs, counters: Counter[str]):
        self.endpoint = endpoint
        self.inbox = inbox
        self.router = router
        self.timers = timers
        self.journal = journal
        self.clock = clock
        self.out = out
        self.counters = counters
        # Boxes run under this lock, so a move or a snapshot happens between batches.  What
        # leaves the node is sent after the lock is released (Outputs' outbox).
        self.lock = asyncio.Lock()
        # Notified after every group of batches (and timer firing) the box task finished: what a publisher held
        # at admission (node/intake.py) waits for, instead of polling.
        self.progress = asyncio.Condition()
        self._task: asyncio.Task | None = None

    def start(self) -> None:
        """Start the one task that runs the boxes; it dying is logged, never silent."""
        self._task = asyncio.create_task(self._run(), name=f"dataflow {self.endpoint}")
        self._task.add_done_callback(self._ended)

    def _ended(self, task: asyncio.Task) -> None:
        if not task.cancelled() and task.exception() is not None:
            log.critical("node %s: the dataflow task died; no more batches are processed",
                         self.endpoint, exc_info=task.exception())

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def _run(self) -> None:
        inbox = self.inbox
        while True:
            deadline = self.timers.next_deadline()
            try:
                if not inbox.empty():  # (wait_for(get(), 0) would never take it: an overdue timer
                    item = inbox.get_nowait()  # must not starve the input)
                elif deadline is None:
                    item = await inbox.get()
                else:
                    item = await asyncio.wait_for(inbox.get(), max(0.0, deadline - self.clock.now()))
            except asyncio.TimeoutError:
                await self._poll_timers()
                continue
            await self.take(item)
            # What is already queued goes with it (one group commit of the log for all of them), for up
            # to DRAIN seconds and never past a timer: an epoch's end, a window's close, a stable read or
            # a peer's acknowledgement must not wait behind a long queue.
            # (An open batch's deadline does not cut the group short: each batch taken closes what is due.)
            until, timer = time.monotonic() + DRAIN, self.timers.next_deadline(batches=False)
            while not inbox.empty() and time.monotonic() < until and (timer is None or self.clock.now() < timer):
                await self.take(inbox.get_nowait())
            if inbox.empty():
                await self.close_idle()
            await self.release()
            await asyncio.sleep(0)  # let control calls (updates, /status, moves) in between batches
            if deadline is not None and self.clock.now() >= deadline:
                await self._poll_timers()

    async def take(self, item: Arrival | None) -> None:
        """Process one arrival: record it in the input log, then push it through the boxes (under the lock)."""
        if item is None:  # a wake-up (:meth:`Inbox.wake`): the timers are looked at again
            return
        stream, rows, producer, seq, box, raw, logged, digest, final = item
        self.counters["batches_in"] += 1
        self.counters["rows_in"] += len(rows)
        async with self.lock:
            now = self.clock.now()
            self.clock.set_current(now)
            position = self.journal.taken(stream, rows, producer, seq, box, raw, now, digest, final)
            if position is not None and logged is not None and not logged.done():
                logged.set_result(position)
            self.router.enter_now(stream, rows, producer, seq, box, digest, final)

    async def close_idle(self) -> None:
        """Nothing waits to be taken: close every open output batch now (each round logged as a ``Tick``
        naming its streams, so a replay closes them at the same record).

        Batches grow only while input queues up: an idle node sends what its
        boxes produced at once, a busy one waits for ``N`` rows or ``T`` ms.
        """
        async with self.lock:
            self.timers.close_all(self.clock.now(), record=True)

    async def take_now(self, arrivals: list[Arrival]) -> None:
        """Process ``arrivals`` at once, not queued (a failed move's batches, a failover's), and send what
        they produced before returning."""
        for arrival in arrivals:
            await self.take(arrival)
        await self.release()
        self.inbox.wake()

    async def release(self) -> None:
        """Send what the group produced, once the inputs it came from are durable (output commit).

        A batch leaves the node only after the log records that produced it
        are on disk: a crash can then never have shown downstream an output
        that replay would not produce again, identically.
        """
        if self.out.queued:
            await self.journal.commit()
        await self.out.flush()
        async with self.progress:
            self.progress.notify_all()

    async def _poll_timers(self) -> None:
        async with self.lock:
            await self.timers.fire(self.clock.now(), record=True)
        await self.release()
