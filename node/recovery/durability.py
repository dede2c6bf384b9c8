"""A node's durable state: what lets a node killed with ``kill -9`` come back as it was.

Everything lives in the node's data directory (``boreas node --data-dir DIR``):

* ``identity.json``: the node's sender name and each box's producer id.  A
  restarted node numbers its output under the same ids, so receivers
  recognise what they already have;
* ``catalog.xml`` and ``catalog.log``: the local catalog, kept by :class:`~.catalog_store.CatalogStore`: a
  change appends what it wrote to the log (fsync'd), and the whole catalog is rewritten (atomically) only
  when the log has grown as large as it;
* ``layouts.json``: each partitioned box's layout as this node first ran it (:meth:`Durability.note_layouts`):
  the catalog learns a box's later layouts, but its member's log began under this one, and a replay of the
  whole log (no snapshot) must begin there too (:meth:`Durability.first_layouts`; docs/cumulus.md §6.3);
* ``log/``: the input log (:mod:`.log`): every batch the node processed and
  every timer firing, in processing order, group-committed before the batch
  is acknowledged and before anything derived from it leaves the node;
* snapshots (:mod:`.snapshots`), by default ``DIR/snapshots``, or any
  directory given as a ``file:`` URL (a shared one serves failover);
  ``positions.json`` maps each retained snapshot id to its log position.

Recovery (:meth:`Durability.recover`) restores the local catalog, the boxes'
state from the newest intact snapshot, and replays the log after that
snapshot's position.  Snapshots follow seed 004's asynchronous scheme: the
state is captured between two batches (a marker record in the log), encoded
and written by a worker thread while the boxes go on, and confirmed to the
Head, which records the snapshot as complete once every node has it; then
each node cuts its log before that snapshot.

Usage::

    durable = Durability(Path("/var/lib/boreas/n1"))
    await durable.open()
    await durable.recover(node)          # NodeService: catalog, state, log replay
    info = await durable.snapshot(node.dataflow, 7)
    durable.completed(7)                 # the Head says 7 is complete: truncate
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections import Counter
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

import msgspec
from boreas.catalog.model import Catalog, Partition, SegmentPlacement

from ..gcpause import gc_paused
from .catalog_store import CatalogStore
from .log import InputLog
from .snapshots import SnapshotStore, write_atomic

log = logging.getLogger(__name__)

#: Group commit defaults, chosen with bench/recovery.py (docs/benchmarks.md, "Durability and
#: recovery"): a sender's window (16 batches) rarely fills a larger group, so the wait is what
#: matters; 64/1 ms and 256/2 ms measured within noise of each other, 1024/5 ms always worst.
FLUSH_EVERY = 256
FLUSH_MS = 2.0


class Durability:
    def __init__(self, data_dir: Path, snapshot_url: str | None = None, *,
                 flush_every: int = FLUSH_EVERY, flush_ms: float = FLUSH_MS, fsync: bool = True):
        self.dir = Path(data_dir)
        self.catalog = CatalogStore(self.dir, fsync=fsync)
        self.log = InputLog(self.dir / "log", flush_every=flush_every, flush_ms=flush_ms, fsync=fsync)
        self.snapshots = SnapshotStore.from_url(snapshot_url or str((self.dir / "snapshots").resolve()))
        self.state = "new"  # new | recovering | ready
        self.positions: dict[int, int] = {}  # snapshot id -> log position it covers up to
        self.last_snapshot: int | None = None
        self.restored_from: int | None = None
        self.replayed = 0
        self.recovery_seconds: float | None = None
        self.replay_seconds: float | None = None  # of those, the log's replay alone (records read and processed)
        self.replay_cpu_seconds: float | None = None  # the process's CPU time in the replay (a shared machine's
        # load stretches the wall time, not this)
        self.completed_id = 0
        self.counters: Counter[str] = Counter()
        self._snapshot_lock = asyncio.Lock()

    async def open(self) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        self.log.open()
        await self.log.start()
        path = self.dir / "positions.json"
        if path.exists():
            self.positions = {int(k): int(v) for k, v in json.loads(path.read_text()).items()}

    async def close(self) -> None:
        await self.log.close()

    # -- identity and local catalog ---------------------------------------------------

    def load_identity(self) -> dict[str, Any] | None:
        path = self.dir / "identity.json"
        return json.loads(path.read_text()) if path.exists() else None

    def save_identity(self, sender: str, box_ids: dict[str, str]) -> None:
        write_atomic(self.dir / "identity.json", json.dumps({"sender": sender, "boxes": box_ids}).encode())

    def load_catalog(self) -> Catalog | None:
        """The local catalog as last saved (None: never saved)."""
        return self.catalog.load()

    def save_catalog(self, changes: list[tuple[list[Any], int]], catalog: Catalog) -> None:
        """Keep the local catalog durable: ``changes`` (:meth:`LocalCatalog.take_changes`) led to ``catalog``."""
        self.catalog.append(changes, catalog)

    def note_layouts(self, partitions: Mapping[str, Partition]) -> None:
        """Keep the layout of each partition (by box and incarnation) as this node first runs it: a member's
        log begins under it, while the catalog goes on to the layouts the members switched to through the log
        (``Relayout``, ``Flip``).  A later layout of a noted incarnation is not kept."""
        path = self.dir / "layouts.json"
        noted = json.loads(path.read_text()) if path.exists() else {}
        new = {box: _layout_fields(p) for box, p in partitions.items()
               if p.planned and noted.get(box, {}).get("id") != p.id}
        if new:
            write_atomic(path, json.dumps({**noted, **new}).encode())

    def first_layouts(self, catalog: Catalog) -> Catalog | None:
        """``catalog`` with each partition at the layout noted when this node first ran it (:meth:`note_layouts`),
        for a replay of the whole log: a member built at the catalog's later layout would stamp and route the
        log's first epochs otherwise than it did, and re-send other messages and changelog batches under the
        numbers it used, which their receivers drop as duplicates.  None: no partition's layout differs."""
        path = self.dir / "layouts.json"
        noted = json.loads(path.read_text()) if path.exists() else {}
        first = {box: _at_layout(p, noted[box]) for box, p in catalog.partitions.items()
                 if box in noted and noted[box]["id"] == p.id and noted[box]["layout"] < p.layout}
        if not first:
            return None
        log.info("replaying the whole log: %s begin under the layouts this node first ran (%s)", ", ".join(first),
                 ", ".join(f"{box} {p.layout}" for box, p in first.items()))
        return replace(catalog, partitions={**catalog.partitions, **first})

    # -- recovery ------------------------------------------------------------------------

    def latest_snapshot(self) -> dict[str, Any] | None:
        """The newest intact snapshot whose log position is still in the log (None: replay it all)."""
        found = self.snapshots.latest_valid()
        while found is not None:
            snapshot_id, data = found
            captured = msgspec.msgpack.decode(data)
            if captured["position"] >= self.log.first_position:
                return captured
            log.warning("snapshot %d covers up to log position %d but the log starts at %d; trying an older one",
                        snapshot_id, captured["position"], self.log.first_position)
            found = self.snapshots.latest_valid(at_most=snapshot_id - 1)
        if self.log.first_position > 0:
            log.error("no usable snapshot and the log was truncated at %d: state before it is lost",
                      self.log.first_position)
        return None

    # -- snapshots -----------------------------------------------------------------------

    async def snapshot(self, flow: Any, snapshot_id: int) -> dict[str, Any]:
        """Capture between two batches, then encode and write off the event loop."""
        async with self._snapshot_lock:
            started = time.monotonic()
            async with flow.lock:
                with gc_paused():
                    captured = flow.replayer.capture(snapshot_id)
            paused = time.monotonic() - started
            data = await asyncio.to_thread(msgspec.msgpack.encode, captured)
            await self.log.durable(captured["position"] - 1)
            await asyncio.to_thread(self.snapshots.write, snapshot_id, data)
            self.positions[snapshot_id] = captured["position"]
            self._save_positions()
            self.last_snapshot = snapshot_id
            self.counters["snapshots"] += 1
            self.counters["snapshot_bytes"] += len(data)
            return {"id": snapshot_id, "position": captured["position"], "bytes": len(data),
                    "pause_seconds": round(paused, 6), "seconds": round(time.monotonic() - started, 6)}

    def completed(self, snapshot_id: int) -> None:
        """Snapshot ``snapshot_id`` is complete everywhere: the log before it and older snapshots go."""
        if snapshot_id <= self.completed_id:
            return
        self.completed_id = snapshot_id
        position = self.positions.get(snapshot_id)
        if position is None:
            return  # this node took no part in it (it joined later): keep everything
        cut = self.log.truncate_before(position)
        removed = self.snapshots.delete_before(snapshot_id)
        self.positions = {k: v for k, v in self.positions.items() if k >= snapshot_id}
        self._save_positions()
        self.counters["log_segments_truncated"] += cut
        self.counters["snapshots_deleted"] += removed
        if cut or removed:
            log.info("snapshot %d complete: %d log segments and %d older snapshots removed", snapshot_id, cut, removed)

    def _save_positions(self) -> None:
        write_atomic(self.dir / "positions.json", json.dumps(self.positions).encode())

    def status(self) -> dict[str, Any]:
        return {
            "durable": True,
            "state": self.state,
            "data_dir": str(self.dir),
            "snapshots": self.snapshots.url,
            "last_snapshot": self.last_snapshot,
            "completed_snapshot": self.completed_id or None,
            "restored_from": self.restored_from,
            "replayed_batches": self.replayed,
            "recovery_seconds": self.recovery_seconds,
            "replay_seconds": self.replay_seconds,
            "replay_cpu_seconds": self.replay_cpu_seconds,
            "catalog_log": {"records": self.catalog.records, "bytes": self.catalog.log_bytes,
                            "compactions": self.catalog.compactions},
            "log": {**{f"{k}_total": v for k, v in self.log.counters.items()},
                    "first": self.log.first_position, "next": self.log.next_position,
                    "size_bytes": self.log.size_bytes()},
            **dict(self.counters),
        }


def _layout_fields(p: Partition) -> dict[str, Any]:
    """What of ``p`` a layout change changes (its segments, members and coordinators), with its incarnation.
    The member and coordinator counts are kept resolved (``None`` in the catalog means "every node", and a
    resubmission that appends nodes keeps the layout: the noted layout must not grow with them)."""
    return {"id": p.id, "layout": p.layout, "segments": [[s.id, s.lo, s.hi, s.member] for s in p.segments],
            "members": len(p.layout_nodes), "coordinators": len(p.modulo_nodes),
            "coordinator_list": None if p.coordinator_list is None else list(p.coordinator_list)}


def _at_layout(p: Partition, fields: dict[str, Any]) -> Partition:
    """``p`` at the layout :func:`_layout_fields` noted (its endpoints as now: a failover may have moved one)."""
    listed = fields["coordinator_list"]
    return replace(p, layout=int(fields["layout"]), segments=tuple(SegmentPlacement(*s) for s in fields["segments"]),
                   members=fields["members"], coordinators=fields["coordinators"],
                   coordinator_list=None if listed is None else tuple(listed))
