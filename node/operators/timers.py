"""Time-driven operators: the shared clock bookkeeping, and the delay box.

Operators that hold tuples for a while (delay, aggregate timeouts, join
timeouts) remember absolute ``time.monotonic()`` instants.  Those are
meaningless on another host, so :class:`Timed` remembers the last ``now``
it saw and saves it with the state; a restore on a different clock shifts
every pending instant by the difference (see :meth:`Operator.restore`).
"""

from __future__ import annotations

import logging
from collections import deque

import pyarrow as pa

from boreas.catalog.model import Box, Schema
from boreas.wire.columns import Columns, as_rows

from .base import Emitted, Operator

log = logging.getLogger(__name__)


class Timed(Operator):
    """An operator with pending instants; subclasses implement :meth:`shift_times`."""

    _clock: float | None = None      # the last `now` seen
    _saved_clock: float | None = None  # the clock of restored state, until the first call

    def tick(self, now: float) -> None:
        """Record `now`; on the first call after a restore, rebase if the clock is another one."""
        saved = self._saved_clock
        if saved is not None:
            self._saved_clock = None
            if now < saved:
                log.info("%s %r: restored on another clock; rebasing timers by %.3fs",
                         self.box.type, self.box.name, now - saved)
                self.shift_times(now - saved)
        self._clock = now

    def shift_times(self, delta: float) -> None:
        raise NotImplementedError

    def clock_state(self) -> float | None:
        return self._clock

    def restore_clock(self, clock: float | None, now: float | None) -> None:
        if clock is None:
            self._clock = now
            return
        if now is not None:
            self.shift_times(now - clock)
            self._clock = now
        else:
            self._clock = clock
            self._saved_clock = clock


class DelayOperator(Timed):
    """``delay``: every tuple leaves ``delay-ms`` milliseconds after it arrived, in arrival order.

    A batch is queued whole with its due instant, in the form it came in: a
    batch of Arrow columns is held as its :class:`~boreas.wire.columns.Columns`
    (no row is made of it, issue 30); :meth:`poll` (and any later
    :meth:`process`) releases every batch that is due, oldest first, as one
    batch: the one batch as it came, the batches of columns concatenated into
    one (:func:`released`), or rows when rows are among them (a batch restored
    from a snapshot).  With several out streams each gets every tuple.  Its
    state holds the queued batches' rows (a snapshot is the row path's edge).
    A delay does not read a changelog (catalog/changelog.py refuses it).
    """

    takes_columns = True  # a batch of columns is held as it came

    def __init__(self, box: Box, inputs: list[Schema], outputs: list[Schema], *, columnar: bool = True):
        """``columnar=False``: Arrow batches are held as rows (the tests' and bench/columnar_rest.py's peer)."""
        super().__init__(box, inputs, outputs)
        self.check_outputs()
        self.delay = self.number("delay-ms", whole=True, low=0, required=True) / 1000.0  # type: ignore[operator]
        self._queue: deque[list] = deque()  # [due, rows or Columns]
        self._ports = range(len(outputs))
        self._columnar = columnar

    def state_entries(self) -> int:
        """Tuples held back until they are due."""
        return sum(len(rows) for _, rows in self._queue)

    def process(self, port: int, rows: list[tuple] | Columns, now: float) -> Emitted:
        self.tick(now)
        if rows:
            held = rows if isinstance(rows, Columns) and self._columnar else list(as_rows(rows))
            self._queue.append([now + self.delay, held])
        return self._release(now)

    def poll(self, now: float) -> Emitted:
        self.tick(now)
        return self._release(now)

    def next_deadline(self) -> float | None:
        return self._queue[0][0] if self._queue else None

    def _release(self, now: float) -> Emitted:
        queue = self._queue
        if not queue or queue[0][0] > now:
            return []
        due: list[list[tuple] | Columns] = []
        while queue and queue[0][0] <= now:
            due.append(queue.popleft()[1])
        out = released(due)
        return [(p, out) for p in self._ports]

    def shift_times(self, delta: float) -> None:
        for item in self._queue:
            item[0] += delta

    def state(self) -> dict:
        return {"clock": self.clock_state(),
                "queue": [[due, [list(r) for r in as_rows(rows)]] for due, rows in self._queue]}

    def restore(self, state: dict, now: float | None = None) -> None:
        self._queue = deque([float(due), [tuple(r) for r in rows]] for due, rows in state.get("queue", []))
        self.restore_clock(state.get("clock"), now)


def released(batches: list[list[tuple] | Columns]) -> list[tuple] | Columns:
    """Batches due together as the one batch a delay emits: one batch as it came; batches of columns of one
    Arrow schema as one batch of their columns (chunks concatenated, weights too when every batch has them);
    else their rows, in order."""
    if len(batches) == 1:
        return batches[0]
    if all(isinstance(b, Columns) for b in batches):
        columns: list[Columns] = batches  # type: ignore[assignment]
        schema = columns[0].batch.schema
        weighted = [c.weights is not None for c in columns]
        if all(c.batch.schema.equals(schema) for c in columns) and (all(weighted) or not any(weighted)):
            table = pa.Table.from_batches([c.batch for c in columns], schema=schema).combine_chunks()
            merged = table.to_batches()[0] if table.num_rows else columns[0].batch.slice(0, 0)
            weights = pa.concat_arrays([c.weights for c in columns]) if all(weighted) else None  # type: ignore[misc]
            return Columns(merged, weights=weights)
    return [row for b in batches for row in as_rows(b)]
