"""What one :class:`~boreas.wire.links.OutboundLink` holds: batches admitted, queued, and not yet acknowledged.

:class:`LinkQueue` is the one owner of a link's batches; the link decides
what is admitted and where a stream goes, the connection
(:mod:`.link_connection`) writes from the queue and reports
acknowledgements, and the cut-off policy (:mod:`.link_cutoff`) drops what
waits for a subscriber that fell behind.  None of them edits the queue's
containers: they call its methods.

It holds:

* the **capacity**: ``capacity`` batches may be queued or in flight; a
  batch admitted beyond it (while the receiver is down, up to
  ``down_capacity``, or handed over from another link) is *borrowed*, and
  acknowledgements pay borrowed batches back first;
* the **queue** the connection's pump writes from, and the batches **sent
  and not acknowledged**, in the order sent (re-sent after a reconnect);
* whether the link is **idle** (``flush`` waits for it);
* the **bytes** waiting, counted only for a subscriber with a byte bound;
* when the receiver last **made progress** (an acknowledgement, or the
  first batch after idle), which tells a slow subscriber from a burst.

>>> import asyncio
>>> from boreas.wire.frames import make_batch
>>> q = LinkQueue(capacity=2)
>>> b = make_batch("S", "p", 0, [(1,)], "", False, False, False)
>>> q.admit(b); q.enqueue(b); q.in_flight, q.idle.is_set()
(1, False)
>>> q.sent(q.queued.get_nowait()); list(q.unacked)
[('S', 'p', 0)]
>>> q.acknowledged(("S", "p", 0)) is b
True
>>> q.settle(); q.idle.is_set()
True
"""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict

from .frames import Batch

#: A batch's identity on a link: (stream, producer, sequence).
Key = tuple[str, str, int]


def key(batch: Batch) -> Key:
    """The (stream, producer, sequence) an acknowledgement names ``batch`` by."""
    return (batch.stream, batch.producer, batch.seq)


class LinkQueue:
    """A link's batches, its capacity and its idleness (the module docstring says what and who asks)."""

    def __init__(self, capacity: int = 64, down_capacity: int = 0, count_bytes: bool = False) -> None:
        self.capacity = asyncio.Semaphore(capacity)
        self.down_capacity = down_capacity  # batches admitted beyond capacity while the receiver is down
        self.borrowed = 0  # batches queued beyond capacity; acknowledgements pay them back first
        self.count_bytes = count_bytes
        self.buffered_bytes = 0  # rows' bytes queued or in flight (when ``count_bytes``)
        self.queued: asyncio.Queue[Batch] = asyncio.Queue()
        self.unacked: OrderedDict[Key, Batch] = OrderedDict()
        self.idle = asyncio.Event()
        self.idle.set()
        self.last_progress = time.monotonic()  # the receiver's last acknowledgement (or the first batch after idle)

    # -- capacity ---------------------------------------------------------------

    def full(self) -> bool:
        return self.capacity.locked()

    async def acquire(self) -> None:
        """Wait for a free place of the capacity."""
        await self.capacity.acquire()

    def borrow(self) -> bool:
        """Admit one batch beyond capacity while the receiver is down; False when ``down_capacity`` is used up."""
        if self.borrowed >= self.down_capacity:
            return False
        self.borrowed += 1
        return True

    def pay_back(self) -> None:
        """One batch left the link: a borrowed place first, else a place of the capacity."""
        if self.borrowed:
            self.borrowed -= 1
        else:
            self.capacity.release()

    def open_up(self) -> None:
        """The link failed for good: wake every sender waiting for room (they raise the failure) and flush."""
        self.idle.set()
        for _ in range(self.in_flight + 1024):  # more than any number of senders that can be waiting
            self.capacity.release()

    # -- batches ----------------------------------------------------------------

    def admit(self, batch: Batch) -> None:
        """``batch`` is the link's now (to be written or queued): the link is busy until it is acknowledged.

        Waiting for the receiver starts now if the link was idle, not at its
        last acknowledgement (a named subscriber is judged by how long it
        keeps batches waiting).
        """
        if self.idle.is_set():
            self.last_progress = time.monotonic()
        self.idle.clear()
        if self.count_bytes:
            self.buffered_bytes += len(batch.rows)

    def enqueue(self, batch: Batch) -> None:
        """Queue an admitted batch for the pump."""
        self.queued.put_nowait(batch)

    def sent(self, batch: Batch) -> None:
        """``batch`` is being written: it waits for its acknowledgement (progress is timed from the first)."""
        if not self.unacked:
            self.last_progress = time.monotonic()
        self.unacked[key(batch)] = batch

    def acknowledged(self, name: Key) -> Batch | None:
        """The receiver answered for ``name``: the batch (None if it was re-sent and answered, or handed over)."""
        batch = self.unacked.pop(name, None)
        if batch is None:
            return None
        self.pay_back()
        self.last_progress = time.monotonic()
        if self.count_bytes:
            self.buffered_bytes -= len(batch.rows)
        return batch

    def progressed(self) -> None:
        """The receiver is answering (a new connection): waiting is timed from now."""
        self.last_progress = time.monotonic()

    def settle(self) -> None:
        """Idle again if nothing waits, queued or unacknowledged."""
        if not self.unacked and self.queued.empty():
            self.idle.set()

    def requeue(self, batches: list[Batch]) -> None:
        """Queue batches handed over from another link, beyond capacity (they were admitted there)."""
        for batch in batches:
            self.borrowed += 1
            self.idle.clear()
            self.queued.put_nowait(batch)
            if self.count_bytes:
                self.buffered_bytes += len(batch.rows)

    def drain_unsent(self) -> list[Batch]:
        """Take back every batch not yet sent."""
        batches = []
        while not self.queued.empty():
            batches.append(self.queued.get_nowait())
            self.pay_back()
        if not self.unacked:
            self.idle.set()
        return batches

    def drop_all(self) -> list[Batch]:
        """Take every batch not acknowledged, sent or not (a subscriber cut off)."""
        dropped = self.drain_unsent() + list(self.unacked.values())
        for _ in self.unacked:
            self.pay_back()
        self.unacked.clear()
        self.idle.set()
        self.buffered_bytes = 0
        return dropped

    def take_stream(self, stream: str) -> list[Batch]:
        """Take every batch of ``stream`` not acknowledged, sent or not, in (producer, sequence) order."""
        moved = [b for b in self.unacked.values() if b.stream == stream]
        for batch in moved:
            del self.unacked[key(batch)]
        keep = []
        while not self.queued.empty():
            batch = self.queued.get_nowait()
            (moved if batch.stream == stream else keep).append(batch)
        for batch in keep:
            self.queued.put_nowait(batch)
        for _ in moved:
            self.pay_back()
        if self.count_bytes:
            self.buffered_bytes -= sum(len(batch.rows) for batch in moved)
        moved.sort(key=lambda b: (b.producer, b.seq))
        self.settle()
        return moved

    def pending(self) -> list[Batch]:
        """Every batch not acknowledged yet, sent or still queued, in the order they were sent (left in place)."""
        queued = []
        while not self.queued.empty():  # no await in between: the queue is the same afterwards
            queued.append(self.queued.get_nowait())
        for batch in queued:
            self.queued.put_nowait(batch)
        return [*self.unacked.values(), *queued]

    @property
    def in_flight(self) -> int:
        return self.queued.qsize() + len(self.unacked)

    def stalled_for(self) -> float:
        """Seconds sent batches have waited with no acknowledgement (0 while none waits)."""
        if not self.unacked:
            return 0.0
        return time.monotonic() - self.last_progress

    def waited(self) -> float:
        """Seconds the link has been busy without progress (0 while idle)."""
        return 0.0 if self.idle.is_set() else time.monotonic() - self.last_progress
