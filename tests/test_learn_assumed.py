"""A change a node made itself (move, connect, disconnect) patches what the Head believes it holds.

After the Head commits a change a node reported, it used to forget what the
nodes involved hold and read their whole local catalogs again (issue 37: at
100,000 boxes over 4 nodes, 25,000 boxes serialized by each node and parsed
by the Head, seconds of CPU per ``boreas move``).  Now
:meth:`~boreas.head.node_sync.NodeSync.assume` patches ``held`` with the
elements the commit touched, as the node's slice has them; a guess the node
refuses makes the Head read it whole, as before.
"""

from __future__ import annotations

import asyncio

from boreas.catalog.model import Box, Catalog, InPort
from boreas.catalog.replicate import catalog_items
from boreas.catalog.updates import update_document
from boreas.client.optimizer import Optimizer
from boreas.head.learning import touched_by
from boreas.head.node_sync import NodeSync
from boreas.head.pending import PendingRequests
from boreas.catalog.store import Change
from boreas.wire.client import PeerRefused
from support.cluster import TOKEN
from test_connect import connect_topology


def _reads(cluster, endpoint: str) -> int:
    return cluster.nodes()[endpoint]["counters"].get("catalog_reads", 0)


def _placed_on(catalog: Catalog, endpoint: str) -> dict[str, Box]:
    return {name: box for name, box in catalog.boxes.items() if box.node == endpoint}


async def test_a_move_connect_and_disconnect_read_no_node_again_and_every_node_holds_its_slice(cluster_factory):
    cluster = cluster_factory()
    nodes = await asyncio.to_thread(connect_topology, cluster, 2)
    await asyncio.to_thread(cluster.wait_in_sync, *nodes)
    reads = {e: _reads(cluster, e) for e in nodes}

    async def check() -> None:
        await asyncio.to_thread(cluster.wait_in_sync, *nodes)
        head = await asyncio.to_thread(cluster.head_catalog)
        for endpoint in nodes:
            held = await asyncio.to_thread(cluster.node_catalog, endpoint)
            assert _placed_on(held, endpoint) == _placed_on(head, endpoint), endpoint
        assert {e: _reads(cluster, e) for e in nodes} == reads  # no node read again

    async with Optimizer(cluster.head, TOKEN) as optimizer:
        await optimizer.move("box1", nodes[0])
        await check()
        await optimizer.insert_filter("box1", "time % 2 = 0", name="even")
        await check()
        await optimizer.disconnect("even")
        await check()
        await optimizer.move("box1", nodes[1])
        await check()


class _Node:
    """A node's two calls the Head makes: ``GET /catalog`` and an update, refused while ``refuse`` is set."""

    def __init__(self, holds: Catalog):
        self.holds = holds
        self.refuse = False
        self.posted: list[str] = []

    async def text(self, url: str, **_: object) -> str:
        return update_document(catalog_items(self.holds), version=self.holds.version, origin="test")

    async def post_update(self, endpoint: str, text: str, timeout: float = 0.0) -> dict:
        self.posted.append(text)
        if self.refuse:
            raise PeerRefused(endpoint, 422, {"error": "box c is here already"})
        return {}


def _box(name: str, node: str = "n:1") -> Box:
    return Box(name, "filter", (InPort("S"),), (f"{name}_out",), (("expression.0", "true"),), node=node)


async def test_an_assumed_hold_the_node_refuses_is_read_whole():
    node = _Node(Catalog(version=3, boxes={"a": _box("a")}))
    sync = NodeSync("n:1", node, PendingRequests(), lambda: None)  # type: ignore[arg-type]
    sync.set_desired(Catalog(boxes={"a": _box("a")}), 3)
    await sync.sync_once()
    assert sync.counters["catalog_reads"] == 1 and sync.in_sync and not node.posted

    # The node took box b itself and reported it: b is assumed held, nothing is sent, nothing read.
    node.holds = Catalog(version=4, boxes={"a": _box("a"), "b": _box("b")})
    sync.set_desired(Catalog(boxes={"a": _box("a"), "b": _box("b")}), 4)
    sync.assume(touched_by([Change("box", "b", "<box/>")]))
    await sync.sync_once()
    assert sync.counters["catalog_reads"] == 1 and sync.in_sync and not node.posted

    # A wrong guess: the node took box c itself too, not in the report, so the push of c is refused
    # (not as a box missing, which a pending request waits for: node_sync.py _hold_back);
    # the sync's loop then reads the node whole, as without the guess, and it is in sync again.
    node.holds = Catalog(version=5, boxes={"a": _box("a"), "b": _box("b"), "c": _box("c")})
    sync.set_desired(Catalog(boxes={"a": _box("a"), "b": _box("b"), "c": _box("c")}), 5)
    sync.assume({"boxes": {"x"}})
    node.refuse = True
    loop = asyncio.create_task(sync.run())
    try:
        while not node.posted:
            await asyncio.sleep(0.01)
        node.refuse = False
        while not (sync.in_sync and sync.counters["catalog_reads"] == 2):
            await asyncio.sleep(0.01)
    finally:
        loop.cancel()
    assert len(node.posted) == 1 and not sync.assumed


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
