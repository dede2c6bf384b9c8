"""Keeping one node's local catalog equal to its slice of the global catalog.

The Head does not replay a log of messages to a node; it knows what the node
should hold (its *desired* slice, from the global catalog) and what it does
hold (*held*: what the node acknowledged, or what it reported on
``GET /catalog``), and sends the difference as update XML.  This is
level-triggered, so the same loop covers every case the paper's Head meets:

* a submission changes the slice: the difference is the new elements only,
  and nodes whose slice did not change are sent nothing;
* several commits arrive while a push is in flight: they go as one update;
* the node was down: ``held`` becomes unknown, and when the node is back the
  Head reads what it holds and sends what is missing (a node that restarted
  empty gets its whole slice);
* the node refuses items because a box is not there (it moved): those
  items are held back as pending requests (:mod:`boreas.head.pending`) and
  the rest is delivered;
* the node, read afresh, holds a box the catalog places on another node: it
  took the box in a move whose report this Head has not received yet (a new
  leader, or a Head restarted, while the report waits in the node's queue).
  Removing it would lose the box's state, so its items are held back the same
  way until the report is committed (or the pending request expires).

Usage::

    sync = NodeSync("localhost:15000", peers, pending, on_change=notify)
    head.tasks.spawn("node localhost:15000", sync.run)   # the Head's supervisor owns the loop
    sync.set_desired(slice_catalog, version=7)   # wakes the loop
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from collections.abc import Callable, Iterable
from typing import Any

from boreas.catalog.diagnostics import ValidationFailed
from boreas.catalog.documents import Delete, Unsubscribe, Update, read_document
from boreas.catalog.model import Catalog
from boreas.catalog.replicate import UpdateRejected, apply_update, update_items
from boreas.catalog.updates import update_document
from boreas.wire.addressing import endpoint_url
from boreas.wire.backoff import Backoff
from boreas.wire.client import PeerClient, PeerRefused, PeerUnreachable
from boreas.wire.move_report import Written, read_serial_id

from .pending import PendingRequests
from .update_boxes import box_of, removal_box

log = logging.getLogger(__name__)

MAX_BACKOFF = 5.0
#: A push may take PUSH_TIMEOUT seconds plus PUSH_PER_ITEM per item: a node parses, checks and applies a
#: large slice for a while (500 boxes took over 10 s on a loaded machine), and a push that times out is
#: sent again from the start, so a fixed timeout below what a slice takes never converges.  A node that
#: is gone is told by its heartbeats and by its connection, not by this timeout.
PUSH_TIMEOUT, PUSH_PER_ITEM = 10.0, 0.02
#: Updates of more items than this are written off the event loop, so the Head's heartbeats and API
#: keep answering while it writes a large slice (5,000 boxes for each of 20 nodes at 100,000).
OFF_LOOP_ITEMS = 500


class NodeSync:
    """The Head's view of one node, and the loop that brings the node up to date."""

    def __init__(self, endpoint: str, peers: PeerClient, pending: PendingRequests,
                 on_change: Callable[[], None], origin: str = "head",
                 placed: Callable[[str], str | None] | None = None):
        self.endpoint = endpoint
        self.placed = placed  # the node the global catalog puts a box on (None: no such box)
        self.unreported: set[str] = set()  # boxes moved here whose move the Head has not learnt yet
        self.peers = peers
        self.pending = pending
        self.on_change = on_change
        self.origin = origin
        self.desired = Catalog()
        self.desired_version = 0
        self.held: Catalog | None = None  # None: unknown, read it from the node first
        self.acked_version = -1
        self.failure: str | None = None
        self.resyncing = False  # held was forgotten: not in sync until read and brought up again
        self.pushing = False  # an update is on its way: the node may be too busy applying it to heartbeat
        self.assumed = False  # held was patched by a change the node reported (:meth:`assume`), not read
        self.assumed_boxes: frozenset[str] = frozenset()  # the boxes that change touched (:meth:`_drop_absent`)
        # The node's (incarnation, serial) that ``held`` is, when known: from its ``GET /catalog``, then one
        # more per push it applied; a move report's items patch ``held`` only at their base (:meth:`patch`).
        self.serial: tuple[str, int] | None = None
        self.counters: Counter[str] = Counter()
        self._wake = asyncio.Event()
        self._wake.set()
        self._running = asyncio.Event()  # cleared while paused
        self._running.set()

    # -- what the Head tells it -------------------------------------------

    def set_desired(self, desired: Catalog, version: int) -> None:
        if desired != self.desired:
            self.desired = desired
            self.desired_version = version
            self._wake.set()

    def resync(self) -> None:
        """Forget what the node holds (it restarted, or came back): read it again."""
        self.held = None
        self.serial = None
        self.assumed = False
        self.assumed_boxes = frozenset()
        self.resyncing = True
        self._wake.set()

    def wake(self) -> None:
        self._wake.set()

    def assume(self, touched: dict[str, set[str]]) -> None:
        """The node made a change itself and reported it (a connect, disconnect, layout): what it holds now
        is taken to be what it held, with the elements the change ``touched`` (Catalog dict name -> keys)
        as the desired slice has them, instead of reading its whole catalog again (:meth:`resync`: at
        100,000 boxes over 4 nodes, 25,000 boxes serialized by the node and parsed here per change, seconds
        of CPU on both: issue 37).  Derived items (subscriptions) stay as held, so the next push carries
        what the slice changed around the touched elements.  The caller patches only when the new slice is
        what the node holds for them (head/learning.py ``assumable``: nodes in sync before, no pending
        request for a touched box, no commit since); a push refused anyway makes the node read whole
        (:meth:`sync_once`).  Unknown ``held``: a resync."""
        if self.held is None:
            self.resync()
            return
        held = self.held.copy()
        for name, keys in touched.items():
            have, want = getattr(held, name), getattr(self.desired, name)
            for key in keys:
                if key in want:
                    have[key] = want[key]
                else:
                    have.pop(key, None)
        self.held = held
        self.serial = None  # (the node counted its own change; this patch is not its serial)
        self.assumed = True
        self.assumed_boxes = frozenset(touched.get("boxes", ()))
        self.counters["assumed"] += 1
        self._wake.set()

    def patch(self, written: Written) -> bool:
        """The node wrote ``written.items`` to its catalog for a move (wire/move_report.py): what it holds
        now is ``held`` with them applied, as the node applied them, if ``held`` is the node's catalog at
        the serial they were applied on (same incarnation, no change of the node between that this Head
        did not count); else, or if they do not apply, the node is read again (:meth:`resync`).  Exact,
        unlike :meth:`assume`: the items are the node's own, not the slice's.  The caller patches only
        nodes in sync before the report, with no commit since (head/learning.py ``assumable``)."""
        if self.held is None or self.serial != (written.incarnation, written.base):
            log.info("node %s: move report at serial %d of %s, the Head's record at %s: read again",
                     self.endpoint, written.base, written.incarnation[:12], self.serial)
            self.counters["patch_mismatch"] += 1
            self.resync()
            return False
        try:
            doc = read_document(written.items, f"move report of node {self.endpoint}", check_schema=False)
            if not isinstance(doc, Update):
                raise TypeError(f"not update XML: {type(doc).__name__}")
            held = apply_update(self.held, doc.items, self.held.version)
        except (ValidationFailed, UpdateRejected, TypeError) as exc:
            log.warning("node %s: its move report does not apply to the Head's record (%s): read again",
                        self.endpoint, exc)
            self.counters["patch_mismatch"] += 1
            self.resync()
            return False
        self.held = held
        self.serial = (written.incarnation, written.serial)
        self.assumed = False
        self.counters["patched"] += 1
        self._wake.set()
        return True

    def pause(self) -> None:
        """Send nothing until :meth:`resume` (the node changed itself; the Head must catch up first)."""
        self._running.clear()

    def resume(self, resync: bool = True, touched: dict[str, set[str]] | None = None,
               written: Written | None = None) -> None:
        """Send again; what the node holds is read again (``resync``), or patched by ``touched`` (:meth:`assume`)
        or by what it ``written`` for a move (:meth:`patch`)."""
        if written is not None:
            self.patch(written)
        elif touched is not None:
            self.assume(touched)
        elif resync:
            self.resync()
        self._running.set()

    @property
    def in_sync(self) -> bool:
        return self.acked_version >= self.desired_version and self.failure is None and not self.resyncing

    # -- the loop ------------------------------------------------------------

    async def run(self) -> None:
        backoff = Backoff(cap=MAX_BACKOFF)
        while True:
            await self._wake.wait()
            await self._running.wait()
            self._wake.clear()
            try:
                await self.sync_once()
                backoff.reset()
            except (PeerUnreachable, PeerRefused) as exc:
                self.held = None  # a lost reply leaves us unsure what it applied
                self.serial = None
                self.failure = _reason(exc)
                self.counters["failures"] += 1
                log.info("cannot update node %s (will retry): %s", self.endpoint, self.failure)
                self.on_change()
                await backoff.sleep()
                self._wake.set()

    async def _read_held(self) -> Catalog:
        """What the node holds, from its ``GET /catalog``: decoded off the event loop (a node holding 5,000
        boxes is a few MB of XML), without the XSD gate (it is what this Head sent it); its id names the
        node's serial (:meth:`patch`)."""
        text = await self.peers.text(endpoint_url(self.endpoint, "/catalog"))
        self.counters["catalog_reads"] += 1
        held, self.serial = await asyncio.to_thread(_held_of, text, f"catalog of node {self.endpoint}")
        return held

    async def sync_once(self) -> None:
        """One round: read what the node holds if unknown, send the difference."""
        if self.held is None:
            self.held = await self._read_held()
            self._hold_unreported_moves(self.held, self.desired_version)
        held, desired, version = self.held, self.desired, self.desired_version
        blocked = self.pending.blocked_boxes(self.endpoint)
        self.unreported &= blocked
        # A box moved here, not yet reported, needs its inputs and subscriptions too: remove nothing.
        keep = bool(self.unreported)
        wanted = update_items(held, desired)
        items = [i for i in wanted if box_of(i, held, desired) not in blocked
                 and not (keep and isinstance(i, (Delete, Unsubscribe)))]
        if items:
            text = await _off_loop_if_large(len(items), update_document, items, version=version,
                                            origin=self.origin, id=f"v{version}")
            self.pushing = True
            try:
                answer = await self.peers.post_update(self.endpoint, text, timeout=push_timeout(len(items)))
            except PeerRefused as exc:
                if self.assumed and self._drop_absent(exc, items, held):  # held a guess: removals it made
                    return
                if exc.status == 409 and self._hold_back(exc.payload.get("rejections", []), items, version):
                    self._wake.set()  # send the rest now
                    self.on_change()
                    return
                self.assumed = False  # a guessed held refused otherwise: read what it holds (run() does)
                raise
            finally:
                self.pushing = False
            self.serial = _serial_after(self.serial, answer)
            self.counters["updates_sent"] += 1
            self.counters["items_sent"] += len(items)
            if len(items) == len(wanted):
                # Every item sent: the node holds the slice itself, and held is that very object, so the
                # next difference compares what the next slice wrote over it (update_items: a Layered
                # version's writes), not the whole slice (5,000-25,000 boxes at 100,000: issue 37).
                self.held = desired
            else:
                self.held = await _off_loop_if_large(len(items), apply_update, held, items, version)
        elif not wanted:
            self.held = desired  # (equal: the same object from now on, for the same reason)
        self.assumed = False
        self.acked_version = max(self.acked_version, version)
        self.failure = None
        self.resyncing = self.held is None
        self.pending.delivered(self.endpoint, self.acked_version)
        self.on_change()

    def _drop_absent(self, exc: PeerRefused, items: list, held: Catalog) -> bool:
        """A guessed ``held`` (:meth:`assume`) refused only for removals of what the node does not hold (it
        removed them itself with its change, as its slice wants): held without them, sent again.  False: a
        refusal of anything else, for which the node is read whole."""
        indexes = [r.get("index") for r in exc.payload.get("rejections", [])] if exc.status == 409 else []
        if not indexes or not all(isinstance(i, int) and 0 <= i < len(items) for i in indexes):
            return False
        absent = [items[i] for i in indexes]
        if not all(isinstance(item, (Delete, Unsubscribe)) for item in absent):
            return False
        # Only removals about what the reported change touched (or about no box): a removal of another
        # box's element refused may be a change the node made that the Head has not learnt yet (a later
        # move): that takes the pending-request path, so learning that move reads the node it went to.
        if not all(removal_box(item, held, self.desired) in self.assumed_boxes | {None} for item in absent):
            return False
        self.held = apply_update(held, absent, held.version)
        self.serial = None
        self.counters["assumed_absent"] += len(absent)
        self._wake.set()
        return True

    def _hold_unreported_moves(self, held: Catalog, version: int) -> None:
        """Boxes the node holds that the catalog places elsewhere: moved here, the move not yet learnt."""
        if self.placed is None:
            return
        for box in sorted(held.boxes.keys() - self.desired.boxes.keys()):
            where = self.placed(box)
            if where is not None and where != self.endpoint:
                reason = f"the node holds it, the catalog puts it on {where}: a move not reported yet"
                self.pending.add(self.endpoint, box, version, reason, self.acked_version)
                self.unreported.add(box)
                self.counters["pending_requests"] += 1
                log.info("node %s: box %r is here, not on %s; holding its removal until the move is reported",
                         self.endpoint, box, where)

    def _hold_back(self, rejections: list[dict[str, Any]], items: list, version: int) -> bool:
        """Queue a pending request per missing box; False if a refusal is not about a box."""
        assert self.held is not None
        boxes: dict[str, str] = {}
        for r in rejections:
            index = r.get("index")
            item = items[index] if isinstance(index, int) and 0 <= index < len(items) else None
            box = box_of(item, self.held, self.desired) if item is not None else None
            if box is None:
                return False
            boxes.setdefault(box, str(r.get("reason", "refused")))
        for box, reason in boxes.items():
            self.pending.add(self.endpoint, box, version, reason, self.acked_version)
            self.counters["pending_requests"] += 1
            log.info("node %s: box %r is not there (%s); holding its update as a pending request",
                     self.endpoint, box, reason)
        return True


def catching_up(syncs: Iterable[NodeSync], alive: Callable[[str], bool]) -> bool:
    """Whether a node is still taking a change: a sync not in sync, leaving out a node whose push failed
    or that is down (it stays out of sync until it is back: background work waiting for it would starve)."""
    return any(not s.in_sync and s.failure is None and alive(s.endpoint) for s in syncs)


def _held_of(text: str, source: str) -> tuple[Catalog, tuple[str, int] | None]:
    doc = read_document(text, source, check_schema=False)
    assert isinstance(doc, Update)
    return apply_update(Catalog(), doc.items, doc.version or 0), read_serial_id(doc.id)


def _serial_after(before: tuple[str, int] | None, answer: Any) -> tuple[str, int] | None:
    """The node's serial after a push it answered: one more than before, if its answer says so (a node
    that changed itself meanwhile, or restarted, or does not say: unknown).

    >>> _serial_after(("a", 4), {"incarnation": "a", "serial": 5}), _serial_after(("a", 4), {"serial": 6})
    (('a', 5), None)
    """
    if before is None or not isinstance(answer, dict):
        return None
    incarnation, serial = before
    if answer.get("incarnation") != incarnation or answer.get("serial") != serial + 1:
        return None
    return incarnation, serial + 1


def push_timeout(items: int) -> float:
    """Seconds a push of ``items`` update items may take before it counts as lost.

    >>> push_timeout(1), push_timeout(20_000)
    (10.02, 410.0)
    """
    return PUSH_TIMEOUT + PUSH_PER_ITEM * items


async def _off_loop_if_large(items: int, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """``fn(*args, **kwargs)``, in a thread when it handles more than :data:`OFF_LOOP_ITEMS` items."""
    if items > OFF_LOOP_ITEMS:
        return await asyncio.to_thread(fn, *args, **kwargs)
    return fn(*args, **kwargs)


def _reason(exc: Exception) -> str:
    if isinstance(exc, PeerUnreachable):
        return f"node unreachable ({exc.reason}); the update will be delivered when it is back"
    if isinstance(exc, PeerRefused):
        return f"node refused the update: {exc.payload.get('error') or exc.status}"
    return str(exc)
