"""How batches get into a node's dataflow: checked, admitted, queued.

:class:`Intake` is the node's ``/data`` side: :meth:`Intake.accept` takes a
batch for a stream that enters here, checks its rows, and puts the good ones
in the :class:`~boreas.node.inbox.Inbox` for the box task; the answer names
the bad ones.  A batch of rows becomes columns here, once (``wire/columns.from_rows``), so what comes after
is columnar whatever the sender sent.  A publisher's batch with weights (a ``_weight`` column) is
refused whole: every stream a publisher writes is plain to the catalog
(catalog/changelog.py), so its rows would be read without them.  A batch for a box that moved on is passed after it; anything
else is refused.  A publisher's batch that does not decode is refused for good
(``Refused.retry`` false: the receiver consumes its number); one inside the
dataflow fails its connection, so its sender sends it again.  A publisher's batch waits first while the partitioned box
it enters is too far ahead (``ADMIT``, ``LAG``): the bounded inbox and this
wait are what push back on publishers.  With an input log the
acknowledgement waits until the batch's record is durable (the
:class:`~boreas.node.journal.Journal` says when).

It owns no routes and no boxes: it asks the
:class:`~boreas.node.operator_host.OperatorHost` how a stream decodes and
which member coordinates it, the :class:`~boreas.node.router.Router` about
bridged streams, and :class:`~boreas.node.outputs.Outputs` about forwards.
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from typing import Any

from boreas.catalog.changelog import WEIGHT
from boreas.wire.columns import Columns, from_rows
from boreas.wire.frames import Ack, Batch, Refused
from boreas.wire.receiver import Deferred
from boreas.wire.tuples import RowType

from .box_state import BoxStates
from .inbox import Arrival, Inbox
from .journal import Journal, payload
from .operator_host import OperatorHost
from .outputs import Outputs
from .router import Router

log = logging.getLogger("boreas.node.dataflow")  # the dataflow's records keep their logger

#: Versions a partition member may have waiting before its coordinator stops taking publishers' batches
#: (bench/cumulus.py: 256 let stable reads age 8-14 epochs under saturating load, 32 about 2-4, 8 about 1-2):
#: what waits at a member must be applied before its epoch can become stable.
ADMIT = 8
#: Epochs the coordinator's last stamped epoch may be ahead of the stable epoch it knows before it stops
#: taking publishers' batches too (a member elsewhere is behind: more input would only age stable reads).
LAG = 2


def from_publisher(producer: str) -> bool:
    """Whether a batch's producer is a publisher, not a box or a Cumulus member (whose ids hold ``~``:
    ``BoxStates``' box ids).

    >>> from_publisher("publisher-1f2e"), from_publisher("q3~0a1b2c3d4e5f")
    (True, False)
    """
    return "~" not in producer


class Unreadable(Exception):
    """A publisher's batch that does not decode: the refusal to answer it with."""

    def __init__(self, refused: Refused):
        super().__init__(refused.reason)
        self.refused = refused


class Intake:
    """Owns the way in: checking, admission and the durable acknowledgement (the inbox it fills is its own)."""

    def __init__(self, endpoint: str, inbox: Inbox, host: OperatorHost, router: Router, states: BoxStates,
                 out: Outputs, journal: Journal, progress: asyncio.Condition, counters: Counter[str]):
        self.endpoint = endpoint
        self.inbox = inbox
        self.host = host
        self.router = router
        self.states = states
        self.out = out
        self.journal = journal
        # notified by the box task after every group of batches it finished: what a held publisher waits for
        self.progress = progress
        self.counters = counters

    def row_type(self, stream: str, box: str | None = None) -> RowType | None:
        """How batches of ``stream`` arriving here (for ``box``, if named) decode; None if it does not enter
        this node.

        A batch forwarded to a box that moved back to the node writing its stream (node/mover.py declares the
        stream no input here) decodes by the stream's schema here: the one rule for taking it live, for a
        failed move's queued batch and for the log's replay of it (a record acknowledged live must replay).
        """
        found = self.host.row_types.get(stream) or self.out.forward_types.get(stream)
        if found is None:
            found = self.router.bridged_row_type(stream)
        if found is None and box and box in self.states.operators and stream in self.host.schemas:
            found = self.host.row_type(stream)
        return found

    def screen(self, batch: Batch) -> Refused | None:
        """The refusal of a publisher's or node's batch (not one forwarded to a moved box) of a stream that does not
        enter here now, before the receiver puts it in its producer's order: a gap it left would hold the
        producer's later batches, acknowledged as held, until the gap timed out and they too were refused, too late
        for the sender to send them where the stream enters now (client/held.py)."""
        return None if batch.box or self.row_type(batch.stream) is not None else self.not_entering(batch)

    def not_entering(self, batch: Batch) -> Refused:
        self.counters["refused_batches"] += 1
        return Refused(batch.stream, batch.producer, batch.seq,
                       f"stream {batch.stream!r} does not enter node {self.endpoint}")

    async def accept(self, batch: Batch) -> Ack | Refused | Deferred:
        """A batch for a stream that enters here: check its rows, queue the good ones.

        With an input log the acknowledgement is :class:`Deferred` until the
        batch's record is durable: an acknowledged batch is never lost.
        """
        row_type = self.row_type(batch.stream, batch.box)
        if batch.box and batch.box not in self.states.operators:
            relay = self.out.forwards.get(batch.stream)
            if relay is not None and relay.forward_to_box == batch.box and row_type is not None:
                try:  # it moved on: pass it after it
                    rows, _ = self._decode(batch, row_type, bytes(batch.rows))
                except Unreadable as exc:
                    return exc.refused
                await relay.send(batch.stream, rows, batch.producer, batch.seq)
                return Ack(batch.stream, batch.producer, batch.seq, len(rows))
            self.counters["refused_batches"] += 1
            return Refused(batch.stream, batch.producer, batch.seq, f"box {batch.box!r} is not on {self.endpoint}")
        if row_type is None:
            return self.not_entering(batch)
        if from_publisher(batch.producer):  # (a box's batches may share a link with member messages: never held)
            await self._admit(batch.stream)
        # the payload where the frame holds it, no copy (a frame is some hundreds of kB): decoded from there, and
        # kept by the log as it came (msgspec writes a memoryview as the bytes it shows)
        data = memoryview(batch.rows)
        try:
            rows, errors = self._decode(batch, row_type, data)  # rows, or Arrow Columns
        except Unreadable as exc:
            return exc.refused
        self.counters["arrow_batches_in" if batch.fmt else "row_batches_in"] += 1  # (/status: how batches travel)
        if from_publisher(batch.producer) and isinstance(rows, Columns) and rows.weights is not None:
            self.counters["refused_batches"] += 1  # nothing of it is taken: the catalog reads the stream as plain
            return Refused(batch.stream, batch.producer, batch.seq,
                           f"stream {batch.stream!r} is a plain input stream: a publisher's batch cannot carry "
                           f"a {WEIGHT!r} column (weights belong to a changelog, which only boxes write: "
                           "docs/dataplane.md, \"Changelog streams\")", retry=False)
        if errors:
            self.counters["refused_rows"] += len(errors)
            log.info("node %s: %d rows of %s/%d refused, first: %s", self.endpoint, len(errors),
                     batch.stream, batch.seq, errors[0])
        ack = Ack(batch.stream, batch.producer, batch.seq, len(rows), [(e.row, e.field, e.reason) for e in errors])
        coordinator = self.host.coordinators.get(batch.stream)  # handed over to another member? (cumulus §6.5)
        if coordinator is not None and from_publisher(batch.producer):
            ack.moved = coordinator.moved_to(batch.stream, batch.producer) or ""
        if not rows and not batch.final:  # (a final mark alone carries none)
            return ack
        came = rows
        if not isinstance(rows, Columns):  # rows become columns here, once: the rest of the node is columnar
            rows = from_rows(rows, row_type.schema) or rows
        # the log keeps what the box task takes (the bytes as they came, unless rows were refused or became
        # columns); made even with no log yet, which a replay's end may attach before the box task takes it
        raw = data if not errors and came is rows else payload(rows)
        if not self.journal.attached:
            await self.inbox.put(Arrival(batch.stream, rows, batch.producer, batch.seq, batch.box, raw, None,
                                         batch.digest, batch.final))
            return ack
        logged: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        await self.inbox.put(Arrival(batch.stream, rows, batch.producer, batch.seq, batch.box, raw, logged,
                                     batch.digest, batch.final))
        return Deferred(ack, self._durable(logged))

    def _decode(self, batch: Batch, row_type: RowType, data: bytes | memoryview) -> tuple[Any, list[Any]]:
        """Decode a batch's payload by the rule for batches that break decoding.

        A publisher's batch is refused for good (:class:`Unreadable`, whose
        ``Refused`` says ``retry=False``: the same bytes would break again,
        and the publisher does not re-send a refused batch, so its number is
        consumed).  A batch inside the dataflow (a box's output, Cumulus
        member traffic: ``~`` in the producer) raises as it came: the
        connection fails and its sender re-sends, since a refusal there
        would be dropped by the sending link, a silent loss.
        """
        try:
            return row_type.decode_payload(data, batch.fmt)
        except Exception as exc:
            if not from_publisher(batch.producer):
                log.error("node %s: batch %s/%d from %s does not decode: failing its connection", self.endpoint,
                          batch.stream, batch.seq, batch.producer)
                raise
            log.exception("node %s: batch %s/%d does not decode", self.endpoint, batch.stream, batch.seq)
            self.counters["refused_batches"] += 1
            raise Unreadable(Refused(batch.stream, batch.producer, batch.seq, f"batch does not decode: {exc!r}",
                                     retry=False)) from exc

    async def _admit(self, stream: str) -> None:
        """Hold a publisher's batch while the partitioned box it enters is too far ahead (``ADMIT``, ``LAG``).

        The coordinator is looked up again on every pass: an operator built
        again meanwhile (a layout or endpoint change) has a new one, and
        waiting on the old one would hold the publisher for ever.
        """
        def admitted() -> bool:
            coordinator = self.host.coordinators.get(stream)
            return coordinator is None or (coordinator.backlog() <= ADMIT
                                           and coordinator.woke - coordinator.known_stable <= LAG)

        if admitted():
            return
        async with self.progress:  # what lifts the hold is the box task's work: look again after each group
            await self.progress.wait_for(admitted)

    async def _durable(self, logged: "asyncio.Future[int]") -> None:
        await self.journal.durable(await logged)

    def arrival(self, batch: Batch) -> Arrival | None:
        """A batch queued for forwarding that is processed here after all (a move that failed), as the box
        task takes it; None if its stream no longer enters here."""
        row_type = self.row_type(batch.stream, batch.box)
        if row_type is None:
            return None
        data = bytes(batch.rows)
        try:
            rows, _ = self._decode(batch, row_type, data)
        except Unreadable:
            return None  # a publisher's batch that cannot be read: logged and counted, as if refused
        return Arrival(batch.stream, rows, batch.producer, batch.seq, batch.box, data, None,
                       batch.digest, batch.final)
