"""``GET /boxes/{name}?node=N&wait=S``: answer once box ``name`` runs on ``N`` and every live node is in sync.

A ``boreas move`` sends its ``<move>`` to the box's node, which hands the
box over and reports the move to the Head; the command then waits until the
Head's catalog shows the box on the target and every live node has taken
that catalog (what :class:`~boreas.client.optimizer_views.HeadView` waits
for).  Asked by polling, that was ``GET /boxes/{name}`` until the box showed,
then ``GET /nodes`` until no node lagged: two requests at least, and a
pause between each (issue 37, "Fast commands").  With ``node`` and ``wait``
the Head answers when the condition holds, or after ``wait`` seconds (at
most :data:`~boreas.head.api.MAX_WAIT`), waking at each status change it
notifies (a commit, a node's acknowledgement, a node up or down:
``HeadService.notify``) and at least every :data:`RECHECK` seconds (a node
whose heartbeats stopped is down by the clock, not by a notification).  The
answer is ``GET /boxes/{name}``'s with ``"placed"`` (the box is on ``N``)
and ``"lagging"`` (the live nodes not in sync, as ``GET /nodes`` shows them:
alive and not ``in_sync``); a client that sees no ``"lagging"`` key is
talking to an older Head, and polls as before.
"""

from __future__ import annotations

import math
import time
from typing import Any

from .context import HeadContext

#: Seconds between two looks at the condition while no notification came (liveness changes by the clock).
RECHECK = 0.5


def lagging_nodes(head: HeadContext) -> list[str]:
    """The live nodes not in sync with the Head's catalog: ``GET /nodes``' rows with ``alive`` and not
    ``in_sync`` (a node the membership knows without a sync counts as not in sync, as there)."""
    now = time.monotonic()
    return [endpoint for endpoint in sorted(set(head.syncs) | set(head.membership.known()))
            if head.membership.alive(endpoint, now)
            and not ((sync := head.syncs.get(endpoint)) is not None and sync.in_sync)]


def wait_seconds(text: str, most: float) -> float:
    """A ``wait=S`` query value as seconds, at most ``most``; ValueError unless a finite number (``nan``
    would make the wait's deadline never come, and the loop below never give way).

    >>> wait_seconds("2.5", 30.0), wait_seconds("99", 30.0), wait_seconds("-1", 30.0)
    (2.5, 30.0, 0.0)
    >>> wait_seconds("nan", 30.0)
    Traceback (most recent call last):
    ...
    ValueError: wait takes a finite number of seconds, not 'nan'
    """
    seconds = float(text)
    if not math.isfinite(seconds):
        raise ValueError(f"wait takes a finite number of seconds, not {text!r}")
    return min(max(seconds, 0.0), most)


async def box_shown(head: HeadContext, name: str, node: str, wait: float) -> dict[str, Any]:
    """``{"placed", "lagging"}`` once box ``name`` is on ``node`` and no live node lags, or after ``wait``
    seconds (what holds then)."""
    deadline = time.monotonic() + wait
    while True:
        seen = head.revision  # (read before the look: a change after it ends the wait below)
        box = head.catalog.boxes.get(name)
        placed = box is not None and box.node == node and name not in head.catalog.partitions
        lagging = lagging_nodes(head)
        left = deadline - time.monotonic()
        if (placed and not lagging) or not left > 0:  # (not: a NaN wait ends at once)
            return {"placed": placed, "lagging": lagging}
        await head.wait_for_change(seen, min(left, RECHECK))
