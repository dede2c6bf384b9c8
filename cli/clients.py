"""Commands that talk to a running Head: ``submit``, ``nodes``, ``snapshot``, ``watch``, ``catalog show --head``.

What ``boreas watch`` and ``catalog show`` print about a catalog and its
changes (``+`` added, ``-`` removed, ``~`` changed) is :mod:`.catalog_text`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from pathlib import Path
from typing import Any

from typing import TYPE_CHECKING

from boreas.catalog.diagnostics import Diagnostic, ValidationFailed
from boreas.catalog.words import counted
from boreas.wire.auth import resolve_token

if TYPE_CHECKING:
    from boreas.catalog.model import Catalog  # (the catalog's model: `boreas nodes` does not load it)

# aiohttp, lxml and xmlschema (the client, XML documents, the global component) are imported in the
# commands that use them: building the parser, and `boreas nodes`, must not wait for them.
from .common import (
    EXIT_FAILED,
    EXIT_INVALID,
    EXIT_OK,
    CommandFailed,
    StdoutClosed,
    add_head_option,
    add_json_option,
    add_retry_option,
    add_token_option,
    print_json,
    print_problems,
    run_until_stopped,
    the_head,
    until_stopped_or_lost,
)

__all__ = ["add_parsers", "cmd_nodes", "cmd_snapshot", "cmd_submit", "cmd_watch",
           "describe_nodes", "fetch_catalog", "fetch_live_nodes"]


def _read_files(paths: list[str]) -> list[tuple[str, bytes]]:
    from boreas.client.head_api import read_documents

    try:
        return read_documents(paths)  # sql-file parameters inlined: the Head reads no files
    except ValidationFailed as exc:
        print_problems(exc.diagnostics)
        raise SystemExit(EXIT_INVALID) from None


def _print_progress(status: dict, shown: dict[str, str]) -> None:
    for node, info in sorted(status.get("nodes", {}).items()):
        line = info["state"] + (f": {info['reason']}" if info.get("reason") else "")
        if shown.get(node) != line:
            shown[node] = line
            print(f"  {node}: {line}", flush=True)


def cmd_submit(args: argparse.Namespace) -> int:
    return asyncio.run(submit_and_report(the_head(args), resolve_token(args.token, required=False),
                                         _read_files(args.files), args.timeout, replace=args.replace,
                                         app=args.app))


async def submit_and_report(head: str, token: str | None, files: list[tuple[str, bytes]], timeout: float,
                            replace: bool = False, app: str | None = None) -> int:
    """Submit ``(name, XML)`` documents as one submission, print its progress, and the exit code: 0 deployed,
    2 refused (every problem printed as file:line: element: reason; nothing committed), 1 a node failed.
    ``replace``: the new version of an application; what it kept, changed, added and removed is printed."""
    from boreas.catalog.app_diff import ApplicationChanges
    from boreas.client.head_api import submit_documents, wait_submission
    from boreas.wire.one_shot import OneShotPeers  # (a few requests: the standard library's HTTP, no aiohttp)
    from boreas.wire.peer_errors import PeerRefused

    async with OneShotPeers(token, timeout=timeout + 35) as peers:
        try:
            status = await submit_documents(peers, head, files, replace=replace, app=app)
        except PeerRefused as exc:
            if exc.status == 422 and "diagnostics" in exc.payload:
                print_problems([Diagnostic(**d) for d in exc.payload["diagnostics"]])
                return EXIT_INVALID
            raise CommandFailed(str(exc)) from None
        leader = peers.heads.answered(head)  # with several Heads: the one that took it (it led)
        print(f"submission {status['id']}: committed as catalog version {status['version']}"
              + (f" by the Head at {leader}" if leader else ""), flush=True)
        if status.get("changes") is not None:
            for line in ApplicationChanges.from_dict(status["changes"]).lines():
                print(f"  {line}", flush=True)
        shown: dict[str, str] = {}
        status = await wait_submission(peers, head, status, timeout, progress=lambda st: _print_progress(st, shown))
    if status["state"] in ("committed", "deploying"):
        waiting = [n for n, i in status["nodes"].items() if i["state"] != "acknowledged"]
        print(f"timed out after {timeout:g}s waiting for {', '.join(waiting)}", file=sys.stderr)
        return EXIT_FAILED
    if status["state"] == "failed":
        for node, info in sorted(status["nodes"].items()):
            if info["state"] == "failed":
                print(f"deployment failed on node {node}: {info.get('reason')}", file=sys.stderr)
        return EXIT_FAILED
    n = len(status["nodes"])
    print(f"deployed: {counted(n, 'node')} acknowledged" if n else "committed: no node is affected")
    return EXIT_OK


def cmd_nodes(args: argparse.Namespace) -> int:
    from boreas.wire.one_shot import OneShotPeers  # (one request: the standard library's HTTP, no aiohttp)

    head = the_head(args)

    async def main() -> int:
        async with OneShotPeers(None) as peers:
            status = await peers.call("GET", f"{head}/nodes")
        if args.json:
            print_json(status)
            return EXIT_OK
        for line in describe_nodes(status):
            print(line)
        return EXIT_OK

    return asyncio.run(main())


def describe_nodes(status: dict[str, Any]) -> list[str]:
    """``boreas nodes``' lines from the Head's ``GET /nodes`` answer: a heading, then one line per node."""
    complete = status.get("snapshot_complete")
    lines = [f"catalog version {status['version']}; last complete snapshot: "
             + (f"{complete['id']} ({_ago(complete['time'])})" if complete else "none"),
             f"{'NODE':24} {'STATE':6} {'BOXES':>5}  {'SYNC':12} {'RECOVERY':24} NOTE"]
    for row in status["nodes"]:
        state = "up" if row["alive"] else ("down" if row["registered"] else "unseen")
        sync = "in sync" if row["in_sync"] else f"{row['acked_version']}/{row['desired_version']}"
        lines.append(f"{row['endpoint']:24} {state:6} {row['boxes']:>5}  {sync:12} "
                     f"{_recovery(row.get('recovery') or {}):24} {_note(row)}".rstrip())
    return lines


def _note(row: dict[str, Any]) -> str:
    """What is worth saying about a node: failover, a failure, pending requests, or that it runs nothing.

    A node that runs no box but has registered, or that the deployment
    names, says "no boxes" (a fresh ``boreas cluster up`` node is not
    missing from anything); "not in catalog" is left for a node that is
    neither registered nor in the catalog (known only from the Head's
    ``--nodes``).

    >>> row = {"failure": None, "pending": [], "boxes": 0, "registered": True, "in_catalog": False}
    >>> _note(row), _note({**row, "registered": False}), _note({**row, "boxes": 2, "in_catalog": True})
    ('no boxes', 'not in catalog', '')
    """
    note = _failover(row.get("failover")) or row["failure"] or "; ".join(row["pending"])
    if note:
        return note
    if not row["boxes"] and (row["registered"] or row["in_catalog"]):
        return "no boxes"
    return "" if row["in_catalog"] else "not in catalog"


def _ago(when: float) -> str:
    return f"{max(0.0, time.time() - when):.0f} s ago"


def _failover(state: dict | None) -> str:
    """What failover did with a node that stayed down, or why it did not."""
    if not state:
        return ""
    if state.get("state") == "failed over":
        return f"failed over to {state['to']} ({', '.join(state.get('boxes', []))})"
    if state.get("state") == "adopting":
        return f"failing over to {state['to']}"
    return f"not failed over: {state.get('reason', '?')}"


def _recovery(report: dict) -> str:
    """One node's durability in a few words: memory only, recovering, or its last snapshot."""
    if not report:
        return "-"
    if not report.get("durable"):
        return "memory only"
    if report.get("state") != "ready":
        return str(report.get("state", "?"))
    text = f"snapshot {report['last_snapshot']}" if report.get("last_snapshot") is not None else "no snapshot"
    if report.get("restored_from") is not None or report.get("replayed_batches"):
        text += f", recovered in {report.get('recovery_seconds')} s"
    return text


def cmd_snapshot(args: argparse.Namespace) -> int:
    """``boreas snapshot``: take a consistent snapshot of every durable node now."""
    from boreas.wire.client import PeerClient

    head = the_head(args)
    token = resolve_token(args.token, required=True)

    async def main() -> int:
        async with PeerClient(token, timeout=120.0) as peers:
            status, body = await peers.request("POST", f"{head}/snapshots")
        result = json.loads(body)
        if status not in (200, 503) or "id" not in result:
            raise CommandFailed(f"the Head refused: {result.get('error', status)}")
        for node, reply in sorted(result["nodes"].items()):
            print(f"{node}: " + (f"FAILED: {reply['error']}" if "error" in reply else
                                 f"{counted(reply['bytes'], 'byte')} at log position {reply['position']}, "
                                 f"boxes paused {reply['pause_seconds'] * 1000:.1f} ms"))
        if result["complete"]:
            print(f"snapshot {result['id']} complete on {counted(len(result['nodes']), 'node')} "
                  f"in {result['seconds']} s")
            return EXIT_OK
        print(f"snapshot {result['id']} not complete: {result.get('reason')}", file=sys.stderr)
        return EXIT_FAILED

    return asyncio.run(main())


async def fetch_catalog(head: str) -> Catalog:
    from boreas.catalog.documents import Update, read_document
    from boreas.catalog.model import Catalog
    from boreas.catalog.replicate import apply_update
    from boreas.wire.client import PeerClient

    async with PeerClient(None) as peers:
        text = await peers.text(f"{head}/catalog")
    doc = read_document(text, f"{head}/catalog")
    assert isinstance(doc, Update)
    return apply_update(Catalog(), doc.items, doc.version or 0)


async def fetch_live_nodes(head: str) -> list[dict[str, Any]]:
    """The Head's rows of ``GET /nodes``: every node it knows, and whether it is up."""
    from boreas.wire.client import PeerClient

    async with PeerClient(None) as peers:
        return list((await peers.call("GET", f"{head}/nodes"))["nodes"])


def _out(*lines: str) -> None:
    """Print to stdout now; ``StdoutClosed`` when the reader has gone (``boreas watch | head``)."""
    try:
        for line in lines:
            print(line)
        sys.stdout.flush()
    except BrokenPipeError:
        raise StdoutClosed() from None


def cmd_watch(args: argparse.Namespace) -> int:
    from boreas.catalog.replicate import UpdateRejected, apply_update, catalog_items
    from boreas.catalog.updates import update_document
    from boreas.catalog.model import Catalog
    from boreas.regional.global_component import GlobalComponent
    from boreas.wire.client import PeerError

    from .catalog_text import describe_catalog, describe_change

    head = the_head(args)
    token = resolve_token(args.token, required=False)
    host, _, port = args.listen.rpartition(":")
    seen = Catalog()  # the catalog as of the last line printed: changes are described against it
    live: list[dict[str, Any]] | None = None
    closed = False

    def printing(callback: Any) -> Any:
        def guarded(*a: Any) -> None:
            nonlocal closed
            if closed:
                return
            try:
                callback(*a)
            except StdoutClosed:
                closed = True
                stop_event.set()
        return guarded

    @printing
    def on_copy(catalog: Catalog) -> None:
        nonlocal seen, live
        seen = catalog.copy()
        _out(f"== catalog version {catalog.version} (full copy)",
             update_document(catalog_items(catalog), version=catalog.version) if args.xml
             else describe_catalog(catalog, live))
        live = None  # which nodes are up is shown with the first copy; later ones follow a gap
        if args.once:
            stop_event.set()

    @printing
    def on_change(version: int, items: list, catalog: Catalog) -> None:
        nonlocal seen
        if args.xml:
            _out(f"== version {version}", update_document(items, version=version))
        else:
            lines, before = [], seen
            for item in items:
                lines.append(f"  {describe_change(item, before)}")
                try:
                    before = apply_update(before.copy(), [item], version)
                except UpdateRejected:
                    pass  # described against what was there; the next item is too
            _out(f"== version {version}", *(lines or ["  (no change: what was submitted was there already)"]))
        seen = catalog.copy()

    stop_event: asyncio.Event

    async def main(stop: asyncio.Event) -> int:
        nonlocal stop_event, live
        stop_event = stop
        try:
            live = await fetch_live_nodes(head)
        except PeerError:
            live = None  # the registration below says what is wrong with the Head
        component = GlobalComponent(head, token, on_copy=on_copy, on_change=on_change)
        try:
            endpoint = await component.start(host or "localhost", int(port or 0), advertise=args.advertise)
        except PeerError as exc:
            await component.close(disconnect=False)
            raise CommandFailed(f"cannot register with the Head: {exc}") from None
        print(f"watching {head} as global component {endpoint}", file=sys.stderr, flush=True)
        code = EXIT_OK
        try:
            code = await until_stopped_or_lost(stop, f"{head}/healthz", args.retry_for, f"the Head at {head}")
        finally:
            await component.close(disconnect=code == EXIT_OK)  # (a Head that is gone is not told)
        if closed:
            raise StdoutClosed()
        return code

    return run_until_stopped(main)


def add_parsers(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("submit", help="submit application (and deployment) XML to the Head")
    p.add_argument("files", nargs="+", metavar="FILE", type=lambda s: str(Path(s)))
    p.add_argument("--replace", action="store_true",
                   help="the files are the new version of an application that is running: what is declared "
                        "as it is keeps running, state and all; what changed is replaced, and what the "
                        "application declared before and the files leave out goes, all in one commit; what "
                        "cannot change in place is refused (docs/xml.md, \"The edit loop\")")
    p.add_argument("--app", metavar="NAME", default=None,
                   help="the application the files declare (default: each application file's base name, "
                        "app.xml -> app); --replace removes what the same application no longer declares")
    p.add_argument("--timeout", type=float, default=30.0,
                   help="seconds to wait for every node to acknowledge (default 30)")
    add_head_option(p)
    add_token_option(p)
    p.set_defaults(func=cmd_submit)

    p = sub.add_parser("nodes", help="the nodes the Head knows, and whether they are up and in sync")
    add_head_option(p)
    add_json_option(p)
    p.set_defaults(func=cmd_nodes)

    p = sub.add_parser("snapshot", help="take a consistent snapshot of every durable node now")
    add_head_option(p)
    add_token_option(p)
    p.set_defaults(func=cmd_snapshot)

    p = sub.add_parser("watch", help="a global component: print the catalog, then every change")
    add_head_option(p)
    add_token_option(p)
    p.add_argument("--listen", default="localhost:0", help="HOST:PORT to receive updates on (default: a free port)")
    p.add_argument("--advertise", metavar="HOST[:PORT]",
                   help="where the Head sends updates to, when --listen is not reachable as it is (0.0.0.0, NAT); a "
                        "HOST alone gets the port bound (default: the address bound)")
    p.add_argument("--xml", action="store_true", help="print update XML instead of a summary")
    add_retry_option(p)
    p.add_argument("--once", action="store_true", help="exit after printing the catalog")
    p.set_defaults(func=cmd_watch)
