"""The dataflow's side of the input log: what it records, and when its outputs may leave.

A durable node (``--data-dir``) appends one record per batch its box task
takes (``Taken``), one per timer firing or batch closed off the beat
(``Tick``), one per snapshot (``Marker``) and, at its start and the head of
every segment, the output batch limits it runs with (``Batching``), in
processing order, with the flow clock value the boxes saw
(docs/architecture.md, "The log is the processing order").  Output commit:
what a group of batches produced is sent only once their records are
durable, and a publisher's acknowledgement waits for its batch's record.

:class:`Journal` is the one owner of that log for the dataflow: the box
task, the timers, the intake and the replayer record and wait through it.
A node without a data dir, or one still replaying its log, has no log
attached: nothing is recorded and nothing waits.

>>> journal = Journal(BatchLimits(1024, 1.0))
>>> journal.attached, journal.tick(1.0), journal.marker(7, 1.0)
(False, None, None)
"""

from __future__ import annotations

from boreas.wire.columns import Columns
from boreas.wire.columns import payload as columns_payload
from boreas.wire.frames import ARROW, ROWS, encode_rows

from .coalescer import UNBATCHED, BatchLimits
from .recovery import records
from .recovery.log import InputLog


def payload(rows: list[tuple] | Columns) -> bytes:
    """What the input log keeps of a batch: its Arrow IPC bytes (columns) or its msgpack rows
    (:func:`payload_format` says which)."""
    return columns_payload(rows) if isinstance(rows, Columns) else encode_rows(rows)


def payload_format(rows: list[tuple] | Columns) -> int:
    return ARROW if isinstance(rows, Columns) else ROWS


class Journal:
    """Owns the dataflow's :class:`~boreas.node.recovery.log.InputLog` (None: nothing is recorded)."""

    def __init__(self, limits: BatchLimits = UNBATCHED) -> None:
        self._log: InputLog | None = None
        self.limits = limits  # the node's output batch limits, recorded so a replay batches alike

    def attach(self, log: InputLog) -> None:
        """Record from now on (a durable node, once its replay of this same log is done), starting with the
        batch limits the node now runs with."""
        self._log = log
        self._batching()

    def _batching(self) -> None:
        assert self._log is not None
        self._log.append(records.encode(records.Batching(self.limits.rows, self.limits.ms)))

    @property
    def attached(self) -> bool:
        return self._log is not None

    def taken(self, stream: str, rows: list[tuple] | Columns, producer: str, seq: int, box: str, raw: bytes,
              now: float, digest: int, final: bool = False) -> int | None:
        """Record a batch the box task takes; its log position (None: not recorded)."""
        if self._log is None:
            return None
        return self._log.append(records.encode(records.Taken(stream, producer, seq, box, raw, now,
                                                             payload_format(rows), digest, final)))

    def tick(self, now: float, close: list[str] | None = None) -> None:
        """Record that the timers due at ``now`` fired (with ``close``: that those streams' batches closed)."""
        if self._log is not None:
            self._log.append(records.encode(records.Tick(now, close or [])))

    def marker(self, snapshot: int, now: float) -> int | None:
        """Record snapshot ``snapshot``'s marker and roll to a new segment; the log position where replay
        starts for that snapshot (None: not recorded)."""
        if self._log is None:
            return None
        position = self._log.append(records.encode(records.Marker(snapshot, now)))
        self._log.roll()
        self._batching()  # a replay from this snapshot starts here
        return position + 1

    async def durable(self, position: int) -> None:
        """Wait until the record at ``position`` is on disk."""
        if self._log is not None:
            await self._log.durable(position)

    async def commit(self) -> None:
        """Wait until everything recorded so far is on disk (before the outputs it produced leave)."""
        if self._log is not None:
            await self._log.durable(self._log.next_position - 1)
