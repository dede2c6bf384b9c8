"""When a node is ready for work: registered with the Head, its local catalog in sync, recovered.

A node serves HTTP as soon as it starts (the Head must see it while it
recovers), so "the port answers" says little.  These checks, served as
``GET /readyz`` (:mod:`boreas.wire.health`), say what a publisher or an
operator waits for:

* ``registered`` -- the Head answered a heartbeat recently (a node started
  without a Head passes);
* ``in_sync`` -- the Head, in its last heartbeat answer, said this node's
  local catalog equals its slice of the global catalog;
* ``recovered`` -- a durable node replayed its log, and no other node
  adopted its boxes.
"""

from __future__ import annotations

import time
from typing import Any

from boreas.wire.health import Check

#: Heartbeat intervals without an answer after which the node counts as no longer registered.
MISSED_HEARTBEATS = 3


def node_checks(node: Any) -> dict[str, Check]:
    """The readiness checks of ``node`` (a :class:`~boreas.node.service.NodeService`)."""

    def registered() -> str | None:
        if not node.head:
            return None
        answered = node.heartbeat_answered
        if answered is None:
            return f"not registered with the Head at {node.head} yet"
        silent = time.monotonic() - answered
        if silent > max(MISSED_HEARTBEATS * node.heartbeat, 3.0):
            return f"the Head at {node.head} has not answered a heartbeat for {silent:.1f} s"
        return None

    def in_sync() -> str | None:
        if not node.head:
            return None
        view = node.head_sync
        if view is None or view.get("in_sync") is None:
            return "the Head has not said yet whether this node's local catalog is in sync"
        if not view["in_sync"]:
            return (f"the Head is still bringing this node's local catalog (version {node.local.version}) "
                    f"to its slice of catalog version {view.get('desired_version')}")
        return None

    def recovered() -> str | None:
        if node.fenced:
            return f"its boxes were adopted by {node.fenced}: it no longer runs them"
        if not node.recovered.is_set():
            return "recovering: restoring the last snapshot and replaying the input log"
        return None

    return {"registered": registered, "in_sync": in_sync, "recovered": recovered}
