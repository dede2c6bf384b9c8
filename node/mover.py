"""A node's side of moving boxes (paper section 3.1): moving one out, taking one in.

``<move box=B node=TARGET>`` sent to the node that holds B (by an optimizer,
or by the Head) moves it, together with every box sharing a ``<table>`` with
it (:func:`companions`; a table's rows live on one node): the source detaches B between two batches
(:mod:`boreas.node.handover`), sends the target B's declarations as update
XML together with B's state (``POST /handover``), then starts forwarding B's
queued and later input batches to the target, drops B from its own local
catalog, and reports the move to the Head, which commits the new location
and re-points upstream nodes.  If the target cannot take B, the source takes
it back, with the batches that queued up for it meanwhile, and the move
fails with the reason.

Usage::

    mover = BoxMover(node)
    await mover.move_out("filter1", "localhost:15001")
"""

from __future__ import annotations

import functools
import logging
import time
from dataclasses import dataclass, replace

import msgspec
from boreas.catalog.documents import Move, Update, read_document
from boreas.catalog.deployment_model import Publication
from boreas.catalog.model import Box, Catalog, Input
from boreas.catalog.replicate import Rejection
from boreas.catalog.table_params import ACCESSING
from boreas.catalog.updates import update_document
from boreas.wire.addressing import endpoint_url
from boreas.wire.client import PeerError
from boreas.wire.move_report import Written

from .box_state import BoxHandover
from .context import NodeContext
from .gcpause import gc_paused
from .handover import (
    FORWARD_FOR,
    attach,
    detach,
    source_items,
    start_forwarding,
    target_items,
)
from .head_reports import head_reports
from .local_catalog import LocalCatalog

log = logging.getLogger(__name__)


class MoveFailed(RuntimeError):
    pass


@dataclass(frozen=True)
class TakenIn:
    """The target's catalog after it took boxes in: its version, and the serial the handover's items were
    applied on and reached (the target's part of the move report, wire/move_report.py)."""

    version: int
    base: int
    serial: int
    items: str | None = None  # the items applied, as update XML, when not the source's (_produced_here)


class BoxMover:
    def __init__(self, node: NodeContext):
        self.node = node
        self.moved_away: dict[str, tuple[str, float]] = {}  # box -> (where it went, when)
        self._retired = 0  # forwarding links retired so far (names their closing tasks)
        self._forwarded = 0  # boxes moved out so far (names the tasks that retire their forwards)

    def recently_moved(self, items: list) -> list[Rejection]:
        """Declarations of boxes that just left this node: the sender's catalog is behind the move."""
        now = time.monotonic()
        for box, (_, when) in list(self.moved_away.items()):
            if now - when > FORWARD_FOR:
                del self.moved_away[box]
        return [Rejection(i, "box", item.name, f"box {item.name!r} moved to {self.moved_away[item.name][0]}")
                for i, item in enumerate(items) if isinstance(item, Box) and item.name in self.moved_away]

    async def move_out(self, box: str, target: str) -> int:
        """Move ``box`` to ``target``, and with it every box sharing a ``<table>`` with it (:func:`companions`);
        returns the local catalog version after they left.

        A box already gone to ``target`` with an earlier box of its table (an
        update naming several of them) is done: nothing more moves.
        """
        node, flow = self.node, self.node.dataflow
        local = node.local.catalog
        if box not in local.boxes and self.moved_away.get(box, ("",))[0] == target:
            return node.local.version
        if box not in local.boxes or box not in flow.state.operators:
            raise MoveFailed(f"box {box!r} is not on node {node.endpoint}")
        if target == node.endpoint:
            raise MoveFailed(f"box {box!r} is already on node {target}")
        names = companions(local, box)
        missing = [n for n in names if n not in flow.state.operators]
        if missing:
            raise MoveFailed(f"box {box!r} shares a table with box {missing[0]!r}, which is not running on node "
                             f"{node.endpoint}: a table's boxes move together")
        definitions = [local.boxes[n] for n in names]
        items = target_items(local, flow, definitions, node.endpoint, target)
        # Regions hear of the move before the target can reflect the box's declaration, so a
        # box moved on again is never seen moving backwards (paper 3.1.1 allows either order).
        node.reflector.reflect(local, [Move(target, box=n) for n in names])
        await node.reflector.flush(timeout=1.0)
        handovers = await detach(flow, names, target)
        text = update_document(items, origin=node.endpoint)
        with gc_paused():
            body = msgspec.msgpack.encode([text, [h.encode() for h in handovers]])
        try:
            answer = await node.peers.call("POST", endpoint_url(target, "/handover"), data=body,
                                           content_type="application/msgpack")
        except PeerError as exc:
            await self._take_back(handovers)
            # The regions heard of the move first: undo it, and send them a full copy, which
            # declares the box here again where a region had dropped it (an unknown target).
            node.reflector.reflect(node.local.catalog, [Move(node.endpoint, box=n) for n in names])
            node.reflector.refresh(node.local.catalog)
            raise MoveFailed(f"node {target} did not take box {box!r}: {exc}") from None
        for handover in handovers:
            self._forwarded += 1
            await start_forwarding(flow, handover, node.tasks, f"forward {handover.box} to {target} #{self._forwarded}")
        own = source_items(local, flow, definitions, node.endpoint, target)
        base = node.local.serial
        version = node.apply_local(own, reflect=[])
        written = [Written(node.endpoint, node.incarnation, base, node.local.serial, update_document(own))]
        # The target's part (an older target: missing), with the items it applied when not all of ours.
        taken = Written.of_answer(target, answer.get("items", text) if isinstance(answer, dict) else text, answer)
        written += [taken] if taken is not None else []
        node.local.counters["boxes_moved_out"] += len(names)
        for name in names:
            self.moved_away[name] = (target, time.monotonic())
        log.info("node %s moved box(es) %s to %s", node.endpoint, ", ".join(names), target)
        self._report(names, target, written)
        return version

    async def _take_back(self, handovers: list[BoxHandover]) -> None:
        """The target refused: run the boxes here again, and feed them what queued up for them."""
        flow = self.node.dataflow
        queued = []
        for link in (link for handover in handovers for link in handover.links):
            queued += link.drain_unsent()
            flow.out.unforward(link)
            await link.abort()
        async with flow.lock:
            flow.reconfigure(self.node.local.catalog)
            for handover in handovers:
                attach(flow, handover)
        for batch in queued:
            await flow.replay(batch)

    def _report(self, names: list[str], target: str, written: list[Written]) -> None:
        """Tell the Head (section 3.1.2), in one update; it commits the locations and re-points the neighbours.

        With it go the items this node and the target wrote for the move
        (``written``), which the Head patches its records of them with
        instead of reading their catalogs again.  Queued on the node's one
        ordered channel to the Head, which retries while the Head is down;
        the move does not wait for it.
        """
        reports = head_reports(self.node)
        if reports is not None:
            reports.report(*[Move(target, box=name) for name in names], written=written)

    async def move_in(self, body: bytes) -> TakenIn:
        """``POST /handover`` on the target: declare the box, restore it; it orders its own inputs."""
        node = self.node
        with gc_paused():
            text, raw = msgspec.msgpack.decode(body)
            handovers = [BoxHandover.decode(h) for h in raw]
        if not handovers:
            raise TypeError("a handover carries the state of at least one box")
        update = read_document(text, "handover update XML")
        assert isinstance(update, Update)
        async with node.update_lock:
            update, applied = _produced_here(node.local, update)
            candidate = node.local.preview(update)
            problems = node.dataflow.refusals(candidate, "handover update XML", rules=False,
                                              touched=node.local.touched)
            if problems:  # the source takes the box back
                node.local.refused()
                raise ValueError(f"node {node.endpoint} cannot run box {handovers[0].box!r}: "
                                 f"{problems[0]['reason']}")
            base = node.local.serial
            catalog = node.local.apply(update, candidate)
            taken = TakenIn(catalog.version, base, node.local.serial, applied)
            async with node.dataflow.lock:
                node.dataflow.reconfigure(catalog)
                stale = [link for handover in handovers for link in attach(node.dataflow, handover)]
                unsent = [batch for link in stale for batch in link.drain_unsent()]
            node.catalog_changed()
            node.reflector.reflect(catalog, update.items)
        if node.durability is not None:  # its state came over the network, not through the log
            await node.durability.snapshot(node.dataflow, node.durability.last_snapshot or 0)
        tasks = node.tasks  # the node's supervisor: a failure is logged, never lost
        for link in stale:  # the box came back: stop forwarding it away
            node.dataflow.counters["forwards_retired"] += 1
            self._retired += 1
            if not tasks.closed:  # else the node is stopping, and closing its dataflow closes the link
                tasks.spawn(f"retire forward to {node.endpoint} #{self._retired}",
                            functools.partial(link.close, flush_timeout=5.0), restart=False)
        for batch in unsent:
            await node.dataflow.replay(batch)
        node.local.counters["boxes_moved_in"] += len(handovers)
        for handover in handovers:
            self.moved_away.pop(handover.box, None)
        log.info("node %s took box(es) %s", node.endpoint, ", ".join(h.box for h in handovers))
        return taken


def _produced_here(local: LocalCatalog, update: Update) -> tuple[Update, str | None]:
    """The handover's update without the ``<input>`` and ``<publication>`` of a stream a box of this node
    writes (a box moving back to the node of its upstream box), and those items as update XML (None: all
    kept).

    The source declares each stream the moved boxes read an input of the
    target, published by the source (node/handover.py), which it cannot
    tell the target writes itself.  Declared, the stream would have two
    producers here, which a node's index cannot check by what changed: the
    target checked and typed every box it holds, a whole check that timed
    the ``/handover`` out at 40,000 boxes (issue 37).  The box reads the
    stream from its local producer; what the source still forwards to it
    decodes by the stream's schema here (node/intake.py).
    """
    dropped = {i.stream for i in update.items if isinstance(i, Input) and local.writes(i.stream)}
    if not dropped:
        return update, None
    items = [i for i in update.items if not (isinstance(i, (Input, Publication)) and i.stream in dropped)]
    return replace(update, items=items), update_document(items, origin=update.origin)


def companions(local: Catalog, box: str) -> list[str]:
    """``box`` and every box here sharing a ``<table>`` with it, directly or through another (in catalog order).

    A table's rows live on one node, with one copy shared by its boxes
    (docs/operators.md, "Table boxes"), so they move as one.

    >>> c = Catalog()
    >>> c.boxes.update({"a": Box("a", "insert", (), (), access=("T",)), "f": Box("f", "filter", (), ()),
    ...                 "s": Box("s", "select", (), ("Out",), access=("T",))})
    >>> companions(c, "s"), companions(c, "f")
    (['a', 's'], ['f'])
    """
    if box not in local.boxes or local.boxes[box].type not in ACCESSING:
        return [box]  # (no scan of a large catalog for the usual move)
    tables: set[str] = set()
    group = {box}
    grew = True
    while grew:
        tables |= {t for name in group for t in local.boxes[name].access if local.boxes[name].type in ACCESSING}
        more = {b.name for b in local.boxes.values() if b.type in ACCESSING and tables & set(b.access)}
        grew = not more <= group
        group |= more
    return [name for name in local.boxes if name in group]
