"""Commands that run Boreas components: ``head``, ``node``, ``region``, ``deploy``; the parsers of every
server command (``cluster up`` and ``down`` live in :mod:`.cluster`)."""

from __future__ import annotations

from boreas.catalog.words import counted
import argparse
import asyncio
import logging
import os
import sys
from pathlib import Path

from boreas.catalog.endpoints import split_endpoint
from boreas.catalog.positions import has_positions, resolve_positions, spell
from boreas.head.service import HeadService
from boreas.head.static import deploy_static
from boreas.node.coalescer import DEFAULT_LIMITS, BatchLimits
from boreas.node.outputs import CLIENT_RETAIN_BYTES, CLIENT_SLOW_AFTER, NAMED_RETAIN_FOR, SubscriberLimits
from boreas.node.recovery.durability import FLUSH_EVERY, FLUSH_MS
from boreas.node.service import NodeService
from boreas.regional.component import RegionalComponent
from boreas.wire.addressing import DEFAULT_HEAD_PORT
from boreas.wire.auth import TOKEN_ENV, new_token, resolve_token

from .addresses import add_address_options, addresses_of
from .cluster import cmd_cluster_up, exit_with_parent
from .cluster_registry import cmd_cluster_down
from .common import (
    CATALOG_HELP,
    EXIT_FAILED,
    EXIT_INVALID,
    EXIT_OK,
    add_head_option,
    add_log_format_option,
    add_retry_option,
    add_token_option,
    catalog_url,
    endpoint_of,
    endpoints_of,
    print_problems,
    read_all,
    run_until_stopped,
    serve_until_stopped,
    the_head,
    token_of,
    until_stopped_or_lost,
    use_log_format,
)

log = logging.getLogger("boreas.cli")

#: ``boreas head`` lost the lead of a zk:// catalog to another Head: start it again and it follows.
EXIT_LOST_LEAD = 3



def cmd_head(args: argparse.Namespace) -> int:
    use_log_format(args)
    listen = endpoint_of(args.listen, DEFAULT_HEAD_PORT)
    token = resolve_token(args.token, required=False)
    if token is None:
        token = new_token()
        print(f"no token given: generated one; start nodes with {TOKEN_ENV}={token}", file=sys.stderr)
    exit_with_parent()

    advertise = endpoint_of(args.advertise, DEFAULT_HEAD_PORT) if args.advertise else None
    head = HeadService(catalog_url(args), token, pending_timeout=args.pending_timeout,
                       snapshot_interval=args.snapshot_interval, failover_after=args.failover_after,
                       nodes=endpoints_of(args.nodes), advertise=advertise, session_timeout=args.session_timeout)
    host, port = split_endpoint(listen)

    async def main(stop: asyncio.Event) -> int:
        try:
            await head.start(host, port)
            lost = asyncio.ensure_future(head.leadership.lost.wait())
            stopped = asyncio.ensure_future(stop.wait())
            await asyncio.wait([lost, stopped], return_when=asyncio.FIRST_COMPLETED)
            lost.cancel()
            stopped.cancel()
        finally:
            await head.close()
        return EXIT_LOST_LEAD if head.leadership.lost.is_set() else EXIT_OK

    return run_until_stopped(main)


def cmd_node(args: argparse.Namespace) -> int:
    use_log_format(args)
    addresses = addresses_of(args, 15000)
    token = token_of(args)
    head = the_head(args) if (args.head or os.environ.get("BOREAS_HEAD")) else None

    data_dir = Path(args.data_dir) if args.data_dir else None
    exit_with_parent()
    limits = SubscriberLimits(retain_bytes=int(args.subscriber_buffer_mb * 1024 * 1024),
                              slow_after=args.subscriber_slow_after, retain_for=args.subscriber_retain_for)
    node = NodeService(addresses.advertise, head, token, data_dir=data_dir, snapshot_url=args.snapshot_store,
                       group_commit=(args.commit_every, args.commit_ms), shared_dir=args.shared_dir,
                       subscriber_limits=limits, listen=addresses.listen,
                       batch_limits=BatchLimits(args.batch_rows, args.batch_ms))
    return serve_until_stopped(node.start, node.close)


def _at_least(least: float):
    """An argparse type: a number (int when ``least`` is) no smaller than ``least``."""
    kind = int if isinstance(least, int) else float

    def parse(text: str):
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
        if value < least:
            raise argparse.ArgumentTypeError(f"{text} is below {least}")
        return value
    return parse


def cmd_region(args: argparse.Namespace) -> int:
    use_log_format(args)
    addresses = addresses_of(args, 16000)
    head = the_head(args)
    region = RegionalComponent(head, token_of(args), name=args.name)
    host, port = split_endpoint(addresses.listen)

    async def main(stop: asyncio.Event) -> int:
        try:
            await region.start(host, port, advertise=addresses.advertise)
            return await until_stopped_or_lost(stop, f"{head}/healthz", args.retry_for, f"the Head at {head}")
        finally:
            await region.close()

    return run_until_stopped(main)


def cmd_deploy(args: argparse.Namespace) -> int:
    docs = read_all(args.files)
    nodes = endpoints_of(args.nodes)
    if nodes and has_positions(docs):
        docs, problems = resolve_positions(
            docs, lambda n: nodes[n] if n < len(nodes) else None,
            lambda n: f"no node at position {spell(n)}: --nodes lists {len(nodes)} (#0..#{len(nodes) - 1})")
        if problems:
            print_problems(problems)
            return EXIT_INVALID
    results = asyncio.run(deploy_static(docs, token_of(args), timeout=args.timeout))
    for node, failure in sorted(results.items()):
        print(f"{node}: {'acknowledged' if failure is None else 'FAILED: ' + failure}")
    failed = [n for n, f in results.items() if f]
    if failed:
        print(f"deployment failed on {len(failed)} of {counted(len(results), 'node')}", file=sys.stderr)
        return EXIT_FAILED
    print(f"deployed to {len(results)} node{'s' if len(results) != 1 else ''}")
    return EXIT_OK


def add_parsers(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("head", help="run the persistent Head")
    p.add_argument("--catalog", help=CATALOG_HELP)
    p.add_argument("--listen", default=f"localhost:{DEFAULT_HEAD_PORT}",
                   help=f"HOST:PORT to serve on (default localhost:{DEFAULT_HEAD_PORT})")
    p.add_argument("--advertise", metavar="HOST:PORT",
                   help="the address other Heads redirect clients to while this one leads (default: --listen)")
    p.add_argument("--session-timeout", type=float, default=10.0, metavar="SECONDS",
                   help="with several Heads on a zk:// catalog: the ZooKeeper session of the Head election; a "
                        "leader that dies is replaced about this long after (ZooKeeper bounds it to 2..20 "
                        "tickTimes; default 10).  A Head that loses the lead exits with status 3")
    p.add_argument("--pending-timeout", type=float, default=30.0,
                   help="seconds a request for a box that moved waits for its new location (default 30)")
    p.add_argument("--failover-after", type=float, default=30.0, metavar="SECONDS",
                   help="a node down this long has its boxes adopted by a live node, when its data directory "
                        "is shared (boreas node --shared-dir); 0 disables failover (default 30)")
    p.add_argument("--snapshot-interval", type=float, default=5.0,
                   help="seconds between consistent snapshots of the durable nodes (default 5; 0: only on "
                        "demand, boreas snapshot)")
    p.add_argument("--nodes", metavar="HOST:PORT,...",
                   help="the cluster's nodes, in position order: deployment XML's node=\"#0\" is the first "
                        "(boreas cluster up passes its nodes).  Nodes that register without being listed "
                        "follow in the order they register.  A deployment may name a listed node before it "
                        "registers; one naming a node that is neither listed, registered nor in the catalog "
                        "is refused")
    add_token_option(p)
    add_log_format_option(p)
    p.set_defaults(func=cmd_head)

    p = sub.add_parser("node", help="run a node")
    add_address_options(p, "this node")
    p.add_argument("--data-dir", metavar="DIR",
                   help="make the node durable: its input log, local catalog and snapshots live here, and a "
                        "node restarted with the same DIR comes back with its state (default: memory only)")
    p.add_argument("--snapshot-store", metavar="URL",
                   help="where snapshots go (a file:///dir URL or a path; default DIR/snapshots); a shared "
                        "directory lets another node take this one's boxes over")
    p.add_argument("--shared-dir", action="store_true",
                   help="DIR is on storage the other nodes reach at the same path: if this node stays down "
                        "past the Head's --failover-after, a live node adopts its boxes from DIR")
    p.add_argument("--commit-every", type=int, default=FLUSH_EVERY, metavar="N",
                   help=f"group commit: flush the input log every N batches ... (default {FLUSH_EVERY})")
    p.add_argument("--commit-ms", type=float, default=FLUSH_MS, metavar="T",
                   help=f"... or T milliseconds after the first unflushed one, whichever comes first "
                        f"(default {FLUSH_MS})")
    p.add_argument("--batch-rows", type=_at_least(1), default=DEFAULT_LIMITS.rows, metavar="N",
                   help="a box's output batch closes at N rows ... (1: every batch a box produces leaves as it is; "
                        f"default {DEFAULT_LIMITS.rows})")
    p.add_argument("--batch-ms", type=_at_least(0.0), default=DEFAULT_LIMITS.ms, metavar="T",
                   help="... or T milliseconds after its first row, whichever comes first, or at once when the "
                        "node's input queue is empty; publishers' batches pass unchanged "
                        f"(default {DEFAULT_LIMITS.ms:g})")
    p.add_argument("--subscriber-slow-after", type=float, default=CLIENT_SLOW_AFTER, metavar="SECONDS",
                   help="a client subscriber that acknowledged nothing for this long while batches waited for it "
                        f"is cut off and told how much it missed (default {CLIENT_SLOW_AFTER:g}); a burst the node "
                        "produces (a replay, a move) never cuts off a subscriber that keeps acknowledging")
    p.add_argument("--subscriber-buffer-mb", type=float, default=CLIENT_RETAIN_BYTES / 1048576, metavar="MB",
                   help="rows that may wait for one such subscriber before it is cut off, or that are kept for a "
                        f"named one (--name) while it is down (default {CLIENT_RETAIN_BYTES // 1048576})")
    p.add_argument("--subscriber-retain-for", type=float, default=NAMED_RETAIN_FOR, metavar="SECONDS",
                   help="how long a named subscriber's batches are kept without an acknowledgement (it is down, "
                        "or stopped reading); past this or --subscriber-buffer-mb they are dropped, and it is "
                        f"told how much it missed when it is back (default {NAMED_RETAIN_FOR:g})")
    add_head_option(p)
    add_token_option(p)
    add_log_format_option(p)
    p.set_defaults(func=cmd_node)

    p = sub.add_parser("region", help="run a regional component: a regional catalog fed by its nodes")
    add_address_options(p, "this component")
    p.add_argument("--name", default="default",
                   help="the region's name, as deployment XML's <region name=...> gives it (default: "
                        "'default', the region of <region node=...> without a name or endpoint)")
    add_retry_option(p)
    add_head_option(p)
    add_token_option(p)
    add_log_format_option(p)
    p.set_defaults(func=cmd_region)

    p = sub.add_parser("deploy", help="static mode: deploy a topology to its nodes and exit")
    p.add_argument("files", nargs="+", metavar="FILE", help="application and deployment XML")
    p.add_argument("--timeout", type=float, default=10.0, help="seconds to wait for each node")
    p.add_argument("--nodes", metavar="HOST:PORT,...",
                   help="what node positions (node=\"#0\") stand for, in order (default: boreas cluster up's "
                        "layout, #n = localhost:15000+n)")
    add_token_option(p)
    p.set_defaults(func=cmd_deploy)

    cluster = sub.add_parser("cluster", help="a development cluster on this machine")
    actions = cluster.add_subparsers(dest="action", required=True)
    p = actions.add_parser("up", help="start a Head and N nodes on loopback; Ctrl-C stops them",
                           description="Start a Head and N durable nodes on this machine and keep them "
                                       "running until Ctrl-C, SIGTERM, SIGHUP or `boreas cluster down`: a "
                                       "Head or node that dies is restarted (a node recovers its state from "
                                       "its data directory).  Deployment XML's node positions #0, #1, ... are "
                                       "these nodes, in port order.  The catalog and the nodes' data are kept: "
                                       "a second run resumes them (and says so) unless --fresh.")
    p.add_argument("--nodes", type=int, default=3, help="number of nodes (default 3)")
    p.add_argument("--catalog", help=CATALOG_HELP)
    p.add_argument("--fresh", action="store_true",
                   help="start from an empty catalog: remove the embedded catalog file first (default: "
                        "resume what is in it); the nodes' data directories are emptied with it")
    p.add_argument("--data-dir", metavar="DIR",
                   help="where the nodes keep their data, DIR/HOST-PORT each (default: next to an embedded "
                        "catalog, NAME.nodes for NAME.db, e.g. ./boreas-catalog.nodes; a temporary directory "
                        "for a memory:// catalog)")
    p.add_argument("--head-port", type=int, default=DEFAULT_HEAD_PORT,
                   help=f"the Head's port (default {DEFAULT_HEAD_PORT})")
    p.add_argument("--base-port", type=int, default=15000,
                   help="the first node's port (#0); the rest follow (default 15000)")
    p.add_argument("--host", default="localhost")
    p.add_argument("--ready-timeout", type=float, default=30.0)
    p.add_argument("--tls", action="store_true",
                   help="TLS on every link: make a throwaway CA and a certificate for the cluster in its data "
                        "directory (DIR/tls; reused while it is there) and print how clients trust it "
                        "(with --tls-client-auth: mutual TLS)")
    add_token_option(p)
    add_log_format_option(p)
    p.set_defaults(func=cmd_cluster_up)

    p = actions.add_parser("down", help="stop a cluster that boreas cluster up runs (in the background)")
    p.add_argument("--head-port", type=int,
                   help="the Head's port of the cluster to stop (default: the one $BOREAS_HEAD names, or "
                        "the only one running)")
    p.add_argument("--timeout", type=float, default=20.0,
                   help="seconds to wait for it to stop before killing it (default 20)")
    p.set_defaults(func=cmd_cluster_down)
