"""A box's output batches, closed at N rows or T ms of flow clock, whichever first.

Under load a box produces many small batches (a filter's share of each
publisher batch, an aggregate's few windows); each costs a frame, a link
window slot and an acknowledgement.  :class:`Coalescer` holds, per stream a
box writes, the rows produced and not yet closed and the flow clock value at
which the first of them was produced; the :class:`~boreas.node.router.Router`
numbers and routes a batch when it closes.  Every close is a function of the
input log (docs/dataplane.md, "Adaptive batching inside the cluster"), so a
replay or a failover produces the same batches under the same numbers:
nothing here reads a wall clock, and the order of streams is the order they
opened in.

:class:`BatchLimits` ``(1, 0)`` is "no batching": every emit closes at once,
as a node did before this existed (and as a log written without batching
replays).

>>> c = Coalescer(BatchLimits(rows=3, ms=2.0))
>>> c.add("O", [(1,)], now=10.0), c.add("O", [(2,)], now=10.001)
(False, False)
>>> c.next_deadline(), c.due(10.0015), c.due(10.002)
(10.002, [], ['O'])
>>> c.add("O", [(3,), (4,)], now=10.0015)     # 4 rows >= 3: it closes, as one batch
True
>>> c.take("O"), c.take("O"), c.next_deadline()
([(1,), (2,), (3,), (4,)], None, None)
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pyarrow as pa

from boreas.wire.columns import Columns

Rows = list[tuple] | Columns


@dataclass(frozen=True)
class BatchLimits:
    """When a box's output batch closes: at ``rows`` rows or ``ms`` milliseconds of flow clock after its first
    row, whichever comes first (``boreas node --batch-rows``, ``--batch-ms``)."""

    rows: int = 1
    ms: float = 0.0

    def __post_init__(self) -> None:
        if self.rows < 1 or self.ms < 0:
            raise ValueError(f"batch limits must be at least 1 row and 0 ms, not {self.rows} rows, {self.ms} ms")


#: a log written before batching existed, or a node told not to batch: every emit is a batch
UNBATCHED = BatchLimits(1, 0.0)
#: ``boreas node``'s defaults: p99 at 10,000 tuples/s stays under 5 ms (docs/dataplane.md)
DEFAULT_LIMITS = BatchLimits(1024, 1.0)


@dataclass
class _Open:
    """A batch not yet closed: its parts as emitted, its row count, when its first row came, its kind."""

    opened: float
    kind: object
    parts: list[Rows] = field(default_factory=list)
    count: int = 0


def _kind(rows: Rows) -> object:
    """Parts join only with their like: rows with rows, columns with columns of one schema and weighting."""
    if isinstance(rows, Columns):
        return (rows.batch.schema, rows.weights is not None)
    return list


def _joined(parts: list[Rows]) -> Rows:
    if len(parts) == 1:
        return parts[0]
    if isinstance(parts[0], Columns):
        batch = pa.Table.from_batches([p.batch for p in parts]).combine_chunks().to_batches()
        weights = None if parts[0].weights is None else pa.concat_arrays([p.weights for p in parts])
        return Columns(batch[0] if batch else parts[0].batch.slice(0, 0), weights=weights)
    joined: list[tuple] = []
    for part in parts:
        joined += part
    return joined


class Coalescer:
    """Owns the output batches boxes have begun and not closed: per stream, its rows and opening time."""

    def __init__(self, limits: BatchLimits = UNBATCHED):
        self.limits = limits  # changed by the replay as the log says (node/replaying.py)
        self._open: dict[str, _Open] = {}  # in the order the batches opened

    def fits(self, stream: str, rows: Rows) -> bool:
        """Whether ``rows`` may join the batch held for ``stream`` (rows join rows, columns join columns of one
        schema and weighting); if not, the caller closes the held batch first."""
        held = self._open.get(stream)
        return held is None or held.kind == _kind(rows)

    def add(self, stream: str, rows: Rows, now: float) -> bool:
        """Hold ``rows`` of ``stream`` (produced at flow clock ``now``, :meth:`fits`); True if its batch is
        now full."""
        held = self._open.get(stream)
        if held is None:
            held = self._open[stream] = _Open(now, _kind(rows))
        held.parts.append(rows)
        held.count += len(rows)
        return held.count >= self.limits.rows

    def take(self, stream: str) -> Rows | None:
        """The batch held for ``stream``, closed (None: nothing is held)."""
        held = self._open.pop(stream, None)
        return _joined(held.parts) if held is not None else None

    def due(self, now: float) -> list[str]:
        """Streams whose batch has been open ``ms`` or longer at flow clock ``now``, oldest first."""
        limit = self.limits.ms / 1000.0
        return [s for s, held in self._open.items() if held.opened + limit <= now]

    def next_deadline(self) -> float | None:
        """The flow clock value at which the oldest open batch is due (None: none is open)."""
        if not self._open:
            return None
        return min(held.opened for held in self._open.values()) + self.limits.ms / 1000.0

    def held(self) -> list[str]:
        """The streams with a batch open, oldest first."""
        return list(self._open)
