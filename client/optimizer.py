"""The Python API for optimizers: move boxes, insert and remove filters, change a partitioned box's layout.

As optimizers in the paper do, an :class:`Optimizer` addresses the node
that holds the box (the sink box, for a filter; a partitioned box's leader,
member 0, for a layout change), not the Head: it reads where the box is,
sends that node the change, and returns once the node answered and the
change shows where it reads (see :mod:`.optimizer_views`).  Every caller
goes through it: ``boreas move``/``connect``/``disconnect``/``split``/
``rebalance``/``retire``/``cancel``, the Head's web UI and a regional
component acting as its region's optimizer, so all of them refuse the same
changes for the same reasons (:mod:`.optimizer_updates`).

Any failure is an :class:`OptimizerFailed` with the reason (and an HTTP
status saying what kind of failure it was).

Usage::

    async with Optimizer("http://localhost:14000", token) as optimizer:
        moved = await optimizer.move("box1", "localhost:15002")      # moved.source: the node it left
        await optimizer.insert_filter("box1", "time % 3 <> 0", name="drop")   # box1 now reads drop
        await optimizer.disconnect("drop")                           # and Source again
        await optimizer.move("q3/2", "localhost:15002")              # a segment of a partitioned box
        await optimizer.split("q3", 0)
        await optimizer.rebalance("q3")
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Self

from boreas.catalog.model import Catalog
from boreas.wire.addressing import endpoint_url
from boreas.wire.one_shot import Peers
from boreas.wire.peer_errors import PeerError, PeerRefused

from .errors import OptimizerFailed, QueryFailed
from .optimizer_updates import (
    ORIGIN,
    check_insertion,
    check_member,
    connect_added,
    connect_document,
    disconnect_document,
    filter_box,
    in_stream,
    inserted_box,
    move_change,
    move_document,
    node_of,
    rebalance_change,
    the_box,
)
from .optimizer_views import CatalogView, HeadView, TopologyView

__all__ = ["CatalogView", "HeadView", "Moved", "Optimizer", "OptimizerFailed", "TopologyView"]

#: Seconds a node may take to answer an update (a box with large state takes a while to hand over).
UPDATE_TIMEOUT = 60.0


@dataclass(frozen=True)
class Moved:
    """What :meth:`Optimizer.move` did.

    For a box that is not partitioned, ``source`` is the node it left and
    ``reply`` that node's answer; for a segment ``BOX/SEG`` or a whole
    partitioned box, ``relayout`` is the leader's answer (``layout``,
    ``moves`` as ``[segment, from member, to member]``, ``seconds``, ``changed``).
    """

    name: str
    target: str
    source: str | None = None
    reply: dict[str, Any] | None = None
    relayout: dict[str, Any] | None = None


class Optimizer:
    """Topology changes made as an optimizer makes them (paper section 3; docs/client.md "Optimizers").

    ``head`` is the Head's URL and ``token`` the cluster's token; ``timeout``
    the seconds a change may take to show.  By default it reads the Head's
    catalog (:class:`HeadView`); a component holding a catalog passes its
    own ``view`` and ``peers`` (which it keeps open) and may name itself as
    the ``origin`` of its updates; a CLI command passes a
    :class:`~boreas.wire.one_shot.OneShotPeers`, which needs no aiohttp.  Use
    it with ``async with``, or :meth:`close` it.
    """

    def __init__(self, head: str | None, token: str | None = None, timeout: float = 60.0, *,
                 peers: Peers | None = None, view: TopologyView | None = None, origin: str = ORIGIN):
        self.head = head.rstrip("/") if head else None
        self.token = token
        self.timeout = timeout
        self.origin = origin
        self._own_peers = peers is None
        if peers is None:
            from boreas.wire.client import PeerClient  # (aiohttp: only for a caller that brought no peers)

            peers = PeerClient(token)
        self.peers = peers
        if view is None:
            if self.head is None:
                raise ValueError("an Optimizer needs the Head's URL or a view of the topology")
            view = HeadView(self.peers, self.head)
        self.view = view

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        if self._own_peers:
            await self.peers.close()

    # -- boxes -------------------------------------------------------------------

    async def move(self, name: str, target: str) -> Moved:
        """Move box ``name`` to node ``target``, with its state; or, of a partitioned box, segment
        ``BOX/SEG`` or every segment of ``BOX`` (its leader moves the data)."""
        box = name.rpartition("/")[0] if "/" in name else name
        catalog = await self.view.catalog(boxes=[box])
        the_box(catalog, box, self.view.where)
        if box in catalog.partitions:
            check_member(catalog, box, target)
            return Moved(name, target, relayout=await self._relayout(catalog, box, move_change(name, target)))
        if box != name:
            raise OptimizerFailed(f"box {box!r} is not partitioned: it has no segments", 422)
        source = node_of(catalog, box, self.view.where)
        if source == target:
            raise OptimizerFailed(f"box {box!r} is already on {target}")
        reply = await self._send(source, move_document(box, target, self.origin))

        def moved(c: Catalog) -> bool:  # (a box moved out of a region leaves the region's catalog)
            return c.boxes[box].node == target if box in c.boxes else target not in c.nodes

        await self.view.shown(moved, f"box {box!r} moved to {target}", self.timeout, boxes=[box])
        return Moved(name, target, source=source, reply=reply)

    async def connect(self, sink: str, port: int, box_xml: str, upstream: bool = False) -> dict[str, Any]:
        """Insert the box in ``box_xml`` before in port ``port`` of ``sink``, on the sink's node (``upstream``:
        on the node the stream comes from); the node's answer (``inserted``, ``node``, ``stream``)."""
        text = connect_document(sink, port, box_xml, upstream, origin=self.origin)
        inserted = inserted_box(text)
        taken = [inserted.name, *inserted.outputs]  # (as box names, inputs, or streams some box writes)
        catalog = await self.view.catalog(boxes=[sink, *taken], streams=taken)
        node = node_of(catalog, sink, self.view.where)
        check_insertion(catalog, sink, port, inserted)
        reply = await self._send(node, text)
        await self.view.shown(lambda c: inserted.name in c.boxes, f"box {inserted.name!r} inserted", self.timeout,
                              boxes=[inserted.name])
        return reply

    async def insert_filter(self, sink: str, expression: str, port: int = 0, name: str | None = None,
                            upstream: bool = False) -> dict[str, Any]:
        """:meth:`connect` a filter box ``name`` (default ``SINK_filter``) keeping the tuples for which
        ``expression`` holds; it writes a stream also called ``name``, which ``sink`` then reads."""
        stream = in_stream(await self.view.catalog(boxes=[sink]), sink, port, self.view.where)
        return await self.connect(sink, port, filter_box(name or f"{sink}_filter", stream, expression), upstream)

    async def disconnect(self, stream: str) -> dict[str, Any]:
        """Remove the box a connect inserted, named by the stream it writes; its sink reads the original
        stream again.  The node's answer (``removed``, ``node``, ``stream``)."""
        catalog = await self.view.catalog(streams=[stream])
        sink, producer = connect_added(catalog, stream)
        reply = await self._send(sink.node or "", disconnect_document(stream, self.origin))
        await self.view.shown(lambda c: producer.name not in c.boxes, f"box {producer.name!r} removed",
                              self.timeout, boxes=[producer.name])
        return reply

    # -- a partitioned box's layout ----------------------------------------------------

    async def relayout(self, box: str, change: dict[str, Any]) -> dict[str, Any]:
        """Send ``change`` (``{"move": [seg, node]}``, ``{"split": seg}``, ``{"move_all": node}``,
        ``{"rebalance": {seg: entries}}``, ``{"retire": node}`` or ``{"cancel": True}``) to the box's leader
        (``POST /segments/{box}/relayout``); its answer once the new layout shows."""
        return await self._relayout(await self.view.catalog(boxes=[box]), box, change)

    async def split(self, box: str, segment: int) -> dict[str, Any]:
        """Split a segment in two, on the same node."""
        return await self.relayout(box, {"split": segment})

    async def retire(self, box: str, node: str) -> dict[str, Any]:
        """Take the box's last member (added later, holding no segment) out of the partition."""
        return await self.relayout(box, {"retire": node})

    async def cancel(self, box: str) -> dict[str, Any]:
        """Drop the box's last announced move, split or rebalance while its segments still copy."""
        return await self.relayout(box, {"cancel": True})

    async def rebalance(self, box: str) -> dict[str, Any]:
        """Even out the box's entries over its members (counted by every member's ``GET /segments``); a
        member a node hosts as a guest after a failover is emptied."""
        if self.head is None:
            raise OptimizerFailed("a rebalance counts entries through the Head: give the Optimizer its URL", 422)
        from .query import QueryClient  # (M3's layouts and aiohttp: only a rebalance reads the members)

        async with QueryClient(self.head, self.token) as client:
            try:
                _, answers = await client.segments(box)
            except QueryFailed as exc:
                raise OptimizerFailed(str(exc), exc.status) from None
            except PeerError as exc:
                raise OptimizerFailed(str(exc), 503) from None
        return await self.relayout(box, rebalance_change(answers))

    async def _relayout(self, catalog: Catalog, box: str, change: dict[str, Any]) -> dict[str, Any]:
        the_box(catalog, box, self.view.where)
        part = catalog.partitions.get(box)
        if part is None:
            raise OptimizerFailed(f"box {box!r} is not partitioned")
        leader = part.nodes[0]
        try:
            reply = await self.peers.call("POST", endpoint_url(leader, f"/segments/{box}/relayout"),
                                          json_body=change, timeout=self.timeout + 5)
        except PeerRefused as exc:
            raise OptimizerFailed(f"{leader}: {exc.payload.get('error') or exc}", 502) from None
        except PeerError as exc:
            raise OptimizerFailed(str(exc), 503) from None
        if reply.get("changed"):
            version = reply["layout"]["layout"]
            await self.view.shown(lambda c: box in c.partitions and c.partitions[box].layout >= version,
                                  f"box {box!r} switched to layout {version}", self.timeout, boxes=[box])
        return reply

    async def _send(self, node: str, text: str) -> dict[str, Any]:
        """Update XML to the node that holds the box; :class:`OptimizerFailed` with the node's reason."""
        try:
            return await self.peers.post_update(node, text, timeout=UPDATE_TIMEOUT)
        except PeerRefused as exc:
            raise OptimizerFailed(f"node {node}: {exc.payload.get('error') or exc}", 502,
                                  exc.payload.get("diagnostics", [])) from None
        except PeerError as exc:
            raise OptimizerFailed(str(exc), 503) from None
