"""Commands that run Boreas components: ``head``, ``node``, ``region``, ``deploy`` and ``cluster up``."""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from boreas.catalog.endpoints import normalize_endpoint, split_endpoint
from boreas.head.service import HeadService
from boreas.head.static import deploy_static
from boreas.node.recovery.durability import FLUSH_EVERY, FLUSH_MS
from boreas.node.service import NodeService
from boreas.regional.component import RegionalComponent
from boreas.wire.addressing import DEFAULT_HEAD_PORT, endpoint_url
from boreas.wire.auth import TOKEN_ENV, MissingToken, new_token, resolve_token
from boreas.wire.client import PeerClient, PeerError

from .common import (
    CATALOG_HELP,
    EXIT_FAILED,
    EXIT_OK,
    CommandFailed,
    add_head_option,
    add_token_option,
    catalog_url,
    read_all,
    run_until_stopped,
    serve_until_stopped,
    the_head,
)

log = logging.getLogger("boreas.cli")


def _token(args: argparse.Namespace) -> str:
    try:
        token = resolve_token(args.token)
    except MissingToken as exc:
        raise CommandFailed(str(exc)) from None
    assert token
    return token


def _endpoint(text: str, default_port: int) -> str:
    try:
        return normalize_endpoint(text, default_port=default_port)
    except ValueError as exc:
        raise CommandFailed(str(exc)) from None


def cmd_head(args: argparse.Namespace) -> int:
    listen = _endpoint(args.listen, DEFAULT_HEAD_PORT)
    token = resolve_token(args.token, required=False)
    if token is None:
        token = new_token()
        print(f"no token given: generated one; start nodes with {TOKEN_ENV}={token}", file=sys.stderr)

    head = HeadService(catalog_url(args), token, pending_timeout=args.pending_timeout,
                       snapshot_interval=args.snapshot_interval, failover_after=args.failover_after)
    host, port = split_endpoint(listen)
    return serve_until_stopped(lambda: head.start(host, port), head.close)


def cmd_node(args: argparse.Namespace) -> int:
    endpoint = _endpoint(args.endpoint, 15000)
    token = _token(args)
    head = the_head(args) if (args.head or os.environ.get("BOREAS_HEAD")) else None

    data_dir = Path(args.data_dir) if args.data_dir else None
    node = NodeService(endpoint, head, token, data_dir=data_dir, snapshot_url=args.snapshot_store,
                       group_commit=(args.commit_every, args.commit_ms), shared_dir=args.shared_dir)
    return serve_until_stopped(node.start, node.close)


def cmd_region(args: argparse.Namespace) -> int:
    endpoint = _endpoint(args.endpoint, 16000)
    region = RegionalComponent(the_head(args), _token(args), name=args.name)
    host, port = split_endpoint(endpoint)
    return serve_until_stopped(lambda: region.start(host, port), region.close)


def cmd_deploy(args: argparse.Namespace) -> int:
    docs = read_all(args.files)
    results = asyncio.run(deploy_static(docs, _token(args), timeout=args.timeout))
    for node, failure in sorted(results.items()):
        print(f"{node}: {'acknowledged' if failure is None else 'FAILED: ' + failure}")
    failed = [n for n, f in results.items() if f]
    if failed:
        print(f"deployment failed on {len(failed)} of {len(results)} nodes", file=sys.stderr)
        return EXIT_FAILED
    print(f"deployed to {len(results)} node{'s' if len(results) != 1 else ''}")
    return EXIT_OK


# -- cluster up -----------------------------------------------------------------


def _spawn(argv: list[str], env: dict[str, str], verbose: bool) -> subprocess.Popen:
    cmd = [sys.executable, "-m", "boreas.cli.main", *(["-v"] if verbose else []), *argv]
    return subprocess.Popen(cmd, env=env, stdin=subprocess.DEVNULL, start_new_session=True)


async def _wait_ready(head: str, nodes: list[str], token: str, procs: list[subprocess.Popen],
                      timeout: float) -> None:
    deadline = time.monotonic() + timeout
    async with PeerClient(token, timeout=2.0) as peers:
        while True:
            dead = [p for p in procs if p.poll() is not None]
            if dead:
                raise CommandFailed(f"a cluster process exited early: {' '.join(dead[0].args)} "
                                    f"(exit {dead[0].returncode})")
            try:
                status = await peers.call("GET", f"{head}/nodes")
                alive = {row["endpoint"] for row in status["nodes"] if row.get("alive")}
                if set(nodes) <= alive:
                    return
            except PeerError:
                pass
            if time.monotonic() > deadline:
                raise CommandFailed(f"cluster not ready after {timeout:g}s")
            await asyncio.sleep(0.1)


def _stop_all(procs: list[subprocess.Popen]) -> None:
    for proc in procs:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
    deadline = time.monotonic() + 10
    for proc in procs:
        try:
            proc.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def cmd_cluster_up(args: argparse.Namespace) -> int:
    if args.nodes < 1:
        raise CommandFailed("--nodes must be at least 1")
    token = resolve_token(args.token, required=False) or new_token()
    env = {**os.environ, TOKEN_ENV: token}
    head = endpoint_url(f"{args.host}:{args.head_port}")
    nodes = [f"{args.host}:{args.base_port + i}" for i in range(args.nodes)]
    procs = [_spawn(["head", "--catalog", catalog_url(args), "--listen", f"{args.host}:{args.head_port}"],
                    env, args.verbose)]
    procs += [_spawn(["node", "--endpoint", n, "--head", head], env, args.verbose) for n in nodes]

    async def main(stop: asyncio.Event) -> int:
        ready = asyncio.create_task(_wait_ready(head, nodes, token, procs, args.ready_timeout))
        stopped = asyncio.create_task(stop.wait())
        done, _ = await asyncio.wait({ready, stopped}, return_when=asyncio.FIRST_COMPLETED)
        if stopped in done:
            ready.cancel()
            return EXIT_OK
        stopped.cancel()
        ready.result()
        print(f"head   {head}   catalog {catalog_url(args)}")
        for n in nodes:
            print(f"node   {n}")
        print(f"token  {token}")
        print(f"\nexport BOREAS_HEAD={head} {TOKEN_ENV}={token}")
        print("cluster is up; press Ctrl-C to stop it", flush=True)
        while not stop.is_set():
            dead = [p for p in procs if p.poll() is not None]
            if dead:
                print(f"error: {' '.join(dead[0].args[3:])} exited with {dead[0].returncode}; "
                      f"stopping the cluster", file=sys.stderr)
                return EXIT_FAILED
            try:
                await asyncio.wait_for(stop.wait(), 0.5)
            except TimeoutError:
                pass
        return EXIT_OK

    try:
        code = run_until_stopped(main)
    finally:
        _stop_all(procs)
    print("cluster stopped", file=sys.stderr)
    return code


def add_parsers(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("head", help="run the persistent Head")
    p.add_argument("--catalog", help=CATALOG_HELP)
    p.add_argument("--listen", default=f"localhost:{DEFAULT_HEAD_PORT}",
                   help=f"HOST:PORT to serve on (default localhost:{DEFAULT_HEAD_PORT})")
    p.add_argument("--pending-timeout", type=float, default=30.0,
                   help="seconds a request for a box that moved waits for its new location (default 30)")
    p.add_argument("--failover-after", type=float, default=30.0, metavar="SECONDS",
                   help="a node down this long has its boxes adopted by a live node, when its data directory "
                        "is shared (boreas node --shared-dir); 0 disables failover (default 30)")
    p.add_argument("--snapshot-interval", type=float, default=5.0,
                   help="seconds between consistent snapshots of the durable nodes (default 5; 0: only on "
                        "demand, boreas snapshot)")
    add_token_option(p)
    p.set_defaults(func=cmd_head)

    p = sub.add_parser("node", help="run a node")
    p.add_argument("--endpoint", required=True, help="HOST:PORT this node listens on")
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
    add_head_option(p)
    add_token_option(p)
    p.set_defaults(func=cmd_node)

    p = sub.add_parser("region", help="run a regional component: a regional catalog fed by its nodes")
    p.add_argument("--endpoint", required=True, help="HOST:PORT this component listens on")
    p.add_argument("--name", default="default",
                   help="the region's name, as deployment XML's <region name=...> gives it (default: "
                        "'default', the region of <region node=...> without a name or endpoint)")
    add_head_option(p)
    add_token_option(p)
    p.set_defaults(func=cmd_region)

    p = sub.add_parser("deploy", help="static mode: deploy a topology to its nodes and exit")
    p.add_argument("files", nargs="+", metavar="FILE", help="application and deployment XML")
    p.add_argument("--timeout", type=float, default=10.0, help="seconds to wait for each node")
    add_token_option(p)
    p.set_defaults(func=cmd_deploy)

    cluster = sub.add_parser("cluster", help="a development cluster on this machine")
    actions = cluster.add_subparsers(dest="action", required=True)
    p = actions.add_parser("up", help="start a Head and N nodes on loopback; Ctrl-C stops them")
    p.add_argument("--nodes", type=int, default=3, help="number of nodes (default 3)")
    p.add_argument("--catalog", help=CATALOG_HELP)
    p.add_argument("--head-port", type=int, default=DEFAULT_HEAD_PORT)
    p.add_argument("--base-port", type=int, default=15000, help="first node's port; the rest follow")
    p.add_argument("--host", default="localhost")
    p.add_argument("--ready-timeout", type=float, default=30.0)
    add_token_option(p)
    p.set_defaults(func=cmd_cluster_up)
