"""The persistent Head: validates submissions, commits them, keeps nodes and global components current.

The Head follows the global catalog store: every commit (its own, or one
made by ``boreas catalog apply`` directly against the store) is processed
in commit order.  For each commit the Head recomputes each node's slice
(:mod:`boreas.catalog.slices`); a node whose slice changed is handed the new
slice and its :class:`~boreas.head.node_sync.NodeSync` sends it the
difference; other nodes are sent nothing.  Global components get the commit
as update XML (:mod:`boreas.head.global_feed`).  Everything the Head holds
in memory can be rebuilt from the store, so a restarted Head just reads the
catalog and re-synchronises the nodes.  What the nodes change themselves
(moves, filter boxes, a partitioned box's layout) and report is committed
by :mod:`boreas.head.learning` (``head.learner``).

All state is owned by the asyncio loop; store calls run in threads.

Usage::

    head = HeadService("sqlite:///catalog.db", token="s3cret")
    await head.start("localhost", 14000)
    ...
    await head.close()
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import time
from collections.abc import Callable, Iterator, Sequence

from boreas.catalog.boxtypes import BoxTypeRegistry
from boreas.catalog.collector import collector_paused
from boreas.catalog.document_model import Connect, Document
from boreas.catalog.index import CatalogIndex
from boreas.catalog.index_checkpoint import load_index
from boreas.catalog.model import Catalog, Partition
from boreas.catalog.node_slices import NodeSlices
from boreas.catalog.store import CatalogStore, Change, open_store
from boreas.catalog.submission import Applied, apply_submission, optimistic_commit, plan_submission
from boreas.m3.boxtype import box_types as standard_box_types
from boreas.wire.addressing import endpoint_url
from boreas.wire.client import PeerClient
from boreas.wire.server import HttpServer
from boreas.wire.supervisor import Supervisor

from .bulk import bulk_step, declared
from .catalog_copy import CatalogCopies
from .copy_ahead import CopyAhead
from .commit_follower import CommitFollower
from .failover import Failover, index_holds
from .global_feed import GlobalFeed, GlobalFeeds
from .index_saver import IndexSaver
from .leadership import Leadership
from .learning import Learner
from .membership import Membership
from .node_sync import NodeSync, catching_up
from .pending import PendingRequests
from .registrations import Registrations
from .snapshots import SnapshotCoordinator
from .submissions import NodeOrder, Submission, SubmissionLog, SubmissionRecord, check_submission
from .yielding import Foreground, Yielder

log = logging.getLogger(__name__)


class HeadService:
    """The Head's state and lifecycle (``start``/``close``); HTTP routes are in :mod:`.api`."""

    def __init__(self, store_url: str, token: str | None, pending_timeout: float = 30.0,
                 heartbeat_timeout: float = 3.0, snapshot_interval: float = 5.0,
                 failover_after: float = 30.0, nodes: Sequence[str] = (),
                 box_types: BoxTypeRegistry | None = None, advertise: str | None = None,
                 session_timeout: float = 10.0):
        self.store_url = store_url
        self.advertise = advertise  # the endpoint other Heads redirect to (default: the one bound)
        self.session_timeout = session_timeout  # the ZooKeeper session of the Head election
        self.token = token
        self.store: CatalogStore | None = None
        self.catalog = Catalog()
        self.syncs: dict[str, NodeSync] = {}
        self.foreground = Foreground()  # requests in flight: work costing the catalog's size yields to them
        # The catalog serialized once per version, for GET /catalog and global components' full copies.
        self.copies = CatalogCopies(lambda: self.catalog, self.origin, Yielder(self.foreground.idle))
        self.submitting = 0  # POST /submissions being read, checked or committed (taking_submission)
        self.copy_ahead = CopyAhead(self.copies, busy=self.catching_up,  # each version's copy built once quiet
                                    held=self.submission_coming)  # (issue 37)
        self.submissions = SubmissionLog(lambda: self.store)  # records in the store: the next leader answers
        self.pending = PendingRequests(pending_timeout)
        self.membership = Membership(heartbeat_timeout)
        self.peers = PeerClient(token, timeout=10.0)
        self.server = HttpServer("head", token)
        self.snapshots = SnapshotCoordinator(lambda: self.catalog, lambda: self.store, self.membership,
                                             self.peers, interval=snapshot_interval)
        # Node positions (#0) in deployments resolve against these, and a deployment to a node the
        # Head does not know (not registered, not in --nodes, not in the catalog) is refused.
        self.node_order = NodeOrder(nodes)
        # The box types submissions are validated against and slices inferred with (given, or the
        # standard set: Borealis's and m3), passed explicitly wherever a catalog is checked.
        self.box_types = box_types or standard_box_types()
        # The catalog held here, checked, with what the check learned (catalog/index.py): a submission is
        # checked, and the nodes' slices recomputed, by what it touches.
        self.index = CatalogIndex.build(self.catalog, self.box_types)
        # The leader saves the index now and then, so a start decodes it (head/index_saver.py); it and the
        self.index_saver = IndexSaver(lambda: self.index, lambda: self.store,  # copy wait while busy or held
                                      busy=self.catching_up, held=self.submission_coming, yielder=Yielder(self.foreground.idle))
        self.slices = NodeSlices()  # every node's slice of self.catalog, sliced again where a commit reaches
        # Every background task (commit follower, expiry, one per node sync and global feed, failover's
        # records) is owned here: a task that crashes is logged with its traceback and restarted.
        self.tasks = Supervisor("head")
        # The global components' feeds (the leader runs them: _take_lead, _install).
        self.global_feeds = GlobalFeeds(self.peers, self.copies, self.tasks, self.origin)
        self.registrations = Registrations(self.commit, self.global_feeds.full_copy)  # <global>, <region>
        # What nodes report they changed themselves (moves, connects, layouts; adoptions): learnt one at a time.
        self.learner = Learner(self)
        self.failover = Failover(lambda: self.catalog, lambda: self.store, self.membership, self.peers,
                                 self.learner.adoption, after=failover_after, tasks=self.tasks,
                                 holds=lambda e: index_holds(self.index, e),
                                 candidates=lambda: {*self.syncs, *self.membership.known()})
        self.revision = 0  # bumped on every status change; long polls wait on it
        self._changed = asyncio.Event()
        # Every commit (ours, or another writer's) is applied to the catalog held here, in order.
        self.commits = CommitFollower(lambda: self.catalog, self._advance)
        # Whether this Head leads (several Heads on a ZooKeeper catalog: one does); a follower serves
        # reads and redirects the rest (head/leadership.py).  Only the leader drives nodes and globals.
        self.leadership = Leadership("")
        self.leading = False  # True once this Head took up the leader's duties (_take_lead)
        self.server.app.middlewares.extend((self.leadership.redirect, self.foreground.middleware))
        self._members = None
        from .api import install_routes
        from .ui import install_ui

        install_routes(self)
        self.ui = install_ui(self)  # the web UI at / (its live feed is told of every commit in _advance)

    # -- lifecycle ------------------------------------------------------------

    @property
    def origin(self) -> str:
        return "head"

    @property
    def feeds(self) -> dict[str, GlobalFeed]:
        """The global components fed, by endpoint (read by the status and metrics)."""
        return self.global_feeds.feeds

    @property
    def catalog_full_reads(self) -> int:
        """Whole-catalog reads from the store: one at start, then only when the log cannot fill a gap."""
        return self.commits.full_reads

    async def start(self, host: str, port: int) -> str:
        self.store = await asyncio.to_thread(open_store, self.store_url)
        marks = [time.process_time()]  # CPU of the start's phases, logged (bench/head_restart.py)
        with collector_paused(keep=True):  # read, checked, sliced: all of it live and kept (catalog/collector.py)
            catalog = await self.commits.start(self.store)
            marks.append(time.process_time())
            # The index saved for this very version when there is one, else the catalog checked whole
            # (catalog/index_checkpoint.py; the log says which); saved again if its boxes were not (saved_boxes.py).
            self.index, decoded = await asyncio.to_thread(load_index, self.store, catalog, self.box_types)
            self.index_saver.started(catalog.version, decoded and (self.commits.saved_boxes > 0 or not catalog.boxes))
            marks.append(time.process_time())
            self._install(catalog, affected_version=None)
            marks.append(time.process_time())
        log.debug("Head start, catalog version %d (%d boxes), CPU s: read %.2f, index %.2f, slices %.2f",
                 catalog.version, len(catalog.boxes), *(b - a for a, b in zip(marks, marks[1:])))
        self.tasks.spawn("commits", self.commits.run)
        self.tasks.spawn("copy ahead", self.copy_ahead.run)
        await self.snapshots.load()
        if self.store.membership_url is not None:
            await self._watch_zookeeper_members(asyncio.get_running_loop(), self.store.membership_url)
        endpoint = await self.server.start(host, port)
        self.leadership.url = endpoint_url(self.advertise or endpoint)
        await self.leadership.start(self.store, self.session_timeout)
        if await self.leadership.settle():  # the catalog's one Head, or the first of several: it leads at once
            await self._take_lead()
        else:
            self.tasks.spawn("leadership", self._await_lead, restart=False)
        log.info("Head serving catalog %s at version %d on %s (%s)", self.store_url, catalog.version, endpoint,
                 "leading" if self.leading else f"following {self.leadership.leader() or 'an election'}")
        return endpoint

    async def _await_lead(self) -> None:
        await self.leadership.elected.wait()
        await self._take_lead()

    async def _take_lead(self) -> None:
        """Take up the leader's duties: drive every node (each read first), feed globals, expire, fail over.

        What the last leader left unfinished is in the store: the catalog (every node is brought to
        its slice), where shared nodes keep their data and which node a failover chose (failover
        metadata).  A node that never heartbeats to this leader counts as down from now on."""
        if self.leading:
            return
        self.leading = True
        self.failover.taking_over()
        for endpoint, sync in self.syncs.items():
            sync.resync()
            self.tasks.spawn(f"node {endpoint}", sync.run)
        self.global_feeds.match(self.catalog)
        self.tasks.spawn("expiry", self._expire_pending)
        self.tasks.spawn("failover", self._failover_checks)
        self.tasks.spawn("index saver", self.index_saver.run)
        await self.snapshots.load()  # the last leader's last complete snapshot: ids go on from it
        self.snapshots.start()
        self.notify()

    async def close(self) -> None:
        await self.leadership.close()  # first: another Head takes over at once
        await self.snapshots.close()
        self.global_feeds.abort()
        await self.tasks.close()
        if self.leading:  # what it holds, for the next start (nothing when saved already)
            await self.index_saver.flush()
        await self.server.close()
        await self.peers.close()
        await self.commits.close()
        if self._members is not None:
            await asyncio.to_thread(self._members.close)
        if self.store is not None:
            await asyncio.to_thread(self.store.close)

    async def _watch_zookeeper_members(self, loop: asyncio.AbstractEventLoop, url: str) -> None:
        from boreas.catalog.store.membership import ZooKeeperMembers

        self._members = await asyncio.to_thread(ZooKeeperMembers, url)
        self._members.watch(lambda live: loop.call_soon_threadsafe(self._zookeeper_changed, live))

    def _zookeeper_changed(self, live: set[str]) -> None:
        for endpoint in self.membership.zookeeper_members(live):
            log.info("node %s lost its ZooKeeper session: it is down", endpoint)
        self.notify()

    # -- status notifications ------------------------------------------------

    def notify(self) -> None:
        """Something a status reader may wait for changed."""
        self.revision += 1
        self._changed.set()
        self._changed = asyncio.Event()

    async def wait_for_change(self, after: int, timeout: float) -> None:
        """Return once ``revision`` passed ``after``, or after ``timeout`` seconds."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while self.revision <= after and loop.time() < deadline:
            with contextlib.suppress(TimeoutError):  # (asyncio.timeout, not wait_for: that can lose a cancel)
                async with asyncio.timeout_at(deadline):
                    await self._changed.wait()

    @contextlib.contextmanager
    def taking_submission(self) -> Iterator[None]:
        """A submission is on its way in (POST /submissions, from its upload to its commit)."""
        self.submitting += 1
        try:
            yield
        finally:
            self.submitting -= 1

    def submission_coming(self) -> bool:
        """Whether a submission is on its way in: work costing the catalog's size (the copy ahead, the index
        save) waits for it (a deployment's next part: that work would take the part's CPU, and the part makes
        it stale anyway, issue 37)."""
        return self.submitting > 0

    def catching_up(self) -> bool:
        """Whether a node is not yet in sync with the last change (that work waits for it too)."""
        return catching_up(self.syncs.values(), self.membership.alive)

    # -- following the catalog ---------------------------------------------

    def _advance(self, before: Catalog, after: Catalog, touched: dict[str, set[str]] | None = None) -> None:
        written = len(after.boxes) if touched is None else sum(map(len, touched.values()))
        with bulk_step(written, keep=True):
            self._install(after, affected_version=after.version, touched=touched)
            self.global_feeds.committed(before, after, touched)
            self.ui.changed(before, after, touched)

    def _install(self, catalog: Catalog, affected_version: int | None,
                 touched: dict[str, set[str]] | None = None) -> None:
        """Make ``catalog`` current: hand the nodes whose slice changed their new slice, start or stop global
        feeds.  Checked and sliced by what changed (``touched``: where, when the commit says)."""
        self.catalog = catalog
        if self.index.catalog is not catalog:  # (at start it was made for this catalog: loaded or checked)
            self.index = self.index.derive(catalog, touched)
            self.index_saver.changed()
        self.copy_ahead.changed(touched)
        affected = []
        try:
            changed = self.slices.advance(self.index)
        except Exception:  # (a defect in slicing by the change: the slices are left as they were, so retry whole)
            log.exception("catalog version %d: slicing by the change failed; slicing every node whole",
                          catalog.version)
            changed = self.slices.advance(self.index, whole=True)
        for endpoint, desired in changed.items():
            sync = self.sync_for(endpoint)
            if (desired or Catalog()) != sync.desired:
                affected.append(endpoint)
            sync.set_desired(desired or Catalog(), catalog.version)
        if affected_version is not None:
            self.submissions.processed(affected_version, affected)
            log.info("catalog version %d: updating %s", affected_version, ", ".join(affected) or "no node")
        if self.leading:
            self.global_feeds.match(catalog)
        self.notify()

    def _placed(self, box: str) -> str | None:
        """The node the catalog puts ``box`` on (None: no such box, or it is partitioned and unplaced)."""
        found = self.catalog.boxes.get(box)
        return found.node if found is not None else None

    def sync_for(self, endpoint: str) -> NodeSync:
        sync = self.syncs.get(endpoint)
        if sync is None:
            sync = NodeSync(endpoint, self.peers, self.pending, self.notify, self.origin, placed=self._placed)
            self.syncs[endpoint] = sync
            if self.leading:  # a follower keeps what each node should hold, and drives it once it leads
                self.tasks.spawn(f"node {endpoint}", sync.run)
        return sync

    # -- operations ----------------------------------------------------------

    async def submit(self, documents: Sequence[Document], replacing: bool = False) -> Submission:
        """Validate and commit; raises ``ValidationFailed`` (nothing committed) or ``StoreError``.

        ``replacing``: the documents are the new version of an application (docs/xml.md "The edit
        loop"); the submission then says what it kept, changed, added and removed."""
        assert self.store is not None
        plan = functools.partial(plan_submission, registry=self.box_types, replacing=replacing)
        documents = await asyncio.to_thread(check_submission, documents, self.node_order, self.catalog, plan)
        # Planned on the catalog held here; a lost race catches up from the log and re-plans.
        record = SubmissionRecord([d.source for d in documents])

        def apply() -> Applied:  # the record goes in the commit's own transaction where the store can
            with self.submissions.recording(record), bulk_step(sum(map(declared, documents))):
                return apply_submission(self.store, documents, registry=self.box_types, base=self.catalog,
                                        read_full=self.commits.read_full, index=self.index, replacing=replacing)

        with self.commits.writing():  # (no need to wait for the watch thread; the plan's boxes are taken)
            applied = await asyncio.to_thread(apply)
            self.commits.committed(applied.commit, (applied.before, applied.after))
        changes = applied.changes.as_dict() if applied.changes is not None else None
        # Stored before the client hears of it: any later leader can answer for it.
        return await self.submissions.committed(record, applied.commit.version, changes)

    async def commit(self, build: Callable[[Catalog], list[Change] | None]) -> int | None:
        """Commit what ``build`` makes of the current catalog; the new version, or None.

        ``build`` gets the catalog held here, or, after a lost race, that
        catalog brought forward from the store's log.
        """
        assert self.store is not None
        result = await asyncio.to_thread(optimistic_commit, self.store, build, base=self.catalog,
                                         read_full=self.commits.read_full)
        if result is None:
            return None
        self.commits.committed(result[1])
        return result[1].version

    async def _failover_checks(self) -> None:
        while True:
            await asyncio.sleep(1.0)
            await self.failover.check()

    async def caught_up(self, version: int, timeout: float = 10.0) -> None:
        """Wait until the Head has processed catalog ``version`` (its slices reflect it)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while self.catalog.version < version and loop.time() < deadline:
            await self.wait_for_change(self.revision, deadline - loop.time())

    def heartbeat(self, endpoint: str, incarnation: str, version: int, recovery: dict | None = None) -> None:
        self.failover.heard(endpoint, recovery)
        if endpoint not in self.membership.known():
            self.node_order.registered(endpoint)
            log.info("node %s registered: position #%d", endpoint, self.node_order.nodes().index(endpoint))
        restarted = self.membership.describe(endpoint).get("incarnation") != incarnation
        if self.membership.heartbeat(endpoint, incarnation, version, recovery=recovery):
            sync = self.sync_for(endpoint)
            failed_over = self.failover.state.get(endpoint, {}).get("state") in ("adopting", "failed over")
            if restarted or failed_over or sync.failure is not None or (sync.held is None and not sync.pushing):
                log.info("node %s is up (incarnation %s): synchronising its local catalog", endpoint,
                         incarnation[:8])
                sync.resync()
            else:  # the same process, late (busy, or the Head was): what it acknowledged is what it holds
                log.info("node %s answers again (incarnation %s, as before): nothing to read again",
                         endpoint, incarnation[:8])
            self.notify()

    async def _expire_pending(self) -> None:
        while True:
            await asyncio.sleep(0.25)
            for request in self.pending.expire():
                reason = request.describe()
                log.warning("%s; giving up after %.0fs and restoring the node from the global catalog",
                            reason, self.pending.timeout)
                self.submissions.fail(request.node, request.after_version, max(request.versions), reason)
                self.sync_for(request.node).resync()
                self.notify()
