"""A node's reports to the Head of the changes it made itself (paper 2.2, 3.1.2, 3.2).

An optimizer asks a node directly to move a box or to insert or remove a
filter; the node does it, then tells the Head, which commits the change to
the global catalog.  These reports must reach the Head, and in the order
the node made the changes (a connect after a move of the same box must not
overtake it), so a node has exactly one :class:`HeadReports`: one
:class:`~boreas.wire.sender.ReliableSender` to the Head's ``/update``, shared
by the mover and the connector.  A Head that is down is retried until it is
back; a report the Head refuses is logged and skipped.

The node service makes it when it starts (``node.head_reports``) and closes
it when it stops, delivering what is still queued within a moment.

Usage::

    reports = head_reports(node)        # None when the node runs without a Head
    if reports is not None:
        reports.report(Move("localhost:15001", box="box1"))
        await reports.flush(timeout=10.0)   # the Head has committed it
"""

from __future__ import annotations

import logging
from typing import Any

from boreas.catalog.updates import describe_item, update_document
from boreas.wire.backoff import Backoff
from boreas.wire.client import PeerClient, PeerRefused
from boreas.wire.move_report import Written, encode_report
from boreas.wire.sender import QueueFull, ReliableSender, SenderClosed

log = logging.getLogger(__name__)

#: Reports waiting for a Head that is down; beyond this they are dropped (and logged).
CAPACITY = 1000
#: How long closing waits for the Head to take what is queued.
CLOSE_TIMEOUT = 2.0


class HeadReports:
    """The node's one ordered channel to the Head for moves, connects and disconnects."""

    def __init__(self, head: str, peers: PeerClient, endpoint: str):
        self.endpoint = endpoint
        self.sender = ReliableSender(head, peers, name=f"node {endpoint}: reports to the Head",
                                     capacity=CAPACITY, backoff=Backoff(first=0.2, cap=5.0),
                                     on_refused=self._refused)
        self.sender.start()

    def report(self, *items: Any, written: list[Written] | None = None) -> bool:
        """Queue one change (``Move``, ``Connect``, ``Disconnect``) for the Head, or several made as one (the
        moves of a table's boxes), in one update; False if dropped.  ``written``: the catalog items each
        node wrote for a move, sent with it (wire/move_report.py), so the Head patches its records of
        them instead of reading the nodes again."""
        text = update_document(list(items), origin=self.endpoint)
        try:
            self.sender.send(encode_report(text, written) if written else text)
            return True
        except (QueueFull, SenderClosed) as exc:
            log.error("node %s cannot report %s to the Head: %s", self.endpoint,
                      "; ".join(describe_item(item) for item in items), exc)
            return False

    async def flush(self, timeout: float) -> bool:
        """Wait until the Head has answered every report so far (it has committed them)."""
        return await self.sender.flush(timeout)

    async def close(self, timeout: float = CLOSE_TIMEOUT) -> bool:
        return await self.sender.close(timeout)

    def stats(self) -> dict[str, Any]:
        return self.sender.stats()

    def _refused(self, text: str | bytes, exc: PeerRefused) -> None:
        log.warning("node %s: the Head refused a report (%s); it is not retried", self.endpoint, exc)


def head_reports(node: Any) -> HeadReports | None:
    """The node's :class:`HeadReports` (None when it runs without a Head)."""
    return getattr(node, "head_reports", None)
