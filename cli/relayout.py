"""Layout commands of a partitioned ``m3`` box: ``boreas split BOX/SEG``, ``boreas rebalance BOX``, ``boreas
retire BOX NODE`` (and ``boreas move BOX/SEG NODE``, ``boreas move BOX NODE`` of a partitioned box, through
:func:`relayout_box`).

They ask the Head for the box's layout, send the change to its leader (member
0, ``POST /segments/{box}/relayout``), which switches every member at an
epoch boundary while events flow and moves the data, and return once the
Head's catalog shows the new layout and every node is in sync with it.

Usage::

    reply = await relayout_box(head, token, "q3", {"move": [2, "localhost:15002"]})
    print(describe(reply))   # moved q3/2 from localhost:15001 to localhost:15002 ... (layout 3, 0.21 s)
"""

from __future__ import annotations

import argparse
import asyncio
from typing import Any

from boreas.client.query import QueryClient
from boreas.m3.cumulus import Layout
from boreas.m3.cumulus.relayout import REPLICAS
from boreas.wire.addressing import endpoint_url
from boreas.wire.auth import resolve_token
from boreas.wire.client import PeerClient, PeerError, PeerRefused

from .common import EXIT_OK, CommandFailed, add_head_option, add_token_option, the_head
from .settled import settled


def segment_name(text: str) -> tuple[str, int]:
    """``q3/2`` as ``("q3", 2)``."""
    box, _, seg = text.rpartition("/")
    if not box or not seg.isdigit():
        raise CommandFailed(f"{text!r} does not name a segment: write BOX/SEGMENT, e.g. q3/2")
    return box, int(seg)


async def layout_of(head: str, token: str | None, box: str) -> Layout:
    async with QueryClient(head, token) as client:
        try:
            layout = await client.layout_of(box, fresh=True)
        except Exception as exc:  # unknown box, Head down: the client says which
            raise CommandFailed(str(exc)) from None
    if layout is None:
        raise CommandFailed(f"box {box!r} is not partitioned")
    return layout


async def relayout_box(head: str, token: str | None, box: str, change: dict[str, Any],
                       timeout: float = 60.0) -> dict[str, Any]:
    """Send ``change`` (``{"move": [seg, node]}``, ``{"split": seg}``, ``{"move_all": node}``,
    ``{"rebalance": {seg: entries}}`` or ``{"retire": node}``) to the box's leader; its answer once the Head
    shows the new layout."""
    layout = await layout_of(head, token, box)
    async with PeerClient(token) as peers:
        try:
            reply = await peers.call("POST", endpoint_url(layout.members[0], f"/segments/{box}/relayout"),
                                     json_body=change, timeout=timeout + 5)
        except PeerRefused as exc:
            raise CommandFailed(f"{layout.members[0]}: {exc.payload.get('error') or exc}") from None
        except PeerError as exc:
            raise CommandFailed(str(exc)) from None
        if reply.get("changed"):
            version = reply["layout"]["layout"]
            await settled(peers, head, lambda c: box in c.partitions and c.partitions[box].layout >= version,
                           f"box {box!r} switched to layout {version}", timeout)
        return reply


async def move_partitioned(head: str, token: str | None, name: str, target: str,
                           timeout: float = 60.0) -> dict[str, Any] | None:
    """``boreas move BOX/SEG NODE`` or ``boreas move BOX NODE`` of a partitioned box; None for a box that is not."""
    if "/" in name:
        box, seg = segment_name(name)
        return await relayout_box(head, token, box, {"move": [seg, target]}, timeout)
    async with QueryClient(head, token) as client:
        try:
            partitioned = await client.layout_of(name, fresh=True) is not None
        except Exception:  # an unknown box: the ordinary move says so
            return None
    if not partitioned:
        return None
    return await relayout_box(head, token, name, {"move_all": target}, timeout)


async def rebalance_box(head: str, token: str | None, box: str, timeout: float = 60.0) -> dict[str, Any]:
    """Even out the box's entries over its nodes (counts from every node's ``GET /segments``); a member a
    node hosts as a guest after a failover (every hosted member but its own) is emptied."""
    async with QueryClient(head, token) as client:
        try:
            _, answers = await client.segments(box)
        except Exception as exc:
            raise CommandFailed(str(exc)) from None
    counts: dict[str, int] = {}
    guests: set[int] = set()
    for answer in answers:
        for sid, per_map in answer.get("segments", {}).items():
            counts[sid] = counts.get(sid, 0) + sum(per_map.values())
        if answer.get("own", answer.get("member")) != answer.get("member"):
            guests.add(int(answer["member"]))
    return await relayout_box(head, token, box, {"rebalance": counts, "guests": sorted(guests)}, timeout)


def describe(box: str, reply: dict[str, Any]) -> str:
    """One line saying what changed."""
    lay = Layout.from_dict(reply["layout"])
    if not reply.get("changed"):
        return f"box {box}: nothing to change (layout {lay.version})"
    moved = ", ".join(f"{'the replicated maps' if seg == REPLICAS else f'{box}/{seg}'} from {lay.members[src]} "
                      f"to {lay.members[dst]}" for seg, src, dst in reply["moves"])
    what = f"moved {moved}" if moved else "no data moved"
    return f"box {box}: layout {lay.version}, {len(lay.segments)} segments; {what} ({reply['seconds']:.2f} s)"


# -- the command line ------------------------------------------------------------


def cmd_split(args: argparse.Namespace) -> int:
    box, seg = segment_name(args.segment)
    reply = asyncio.run(relayout_box(the_head(args), resolve_token(args.token, required=False), box,
                                     {"split": seg}, args.timeout))
    print(describe(box, reply))
    return EXIT_OK


def cmd_rebalance(args: argparse.Namespace) -> int:
    reply = asyncio.run(rebalance_box(the_head(args), resolve_token(args.token, required=False), args.box,
                                      args.timeout))
    print(describe(args.box, reply))
    return EXIT_OK


def cmd_retire(args: argparse.Namespace) -> int:
    """``boreas retire BOX NODE``: the box's last member, added to it later and holding no segment, leaves the
    partition at an epoch (docs/cumulus.md §6.4); the Head's catalog then lists the box without NODE."""
    reply = asyncio.run(relayout_box(the_head(args), resolve_token(args.token, required=False), args.box,
                                     {"retire": args.node}, args.timeout))
    lay = Layout.from_dict(reply["layout"])
    print(f"box {args.box}: layout {lay.version}, {len(lay.members)} members; {args.node} retired "
          f"({reply['seconds']:.2f} s)")
    return EXIT_OK


def cmd_cancel(args: argparse.Namespace) -> int:
    """``boreas cancel BOX``: the leader drops the box's last announced move, split or rebalance (409 -> exit 1
    with the leader's reason when none is under way or its segments have already copied)."""
    reply = asyncio.run(relayout_box(the_head(args), resolve_token(args.token, required=False), args.box,
                                     {"cancel": True}, args.timeout))
    print(f"box {args.box}: layout change {reply['cancelled']} cancelled; "
          f"layout {Layout.from_dict(reply['layout']).version} stays")
    return EXIT_OK


def add_parsers(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("split", help="split a segment of a partitioned m3 box in two (on the same node)")
    p.add_argument("segment", metavar="BOX/SEGMENT")
    p.add_argument("--timeout", type=float, default=60.0)
    add_head_option(p)
    add_token_option(p)
    p.set_defaults(func=cmd_split)

    p = sub.add_parser("rebalance", help="even out a partitioned m3 box's entries over its nodes")
    p.add_argument("box")
    p.add_argument("--timeout", type=float, default=60.0)
    add_head_option(p)
    add_token_option(p)
    p.set_defaults(func=cmd_rebalance)

    p = sub.add_parser("cancel", help="cancel a partitioned m3 box's last move, split or rebalance while its "
                                      "segments still copy")
    p.add_argument("box")
    p.add_argument("--timeout", type=float, default=60.0)
    add_head_option(p)
    add_token_option(p)
    p.set_defaults(func=cmd_cancel)

    p = sub.add_parser("retire", help="take the last member (added later, holding no segment) out of a "
                                      "partitioned m3 box")
    p.add_argument("box")
    p.add_argument("node", help="the member's node (host:port)")
    p.add_argument("--timeout", type=float, default=60.0)
    add_head_option(p)
    add_token_option(p)
    p.set_defaults(func=cmd_retire)
