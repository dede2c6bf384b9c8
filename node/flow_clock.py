"""The flow clock: the one time a node's boxes see, continuing across a restart.

Operators are deterministic given ``(rows, now)``; the input log records the
``now`` each batch and timer firing had, and a replay hands the same values
back.  So the clock must be one value per batch (:attr:`FlowClock.current`,
set when the batch is taken and read by every box it reaches), and after a
restart it must continue from the log's values, never go back.

>>> clock = FlowClock()
>>> clock.continue_from(1000.0)           # a snapshot's clock
>>> 1000.0 <= clock.now() < 1001.0
True
>>> clock.catch_up(2000.0)                # the last record a replay processed
>>> clock.now() >= 2000.0
True
>>> clock.catch_up(0.0)                   # never back
>>> clock.now() >= 2000.0
True
>>> clock.set_current(5.0); clock.current
5.0
"""

from __future__ import annotations

import time


class FlowClock:
    """Owns the flow clock's offset from ``time.monotonic`` and the time of what is being processed."""

    def __init__(self) -> None:
        self.offset = 0.0  # flow clock = monotonic + offset
        #: the flow clock of the batch or timer firing being processed (every box it reaches sees this)
        self.current = 0.0

    def now(self) -> float:
        """The flow clock now: monotonic, and continuing across a restart (the log's clock values)."""
        return time.monotonic() + self.offset

    def set_current(self, now: float) -> None:
        """The batch or timer firing about to be processed happens at ``now``."""
        self.current = now

    def continue_from(self, clock: float) -> None:
        """Go on from a captured clock value (a snapshot's), whatever this process's monotonic time is."""
        self.offset = clock - time.monotonic()

    def catch_up(self, last: float) -> None:
        """Never behind ``last`` (the newest clock value a replay processed)."""
        self.offset = max(last - time.monotonic(), self.offset)
