"""Layout commands of a partitioned ``m3`` box: ``boreas split BOX/SEG``, ``boreas rebalance BOX``, ``boreas
retire BOX NODE``, ``boreas cancel BOX`` (``boreas move BOX/SEG NODE`` and ``boreas move BOX NODE`` of a
partitioned box are :mod:`.optimize`'s).

Thin callers of :class:`boreas.client.optimizer.Optimizer`: it sends the
change to the box's leader (member 0, ``POST /segments/{box}/relayout``),
which switches every member at an epoch boundary while events flow and
moves the data, and returns once the Head's catalog shows the new layout and
every node is in sync with it.
"""

from __future__ import annotations

import argparse
from typing import Any

from boreas.client.optimizer import OptimizerFailed
from boreas.client.optimizer_updates import segment_name
from boreas.m3.cumulus import Layout
from boreas.m3.cumulus.relayout import REPLICAS

from .common import EXIT_OK, CommandFailed, add_head_option, add_token_option, run_optimizer


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
    try:
        box, seg = segment_name(args.segment)
    except OptimizerFailed as exc:
        raise CommandFailed(str(exc)) from None
    reply = run_optimizer(args, lambda optimizer: optimizer.split(box, seg))
    print(describe(box, reply))
    return EXIT_OK


def cmd_rebalance(args: argparse.Namespace) -> int:
    reply = run_optimizer(args, lambda optimizer: optimizer.rebalance(args.box))
    print(describe(args.box, reply))
    return EXIT_OK


def cmd_retire(args: argparse.Namespace) -> int:
    """``boreas retire BOX NODE``: the box's last member, added to it later and holding no segment, leaves the
    partition at an epoch (docs/cumulus.md §6.4); the Head's catalog then lists the box without NODE."""
    reply = run_optimizer(args, lambda optimizer: optimizer.retire(args.box, args.node))
    lay = Layout.from_dict(reply["layout"])
    print(f"box {args.box}: layout {lay.version}, {len(lay.members)} members; {args.node} retired "
          f"({reply['seconds']:.2f} s)")
    return EXIT_OK


def cmd_cancel(args: argparse.Namespace) -> int:
    """``boreas cancel BOX``: the leader drops the box's last announced move, split or rebalance (409 -> exit 1
    with the leader's reason when none is under way or its segments have already copied)."""
    reply = run_optimizer(args, lambda optimizer: optimizer.cancel(args.box))
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
