"""A publisher's batches that its entry node refused because the stream does not enter there any more.

Why: the node a publisher sends to can stop taking the stream while batches
are in flight: a partitioned box's grown coordinator emptied and retired
(docs/cumulus.md §6.5), a deployment that moved where the stream enters.
The node answers each such batch ``Refused(retry=True)`` ("the stream may
enter here later": it did not take it).  Counting that as the publisher's
final answer dropped the batch and failed a healthy publisher with
``PublishRefused``.  The batches are held here instead, in order, until the
publisher has asked the Head where the stream enters now: they are then
queued on the link to that node ahead of what the old link still holds
(:meth:`Publisher._reroute`), or, if the Head names no other node, refused
for good with the node's reason.  ``flush`` waits until nothing is held.

>>> from boreas.wire.frames import Batch
>>> held = Held()
>>> held.empty.is_set()
True
>>> held.hold(Batch("S", "p", 8, b""), "stream 'S' does not enter node a")
>>> held.hold(Batch("S", "p", 7, b""), "stream 'S' does not enter node a")
>>> held.empty.is_set(), [b.seq for b in held.take()], held.empty.is_set()
(False, [7, 8], True)
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from boreas.wire.frames import Batch


@dataclass
class Held:
    """Owns the held batches and the reason their node gave; :attr:`empty` is set while none is held."""

    batches: list[Batch] = field(default_factory=list)
    reason: str = ""
    empty: asyncio.Event = field(default_factory=asyncio.Event)

    def __post_init__(self) -> None:
        if not self.batches:
            self.empty.set()

    def __bool__(self) -> bool:
        return bool(self.batches)

    def hold(self, batch: Batch, reason: str) -> None:
        self.batches.append(batch)
        self.reason = reason
        self.empty.clear()

    def take(self) -> list[Batch]:
        """Every held batch, in sequence order; none is held after."""
        batches, self.batches = sorted(self.batches, key=lambda b: b.seq), []
        self.empty.set()
        return batches
