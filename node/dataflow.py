"""Running a node's boxes over batches of tuples.

The dataflow is built from the local catalog alone: the slice says which
streams enter (``<input>``, with their schemas), which boxes run here, and
where each stream goes (``<subscribe>``: downstream nodes and clients).
Schemas of the streams between boxes are inferred locally with the same
rules the Head validated them with.

All batches go through one task, in arrival order: a batch is pushed through
every local box it reaches, depth first, and what leaves the node is handed
to the :class:`~boreas.wire.links.OutboundLink` of its destination.  The
input queue is bounded and links to other nodes wait when full, so a slow
consumer slows the node and, through acknowledgements, the publishers; the
node's memory stays bounded.  Links to client subscribers drop batches while
nothing is connected there (counted), so an absent client cannot stall the
network.

This module is the box task: the bounded input queue, timers, routing a
batch through the boxes and handing on what leaves.  The rest is in mixins
of :class:`Dataflow`, which owns all the state (set up in its
``__init__``): :mod:`.wiring` follows the local catalog (which boxes run,
what feeds each, bridges), :mod:`.intake` takes batches in (checks,
admission, the durable acknowledgement), and :mod:`.replaying` captures the
boxes' state for a snapshot and replays the input log after a restart.

Usage::

    flow = Dataflow("localhost:15000", token)
    flow.reconfigure(local_catalog)      # after every update XML
    await flow.start()
    reply = await flow.accept(batch)     # from the /data receiver
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import Counter

from boreas.catalog.boxtypes import BoxTypeRegistry
from boreas.catalog.model import Partition, Schema
from boreas.m3.boxtype import box_types as standard_box_types
from boreas.wire.columns import as_rows
from boreas.wire.tuples import RowType

from .box_inputs import Bridge
from .box_state import BoxStates
from .cumulus.part import PartOperator
from .intake import Intake, payload_format
from .operators import Operator
from .operators.base import InternalStreams
from .outputs import Outputs, SubscriberLimits
from .recovery import records
from .recovery.log import InputLog
from .replaying import Replaying
from .stream_ends import StreamEnds
from .wiring import Wiring

log = logging.getLogger(__name__)

#: Seconds of queued input the dataflow takes in one go before it sends, fires due timers and lets
#: other tasks (HTTP, links) run.
DRAIN = 0.02


class Dataflow(Wiring, Intake, Replaying):
    def __init__(self, endpoint: str, token: str | None, sender: str, queue_batches: int = 64,
                 box_types: BoxTypeRegistry | None = None, subscriber_limits: SubscriberLimits = SubscriberLimits()):
        self.endpoint = endpoint
        # The box types this node's slices are checked and inferred with (the node passes its own).
        self.box_types = box_types or standard_box_types()
        self.token = token
        self.sender = sender
        self.counters: Counter[str] = Counter()
        #: per stream, batches and tuples routed here (entered, or produced by a box here): ``/metrics``
        self.stream_batches: Counter[str] = Counter()
        self.stream_rows: Counter[str] = Counter()
        #: per box, batches it processed and the seconds its operator took over them
        self.box_batches: Counter[str] = Counter()
        self.box_seconds: Counter[str] = Counter()
        self.schemas: dict[str, Schema] = {}
        self.row_types: dict[str, RowType] = {}  # streams that enter this node
        self.consumers: dict[str, list[tuple[Operator, str, int]]] = {}  # stream -> (op, box, port)
        self.producer_of: dict[str, str] = {}  # stream -> the local box that writes it
        self.partitions: dict[str, Partition] = {}  # partitioned boxes, from the local catalog
        self.internal: dict[str, InternalStreams] = {}  # box -> streams between its parts on other nodes
        self.coordinators: dict[str, PartOperator] = {}  # input stream -> the partition member it feeds
        # Where what the node produces goes: links, forwards of moved boxes, the outbox.
        self.out = Outputs(endpoint, token, sender, self.counters, subscriber_limits)
        # The boxes and all their state (operators, producer ids, numbering, input positions):
        # owned there; moves, snapshots, recovery and failover go through it.
        self.state = BoxStates()
        # (stream, rows, producer, seq, box, rows as msgpack, future of its log position or None)
        self._inbox: asyncio.Queue[tuple] = asyncio.Queue(queue_batches)
        # Boxes run under this lock, so a move or a snapshot happens between batches.  What
        # leaves the node is sent after the lock is released (Outputs' outbox).
        self.lock = asyncio.Lock()
        # Notified after every group of batches (and timer firing) the box task finished: what a publisher held
        # at admission (node/intake.py) waits for, instead of polling.
        self.progress = asyncio.Condition()
        # A filter inserted or removed across two nodes switches a box's in port from one stream
        # to another that comes over the same ordered link; batches of the old stream still on
        # their way go to the port until the first batch of the new one arrives.
        self.bridges: dict[str, Bridge] = {}  # old stream -> where it still goes
        self._task: asyncio.Task | None = None
        # Durability (a node with --data-dir): every batch processed and every timer firing is
        # appended to the input log, in processing order; outputs leave once their inputs are durable.
        self.journal: InputLog | None = None
        self.clock_offset = 0.0  # flow clock = monotonic + offset; a restart continues the old clock
        self._now = 0.0  # the flow clock of the batch or timer being processed
        self.ends = StreamEnds()  # input streams whose producers have all ended (Publisher.close(final=True))

    @property
    def operators(self) -> dict[str, Operator]:
        """The running operators by box name (read them; :attr:`state` changes them)."""
        return self.state.operators

    # -- lifecycle ---------------------------------------------------------------

    async def start(self, run: bool = True) -> None:
        """Start the links, and (unless ``run`` is False: a log replay comes first) the boxes."""
        await self.out.start()
        if run:
            self.run()

    def run(self) -> None:
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
        await self.out.close()

    # -- the box task ----------------------------------------------------------------

    def wake(self) -> None:
        """Let the box task look at its timers again (a batch processed outside it may have set one)."""
        if not self._inbox.full():
            self._inbox.put_nowait(())

    async def release(self) -> None:
        """Send what is queued for sending (after :meth:`send_later`)."""
        await self._release()

    async def _run(self) -> None:
        while True:
            deadline = self._next_deadline()
            try:
                if not self._inbox.empty():  # (wait_for(get(), 0) would never take it: an overdue timer
                    item = self._inbox.get_nowait()  # must not starve the input)
                elif deadline is None:
                    item = await self._inbox.get()
                else:
                    item = await asyncio.wait_for(self._inbox.get(), max(0.0, deadline - self.now()))
            except asyncio.TimeoutError:
                await self._poll_timers()
                continue
            await self._take(item)
            # What is already queued goes with it (one group commit of the log for all of them), for up
            # to DRAIN seconds and never past a timer: an epoch's end, a window's close, a stable read or
            # a peer's acknowledgement must not wait behind a long queue.
            until = time.monotonic() + DRAIN
            while not self._inbox.empty() and time.monotonic() < until and (deadline is None or self.now() < deadline):
                await self._take(self._inbox.get_nowait())
            await self._release()
            await asyncio.sleep(0)  # let control calls (updates, /status, moves) in between batches
            if deadline is not None and self.now() >= deadline:
                await self._poll_timers()

    async def _take(self, item: tuple) -> None:
        if not item:  # a wake-up (:meth:`wake`): the timers are looked at again
            return
        stream, rows, producer, seq, box, raw, logged, digest, final = item
        self.counters["batches_in"] += 1
        self.counters["rows_in"] += len(rows)
        async with self.lock:
            self._now = now = self.now()
            if self.journal is not None:
                position = self.journal.append(records.encode(records.Taken(stream, producer, seq, box, raw, now,
                                                                            payload_format(rows), digest, final)))
                if logged is not None and not logged.done():
                    logged.set_result(position)
            await self._process(stream, rows, producer, seq, box, digest, final)

    async def _process(self, stream: str, rows: list[tuple], producer: str, seq: int, box: str,
                       digest: int = 0, final: bool = False) -> None:
        if box:
            await self._feed(box, stream, rows, (producer, seq))
        else:
            if rows:  # (a final mark alone carries none)
                await self._route(stream, rows, (producer, seq))
            self.state.processed[(stream, producer)] = seq  # the hot path: a plain store
            if digest:
                self.state.digests.record(stream, producer, seq, digest)
            if final and self.ends.end(stream, producer, [p for s, p in self.state.processed if s == stream]):
                for op, name, _ in self.consumers.get(stream, ()):  # node/stream_ends.py
                    await self.emit(name, op.end_of_input(self._now))

    async def _release(self) -> None:
        """Send what the group produced, once the inputs it came from are durable (output commit).

        A batch leaves the node only after the log records that produced it
        are on disk: a crash can then never have shown downstream an output
        that replay would not produce again, identically.
        """
        if self.journal is not None and self.out.queued:
            await self.journal.durable(self.journal.next_position - 1)
        await self.out.flush()
        async with self.progress:
            self.progress.notify_all()

    @property
    def queued(self) -> int:
        """Batches (and wake-ups) in the input queue, not yet taken."""
        return self._inbox.qsize()

    def now(self) -> float:
        """The flow clock: monotonic, and continuing across a restart (the log's clock values)."""
        return time.monotonic() + self.clock_offset

    def _next_deadline(self) -> float | None:
        deadlines = [d for op in self.state.operators.values() if (d := op.next_deadline()) is not None]
        return min(deadlines) if deadlines else None

    async def _poll_timers(self) -> None:
        async with self.lock:
            await self._fire_timers(self.now(), log_it=True)
        await self._release()

    async def _fire_timers(self, now: float, log_it: bool) -> None:
        due = [(name, op) for name, op in list(self.state.operators.items())
               if (deadline := op.next_deadline()) is not None and deadline <= now]
        if not due:
            return
        if log_it and self.journal is not None:
            self.journal.append(records.encode(records.Tick(now)))
        self._now = now
        for name, op in due:
            await self.emit(name, op.poll(now))

    async def _route(self, stream: str, rows: list[tuple], origin: tuple[str, int] | None = None) -> None:
        """Push ``rows`` of ``stream`` through every local consumer, then send it where it goes.

        A batch that entered the node is passed on under its own (producer,
        seq); a box's output is numbered as the box's.
        """
        producer, seq = origin if origin is not None else self._number(stream)
        resumable = self._resumable(stream, producer, origin is None)
        if self.bridges:
            self._cross_bridges(stream)
        self.stream_batches[stream] += 1
        self.stream_rows[stream] += len(rows)
        for op, name, port in self.consumers.get(stream, ()):
            if name in self.state.inputs:
                await self._feed(name, stream, rows, (producer, seq))
            else:
                started = time.perf_counter()
                produced = op.process_from(port, rows if op.takes_columns else as_rows(rows), self._now,
                                           (stream, producer, seq))
                self.box_seconds[name] += time.perf_counter() - started
                self.box_batches[name] += 1
                await self.emit(name, produced)
        self.out.route(stream, rows, producer, seq, resumable, consumed_here=stream in self.consumers)

    async def _feed(self, box: str, stream: str, rows: list[tuple], origin: tuple[str, int]) -> None:
        """A batch for one box that orders its own inputs (it arrived by a move)."""
        op = self.state.operators.get(box)
        if op is None or box not in self.state.inputs:
            if not self.out.relay(box, stream, rows, *origin):  # it left while this batch queued here
                self.counters["batches_for_absent_box"] += 1
                log.warning("node %s: %s/%s#%d for box %r, which is not here and not forwarded",
                            self.endpoint, stream, origin[0], origin[1], box)
            return
        ports = [port for o, name, port in self.consumers.get(stream, ()) if name == box]
        for ready in self.state.admit(box, stream, origin[0], origin[1], as_rows(rows)):
            for port in ports:
                started = time.perf_counter()
                produced = op.process(port, ready, self._now)
                self.box_seconds[box] += time.perf_counter() - started
                self.box_batches[box] += 1
                await self.emit(box, produced)

    def input_positions(self, box: str) -> list[tuple[str, str, int]]:
        """(stream, producer, next sequence) of every input batch ``box`` has yet to process."""
        return self.state.positions(box, self.producer_of)

    def _resumable(self, stream: str, producer: str, own: bool) -> bool:
        """Whether every earlier batch of ``producer`` on ``stream`` went out from this node.

        Then a route that starts again may tell its receiver to skip the
        sequence numbers that went elsewhere.  Not so for a box that moved
        here (its earlier batches left from another node, perhaps still on
        their way) or for a box's batches passing through.
        """
        if own:
            return self.producer_of.get(stream) not in self.state.inputs
        return "~" not in producer

    def _number(self, stream: str) -> tuple[str, int]:
        return self.state.number(stream, self.producer_of.get(stream), self.sender)

    async def emit(self, box: str, produced: list[tuple[int, list[tuple]]]) -> None:
        """Route what ``box`` produced, ``(port, rows)`` pairs, onto its out streams (the adopter's way in too)."""
        definition = self.state.boxes.get(box)
        if definition is None:
            return
        declared = len(definition.outputs)
        for port, rows in produced:
            if rows:
                stream = definition.outputs[port] if port < declared else self.internal[box].outputs[port - declared][0]
                await self._route(stream, rows)
