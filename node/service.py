"""A Boreas node: one listening endpoint for update XML and data.

The node holds its :class:`~boreas.node.local_catalog.LocalCatalog` and
changes it only with the update XML it is sent.  It registers with the Head
and keeps telling it that it is alive; each process start has a fresh
*incarnation*, which is how the Head tells a node that restarted empty from
one that merely missed a heartbeat.  With the ZooKeeper store the node also
holds an ephemeral znode for as long as it lives.

With a data directory it is durable: it comes back after a crash as it was
(identity, local catalog, box state, then the input log since), and with a
shared one it stops processing once another node has adopted its boxes.

Its HTTP interface, the routes and their handlers, is :mod:`.api` (a mixin
of :class:`NodeService`); this module is the node's state and lifecycle:
start, recovery, heartbeats and membership, close.

Usage::

    node = NodeService("localhost:15000", head="http://localhost:14000", token="s3cret")
    await node.start()
    ...
    await node.close()
"""

from __future__ import annotations

import asyncio
import gc
import json
import logging
import time
import uuid
from pathlib import Path

from boreas.catalog.documents import Update
from boreas.catalog.endpoints import split_endpoint
from boreas.catalog.model import Catalog
from boreas.catalog.replicate import update_items
from boreas.catalog.words import counted
from boreas.m3.boxtype import box_types
from boreas.wire.client import PeerClient, PeerError
from boreas.wire.receiver import DataReceiver
from boreas.wire.server import HttpServer
from boreas.wire.supervisor import Supervisor

from .adopt import Adopter
from .adopt_claim import archive_adopted, claimed_by
from .api import NodeApi
from .coalescer import DEFAULT_LIMITS, BatchLimits
from .connector import FilterConnector
from .dataflow import Dataflow
from .gcpause import gc_paused
from .head_reports import HeadReports
from .local_catalog import LocalCatalog
from .metrics import NodeMetrics
from .mover import BoxMover
from .outputs import SubscriberLimits
from .query import QueryApi
from .recovery.durability import FLUSH_EVERY, FLUSH_MS, Durability
from .reflect import Reflector

log = logging.getLogger(__name__)

HEARTBEAT_INTERVAL = 1.0


def freeze_startup_heap() -> None:
    """Leave what the node holds once started out of every later garbage collection.

    The modules, the app, the routes and a recovered node's box state live as
    long as the process; a full (generation 2) collection walked all of them
    again each time: ~90,000 objects, 75-87 ms on the 2-core benchmark machine
    (65-100 ms in bench/dataplane.py --probe's nodes), a pause every batch in
    flight waited out.  Frozen, a full collection walks only what came after
    startup (well under a millisecond for an idle node).  Collected first, so
    no garbage is frozen.
    """
    gc.collect()
    gc.freeze()


class NodeService(NodeApi):
    """A node process's state and lifecycle: ``start()``, ``close()``."""

    def __init__(self, endpoint: str, head: str | None, token: str | None,
                 heartbeat: float = HEARTBEAT_INTERVAL, data_dir: Path | None = None,
                 snapshot_url: str | None = None, group_commit: tuple[int, float] = (FLUSH_EVERY, FLUSH_MS),
                 shared_dir: bool = False, subscriber_limits: SubscriberLimits = SubscriberLimits(),
                 listen: str | None = None, batch_limits: BatchLimits = DEFAULT_LIMITS):
        self.endpoint = endpoint  # what others reach us at: our name in the catalog (--advertise)
        self.listen = listen or endpoint  # what the server binds (--listen: 0.0.0.0:PORT in a container)
        self.head = head
        self.incarnation = uuid.uuid4().hex
        self.local = LocalCatalog(endpoint)
        self.heartbeat = heartbeat
        self.server = HttpServer(f"node {endpoint}", token)
        self.peers = PeerClient(token, timeout=5.0)
        self.registered = asyncio.Event()
        self.heartbeat_answered: float | None = None  # when the Head last answered (readiness)
        self.head_sync: dict | None = None  # the Head's word on our sync, from its last answer
        # The box types this node runs: built once here, passed to everything that checks a slice.
        self.box_types = box_types()
        self.dataflow = Dataflow(endpoint, token, sender=f"{endpoint}#{self.incarnation[:12]}",
                                 box_types=self.box_types, subscriber_limits=subscriber_limits,
                                 batch_limits=batch_limits)
        self.metrics = NodeMetrics(self)  # views of the counters below, read when /metrics is scraped
        self.receiver = DataReceiver(self.metrics.counting(self.dataflow.intake.accept), token,
                                     digests=self.dataflow.state.digests,
                                     screen=self.metrics.screening(self.dataflow.intake.screen))
        # With a data dir the node is durable: it logs what it takes and comes back after a crash.
        self.durability = (Durability(data_dir, snapshot_url, flush_every=group_commit[0], flush_ms=group_commit[1])
                           if data_dir is not None else None)
        if self.durability is not None:
            self.local.keep_changes()  # what a change wrote is what it saves (catalog_changed)
        self.recovered = asyncio.Event()
        # A data dir on shared storage lets another node adopt this node's boxes if it stays down.
        self.shared_dir = shared_dir and data_dir is not None
        self.fenced: str | None = None  # another node adopted our boxes: we stopped running them
        self.adopter = Adopter(self)
        self._members = None  # ZooKeeperMembers when the Head's store is ZooKeeper
        self.update_lock = asyncio.Lock()  # one update at a time, in arrival order
        self.mover = BoxMover(self)
        # Every background task of the node is owned here: one that dies is logged and restarted.
        self.tasks = Supervisor(f"node {endpoint}")
        self.reflector = Reflector(endpoint, self.peers, self.tasks)
        self.head_reports: HeadReports | None = None  # moves and connects, in order, to the Head
        self.connector = FilterConnector(self)
        self.queries = QueryApi(self.dataflow, endpoint)  # serves GET /query/{box} (the m3 boxes' maps)
        self._add_routes()  # the HTTP interface (.api)

    async def start(self) -> None:
        host, port = split_endpoint(self.listen)
        if self.durability is None:
            await self.dataflow.start()
            self.recovered.set()
        await self.server.start(host, port)
        if self.head:
            self.head_reports = HeadReports(self.head, self.peers, self.endpoint)
            self.tasks.spawn("heartbeat", self._heartbeats)
        if self.shared_dir:
            self.tasks.spawn("fence", self._watch_claim)
        if self.durability is not None:
            await self._recover(self.durability)
        freeze_startup_heap()

    async def _recover(self, durable: Durability) -> None:
        """Come back as the node was: identity, local catalog, box state, then the log since.

        The listener is already up (the Head sees "recovering"), but data
        connections and updates wait until the replay is done.
        """
        started = time.monotonic()
        durable.state = "recovering"
        flow = self.dataflow
        async with self.update_lock:
            await asyncio.to_thread(archive_adopted, durable.dir)  # our boxes run elsewhere now
            await durable.open()
            identity = durable.load_identity()
            if identity is not None:
                flow.sender = identity["sender"]
                flow.state.adopt_identity(identity["boxes"])
            else:
                durable.save_identity(flow.sender, flow.state.box_ids)
            flow.state.on_new_box_id = lambda: durable.save_identity(flow.sender, flow.state.box_ids)
            saved = durable.load_catalog()
            captured = durable.latest_snapshot()
            first = None  # the catalog at the layouts the log began under, when all of it replays (§6.3)
            if saved is not None:
                catalog = self.local.restore(saved)
                first = durable.first_layouts(catalog) if captured is None else None
                flow.reconfigure(first or catalog)
            start = durable.log.first_position
            if captured is not None:
                with gc_paused():
                    restored = flow.replayer.restore_capture(captured)
                start = captured["position"]
                durable.restored_from = durable.last_snapshot = int(captured["snapshot"])
                log.info("node %s: restored %s from snapshot %d", self.endpoint, counted(len(restored), "box"),
                         captured["snapshot"])
            await flow.start(run=False)  # links up: replayed outputs go out (receivers drop what they have)
            replay_began, replay_cpu = time.monotonic(), time.process_time()
            durable.replayed = await flow.replayer.replay_log(durable.log.read(start))
            durable.replay_seconds = round(time.monotonic() - replay_began, 3)
            durable.replay_cpu_seconds = round(time.process_time() - replay_cpu, 3)
            if first is not None:  # the members switched to the catalog's layouts through the log: they follow it
                flow.reconfigure(self.local.catalog)
            durable.note_layouts(self.local.catalog.partitions)
            for (stream, producer), seq in flow.state.processed.items():
                self.receiver.sequencer.expect(stream, producer, seq + 1)
            flow.journal.attach(durable.log)
            flow.run()
        durable.state = "ready"
        durable.recovery_seconds = round(time.monotonic() - started, 3)
        self.recovered.set()
        log.info("node %s recovered in %.2f s: %s replayed from log position %d", self.endpoint,
                 durable.recovery_seconds, counted(durable.replayed, "batch"), start)
    async def _watch_claim(self) -> None:
        """Every heartbeat interval, whether or not the Head answers: were our boxes adopted?"""
        while self.fenced is None:
            await asyncio.sleep(self.heartbeat)
            await self._fence_if_adopted()

    async def _fence_if_adopted(self) -> None:
        """Our boxes were adopted (we were taken for dead): stop running them, never both."""
        durable = self.durability
        if durable is None or self.fenced is not None or not self.shared_dir:
            return
        owner = await asyncio.to_thread(claimed_by, durable.dir)
        if owner is None or owner == self.endpoint:
            return
        self.fenced = owner
        durable.state = "adopted"
        log.critical("node %s: its boxes were adopted by %s (it was taken for dead); it stops processing",
                     self.endpoint, owner)
        await self.dataflow.close()

    def catalog_changed(self) -> None:
        """The local catalog changed: keep the durable copy current (a restart starts from it)."""
        if self.durability is not None:
            self.durability.save_catalog(self.local.take_changes(), self.local.catalog)
            self.durability.note_layouts(self.local.catalog.partitions)

    def _report(self, item: object) -> None:
        """A change this node made itself (a partitioned box's new layout) for the Head to commit."""
        if self.head_reports is not None:
            self.head_reports.report(item)

    async def close(self) -> None:
        await self.server.close()
        if self.head_reports is not None:
            await self.head_reports.close()
        await self.reflector.close()
        await self.tasks.close()
        await self.dataflow.close()
        if self.durability is not None:
            await self.durability.close()
        await self.peers.close()
        if self._members is not None:
            await asyncio.to_thread(self._members.close)

    # -- the local catalog, changed by the node itself ----------------------------

    def apply_local(self, items: list, reflect: list | None = None, keep_state: tuple[str, ...] = ()) -> int:
        """A change this node makes to its own local catalog (a box moved in or away, a filter).

        Regions are sent ``reflect`` (by default the items themselves);
        boxes in ``keep_state`` keep their state though their declaration changed.
        """
        catalog = self.local.apply(Update("local change", self.local.version, self.endpoint, items=items))
        self.dataflow.reconfigure(catalog, keep_state, touched=self.local.touched)  # (by the keys it wrote)
        self.catalog_changed()
        self.reflector.reflect(catalog, items if reflect is None else reflect)
        return catalog.version

    def restore_local(self, earlier: Catalog, keep_state: tuple[str, ...] = ()) -> int:
        """Undo local changes: back to ``earlier`` (as a change of its own, so regions follow)."""
        return self.apply_local(update_items(self.local.catalog, earlier), keep_state=keep_state)

    # -- membership ---------------------------------------------------------

    async def _heartbeats(self) -> None:
        """Register, then keep telling the Head we are alive; survive Head restarts."""
        assert self.head
        url = f"{self.head}/members"
        announced = False
        while True:
            body = {"endpoint": self.endpoint, "incarnation": self.incarnation,
                    "version": self.local.version,
                    "recovery": self._recovery_summary()}
            try:
                reply = await self.peers.call("POST", url, json_body=body)
            except PeerError as exc:
                if announced:
                    log.warning("node %s: heartbeat to Head failed: %s", self.endpoint, exc)
                announced = False
            else:
                if not announced:
                    log.info("node %s registered with the Head at %s", self.endpoint, self.head)
                announced = True
                self.registered.set()
                self.heartbeat_answered = time.monotonic()
                self.head_sync = {k: reply.get(k) for k in ("in_sync", "desired_version")}
                if self.durability is not None and reply.get("snapshot_complete"):
                    self.durability.completed(int(reply["snapshot_complete"]))
                await self._join_zookeeper(reply.get("membership"))
            await asyncio.sleep(self.heartbeat)

    def _recovery_summary(self) -> dict:
        durable = self.durability
        if durable is None:
            return {"durable": False}
        shared = {"shared": True, "data_dir": str(durable.dir.resolve()), "snapshots": durable.snapshots.url} \
            if self.shared_dir else {"shared": False}
        return {"durable": True, **shared, "state": durable.state, "last_snapshot": durable.last_snapshot,
                "restored_from": durable.restored_from, "replayed_batches": durable.replayed,
                "recovery_seconds": durable.recovery_seconds, "replay_seconds": durable.replay_seconds,
                "replay_cpu_seconds": durable.replay_cpu_seconds}

    async def _join_zookeeper(self, url: str | None) -> None:
        if not url or self._members is not None:
            return
        from boreas.catalog.store.membership import ZooKeeperMembers

        data = json.dumps({"incarnation": self.incarnation}).encode()
        try:
            members = await asyncio.to_thread(ZooKeeperMembers, url)
            await asyncio.to_thread(members.join, self.endpoint, data)
        except Exception as exc:  # membership is best effort; heartbeats still work
            log.warning("node %s could not join ZooKeeper membership: %s", self.endpoint, exc)
            return
        self._members = members

