"""Optimizer commands: ``boreas move``, ``boreas connect``, ``boreas disconnect``.

As optimizers in the paper do, the commands address the node that holds the
box (the sink box, for a filter), not the Head: they ask the Head where it
is, send the update XML to that node, and return once the change is
complete everywhere -- the node answered (after any second node it needed),
the Head's catalog shows the change, and every node the Head serves is in
sync with it.  Any failure is a :class:`CommandFailed` with the reason.

Usage::

    source = await move_box(head, token, "box1", "localhost:15001")
    await connect_filter(head, token, "box1", 0, open("drop.xml").read(), upstream=True)
    await disconnect_filter(head, token, "Dropped")
"""

from __future__ import annotations

import argparse
import asyncio
from pathlib import Path

from boreas.catalog.diagnostics import ValidationFailed
from boreas.catalog.documents import Disconnect, Move, read_document
from boreas.catalog.endpoints import normalize_endpoint
from boreas.catalog.updates import update_document
from boreas.catalog.xmlsafe import parse_xml
from boreas.wire.auth import resolve_token
from boreas.wire.client import PeerClient, PeerError, PeerRefused
from lxml import etree

from .common import EXIT_OK, CommandFailed, add_head_option, add_token_option, the_head
from .settled import head_catalog, settled


async def _send(peers: PeerClient, node: str, text: str) -> dict:
    try:
        return await peers.post_update(node, text, timeout=60.0)
    except PeerRefused as exc:
        raise CommandFailed(f"node {node}: {exc.payload.get('error') or exc}") from None
    except PeerError as exc:
        raise CommandFailed(str(exc)) from None


async def move_box(head: str, token: str | None, box: str, target: str, timeout: float = 30.0) -> str:
    """Move ``box`` to ``target``; returns the node it left."""
    async with PeerClient(token) as peers:
        try:
            where = await peers.call("GET", f"{head}/boxes/{box}")
        except PeerRefused as exc:
            raise CommandFailed(exc.payload.get("error") or str(exc)) from None
        source = where["node"]
        if source is None:
            raise CommandFailed(f"box {box!r} is not deployed on any node")
        if source == target:
            raise CommandFailed(f"box {box!r} is already on {target}")
        await _send(peers, source, update_document([Move(target, box=box)], origin="optimizer"))
        await settled(peers, head, lambda c: box in c.boxes and c.boxes[box].node == target,
                       f"box {box!r} moved", timeout)
        return source


def connect_document(sink: str, port: int, box_xml: str, upstream: bool, source: str = "box XML") -> str:
    """``<update><connect box=SINK port=N [upstream=1]><box .../></connect></update>``.

    ``box_xml`` is a ``<box>`` element, or a document holding exactly one.
    """
    root = parse_xml(box_xml, source).getroot()
    boxes = [root] if root.tag == "box" else [el for el in root.iter("box")]
    if len(boxes) != 1:
        raise CommandFailed(f"{source}: expected one <box> to insert, found {len(boxes)}")
    update = etree.Element("update", origin="optimizer")
    connect = etree.SubElement(update, "connect", box=sink, port=str(port))
    if upstream:
        connect.set("upstream", "1")
    connect.append(boxes[0])
    return etree.tostring(update, encoding="unicode")


async def connect_filter(head: str, token: str | None, sink: str, port: int, box_xml: str,
                         upstream: bool = False, timeout: float = 30.0) -> dict:
    """Insert the box in ``box_xml`` before in port ``port`` of ``sink``; the node's answer."""
    try:
        text = connect_document(sink, port, box_xml, upstream)
    except ValidationFailed as exc:
        raise CommandFailed(str(exc)) from None
    name = read_document(text.encode(), "connect").items[0].box.name
    async with PeerClient(token) as peers:
        try:
            where = await peers.call("GET", f"{head}/boxes/{sink}")
        except PeerRefused as exc:
            raise CommandFailed(exc.payload.get("error") or str(exc)) from None
        if where["node"] is None:
            raise CommandFailed(f"box {sink!r} is not deployed on any node")
        reply = await _send(peers, where["node"], text)
        await settled(peers, head, lambda c: name in c.boxes, f"box {name!r} inserted", timeout)
        return reply


async def disconnect_filter(head: str, token: str | None, stream: str, timeout: float = 30.0) -> dict:
    """Remove the box a connect inserted, named by the stream the connect added."""
    async with PeerClient(token) as peers:
        catalog = await head_catalog(peers, head)
        sinks = [b for b in catalog.boxes.values() if any(p.stream == stream for p in b.inputs)]
        producer = next((b for b in catalog.boxes.values() if stream in b.outputs), None)
        if len(sinks) != 1 or producer is None or not sinks[0].node:
            raise CommandFailed(f"stream {stream!r} is not a stream a connect added (one box writes it, "
                                f"one box reads it)")
        text = update_document([Disconnect(stream)], origin="optimizer")
        reply = await _send(peers, sinks[0].node, text)
        await settled(peers, head, lambda c: producer.name not in c.boxes, f"box {producer.name!r} removed",
                       timeout)
        return reply


# -- the command line ------------------------------------------------------------


def cmd_move(args: argparse.Namespace) -> int:
    from .relayout import describe, move_partitioned

    target = normalize_endpoint(args.node)
    head, token = the_head(args), resolve_token(args.token, required=False)
    moved = asyncio.run(move_partitioned(head, token, args.box, target, args.timeout))
    if moved is not None:  # a segment, or a partitioned box: its leader moves the data
        print(describe(args.box.rpartition("/")[0] or args.box, moved))
        return EXIT_OK
    source = asyncio.run(move_box(head, token, args.box, target, args.timeout))
    print(f"moved box {args.box} from {source} to {target}")
    return EXIT_OK


def cmd_connect(args: argparse.Namespace) -> int:
    path = Path(args.box)
    try:
        box_xml = path.read_text()
    except OSError as exc:
        raise CommandFailed(f"{path}: {exc.strerror}") from None
    reply = asyncio.run(connect_filter(the_head(args), resolve_token(args.token, required=False), args.sink,
                                       args.port, box_xml, args.upstream, args.timeout))
    print(f"inserted box {reply['inserted']} on {reply['node']} before {args.sink} port {args.port}: "
          f"it writes {reply['stream']}")
    return EXIT_OK


def cmd_disconnect(args: argparse.Namespace) -> int:
    reply = asyncio.run(disconnect_filter(the_head(args), resolve_token(args.token, required=False),
                                          args.stream, args.timeout))
    print(f"removed the box that wrote {args.stream}; its sink reads {reply['stream']} again")
    return EXIT_OK


def add_parsers(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("move", help="optimizer: move a running box to another node, with its state")
    p.add_argument("box", help="a box, or a segment of a partitioned m3 box (BOX/SEGMENT)")
    p.add_argument("node", help="the target node's endpoint")
    p.add_argument("--timeout", type=float, default=30.0)
    add_head_option(p)
    add_token_option(p)
    p.set_defaults(func=cmd_move)

    p = sub.add_parser("connect", help="optimizer: insert a filter box before an in port of a running box")
    p.add_argument("sink", metavar="SINK_BOX", help="the box whose in port gets the filter")
    p.add_argument("--port", type=int, default=0, help="the sink's zero-based in port (default 0)")
    p.add_argument("--upstream", action="store_true",
                   help="insert on the node the stream comes from (fewer tuples cross the network)")
    p.add_argument("--box", required=True, metavar="FILTER.xml",
                   help="the box to insert: one in stream (the sink's), one new out stream")
    p.add_argument("--timeout", type=float, default=30.0)
    add_head_option(p)
    add_token_option(p)
    p.set_defaults(func=cmd_connect)

    p = sub.add_parser("disconnect", help="optimizer: remove a box inserted by connect")
    p.add_argument("stream", help="the stream the connect added (the inserted box's out stream)")
    p.add_argument("--timeout", type=float, default=30.0)
    add_head_option(p)
    add_token_option(p)
    p.set_defaults(func=cmd_disconnect)
