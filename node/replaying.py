"""A dataflow across a restart: its state at a snapshot, and the input log replayed since.

A mixin of :class:`~boreas.node.dataflow.Dataflow`, which owns the state
(the boxes' :class:`~boreas.node.box_state.BoxStates`, the journal, the flow
clock) and the box task these methods share the lock with.  A snapshot is
:meth:`Replaying.capture`: the boxes' state between two batches, at the log
position where its marker goes.  A restart (or a failover's adopter) is
:meth:`Replaying.restore_capture` then :meth:`Replaying.replay_log`: the
records after the marker are processed again, with the clock values they
had, so the boxes end exactly as they were and produce the same outputs
(receivers drop those they already have).
"""

from __future__ import annotations

import time
from collections.abc import Iterable

from .recovery import records


class Replaying:

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
                    rows = row_type.decode_payload(record.rows, record.fmt)[0]
                    await self._process(record.stream, rows, record.producer, record.seq, record.box, record.digest,
                                        record.final)
                    replayed += 1
                last = max(last, record.now)
            if self.out.queued >= 64:
                await self.out.flush()
        await self.out.flush()
        self.clock_offset = max(last - time.monotonic(), self.clock_offset)
        return replayed
