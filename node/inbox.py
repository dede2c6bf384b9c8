"""The bounded queue between a node's intake and its box task.

The :class:`~boreas.node.intake.Intake` puts each accepted batch here as an
:class:`Arrival`; the :class:`~boreas.node.box_task.BoxTask` takes them in
order.  The bound is the node's back-pressure: a full inbox makes
``accept`` wait, which holds the sender's link.  ``None`` is a wake-up:
the box task looks at its timers again (a batch processed outside it may
have set one).

>>> inbox = Inbox(1)
>>> inbox.wake(); inbox.wake()            # the second finds it full: one wake-up is enough
>>> inbox.qsize(), inbox.get_nowait(), inbox.empty()
(1, None, True)
"""

from __future__ import annotations

import asyncio
from typing import NamedTuple

from boreas.wire.columns import Columns


class Arrival(NamedTuple):
    """A batch for the box task, as it was accepted."""

    stream: str
    rows: list[tuple] | Columns
    producer: str
    seq: int
    box: str  # the one box it is for ("" for its stream's routes)
    raw: bytes | memoryview  # what the input log keeps (the rows as they came; a view into the frame)
    logged: asyncio.Future[int] | None  # told the batch's log position, for a deferred acknowledgement
    digest: int  # the publisher's digest of its rows (0: none)
    final: bool = False  # the producer's end of input (``Publisher.close(final=True)``): node/stream_ends.py


class Inbox:
    """Owns the box task's input queue (:class:`Arrival` items, ``None`` for a wake-up)."""

    def __init__(self, capacity: int):
        self._queue: asyncio.Queue[Arrival | None] = asyncio.Queue(capacity)

    async def put(self, arrival: Arrival) -> None:
        """Queue ``arrival``, waiting while the inbox is full (back-pressure)."""
        await self._queue.put(arrival)

    def wake(self) -> None:
        """Let the box task look at its timers again (unless something already waits to wake it)."""
        if not self._queue.full():
            self._queue.put_nowait(None)

    async def get(self) -> Arrival | None:
        return await self._queue.get()

    def get_nowait(self) -> Arrival | None:
        return self._queue.get_nowait()

    def empty(self) -> bool:
        return self._queue.empty()

    def qsize(self) -> int:
        return self._queue.qsize()
