"""Pending requests: updates for a box that was not where the Head thought.

Paper section 3.1.2: optimizers move boxes without asking the Head, so the
Head may send a ``<modify>``, ``<delete>`` or ``<subscribe>`` to a node the
box has just left.  The node refuses it; the Head queues the request under
the box's name and stops sending that box's items to that node.  When the
Head learns the box's new location (a ``<move>``), the request is forwarded
there; if no move arrives before the deadline, the request fails with a
clear reason.  Requests are level-triggered: the Head does not keep the
refused XML, it keeps *that the box is unaccounted for*, and once the box's
location is known the node holding it is brought to the catalog's state,
which re-sends exactly what is still owed.

Usage::

    pending = PendingRequests(timeout=30)
    pending.add("localhost:15000", "box1", version=7, reason="box 'box1' is not here", after_version=6)
    pending.blocked_boxes("localhost:15000")  # -> {"box1"}: hold back box1's items
    pending.moved("box1", "localhost:15001", move_version=8)
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field


@dataclass
class PendingRequest:
    node: str  # where the request was refused
    box: str
    after_version: int  # the node had acknowledged this version when the request was refused
    reason: str
    deadline: float
    state: str = "waiting"  # waiting | forwarded | failed (then dropped)
    moved_to: str | None = None
    move_version: int | None = None
    attempts: int = 1
    versions: set[int] = field(default_factory=set)

    def describe(self) -> str:
        if self.state == "forwarded":
            return f"box {self.box!r} moved to {self.moved_to}; forwarding the update there"
        if self.state == "failed":
            return (f"box {self.box!r} was not on node {self.node} ({self.reason}) and the Head did "
                    f"not learn where it went in time")
        return f"box {self.box!r} is not on node {self.node} ({self.reason}); waiting for its new location"


class PendingRequests:
    """Pending requests by (node, box); the Head owns one."""

    def __init__(self, timeout: float = 30.0):
        self.timeout = timeout
        self._requests: dict[tuple[str, str], PendingRequest] = {}

    def add(self, node: str, box: str, version: int, reason: str, after_version: int = -1) -> PendingRequest:
        """The update at ``version`` to ``node`` was refused because ``box`` is not there."""
        key = (node, box)
        request = self._requests.get(key)
        if request is None:
            request = PendingRequest(node, box, after_version, reason, time.monotonic() + self.timeout)
            self._requests[key] = request
        else:
            request.attempts += 1
        request.versions.add(version)
        return request

    def blocked_boxes(self, node: str) -> set[str]:
        return {box for (n, box), r in self._requests.items() if n == node and r.state == "waiting"}

    def moved(self, box: str, target: str, move_version: int) -> list[PendingRequest]:
        """The box is on ``target`` now: forward every request waiting for it."""
        found = []
        for request in self._requests.values():
            if request.box == box and request.state == "waiting":
                request.state = "forwarded"
                request.moved_to = target
                request.move_version = move_version
                found.append(request)
        return found

    def delivered(self, node: str, acked_version: int) -> list[PendingRequest]:
        """Requests forwarded to ``node`` that its acknowledgement of ``acked_version`` settles."""
        done = [r for r in self._requests.values()
                if r.state == "forwarded" and r.moved_to == node and acked_version >= (r.move_version or 0)]
        for request in done:
            del self._requests[(request.node, request.box)]
        return done

    def expire(self, now: float | None = None) -> list[PendingRequest]:
        """Requests whose deadline passed with no move: they fail and are dropped."""
        now = time.monotonic() if now is None else now
        expired = [r for r in self._requests.values() if r.state == "waiting" and r.deadline <= now]
        for request in expired:
            request.state = "failed"
            del self._requests[(request.node, request.box)]
        return expired

    def for_node(self, node: str) -> list[PendingRequest]:
        return [r for (n, _), r in self._requests.items() if n == node]

    def __len__(self) -> int:
        return len(self._requests)
