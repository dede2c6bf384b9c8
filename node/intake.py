"""How batches get into a node's dataflow: checked, admitted, queued.

A mixin of :class:`~boreas.node.dataflow.Dataflow`, which owns the state
these methods use (the input queue, the row types of the streams that enter,
the partition coordinators, the journal) and runs what they queue.  Three
ways in:

* :meth:`Intake.accept`, from the ``/data`` receiver: a batch for a stream
  that enters here has its rows checked; the good ones are queued for the box
  task, and the answer names the bad ones.  A batch for a box that moved on
  is passed after it; anything else is refused.  A publisher's batch waits
  first while the partitioned box it enters is too far ahead (``ADMIT``,
  ``LAG``): the bounded queue and this wait are what push back on
  publishers.  With an input log the acknowledgement waits until the batch's
  record is durable.
* :meth:`Intake.replay`, a batch that was queued for forwarding after all (a
  move that failed);
* :meth:`Intake.deliver`, batches handed over by a failover.

The last two are processed at once, not queued: each batch is logged like
any taken here, and what it produced is sent before they return.
"""

from __future__ import annotations

import asyncio
import logging

from boreas.wire.columns import Columns
from boreas.wire.columns import payload as columns_payload
from boreas.wire.frames import ARROW, ROWS, Ack, Batch, Refused, encode_rows
from boreas.wire.receiver import Deferred
from boreas.wire.tuples import RowType

log = logging.getLogger("boreas.node.dataflow")  # the dataflow's records keep their logger

#: Versions a partition member may have waiting before its coordinator stops taking publishers' batches
#: (bench/cumulus.py: 256 let stable reads age 8-14 epochs under saturating load, 32 about 2-4, 8 about 1-2):
#: what waits at a member must be applied before its epoch can become stable.
ADMIT = 8
#: Epochs the coordinator's last stamped epoch may be ahead of the stable epoch it knows before it stops
#: taking publishers' batches too (a member elsewhere is behind: more input would only age stable reads).
LAG = 2


def payload(rows: list[tuple] | Columns) -> bytes:
    """What the input log keeps of a batch: its Arrow IPC bytes (columns) or its msgpack rows
    (:func:`payload_format` says which)."""
    return columns_payload(rows) if isinstance(rows, Columns) else encode_rows(rows)


def payload_format(rows: list[tuple] | Columns) -> int:
    return ARROW if isinstance(rows, Columns) else ROWS


class Intake:

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
                rows, _ = row_type.decode_payload(bytes(batch.rows), batch.fmt)  # it moved on: pass it after it
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
        rows, errors = row_type.decode_payload(bytes(batch.rows), batch.fmt)  # rows, or Arrow Columns
        if errors:
            self.counters["refused_rows"] += len(errors)
            log.info("node %s: %d rows of %s/%d refused, first: %s", self.endpoint, len(errors),
                     batch.stream, batch.seq, errors[0])
        ack = Ack(batch.stream, batch.producer, batch.seq, len(rows), [(e.row, e.field, e.reason) for e in errors])
        if not rows and not batch.final:
            return ack
        raw = bytes(batch.rows) if not errors else payload(rows)
        if self.journal is None:
            await self._inbox.put((batch.stream, rows, batch.producer, batch.seq, batch.box, raw, None, batch.digest,
                                   batch.final))
            return ack
        logged: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        await self._inbox.put((batch.stream, rows, batch.producer, batch.seq, batch.box, raw, logged, batch.digest,
                               batch.final))
        return Deferred(ack, self._durable(logged))

    async def _admit(self, stream: str) -> None:
        """Hold a publisher's batch while the partitioned box it enters is too far ahead (``ADMIT``, ``LAG``).

        The coordinator is looked up again on every pass: an operator built
        again meanwhile (a layout or endpoint change) has a new one, and
        waiting on the old one would hold the publisher for ever.
        """
        def admitted() -> bool:
            coordinator = self.coordinators.get(stream)
            return coordinator is None or (coordinator.backlog() <= ADMIT
                                           and coordinator.woke - coordinator.known_stable <= LAG)

        if admitted():
            return
        async with self.progress:  # what lifts the hold is the box task's work: look again after each group
            await self.progress.wait_for(admitted)

    async def _durable(self, logged: "asyncio.Future[int]") -> None:
        assert self.journal is not None
        await self.journal.durable(await logged)

    async def replay(self, batch: Batch) -> None:
        """Process a batch that was queued for forwarding after all (a move that failed)."""
        row_type = self.row_type(batch.stream)
        if row_type is None:
            return
        rows, _ = row_type.decode_payload(bytes(batch.rows), batch.fmt)
        await self._take((batch.stream, rows, batch.producer, batch.seq, batch.box, bytes(batch.rows), None,
                          batch.digest, batch.final))
        await self._release()
        self.wake()

    async def deliver(self, batches: list[tuple[str, list[tuple], str, int, str]]) -> None:
        """Process batches handed over by a failover: (stream, rows, producer, seq, box or "").

        They are logged like any batch taken here; a named box gets the
        batch alone (its own positions drop what it already has).
        """
        for stream, rows, producer, seq, box in batches:
            await self._take((stream, rows, producer, seq, box, payload(rows), None, 0, False))
        await self._release()
        self.wake()
