"""The watermark as the windowed ``m3`` tests' row-at-a-time references compute it (docs/m3.md, "Event time").

The minimum over the producers heard from within the idle timeout of the
newest event time each sent, less the declared delay; with every producer
idle, the maximum (an idle producer stops holding the mark back); after the
end of input, +infinity.  The mark never goes back.  A reference subclasses
it and closes what ends at or before :attr:`closed` each time
:meth:`advance` says the mark moved.
"""

from __future__ import annotations

import math


class WatermarkReference:
    def __init__(self, delay: int, idle: float):
        self.delay, self.idle = delay, idle
        self.newest: dict[str, int] = {}  # producer -> the newest event time it sent
        self.heard: dict[str, float] = {}  # producer -> when it last sent a batch (an empty one counts)
        self.ended = False
        self.mark = -math.inf
        self.closed = -math.inf  # the mark the last close went up to
        self.late = 0

    def heard_from(self, producer: str, times: list[int], now: float) -> None:
        if times:
            self.newest[producer] = max(self.newest.get(producer, -math.inf), *times)
        if producer in self.newest:  # a batch, even an empty one, says the producer is not idle
            self.heard[producer] = now

    def advance(self, now: float) -> bool:
        """Move the mark; True when it passed :attr:`closed`, which is then the new mark."""
        if self.ended:
            mark = math.inf
        else:
            active = [p for p in self.newest if now - self.heard[p] < self.idle]
            pool = active or list(self.newest)
            pick = min if active else max
            mark = pick(self.newest[p] for p in pool) - self.delay if pool else -math.inf
        self.mark = max(self.mark, mark)
        if self.mark <= self.closed:
            return False
        self.closed = self.mark
        return True
