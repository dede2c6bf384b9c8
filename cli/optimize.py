"""Optimizer commands: ``boreas move BOX NODE``.

As optimizers in the paper do, the command addresses the node that holds the
box, not the Head: it asks the Head where the box is, sends ``<move>`` to
that node, and returns once the box runs on its new node and the Head's
catalog and every node it affects agree.
"""

from __future__ import annotations

import argparse
import asyncio
import time

from boreas.catalog.documents import Move
from boreas.catalog.endpoints import normalize_endpoint
from boreas.catalog.updates import update_document
from boreas.wire.addressing import endpoint_url
from boreas.wire.auth import resolve_token
from boreas.wire.client import PeerClient, PeerRefused

from .common import EXIT_FAILED, EXIT_OK, CommandFailed, add_head_option, add_token_option, the_head


async def move_box(head: str, token: str | None, box: str, target: str, timeout: float = 30.0) -> str:
    """Move ``box`` to ``target``; returns the node it left.  Raises ``CommandFailed``."""
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
        text = update_document([Move(target, box=box)], origin="optimizer")
        try:
            await peers.call("POST", endpoint_url(source, "/update"), data=text, content_type="application/xml")
        except PeerRefused as exc:
            raise CommandFailed(f"node {source}: {exc.payload.get('error') or exc}") from None
        deadline = time.monotonic() + timeout
        while True:  # complete everywhere: the Head has the new location and its nodes are in sync
            where = await peers.call("GET", f"{head}/boxes/{box}")
            nodes = (await peers.call("GET", f"{head}/nodes"))["nodes"]
            lagging = [n["endpoint"] for n in nodes if n["alive"] and not n["in_sync"]]
            if where["node"] == target and not lagging:
                return source
            if time.monotonic() > deadline:
                raise CommandFailed(f"box {box!r} moved, but after {timeout:g}s the Head still shows it on "
                                    f"{where['node']}" + (f" and {', '.join(lagging)} not in sync" if lagging else ""))
            await asyncio.sleep(0.05)


def cmd_move(args: argparse.Namespace) -> int:
    head = the_head(args)
    target = normalize_endpoint(args.node)
    token = resolve_token(args.token, required=False)
    source = asyncio.run(move_box(head, token, args.box, target, args.timeout))
    print(f"moved box {args.box} from {source} to {target}")
    return EXIT_OK if source else EXIT_FAILED


def add_parsers(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("move", help="optimizer: move a running box to another node, with its state")
    p.add_argument("box")
    p.add_argument("node", help="the target node's endpoint")
    p.add_argument("--timeout", type=float, default=30.0)
    add_head_option(p)
    add_token_option(p)
    p.set_defaults(func=cmd_move)
