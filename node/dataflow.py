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
from collections.abc import Iterable

from boreas.catalog.boxtypes import BoxTypeRegistry
from boreas.catalog.model import Box, Catalog, Partition, Schema
from boreas.catalog.validate import check_topology, stream_schemas
from boreas.m3.boxtype import box_types as standard_box_types
from boreas.wire.frames import Ack, Batch, Refused, encode_rows
from boreas.wire.receiver import Deferred
from boreas.wire.tuples import RowType

from .box_inputs import Bridge
from .box_state import BoxStates
from .cumulus.part import PartOperator
from .operators import Operator, build_operator
from .operators.base import InternalStreams
from .outputs import Outputs
from .recovery import records
from .recovery.log import InputLog

log = logging.getLogger(__name__)

#: Versions a partition member may have waiting before its coordinator stops taking publishers' batches
#: (bench/cumulus.py: 256 let stable reads age 8-14 epochs under saturating load, 32 about 2-4, 8 about 1-2):
#: what waits at a member must be applied before its epoch can become stable.
ADMIT = 8
#: Epochs the coordinator's last stamped epoch may be ahead of the stable epoch it knows before it stops
#: taking publishers' batches too (a member elsewhere is behind: more input would only age stable reads).
LAG = 2

#: Seconds of queued input the dataflow takes in one go before it sends, fires due timers and lets
#: other tasks (HTTP, links) run.
DRAIN = 0.02



class Dataflow:
    def __init__(self, endpoint: str, token: str | None, sender: str, queue_batches: int = 64,
                 box_types: BoxTypeRegistry | None = None):
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
        self.out = Outputs(endpoint, token, sender, self.counters)
        # The boxes and all their state (operators, producer ids, numbering, input positions):
        # owned there; moves, snapshots, recovery and failover go through it.
        self.state = BoxStates()
        # (stream, rows, producer, seq, box, rows as msgpack, future of its log position or None)
        self._inbox: asyncio.Queue[tuple] = asyncio.Queue(queue_batches)
        # Boxes run under this lock, so a move or a snapshot happens between batches.  What
        # leaves the node is sent after the lock is released (Outputs' outbox).
        self.lock = asyncio.Lock()
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

    # -- the catalog decides the shape -----------------------------------------

    def reconfigure(self, catalog: Catalog, keep_state: tuple[str, ...] = ()) -> None:
        """Follow a new local catalog: keep unchanged boxes (and their state), build new ones.

        Boxes named in ``keep_state`` carry their state over even though their
        declaration changed (a box whose in port was rewired to a filter).
        """
        self.schemas = stream_schemas(catalog, self.box_types)
        changed = [name for name, part in catalog.partitions.items()
                   if self.partitions.get(name) != part and not self._runs(name, part)]
        self.partitions = dict(catalog.partitions)
        for name, why in self.state.follow(catalog.boxes, self.schemas, keep_state, self._build, changed).items():
            log.error("node %s cannot run box %r: %s", self.endpoint, name, why)
        self.internal = {name: found for name, op in self.state.operators.items()
                         if (found := op.internal_streams()) is not None}
        for streams in self.internal.values():
            self.schemas.update(streams.schemas)
        entering = [*catalog.inputs, *(s for streams in self.internal.values() for s in streams.inputs)]
        self.row_types = {s: _same_or_new(self.row_types.get(s), self.schemas[s]) for s in entering if s in self.schemas}
        for streams in self.internal.values():
            self.row_types.update(streams.decoders)
        self.coordinators = {p.stream: op for name, op in self.state.operators.items() if isinstance(op, PartOperator)
                             for p in self.state.boxes[name].inputs}
        self.producer_of = {s: name for name, box in self.state.boxes.items() for s in box.outputs}
        self.producer_of.update((s, name) for name, streams in self.internal.items() for s, _ in streams.outputs)
        self._wire_consumers()
        self.out.follow(catalog, {s: e for streams in self.internal.values() for s, e in streams.outputs})

    def _runs(self, box: str, partition: Partition) -> bool:
        """Whether box's member here already runs ``partition`` (a layout its members switched to themselves)."""
        op = self.state.operators.get(box)
        if not isinstance(op, PartOperator) or not op.follows(partition):
            return False
        op.partition = partition
        return True

    def _build(self, box: Box, inputs: list[Schema], outputs: list[Schema]) -> Operator:
        """An operator for ``box``: a member of its partition if it is partitioned, else the usual one."""
        partition = self.partitions.get(box.name)
        if partition is not None:
            return PartOperator(box, inputs, outputs, partition, self.endpoint)
        return build_operator(box, inputs, outputs)

    def refusals(self, candidate: Catalog, source: str, rules: bool = True) -> list[dict[str, object]]:
        """Why the boxes of an update (``source``: its document name) could not run here; [] if they can.

        The same topology checks the Head runs, on this node's slice (unless
        ``rules`` is False: a box moving in, whose slice is briefly both the
        stream's input and its producer until the Head re-syncs), then a
        trial build of every new or changed box: a problem found in the
        update refuses it whole, before anything changes.
        """
        report = check_topology(candidate, self.box_types)
        found: list[dict[str, object]] = [d.as_dict() for d in report.problems if d.file == source] if rules else []
        if not found:  # the rules passed; can each box really be built here?
            partitions, self.partitions = self.partitions, dict(candidate.partitions)
            try:
                reasons = self.state.check(candidate.boxes, report.stream_schemas, self._build)
            finally:
                self.partitions = partitions
            found = [{"file": source, "line": None, "path": f"box {name}", "reason": f"box {name!r}: {why}"}
                     for name, why in sorted(reasons.items())]
        return found

    def _wire_consumers(self) -> None:
        for old, bridge in list(self.bridges.items()):
            box = self.state.boxes.get(bridge.box)
            if box is None or bridge.port >= len(box.inputs) or box.inputs[bridge.port].stream == old:
                # The box is gone, or its port reads the old stream again (a filter removed before
                # any batch came through it): a bridge now would feed the port twice.
                del self.bridges[old]
        self.consumers = {}
        for name, box in self.state.boxes.items():
            for port, inport in enumerate(box.inputs):
                self.consumers.setdefault(inport.stream, []).append((self.state.operators[name], name, port))
        for name, streams in self.internal.items():
            for stream, port in streams.inputs.items():
                self.consumers.setdefault(stream, []).append((self.state.operators[name], name, port))
        for stream, bridge in self.bridges.items():
            if bridge.box in self.state.operators:
                self.consumers.setdefault(stream, []).append((self.state.operators[bridge.box], bridge.box, bridge.port))

    def bridge(self, old: str, box: str, port: int, new: str) -> None:
        """Until ``new`` first arrives, ``old`` still feeds ``box``'s ``port`` (the caller holds the lock)."""
        row_type = self.row_types.get(old) or RowType(self.schemas[old])
        self.bridges[old] = Bridge(box, port, new, row_type)
        self._wire_consumers()

    def unbridge(self, old: str) -> None:
        if self.bridges.pop(old, None) is not None:
            self._wire_consumers()

    def remove_box(self, name: str) -> None:
        """Stop routing to a box taken out (:meth:`BoxStates.take`); the caller holds the lock."""
        for stream, consumers in list(self.consumers.items()):
            self.consumers[stream] = [c for c in consumers if c[1] != name]
        self.producer_of = {s: b for s, b in self.producer_of.items() if b != name}

    async def replay(self, batch: Batch) -> None:
        """Process a batch that was queued for forwarding after all (a move that failed)."""
        row_type = self.row_type(batch.stream)
        if row_type is None:
            return
        rows, _ = row_type.decode(bytes(batch.rows))
        await self._take((batch.stream, rows, batch.producer, batch.seq, batch.box, bytes(batch.rows), None))
        await self._release()
        self.wake()

    async def deliver(self, batches: list[tuple[str, list[tuple], str, int, str]]) -> None:
        """Process batches handed over by a failover: (stream, rows, producer, seq, box or "").

        They are logged like any batch taken here; a named box gets the
        batch alone (its own positions drop what it already has).
        """
        for stream, rows, producer, seq, box in batches:
            await self._take((stream, rows, producer, seq, box, encode_rows(rows), None))
        await self._release()
        self.wake()

    def wake(self) -> None:
        """Let the box task look at its timers again (a batch processed outside it may have set one)."""
        if not self._inbox.full():
            self._inbox.put_nowait(())

    async def release(self) -> None:
        """Send what is queued for sending (after :meth:`send_later`)."""
        await self._release()

    # -- recovery -------------------------------------------------------------------

    def capture(self, snapshot: int) -> dict:
        """Everything the node's boxes remember, at the log position where a marker now goes.

        The caller holds the lock, so this falls between two batches: the
        state covers exactly the log records before the marker.  Operator
        ``state()`` returns fresh containers, so the caller may encode and
        write the result off the event loop while the boxes go on.
        """
        now = self.now()
        position = 0
        if self.journal is not None:
            position = self.journal.append(records.encode(records.Marker(snapshot, now)))
            self.journal.roll()
        return {"snapshot": snapshot, "position": position + 1 if self.journal else 0, "clock": now,
                **self.state.capture(), "unacknowledged": self.out.unacknowledged()}

    def restore_capture(self, captured: dict) -> list[str]:
        """Continue from :meth:`capture` after a restart; returns the boxes that got their state back.

        The flow clock continues from the captured one, so timers and the
        clock values in the log keep their meaning.  Outputs no receiver had
        acknowledged at the snapshot go out again first (the replay starts
        after them, so it would not produce them).
        """
        self.clock_offset = float(captured["clock"]) - time.monotonic()
        restored = self.state.restore(captured)
        self.out.resend(captured.get("unacknowledged", []))  # ahead of what the replay produces again
        return restored

    async def replay_log(self, entries: Iterable[tuple[int, bytes]]) -> int:
        """Process the log's records again, with their clock values; returns how many batches.

        Outputs go out as they did the first time (same producer and
        sequence), so receivers that already have them drop them.
        """
        replayed = 0
        last = self.now()
        for _, payload in entries:
            record = records.decode(payload)
            if isinstance(record, records.Marker):
                last = max(last, record.now)
                continue
            async with self.lock:
                if isinstance(record, records.Tick):
                    await self._fire_timers(record.now, log_it=False)
                elif (row_type := self.row_type(record.stream)) is not None:  # else: no longer enters here
                    self._now = record.now
                    rows = row_type.decode(record.rows)[0]
                    await self._process(record.stream, rows, record.producer, record.seq, record.box)
                    replayed += 1
                last = max(last, record.now)
            if self.out.queued >= 64:
                await self.out.flush()
        await self.out.flush()
        self.clock_offset = max(last - time.monotonic(), self.clock_offset)
        return replayed

    # -- data in ------------------------------------------------------------------

    def row_type(self, stream: str) -> RowType | None:
        """How batches of ``stream`` arriving here decode; None if it does not enter this node."""
        found = self.row_types.get(stream) or self.out.forward_types.get(stream)
        if found is None and stream in self.bridges:
            found = self.bridges[stream].row_type
        return found

    async def accept(self, batch: Batch) -> Ack | Refused | Deferred:
        """A batch for a stream that enters here: check its rows, queue the good ones.

        With an input log the acknowledgement is :class:`Deferred` until the
        batch's record is durable: an acknowledged batch is never lost.
        """
        row_type = self.row_type(batch.stream)
        if batch.box and batch.box not in self.state.operators:
            relay = self.out.forwards.get(batch.stream)
            if relay is not None and relay.forward_to_box == batch.box and row_type is not None:
                rows, _ = row_type.decode(bytes(batch.rows))  # it moved on: pass the batch after it
                await relay.send(batch.stream, rows, batch.producer, batch.seq)
                return Ack(batch.stream, batch.producer, batch.seq, len(rows))
            self.counters["refused_batches"] += 1
            return Refused(batch.stream, batch.producer, batch.seq, f"box {batch.box!r} is not on {self.endpoint}")
        if row_type is None:
            self.counters["refused_batches"] += 1
            return Refused(batch.stream, batch.producer, batch.seq,
                           f"stream {batch.stream!r} does not enter node {self.endpoint}")
        if "~" not in batch.producer:  # a publisher's (a box's batches may share a link with member messages:
            await self._admit(batch.stream)  # never held)
        rows, errors = row_type.decode(bytes(batch.rows))
        if errors:
            self.counters["refused_rows"] += len(errors)
            log.info("node %s: %d rows of %s/%d refused, first: %s", self.endpoint, len(errors),
                     batch.stream, batch.seq, errors[0])
        ack = Ack(batch.stream, batch.producer, batch.seq, len(rows), [(e.row, e.field, e.reason) for e in errors])
        if not rows:
            return ack
        raw = bytes(batch.rows) if not errors else encode_rows(rows)
        if self.journal is None:
            await self._inbox.put((batch.stream, rows, batch.producer, batch.seq, batch.box, raw, None))
            return ack
        logged: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        await self._inbox.put((batch.stream, rows, batch.producer, batch.seq, batch.box, raw, logged))
        return Deferred(ack, self._durable(logged))

    async def _admit(self, stream: str) -> None:
        """Hold a publisher's batch while the partitioned box it enters is too far ahead (``ADMIT``, ``LAG``).

        The coordinator is looked up again on every pass: an operator built
        again meanwhile (a layout or endpoint change) has a new one, and
        waiting on the old one would hold the publisher for ever.
        """
        while True:
            coordinator = self.coordinators.get(stream)
            if coordinator is None or (coordinator.backlog() <= ADMIT
                                       and coordinator.woke - coordinator.known_stable <= LAG):
                return
            await asyncio.sleep(0.005)

    async def _durable(self, logged: "asyncio.Future[int]") -> None:
        assert self.journal is not None
        await self.journal.durable(await logged)

    # -- processing -----------------------------------------------------------------

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
        stream, rows, producer, seq, box, raw, logged = item
        self.counters["batches_in"] += 1
        self.counters["rows_in"] += len(rows)
        async with self.lock:
            self._now = now = self.now()
            if self.journal is not None:
                position = self.journal.append(records.encode(records.Taken(stream, producer, seq, box, raw, now)))
                if logged is not None and not logged.done():
                    logged.set_result(position)
            await self._process(stream, rows, producer, seq, box)

    async def _process(self, stream: str, rows: list[tuple], producer: str, seq: int, box: str) -> None:
        if box:
            await self._feed(box, stream, rows, (producer, seq))
        else:
            await self._route(stream, rows, (producer, seq))
            self.state.processed[(stream, producer)] = seq  # the hot path: a plain store

    async def _release(self) -> None:
        """Send what the group produced, once the inputs it came from are durable (output commit).

        A batch leaves the node only after the log records that produced it
        are on disk: a crash can then never have shown downstream an output
        that replay would not produce again, identically.
        """
        if self.journal is not None and self.out.queued:
            await self.journal.durable(self.journal.next_position - 1)
        await self.out.flush()

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
                produced = op.process_from(port, rows, self._now, (stream, producer, seq))
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
        for ready in self.state.admit(box, stream, origin[0], origin[1], rows):
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


    def _cross_bridges(self, stream: str) -> None:
        """The first batch of a stream that replaced another: nothing more of the old one can come."""
        done = [old for old, bridge in self.bridges.items() if bridge.successor == stream]
        for old in done:
            log.info("node %s: %s replaced %s at %s port %d", self.endpoint, stream, old,
                     self.bridges[old].box, self.bridges[old].port)
            self.unbridge(old)


def _same_or_new(row_type: RowType | None, schema: Schema) -> RowType:
    return row_type if row_type is not None and row_type.schema == schema else RowType(schema)
