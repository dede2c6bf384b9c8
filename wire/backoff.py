"""Retry delays that grow while a peer keeps failing and reset once it answers.

>>> b = Backoff(first=0.2, cap=1.0)
>>> [b.next_delay() for _ in range(5)]
[0.2, 0.4, 0.8, 1.0, 1.0]
>>> b.reset(); b.next_delay()
0.2
"""

from __future__ import annotations

import asyncio


class Backoff:
    def __init__(self, first: float = 0.2, cap: float = 5.0):
        self.first = first
        self.cap = cap
        self._delay = first

    def reset(self) -> None:
        self._delay = self.first

    def next_delay(self) -> float:
        delay = self._delay
        self._delay = min(self._delay * 2, self.cap)
        return delay

    async def sleep(self) -> float:
        """Wait the next delay; returns how long it waited."""
        delay = self.next_delay()
        await asyncio.sleep(delay)
        return delay
