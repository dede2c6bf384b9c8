"""A change a node made itself (connect, disconnect, a layout) patches what the Head believes it holds.

After the Head commits a change a node reported, it used to forget what the
nodes involved hold and read their whole local catalogs again (issue 37: at
100,000 boxes over 4 nodes, 25,000 boxes serialized by each node and parsed
by the Head, seconds of CPU per ``boreas move``).  Now
:meth:`~boreas.head.node_sync.NodeSync.assume` patches ``held`` with the
elements the commit touched, as the node's slice has them, when that is what
the nodes hold: they were in sync before the report, no touched box has a
pending request, and no Head commit came between.  Otherwise they are read
whole, as before (a modify refused by a moving box, a commit before resume).
A move is patched with what its nodes report they wrote (the source and the
target write the moved boxes' streams' elements from the source's catalog as
it was, node/handover.py): tests/test_learn_move_report.py.
"""

from __future__ import annotations

import asyncio

from collections.abc import Callable
from dataclasses import replace

from boreas.catalog.documents import Update, read_document
from boreas.catalog.elements import apply_changes
from boreas.catalog.deployment_model import Subscription
from boreas.catalog.document_model import Unsubscribe
from boreas.catalog.model import Box, Catalog, InPort
from boreas.catalog.slices import node_slice
from boreas.catalog.replicate import apply_update, catalog_items
from boreas.catalog.xmlcodec import to_text
from boreas.catalog.updates import update_document
from boreas.client.optimizer import Optimizer
from boreas.head.learning import Learner
from boreas.head.node_sync import NodeSync
from boreas.head.pending import PendingRequests
from boreas.catalog.store import Change
from boreas.wire.client import PeerRefused
from support.cluster import TOKEN, wait_until
from test_connect import connect_topology


def _reads(cluster, endpoint: str) -> int:
    return cluster.nodes()[endpoint]["counters"].get("catalog_reads", 0)


def _placed_on(catalog: Catalog, endpoint: str) -> dict[str, Box]:
    return {name: box for name, box in catalog.boxes.items() if box.node == endpoint}


async def test_connect_disconnect_and_a_reported_move_read_no_node_and_each_holds_its_slice(cluster_factory):
    cluster = cluster_factory()
    nodes = await asyncio.to_thread(connect_topology, cluster, 2)
    await asyncio.to_thread(cluster.wait_in_sync, *nodes)
    reads = {e: _reads(cluster, e) for e in nodes}

    async def check(read: bool) -> None:
        nonlocal reads
        await asyncio.to_thread(cluster.wait_in_sync, *nodes)
        head = await asyncio.to_thread(cluster.head_catalog)
        for endpoint in nodes:  # the whole local catalog (inputs, publications, subscriptions), not only boxes
            await asyncio.to_thread(wait_until, lambda: cluster.node_catalog(endpoint) == node_slice(head, endpoint),
                                    10, f"{endpoint} in its slice")
        now = {e: _reads(cluster, e) for e in nodes}
        assert (now != reads) == read, (reads, now)
        reads = now

    async with Optimizer(cluster.head, TOKEN) as optimizer:
        await optimizer.move("box1", nodes[0])
        await check(read=False)  # patched with what the two nodes wrote (their serials known: read at start)
        await optimizer.insert_filter("box1", "time % 2 = 0", name="even")
        await check(read=False)
        await optimizer.disconnect("even")
        await check(read=False)
        # (the connect and disconnect on box1's node were reported with what it wrote: its serial is known)
        await optimizer.move("box1", nodes[1])
        await check(read=False)


class _Node:
    """A node's two calls the Head makes: ``GET /catalog``, and an update, applied to what it ``holds``;
    an update about a box in ``gone`` is refused as a real node refuses it: 409, the box moved away."""

    def __init__(self, holds: Catalog):
        self.holds = holds
        self.gone: set[str] = set()
        self.posted: list[str] = []

    async def text(self, url: str, **_: object) -> str:
        return update_document(catalog_items(self.holds), version=self.holds.version, origin="test")

    async def post_update(self, endpoint: str, text: str, timeout: float = 0.0) -> dict:
        self.posted.append(text)
        doc = read_document(text, "test", check_schema=False)
        assert isinstance(doc, Update)
        refused = [{"index": i, "reason": f"box {box} moved away"} for i, item in enumerate(doc.items)
                   if (box := getattr(item, "box", None) or getattr(item, "name", None)) in self.gone]
        if refused:
            raise PeerRefused(endpoint, 409, {"error": "refused", "rejections": refused})
        self.holds = apply_update(self.holds, doc.items, doc.version or 0)
        return {}


def _box(name: str, node: str = "n:1", expression: str = "true") -> Box:
    return Box(name, "filter", (InPort("S"),), (f"{name}_out",), (("expression.0", expression),), node=node)


class _Head:
    """What :class:`~boreas.head.learning.Learner` uses of a Head: the catalog, committed here in order
    (``before`` lands just before the next commit, while the learnt nodes are paused; ``between`` runs
    inside the next ``caught_up``: a Head commit landing before the learnt nodes resume),
    and one sync per fake node, each sent the boxes placed on it; each sync's loop runs as a task."""

    def __init__(self, catalog: Catalog, nodes: dict[str, _Node]):
        self.catalog = catalog
        self.index = None
        self.pending = PendingRequests()
        self.syncs = {e: NodeSync(e, n, self.pending, lambda: None) for e, n in nodes.items()}  # type: ignore
        self.between: Callable[[Catalog], list[Change] | None] | None = None
        self.before: Callable[[Catalog], list[Change] | None] | None = None  # committed before the next
        self._set_slices()

    def _set_slices(self) -> None:
        for endpoint, sync in self.syncs.items():
            sync.set_desired(Catalog(version=self.catalog.version, boxes=_placed_on(self.catalog, endpoint)),
                             self.catalog.version)

    def sync_for(self, endpoint: str) -> NodeSync:
        return self.syncs[endpoint]

    async def commit(self, build) -> int | None:
        if self.before is not None:  # another commit lands first (the next build sees the catalog after it)
            first, self.before = self.before, None
            await self.commit(first)
        changes = build(self.catalog)
        if not changes:
            return None
        self.catalog = apply_changes(self.catalog, changes, self.catalog.version + 1)
        self._set_slices()
        return self.catalog.version

    async def caught_up(self, version: int, timeout: float = 10.0) -> None:
        if self.between is not None:
            build, self.between = self.between, None
            await self.commit(build)

    def notify(self) -> None:
        pass

    async def settle(self) -> None:
        """Until every sync is in sync (each sync's loop runs meanwhile)."""
        loops = [asyncio.create_task(s.run()) for s in self.syncs.values()]
        try:
            while not all(s.in_sync for s in self.syncs.values()):
                await asyncio.sleep(0.01)
        finally:
            for loop in loops:
                loop.cancel()


def _modify(box: str, expression: str):
    def build(catalog: Catalog) -> list[Change]:
        changed = replace(catalog.boxes[box], params=(("expression.0", expression),))
        return [Change("box", box, to_text(changed))]
    return build


def _two_nodes() -> tuple[_Head, _Node, _Node]:
    source, target = _Node(Catalog(version=1, boxes={"box1": _box("box1", "s:1", "time > 1")})), _Node(Catalog())
    head = _Head(Catalog(version=1, boxes={"box1": _box("box1", "s:1", "time > 1")}), {"s:1": source, "t:1": target})
    return head, source, target


def _runs(node: _Node) -> str:
    return node.holds.boxes["box1"].param("expression.0")


async def test_a_modify_refused_by_a_box_moving_away_reaches_its_new_node():
    """box1 on s:1 runs ``time > 1``; a modify to ``time > 2`` is committed; meanwhile s:1 moved box1 to
    t:1 (with what it ran), so s:1 refuses the push, 409 "moved away", and it is held as a pending request;
    t:1 reports the move, committed with the catalog's box (``time > 2``).  t:1 runs ``time > 1`` until
    sent the modify: what it holds is not the new slice, so it is read, not patched (the reviewer's case)."""
    head, source, target = _two_nodes()
    await head.settle()
    source.gone.add("box1")  # s:1 moves box1 to t:1 itself
    source.holds = Catalog(version=1)
    target.holds = Catalog(version=1, boxes={"box1": _box("box1", "t:1", "time > 1")})
    await head.commit(_modify("box1", "time > 2"))
    await head.settle()  # s:1's push refused as the box moved away: a pending request
    assert head.pending.blocked_boxes("s:1") == {"box1"}
    await Learner(head).move(["box1"], "t:1")  # type: ignore[arg-type]
    await head.settle()
    assert _runs(target) == "time > 2" and head.catalog.boxes["box1"].node == "t:1" and not len(head.pending)


async def test_a_head_commit_before_the_learnt_nodes_resume_reaches_them():
    """A modify committed by the Head between the move's commit and the nodes' resume is sent."""
    head, source, target = _two_nodes()
    await head.settle()
    source.holds, target.holds = Catalog(version=1), Catalog(version=1, boxes={"box1": _box("box1", "t:1", "time > 1")})
    head.between = _modify("box1", "time > 3")
    await Learner(head).move(["box1"], "t:1")  # type: ignore[arg-type]
    await head.settle()
    assert _runs(target) == "time > 3" and head.catalog.boxes["box1"].param("expression.0") == "time > 3"


async def test_a_head_commit_after_the_nodes_paused_and_before_the_learnt_commit_reaches_them():
    """A modify committed while the nodes are paused, before the move's commit (which carries it): the
    paused s:1 was never sent it, so t:1 runs the box as before it, and is read, not patched."""
    head, source, target = _two_nodes()
    await head.settle()
    source.holds, target.holds = Catalog(version=1), Catalog(version=1, boxes={"box1": _box("box1", "t:1", "time > 1")})
    head.before = _modify("box1", "time > 4")
    await Learner(head).move(["box1"], "t:1")  # type: ignore[arg-type]
    await head.settle()
    assert _runs(target) == "time > 4" and head.catalog.version == 3


async def test_an_adopter_is_read_not_patched():
    """Failover: t:1 adopted s:1's boxes from the catalog s:1 saved, which may be older than what s:1
    acknowledged (here ``time > 1`` against ``time > 2``): t:1 is read and sent the difference."""
    head, source, target = _two_nodes()
    await head.commit(_modify("box1", "time > 2"))
    await head.settle()
    assert source.holds.boxes["box1"].param("expression.0") == "time > 2"
    target.holds = Catalog(version=1, boxes={"box1": _box("box1", "t:1", "time > 1")})  # s:1's old catalog
    await Learner(head).adoption("s:1", "t:1")  # type: ignore[arg-type]
    await head.settle()
    assert _runs(target) == "time > 2" and head.catalog.boxes["box1"].node == "t:1"


async def test_a_move_reads_its_source_and_target_again():
    head, source, target = _two_nodes()
    await head.settle()
    reads = {e: s.counters["catalog_reads"] for e, s in head.syncs.items()}
    source.holds, target.holds = Catalog(version=1), Catalog(version=1, boxes={"box1": _box("box1", "t:1", "time > 1")})
    await Learner(head).move(["box1"], "t:1")  # type: ignore[arg-type]
    await head.settle()
    assert {e: s.counters["catalog_reads"] - reads[e] for e, s in head.syncs.items()} == {"s:1": 1, "t:1": 1}
    assert _runs(target) == "time > 1" and "box1" not in source.holds.boxes


class _Subscribed(_Node):
    """Refuses the removal of a subscription it does not hold, 409 with the item's index, as a node does."""

    async def post_update(self, endpoint: str, text: str, timeout: float = 0.0) -> dict:
        doc = read_document(text, "test", check_schema=False)
        assert isinstance(doc, Update)
        refused = [{"index": i, "reason": "no such subscription"} for i, item in enumerate(doc.items)
                   if isinstance(item, Unsubscribe) and f"{item.stream}|{item.endpoint}" not in self.holds.subscriptions]
        if refused:
            raise PeerRefused(endpoint, 409, {"error": "refused", "rejections": refused})
        return await super().post_update(endpoint, text, timeout)


async def test_a_refused_removal_about_a_box_the_learnt_change_did_not_touch_is_a_pending_request():
    """a:1 held box0 and box1, box1's out stream subscribed by client:9.  a:1 moved box0 (learnt, so its held
    was patched for box0) and then box1 with its subscription (not learnt yet).  The client unsubscribes: a:1
    refuses the removal (it no longer holds it).  That refusal is about box1, which the learnt change did not
    touch: a pending request for box1, so learning box1's move reads the node it went to, which holds the
    subscription, and removes it there -- not dropped as a removal a:1 made itself with the learnt move."""
    subscribed = Subscription("box1_out", "client:9")
    v1 = Catalog(version=1, boxes={"box0": _box("box0", "a:1"), "box1": _box("box1", "a:1")},
                 subscriptions={subscribed.key: subscribed})
    node = _Subscribed(v1)
    pending = PendingRequests()
    sync = NodeSync("a:1", node, pending, lambda: None)  # type: ignore[arg-type]
    sync.set_desired(v1, 1)
    await sync.sync_once()
    sync.set_desired(Catalog(version=2, boxes={"box1": _box("box1", "a:1")}, subscriptions={subscribed.key: subscribed}), 2)
    node.holds = Catalog(version=1, subscriptions={})  # a:1 moved box0 (learnt) and box1, its subscription along
    sync.assume({"boxes": {"box0"}})
    sync.set_desired(Catalog(version=3, boxes={"box1": _box("box1", "a:1")}), 3)  # the client unsubscribed
    await sync.sync_once()  # refused: held back as a pending request, the rest sent
    assert [r.box for r in pending.for_node("a:1")] == ["box1"]


async def test_after_a_push_the_head_holds_the_slice_object_itself():
    """What a node acknowledged is its slice, the very object: the next difference is what the next slice
    wrote over it (a Layered version's writes), not a comparison of the whole slice."""
    node = _Node(Catalog(version=1))
    sync = NodeSync("n:1", node, PendingRequests(), lambda: None)  # type: ignore[arg-type]
    first = Catalog(version=2, boxes={"a": _box("a")})
    sync.set_desired(first, 2)
    await sync.sync_once()
    assert sync.held is first and len(node.posted) == 1 and sync.in_sync
    second = first.copy()
    second.version = 3
    second.boxes["b"] = _box("b")
    sync.set_desired(second, 3)
    await sync.sync_once()
    assert sync.held is second and len(node.posted) == 2 and sync.in_sync
    assert "name=\"b\"" in node.posted[-1] and "name=\"a\"" not in node.posted[-1]
