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

Every submission's record (id, catalog version, sources, changes) is also
kept in the catalog store's metadata (``submission/<version mod STORED>``,
a znode under ``<chroot>/meta`` with ZooKeeper), so that the next leader can
answer ``GET /submissions/{id}`` after a failover (docs/architecture.md,
"Leadership and fencing").  With ZooKeeper the record is written in the
commit's own multi-op (:meth:`SubmissionLog.recording`,
:mod:`boreas.catalog.store.commit_meta`): a leader dying mid-way cannot
leave a committed version without its record, or a record without its
commit.  A replacing submission's summary of what it changed is known only
once it is planned, so it is added to the record just after the commit,
before ``POST /submissions`` answers; stores that cannot write metadata in a
commit (SQLite, memory: one Head) get the whole record then.  The id starts with the catalog version, which names the slot;
a slot is reused ``STORED`` catalog versions later, so the store holds the
submissions of the last ``STORED`` versions and no more.

Before a submission is planned, :func:`check_submission` resolves its node
positions (``#0``: :mod:`boreas.catalog.positions`) against the Head's
:class:`NodeOrder` and refuses it when it names a node the Head does not
know -- one that never registered, is not declared (``boreas head
--nodes``) and is not in the catalog yet: such a deployment would be
committed and then wait for that node forever.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from boreas.catalog.diagnostics import Diagnostic, ValidationFailed
from boreas.catalog.document_model import Document
from boreas.catalog.model import Catalog
from boreas.catalog.store import CatalogStore, StoreError
from boreas.catalog.positions import (
    named_nodes,
    parse_position,
    resolve_positions,
    spell,
)

from .node_sync import NodeSync
from .pending import PendingRequests

log = logging.getLogger(__name__)

#: Submissions (and per-version affected-node lists) kept for status queries.
KEEP = 10_000
#: Catalog versions whose submission records the store keeps (one metadata slot per version, reused).
STORED = 1_000


@dataclass
class Submission:
    id: str
    version: int
    sources: list[str]
    created: float = field(default_factory=time.time)
    affected: list[str] | None = None
    failures: dict[str, str] = field(default_factory=dict)  # sticky per-node failures
    changes: dict[str, Any] | None = None  # a replacing submission: kept/changed/added/removed (catalog.app_diff)


@dataclass
class SubmissionRecord:
    """A submission's record before its commit: the id's random part is fixed now, its version by the commit."""

    sources: list[str]
    nonce: str = field(default_factory=lambda: uuid.uuid4().hex[:10])
    created: float = field(default_factory=time.time)

    def id(self, version: int) -> str:
        return f"{version}-{self.nonce}"

    def entries(self, version: int) -> dict[str, str]:
        """The metadata a commit of ``version`` writes for this submission (key -> JSON)."""
        return {f"submission/{version % STORED}": _encode(self.id(version), version, self.sources, None,
                                                         self.created)}


def _encode(submission_id: str, version: int, sources: list[str], changes: dict[str, Any] | None,
            created: float) -> str:
    return json.dumps({"id": submission_id, "version": version, "sources": sources, "changes": changes,
                       "created": created})


def _record_key(submission_id: str) -> str | None:
    """The store metadata key of a submission's record: its id starts with its catalog version."""
    version, dash, _ = submission_id.partition("-")
    return f"submission/{int(version) % STORED}" if dash and version.isdigit() else None


class SubmissionLog:
    """Submissions by id, in memory and (their records) in the store that ``store()`` returns, if any."""

    def __init__(self, store: Callable[[], CatalogStore | None] = lambda: None) -> None:
        self._store = store
        self._by_id: OrderedDict[str, Submission] = OrderedDict()
        self._affected: OrderedDict[int, list[str]] = OrderedDict()

    def add(self, version: int, sources: list[str], changes: dict[str, Any] | None = None,
            submission_id: str | None = None) -> Submission:
        sub = Submission(submission_id or f"{version}-{uuid.uuid4().hex[:10]}", version, sources,
                         affected=self._affected.get(version), changes=changes)
        self._by_id[sub.id] = sub
        while len(self._by_id) > KEEP:
            self._by_id.popitem(last=False)
        return sub

    def get(self, submission_id: str) -> Submission | None:
        return self._by_id.get(submission_id)

    def recording(self, record: SubmissionRecord) -> contextlib.AbstractContextManager[Any]:
        """Within this block, commits made on this thread write ``record`` in their own transaction, when the
        store can (:mod:`boreas.catalog.store.commit_meta`); else :meth:`committed` writes it after."""
        store = self._store()
        alongside = store.alongside if store is not None else None
        return alongside.writing(record.entries) if alongside is not None else contextlib.nullcontext()

    async def committed(self, record: SubmissionRecord, version: int,
                        changes: dict[str, Any] | None = None) -> Submission:
        """The submission ``record`` became, committed as ``version``: its record is in the store (written by
        the commit, or now), with ``changes`` (a replacing submission's) added now."""
        sub = self.add(version, record.sources, changes, submission_id=record.id(version))
        sub.created = record.created
        store = self._store()
        if store is None or store.alongside is None or changes is not None:
            await self.keep(sub)
        return sub

    async def keep(self, sub: Submission) -> None:
        """Write ``sub``'s record to the store, so another Head can answer for it once it leads.

        A store that cannot take it costs only that: the submission is committed, and this Head
        still answers for it."""
        store, key = self._store(), _record_key(sub.id)
        if store is None or key is None:
            return
        record = _encode(sub.id, sub.version, sub.sources, sub.changes, sub.created)
        try:
            await asyncio.to_thread(store.put_meta, key, record)
        except StoreError as exc:
            log.warning("submission %s (catalog version %d) is committed, but its record could not be "
                        "stored; only this Head can answer for it: %s", sub.id, sub.version, exc)

    async def find(self, submission_id: str, nodes: Iterable[str]) -> Submission | None:
        """The submission, from memory or else from its record in the store (another Head took it).

        A record read back does not say which nodes its commit changed unless this Head saw the
        commit come in (a follower does); otherwise ``nodes`` (those the catalog places anything
        on) stand for them: deployed then means every one of them holds that version or later."""
        sub = self._by_id.get(submission_id)
        store, key = self._store(), _record_key(submission_id)
        if sub is not None or store is None or key is None:
            return sub
        text = await asyncio.to_thread(store.get_meta, key)
        record = json.loads(text) if text else None
        if record is None or record.get("id") != submission_id:  # never stored, or its slot was reused
            return None
        version = int(record["version"])
        sub = self.add(version, list(record["sources"]), record.get("changes"), submission_id=submission_id)
        sub.created = float(record.get("created", sub.created))
        if sub.affected is None:
            sub.affected = sorted(nodes)
        return sub

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
        status = {"id": sub.id, "version": sub.version, "sources": sub.sources, "state": state, "nodes": nodes}
        if sub.changes is not None:
            status["changes"] = sub.changes
        return status


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


# -- node positions and unknown nodes --------------------------------------------------


class NodeOrder:
    """The Head's nodes in position order: ``#0`` is the first.

    First the nodes declared when the Head started (``boreas head --nodes``;
    ``boreas cluster up`` declares its nodes in port order), then every other
    node in the order it first registered with this Head.  A node that
    restarts keeps its place; one that is down keeps it too.

    >>> order = NodeOrder(["localhost:16000", "localhost:16001"])
    >>> order.registered("localhost:17000"); order.registered("localhost:16001")
    >>> order.nodes()
    ['localhost:16000', 'localhost:16001', 'localhost:17000']
    >>> order.knows("localhost:16000"), order.knows("localhost:15000")
    (True, False)
    """

    def __init__(self, declared: Iterable[str] = ()):
        self.declared = list(dict.fromkeys(declared))
        self._registered: dict[str, None] = {}  # insertion ordered

    def registered(self, endpoint: str) -> None:
        self._registered.setdefault(endpoint, None)

    def nodes(self) -> list[str]:
        return [*self.declared, *(n for n in self._registered if n not in self.declared)]

    def knows(self, endpoint: str) -> bool:
        return endpoint in self._registered or endpoint in self.declared

    def describe(self) -> str:
        nodes = self.nodes()
        if not nodes:
            return "the Head has no nodes yet (start one: boreas node --endpoint HOST:PORT --head URL)"
        listed = ", ".join(f"{spell(i)} {n}" for i, n in enumerate(nodes))
        return f"the Head has {len(nodes)} node{'s' if len(nodes) != 1 else ''}: {listed}"


def check_submission(documents: Sequence[Document], order: NodeOrder, catalog: Catalog,
                     plan: Any = None) -> list[Document]:
    """``documents`` with their positions resolved; raises ``ValidationFailed`` naming every problem.

    Refused: a position past the Head's last node, and a node that the Head
    does not know (never registered, not declared, not in ``catalog``).
    ``plan`` (``plan_submission``) adds the submission's other problems to
    the refusal, so that it lists every reason at once.
    """
    nodes = order.nodes()
    resolved, problems = resolve_positions(
        documents, lambda n: nodes[n] if n < len(nodes) else None,
        lambda n: f"no node at position {spell(n)}: {order.describe()}")
    unresolved = bool(problems)
    for node, origin in named_nodes(resolved):
        if parse_position(node) is not None or order.knows(node) or node in catalog.nodes:
            continue
        problems.append(Diagnostic.at(origin, (
            f"node {node!r} has not registered with the Head, so nothing would ever run there; "
            f"start it first (boreas node --endpoint {node} --head ...), or name one of the Head's "
            f"nodes by endpoint or position; {order.describe()}")))
    if not problems:
        return resolved
    if plan is not None and not unresolved:  # every node resolved: the rest of the checks mean something
        problems += [p for p in plan(catalog, resolved).problems if p not in problems]
    raise ValidationFailed(problems)
