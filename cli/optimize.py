"""Optimizer commands: ``boreas move``, ``boreas connect``, ``boreas disconnect``.

Thin callers of :class:`boreas.client.optimizer.Optimizer`, the Python API
for optimizers (docs/client.md): it addresses the node that holds the box
(the sink box, for a filter; a partitioned box's leader), and returns once
the change is complete everywhere -- the node answered, the Head's catalog
shows the change, and every node the Head serves is in sync with it.  Any
failure is a :class:`CommandFailed` with the reason (exit 1).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from boreas.catalog.endpoints import normalize_endpoint
from boreas.client.box_move import move_box

from .common import EXIT_OK, CommandFailed, add_head_option, add_token_option, run_blocking, run_optimizer


def cmd_move(args: argparse.Namespace) -> int:
    target = normalize_endpoint(args.node)
    # A box that is not partitioned: through the Head's JSON alone (client/box_move.py: no catalog model, no
    # lxml); a segment or a partitioned box (None): the Optimizer, whose leader moves the data.
    light = run_blocking(args, lambda peers, head: move_box(peers, head, args.box, target, args.timeout))
    if light is not None:
        print(_moved(args.box, light.source, target, light.reply))
        return EXIT_OK
    moved = run_optimizer(args, lambda optimizer: optimizer.move(args.box, target))
    if moved.relayout is not None:  # a segment, or a partitioned box: its leader moved the data
        from .relayout import describe  # (M3's layouts: only for a partitioned box)

        print(describe(args.box.rpartition("/")[0] or args.box, moved.relayout))
    else:
        print(_moved(args.box, moved.source, target, moved.reply))
    return EXIT_OK


def _moved(box: str, source: str | None, target: str, reply: dict[str, Any] | None) -> str:
    """What ``boreas move`` says of a box (not partitioned) it moved, and of the boxes that went with it."""
    others = [name for name, _ in (reply or {}).get("moved", []) if name != box]
    return (f"moved box {box} from {source} to {target}"
            + (f", with the boxes sharing its table: {', '.join(others)}" if others else ""))


def cmd_connect(args: argparse.Namespace) -> int:
    path = Path(args.box)
    try:
        box_xml = path.read_text()
    except OSError as exc:
        raise CommandFailed(f"{path}: {exc.strerror}") from None
    reply = run_optimizer(args, lambda optimizer: optimizer.connect(args.sink, args.port, box_xml, args.upstream))
    print(f"inserted box {reply['inserted']} on {reply['node']} before {args.sink} port {args.port}: "
          f"it writes {reply['stream']}")
    return EXIT_OK


def cmd_disconnect(args: argparse.Namespace) -> int:
    reply = run_optimizer(args, lambda optimizer: optimizer.disconnect(args.stream))
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
