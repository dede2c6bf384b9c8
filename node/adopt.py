"""Failover: a live node adopts every box of a node that stayed down, from its shared data directory.

A durable node keeps everything its boxes' future depends on in its data
directory (:mod:`boreas.node.recovery.durability`): its local catalog, its
identity (box producer ids), snapshots, and the input log since the last
complete snapshot.  When that directory is on storage other nodes reach
(``boreas node --data-dir DIR --shared-dir``) and the node stays down past
the Head's ``--failover-after``, the Head asks a live node to adopt it
(``POST /adopt``).  The adopter:

1. **claims** the directory (``adopted.json``, created exclusively), so two
   adopters never both run the boxes, and the failed node, if it comes back
   or was only cut off, stops instead of running them too (it checks the
   claim on every heartbeat and at start);
2. **recovers the failed node off to the side**: a scratch dataflow built
   from the failed node's catalog restores the newest intact snapshot and
   replays the log after it, with its clock values, exactly as the failed
   node's own restart would (so even a union's or join's interleaving is the
   same; with no snapshot, its partitioned members begin at the layouts its
   log began under, ``layouts.json``).  Its outputs are kept, not sent;
3. **takes the boxes over** between two of its own batches: declares them
   (the failed node's catalog, re-homed here), hands each box its replayed
   state, producer id and output numbering, and positions per input
   (:class:`~boreas.node.box_state.BoxHandover`, as a move does), queues the
   replay's outputs on its own links (receivers drop what they already
   have), and feeds the adopted boxes what it had itself sent the failed
   node and never got acknowledged;
4. takes a snapshot of its own (the adopted state came from outside its
   log), and answers; the Head then commits the boxes' new location, which
   re-points upstream nodes: their unacknowledged batches for the failed
   node are handed to the new link (:meth:`OutboundLink.redirect`).

So with a shared directory failover loses nothing and duplicates nothing.
Timers restart on the adopter's clock (pending instants keep their distance).

Usage::

    adopter = Adopter(node)
    report = await adopter.adopt("localhost:15001", Path("/shared/n1"), None)
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections import Counter
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import msgspec
from boreas.catalog.diagnostics import ValidationFailed
from boreas.catalog.documents import Unsubscribe, Update
from boreas.catalog.model import Catalog, Node, Partition, Region, Subscription
from boreas.catalog.replicate import UpdateRejected, catalog_items
from boreas.catalog.words import counted
from boreas.wire.columns import read_columns, unwrap
from boreas.wire.frames import ARROW, Batch, decode

from .adopt_claim import AdoptionRefused, claim
from .box_state import BoxStates
from .context import NodeContext
from .cumulus.part import PartOperator
from .cumulus.takeover import members_of, pending_for, streams_of
from .dataflow import Dataflow
from .handover import attach
from .outputs import Outputs
from .recovery.durability import Durability

log = logging.getLogger(__name__)

#: Seconds between claiming a directory and reading it: two of the failed node's heartbeats.
FENCE_WAIT = 2.0


@dataclass
class _Failed:
    endpoint: str
    catalog: Catalog
    identity: dict[str, Any]
    captured: dict[str, Any] | None
    durable: Durability


class _Collected(Outputs):
    """Outputs of a replay: kept (endpoint, stream, rows, producer, seq, restart), not sent."""

    def __init__(self, endpoint: str, sender: str, counters: Counter[str]):
        super().__init__(endpoint, None, sender, counters)
        self.outputs: list[tuple[str, str, list[tuple], str, int, bool]] = []
        self._internal: set[str] = set()  # streams between members of a partitioned box

    def follow(self, catalog: Catalog, internal: dict[str, str] | None = None) -> None:
        self._internal = set(internal or ())
        self.destinations = {}
        for sub in catalog.subscriptions.values():
            self.destinations.setdefault(sub.stream, []).append(sub.endpoint)
        for stream, endpoint in (internal or {}).items():  # a partition member's messages
            self.destinations.setdefault(stream, []).append(endpoint)
        self.links = {e: _Endpoint(e) for targets in self.destinations.values() for e in targets}  # type: ignore

    def resend(self, unacknowledged: list[list]) -> int:
        """Outputs the failed node's snapshot lists as not acknowledged: kept first, like the replay's."""
        kept = 0
        for endpoint, data, *_ in unacknowledged:  # (a named subscriber's carry its name)
            batch = decode(bytes(data))
            if not isinstance(batch, Batch):
                continue
            if batch.fmt == ARROW:  # columns: rows again for the replayed outputs (re-encoded when sent),
                columns = read_columns(unwrap(bytes(batch.rows)))  # a changelog's kept as columns, with weights
                rows = columns if columns.weights is not None else columns.rows()
            else:
                rows = msgspec.msgpack.decode(bytes(batch.rows))
                if batch.stream not in self._internal:  # a stream's rows are tuples; a member's messages stay lists
                    rows = [tuple(r) for r in rows]
            self.outputs.append((endpoint, batch.stream, rows, batch.producer, batch.seq, batch.restart))
            kept += 1
        return kept

    async def flush(self) -> None:
        outbox, self._outbox = self._outbox, []
        # A final mark replayed here goes on as an empty batch: its number is kept (no gap for the receiver's
        # sequencer), its end is not (an end of input across a failover: docs/dataplane.md)
        self.outputs += [(link.endpoint, stream, rows, producer, seq, restart)
                         for link, stream, rows, producer, seq, restart, _final in outbox]


def _replayer(endpoint: str, sender: str, like: Dataflow) -> tuple[Dataflow, _Collected]:
    """A dataflow that replays a failed node's log and keeps its outputs instead of sending them.

    It runs as the failed node ``endpoint`` (a partitioned box's operator
    there is the failed node's member, found by its endpoint).
    """
    collected = _Collected(endpoint, sender, Counter())
    return Dataflow(endpoint, None, sender, box_types=like.box_types, outputs=collected), collected


@dataclass(frozen=True)
class _Endpoint:
    endpoint: str
    drop_when_down: bool = False


def adoption_items(failed: Catalog, source: str, target: str, held: Catalog) -> list[Any]:
    """The failed node's catalog re-homed on ``target``; ``target`` stops sending to ``source``.

    >>> from boreas.catalog.model import Box, InPort, Input, Subscription
    >>> failed = Catalog(nodes={"a:1": Node("a:1"), "b:2": Node("b:2")},
    ...                  inputs={"S": Input("S", "T", "b:2")},
    ...                  boxes={"f": Box("f", "filter", (InPort("S"),), ("O",), node="b:2")})
    >>> held = Catalog(subscriptions={"S|b:2": Subscription("S", "b:2")})
    >>> [type(i).__name__ for i in adoption_items(failed, "b:2", "c:3", held)]
    ['Node', 'Node', 'Input', 'Box', 'Unsubscribe']
    """
    items: list[Any] = []
    for item in catalog_items(failed):
        if isinstance(item, Region) or (isinstance(item, Node) and item.endpoint == source):
            continue
        if getattr(item, "node", None) == source:
            item = replace(item, node=target)
        if isinstance(item, Partition):  # its member(s) on source now run on target (docs/cumulus.md §6.3)
            mine = held.partitions.get(item.box)
            base = mine if mine is not None and mine.id == item.id and mine.layout >= item.layout else item
            item = replace(base, nodes=tuple(target if n == source else n for n in base.nodes))
        items.append(item)
    if target not in failed.nodes:
        items.insert(0, Node(target))
    items = [i for i in items if not (isinstance(i, Subscription) and i.endpoint == target)]  # local now
    items += [Unsubscribe(sub.stream, source) for sub in held.subscriptions.values() if sub.endpoint == source]
    return items


class Adopter:
    """One node's side of failover: ``POST /adopt`` lands here."""

    def __init__(self, node: NodeContext):
        self.node = node
        self.adopted: dict[str, dict[str, Any]] = {}  # failed endpoint -> report

    async def adopt(self, source: str, directory: Path, snapshot_url: str | None) -> dict[str, Any]:
        node = self.node
        if node.durability is None:
            raise AdoptionRefused(f"node {node.endpoint} runs without --data-dir; it cannot adopt state")
        if not (directory / "identity.json").exists():
            raise AdoptionRefused(f"{directory} holds no node's data (no identity.json)")
        started = time.monotonic()
        claim(directory, node.endpoint)
        # A failed node that is in fact alive (cut off from the Head) checks for a claim every
        # heartbeat and stops; once it has, nothing more lands in its log after what we read.
        await asyncio.sleep(FENCE_WAIT)
        failed = await asyncio.to_thread(open_failed, source, directory, snapshot_url)
        try:
            replayer, collected, replayed = await self._replay(failed)
        finally:
            await failed.durable.log.close()
        parts = {name: op.state() for name, op in replayer.state.operators.items() if isinstance(op, PartOperator)}
        handovers = [replayer.state.handover(name, replayer.router.producer_of) for name in replayer.state.operators
                     if name not in parts]  # a partition member becomes a guest instead (docs/cumulus.md §6.3)
        items = adoption_items(failed.catalog, source, node.endpoint, node.local.catalog)
        flow = node.dataflow
        internal = {s for name in parts for s in streams_of(name, list(range(len(replayer.partitions[name].nodes))))}
        async with node.update_lock:
            # No send to the failed node is under way (``sending``) while the guests' messages are taken back.
            async with flow.out.sending, flow.lock:
                guests = self._guest_messages(source, parts, replayer, collected)
                catalog = node.local.apply(Update(f"failover of {source}", node.local.version, node.endpoint,
                                                  items=items))
                flow.reconfigure(catalog)
                for handover in handovers:
                    attach(flow, handover)
                unsent = flow.out.send_later([o for o in collected.outputs if o[0] != node.endpoint])
                consumers, withdrawn = self._withdraw(source, handovers)
                for (stream, producer), seq in replayer.state.processed.items():
                    node.receiver.sequencer.expect(stream, producer, seq + 1)
                take_guest_inputs(replayer.state, flow.state, internal, set(flow.host.coordinators))
                await self._take_guests(parts, guests)
            node.catalog_changed()
            node.reflector.reflect(catalog, items)
        if unsent:
            log.warning("node %s: replayed outputs for %s have no link here; not sent", node.endpoint,
                        sorted(set(unsent)))
        returned = await self._take_back(source, consumers, withdrawn)
        await flow.release()
        await flow.deliver(self._for_me([o for o in collected.outputs if o[1] not in internal]) + returned)
        snapshot = await node.durability.snapshot(flow, node.durability.last_snapshot or 0)
        report = {"node": source, "boxes": sorted(name for name in failed.catalog.boxes),
                  "snapshot": failed.captured["snapshot"] if failed.captured else None,
                  "replayed_batches": replayed, "returned_batches": len(returned),
                  "seconds": round(time.monotonic() - started, 3), "own_snapshot": snapshot["id"]}
        self.adopted[source] = report
        log.info("node %s adopted %s of failed node %s (%s replayed from its log)",
                 node.endpoint, counted(len(report["boxes"]), "box"), source, counted(replayed, "batch"))
        return report

    def _guest_messages(self, source: str, parts: dict[str, dict], replayer: Dataflow,
                        collected: _Collected) -> dict[str, dict[int, list[list]]]:
        """Under ``sending`` and the lock, before the routes change: per partitioned box, the messages each
        member hosted here takes before anything new (:mod:`~boreas.node.cumulus.takeover`)."""
        flow, node = self.node.dataflow, self.node
        found = {}
        for name, state in parts.items():
            guests = members_of(state)
            own = [m for m in range(len(replayer.partitions[name].nodes)) if replayer.partitions[name].nodes[m]
                   == node.endpoint]
            withdrawn = flow.out.withdraw(source, set(streams_of(name, guests)))
            found[name] = pending_for(name, guests, own, flow.out.links.get(source), withdrawn,
                                      replayer.state.processed, collected.outputs, node.endpoint,
                                      node.receiver.sequencer)
        return found

    async def _take_guests(self, parts: dict[str, dict], pending: dict[str, dict[int, list[list]]]) -> None:
        """Under the lock, the routes changed: each partitioned box's operator here takes the failed members."""
        flow = self.node.dataflow
        for name, state in parts.items():
            op = flow.state.operators.get(name)
            if not isinstance(op, PartOperator):
                why = flow.state.broken.get(name, "it is not a partition member here")
                raise AdoptionRefused(f"node {self.node.endpoint} cannot host the members of box {name!r}: {why}")
            await flow.router.emit(name, op.take_guests(state, pending[name], flow.clock.now()))

    async def _replay(self, failed: _Failed) -> tuple[Dataflow, _Collected, int]:
        replayer, collected = _replayer(failed.endpoint, failed.identity["sender"], self.node.dataflow)
        replayer.state.adopt_identity(failed.identity.get("boxes", {}))
        # A replay of the whole log begins under the layouts the failed node's log began under, as its own
        # restart would (layouts.json: docs/cumulus.md §6.3), then follows its catalog, which its members
        # switched to through the log
        first = failed.durable.first_layouts(failed.catalog) if failed.captured is None else None
        replayer.reconfigure(first or failed.catalog)
        start = failed.durable.log.first_position
        if failed.captured is not None:
            replayer.replayer.restore_capture(failed.captured)
            start = failed.captured["position"]
        replayed = await replayer.replayer.replay_log(failed.durable.log.read(start))
        if first is not None:
            replayer.reconfigure(failed.catalog)
        return replayer, collected, replayed

    def _withdraw(self, source: str, handovers: list) -> tuple[dict[str, list[str]], list]:
        """Under the lock: outputs queued for the failed node that the adopted boxes now take here."""
        flow = self.node.dataflow
        consumers: dict[str, list[str]] = {}
        for handover in handovers:
            for port in flow.state.boxes[handover.box].inputs:
                consumers.setdefault(port.stream, []).append(handover.box)
        return consumers, flow.out.withdraw(source, set(consumers))

    async def _take_back(self, source: str, consumers: dict[str, list[str]], withdrawn: list) -> list:
        """What this node sent the failed node and never got acknowledged: for the adopted boxes now.

        Taken once no send to the failed node is in progress; the routes
        already changed, so nothing more of these streams goes there.
        """
        flow = self.node.dataflow
        link = flow.out.links.get(source)
        pending: list[tuple[str, list[tuple], str, int]] = []
        async with flow.out.sending:
            for stream in consumers:
                row_type = flow.row_type(stream)
                for batch in link.take(stream) if link is not None else ():
                    # as decoded: a changelog's Columns keep their weights (the box's operator reads rows if it must)
                    rows = row_type.decode_payload(bytes(batch.rows), batch.fmt)[0] if row_type else []
                    pending.append((stream, rows, batch.producer, batch.seq))
        return [(stream, rows, producer, seq, box) for stream, rows, producer, seq in pending + withdrawn
                for box in consumers[stream]]

    def _for_me(self, outputs: list) -> list[tuple[str, list[tuple], str, int, str]]:
        """Replayed outputs the failed node sent here: taken as if they came over the network."""
        node = self.node
        sequencer = node.receiver.sequencer
        mine = []
        for endpoint, stream, rows, producer, seq, _ in outputs:
            if endpoint != node.endpoint:
                continue
            expected = sequencer.positions(stream).get((stream, producer))
            if expected is None or seq >= expected:
                mine.append((stream, rows, producer, seq, ""))
                sequencer.expect(stream, producer, seq + 1)
        return mine


def take_guest_inputs(failed: BoxStates, here: BoxStates, internal: set[str], inputs: set[str]) -> None:
    """What the failed node's replay reached on the guests' streams, taken here: the positions of the streams
    between the members (``internal``) and of the partitioned boxes' input streams (``inputs``), and the final
    marks of those input streams' producers that came there.  The router counts a producer whose position it
    holds as one that published here, and a member's out stream here waits for its end (node/router.py
    ``_ended_everywhere``): without its final mark it would wait for good."""
    for (stream, producer), seq in failed.processed.items():
        if stream in internal or stream in inputs:
            here.processed[(stream, producer)] = max(seq, here.processed.get((stream, producer), -1))
    here.ends.merge({"producers": {s: sorted(p) for s, p in failed.ends.producers.items() if s in inputs}})


def open_failed(source: str, directory: Path, snapshot_url: str | None) -> _Failed:
    """Read a failed node's directory: catalog, identity, newest usable snapshot; its log opened for reading."""
    durable = Durability(directory, snapshot_url, fsync=False)
    try:
        identity = json.loads((directory / "identity.json").read_text())
        durable.catalog.writable = False  # the failed node's: read, never repaired here
        catalog = durable.load_catalog() or Catalog()
        durable.log.open()
    except (OSError, ValueError, AssertionError, ValidationFailed, UpdateRejected) as exc:
        raise AdoptionRefused(f"cannot read the data of the failed node in {directory}: {exc}") from None
    return _Failed(source, catalog, identity, durable.latest_snapshot(), durable)

