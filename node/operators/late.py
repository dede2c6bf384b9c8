"""Late tuples: dropped because their window had already closed, and said so in the log.

A stream that arrives out of order beyond an aggregate's ``slack`` can drop
millions of tuples; each is counted (``late_tuples`` in the box's
:meth:`~.base.Operator.counters`, exported as ``boreas_late_tuples_total``
by node/metrics.py and shown among the UI's recent problems), and
:class:`LateLog` writes one WARNING line for them at most every
:data:`INTERVAL` seconds per box, with the count since its last line: loud
enough to be found, never one line per tuple.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

log = logging.getLogger(__name__)

#: Seconds between two log lines about one box's late tuples.
INTERVAL = 10.0


@dataclass
class LateLog:
    """The rate-limited log line of one box's late tuples; the box keeps the count, this what was logged."""

    box: str
    logged: int = 0              # the box's late count at the last line
    at: float | None = None      # the clock of the last line
    kind: str = "aggregate"      # the box's type, and what sets how late a tuple may be
    allowance: str = "its slack"

    def note(self, late: int, now: float) -> None:
        """Called after each batch with the box's late count so far and the flow clock."""
        if late <= self.logged or (self.at is not None and now - self.at < INTERVAL):
            return
        log.warning("%s box %r dropped %d late tuples (their window had already closed; see %s) "
                    "since %s", self.kind, self.box, late - self.logged, self.allowance,
                    "it started" if self.at is None else f"{now - self.at:.0f}s ago")
        self.logged, self.at = late, now

    def restored(self, late: int) -> None:
        """State came back with ``late`` already counted (and logged where it was counted)."""
        self.logged = late
