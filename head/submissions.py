"""Submissions and their status: committed, then acknowledged or failed per node.

A submission is committed to the global catalog as one catalog version.
The nodes it affects are those whose slice that version changed (the Head
learns them when it processes the commit).  A node has acknowledged the
submission once it acknowledged an update at that version or later; the
status is derived from the node's state on every read, so it never goes
stale.  A failure caused by a pending request that timed out is recorded
for good; other failures (an unreachable node) turn into acknowledgements
when the node comes back and takes the update.

Usage::

    log = SubmissionLog()
    sub = log.add(version=7, sources=["app.xml"])
    log.processed(7, ["localhost:15000"])
    log.status(sub, syncs, pending)["state"]   # 'deploying', 'deployed' or 'failed'
"""

from __future__ import annotations

import time
import uuid
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from .node_sync import NodeSync
from .pending import PendingRequests

#: Submissions (and per-version affected-node lists) kept for status queries.
KEEP = 10_000


@dataclass
class Submission:
    id: str
    version: int
    sources: list[str]
    created: float = field(default_factory=time.time)
    affected: list[str] | None = None
    failures: dict[str, str] = field(default_factory=dict)  # sticky per-node failures


class SubmissionLog:
    def __init__(self) -> None:
        self._by_id: OrderedDict[str, Submission] = OrderedDict()
        self._affected: OrderedDict[int, list[str]] = OrderedDict()

    def add(self, version: int, sources: list[str]) -> Submission:
        sub = Submission(uuid.uuid4().hex[:12], version, sources, affected=self._affected.get(version))
        self._by_id[sub.id] = sub
        while len(self._by_id) > KEEP:
            self._by_id.popitem(last=False)
        return sub

    def get(self, submission_id: str) -> Submission | None:
        return self._by_id.get(submission_id)

    def processed(self, version: int, affected: list[str]) -> None:
        """The Head has handed commit ``version`` to the nodes in ``affected``."""
        self._affected[version] = affected
        while len(self._affected) > KEEP:
            self._affected.popitem(last=False)
        for sub in self._by_id.values():
            if sub.version == version:
                sub.affected = affected

    def fail(self, node: str, first_version: int, last_version: int, reason: str) -> None:
        """Record a lasting failure on ``node`` for submissions in a version range."""
        for sub in self._by_id.values():
            if first_version < sub.version <= last_version and sub.affected and node in sub.affected:
                sub.failures.setdefault(node, reason)

    def status(self, sub: Submission, syncs: Mapping[str, NodeSync],
               pending: PendingRequests) -> dict[str, Any]:
        nodes: dict[str, dict[str, Any]] = {}
        for node in sub.affected or ():
            nodes[node] = _node_status(sub, node, syncs.get(node), pending)
        states = {n["state"] for n in nodes.values()}
        if sub.affected is None:
            state = "committed"
        elif states <= {"acknowledged"}:
            state = "deployed"
        elif states <= {"acknowledged", "failed"}:
            state = "failed"
        else:
            state = "deploying"
        return {"id": sub.id, "version": sub.version, "sources": sub.sources, "state": state,
                "nodes": nodes}


def _node_status(sub: Submission, node: str, sync: NodeSync | None,
                 pending: PendingRequests) -> dict[str, Any]:
    if node in sub.failures:
        return {"state": "failed", "reason": sub.failures[node]}
    for request in pending.for_node(node):
        if request.after_version < sub.version <= max(request.versions):
            return {"state": "waiting", "reason": request.describe()}
    if sync is None:
        return {"state": "pending", "reason": "node not known yet"}
    if sync.acked_version >= sub.version:
        return {"state": "acknowledged", "version": sync.acked_version}
    if sync.failure:
        return {"state": "failed", "reason": sync.failure}
    return {"state": "pending"}
