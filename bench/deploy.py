"""Benchmark: deploy a 1,000-box application to 20 node processes through a real Head.

It starts a real Head process and 20 node processes on loopback (and 20
more node processes that never talk to the Head, for the peer), then times
two figures, each against a peer measured in the same run:

* **deploy**: from ``POST /submissions`` (application and deployment XML,
  multipart) until ``GET /submissions/{id}`` (long poll) reports the state
  ``deployed``: upload, hardened parse and XSD, validation, commit to the
  store, slicing, update XML to every node, every node's acknowledgement.
  Peer: the same per-node update XML (node slices of the same catalog,
  ``update_document(catalog_items(slice))``) built and POSTed directly and
  concurrently to 20 fresh node processes, with no validation and no commit.
  Target (issue): under 3 s with the embedded store.
* **global copy**: an in-process global component, from ``start()`` until
  its ``ready`` event (it registered with the Head, which committed the
  registration and sent it the whole catalog as update XML, parsed and
  applied).  Peer: a plain ``GET /catalog`` of the whole catalog from the
  Head.  Target: under 1 s.

The ratio says what the control plane costs over just moving the same bytes.
Timing never fails the run; the exit status is non-zero only on errors (a
process that will not start, a refused or failed submission, a catalog that
is not what was sent).  Every process is stopped and the temporary directory
removed on exit, Ctrl-C and SIGTERM included.

Usage: .venv/bin/python bench/deploy.py [--boxes 1000] [--nodes 20] [--store sqlite|zk] [--keep-logs]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib.util
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import traceback
import uuid
from pathlib import Path
from typing import Any

import aiohttp
from boreas.catalog import Catalog, plan_submission, read_document
from boreas.catalog.documents import Update
from boreas.catalog.replicate import apply_update, catalog_items
from boreas.catalog.slices import node_slices
from boreas.catalog.store import StoreError
from boreas.catalog.updates import update_document
from boreas.regional.global_component import GlobalComponent
from boreas.wire.addressing import endpoint_url
from boreas.wire.auth import TOKEN_ENV, new_token
from boreas.wire.client import PeerClient, PeerError, PeerRefused

HOST = "127.0.0.1"
READY_TIMEOUT = 60.0  # seconds for every process to come up
TARGETS = {"deploy": {"sqlite": 3.0, "zk": None}, "copy": {"sqlite": 1.0, "zk": 1.0}}


class BenchError(Exception):
    """Something went wrong (not slow: wrong); the run exits 1."""


def _generator():
    """bench/catalog.py's generate(boxes, nodes): the same application, nodes named node{c}:15000."""
    spec = importlib.util.spec_from_file_location("_bench_catalog", Path(__file__).with_name("catalog.py"))
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.generate


def generate(boxes: int, endpoints: list[str]) -> tuple[str, str]:
    """Application and deployment XML, with the generator's placeholder nodes moved to ``endpoints``."""
    app, dep = _generator()(boxes, len(endpoints))
    dep, n = re.subn(r'"node(\d+):15000"', lambda m: f'"{endpoints[int(m[1])]}"', dep)
    assert n == 2 * len(endpoints), "bench/catalog.py's deployment XML changed shape"
    return app, dep


def free_ports(n: int) -> list[int]:
    """``n`` distinct free ports on HOST (held open together so none repeats)."""
    with contextlib.ExitStack() as stack:
        socks = [stack.enter_context(socket.socket(socket.AF_INET, socket.SOCK_STREAM)) for _ in range(n)]
        for s in socks:
            s.bind((HOST, 0))
        return [s.getsockname()[1] for s in socks]


# -- processes -------------------------------------------------------------------


class Processes:
    """``boreas`` processes started by this run; each in its own session, logging to a file."""

    def __init__(self, workdir: Path, env: dict[str, str]):
        self.workdir = workdir
        self.env = env
        self.procs: list[tuple[str, subprocess.Popen, Path]] = []

    def spawn(self, name: str, argv: list[str]) -> None:
        log = self.workdir / f"{re.sub(r'[^A-Za-z0-9.-]', '_', name)}.log"
        with open(log, "wb") as out:
            proc = subprocess.Popen([sys.executable, "-m", "boreas.cli.main", *argv], env=self.env,
                                    cwd=self.workdir, stdin=subprocess.DEVNULL, stdout=out,
                                    stderr=subprocess.STDOUT, start_new_session=True)
        self.procs.append((name, proc, log))

    def check(self) -> None:
        for name, proc, log in self.procs:
            if proc.poll() is not None:
                raise BenchError(f"{name} exited early with status {proc.returncode}:\n{_tail(log)}")

    def dump_logs(self, lines: int = 15) -> None:
        for name, _, log in self.procs[:2]:  # the Head and the first node say enough
            print(f"--- last lines of {name}'s log ---\n{_tail(log, lines)}", file=sys.stderr)

    def stop(self) -> None:
        """SIGTERM every process group we started, then SIGKILL what is left after 10 s."""
        for _, proc, _ in self.procs:
            if proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGTERM)
        deadline = time.monotonic() + 10
        for _, proc, _ in self.procs:
            try:
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        self.procs.clear()


def _tail(path: Path, lines: int = 15) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


async def wait_cluster(head: str, nodes: list[str], peer_nodes: list[str], procs: Processes,
                       peer_client: PeerClient) -> None:
    """Until the Head reports every node alive and synchronised, and every peer node answers."""
    deadline = time.monotonic() + READY_TIMEOUT
    waiting: list[str] = nodes + peer_nodes
    async with PeerClient(None, timeout=2.0) as peers:
        while True:
            procs.check()
            waiting = []
            try:
                rows = {r["endpoint"]: r for r in (await peers.call("GET", f"{head}/nodes"))["nodes"]}
                waiting = [n for n in nodes if not (rows.get(n, {}).get("alive") and rows[n].get("in_sync"))]
            except PeerError:
                waiting = ["the Head"]
            for n in peer_nodes:  # the peer's own client, so its connections are warm like the Head's
                try:
                    await peer_client.call("GET", endpoint_url(n, "/status"))
                except PeerError:
                    waiting.append(n)
            if not waiting:
                return
            if time.monotonic() > deadline:
                raise BenchError(f"not ready after {READY_TIMEOUT:g} s: {', '.join(waiting[:5])}"
                                 f"{' ...' if len(waiting) > 5 else ''}")
            await asyncio.sleep(0.1)


# -- the figures -----------------------------------------------------------------


async def time_submission(head: str, token: str, app: str, dep: str, timeout: float) -> dict[str, Any]:
    """POST /submissions, then long-poll its status until deployed."""
    form = aiohttp.FormData()
    form.add_field("document", app.encode(), filename="bench.xml", content_type="application/xml")
    form.add_field("document", dep.encode(), filename="bench_deploy.xml", content_type="application/xml")
    async with PeerClient(token, timeout=timeout + 35) as peers:
        start = time.perf_counter()
        try:
            status = await peers.call("POST", f"{head}/submissions", data=form())
        except PeerRefused as exc:
            problems = [f"{d.get('file')}:{d.get('line')}: {d.get('path')}: {d.get('reason')}"
                        for d in exc.payload.get("diagnostics", [])[:10]]
            raise BenchError("\n".join([str(exc), *problems])) from None
        committed = time.perf_counter() - start
        polls = 0
        while status["state"] in ("committed", "deploying"):
            remaining = start + timeout - time.perf_counter()
            if remaining <= 0:
                late = sorted(n for n, i in status["nodes"].items() if i["state"] != "acknowledged")
                raise BenchError(f"submission {status['id']} not deployed after {timeout:g} s "
                                 f"(state {status['state']}; waiting for {', '.join(late) or 'the Head'})")
            status = await peers.call("GET", f"{head}/submissions/{status['id']}"
                                             f"?after={status['revision']}&wait={min(remaining, 10):.1f}")
            polls += 1
        total = time.perf_counter() - start
    if status["state"] != "deployed":
        reasons = [f"{n}: {i.get('reason')}" for n, i in sorted(status["nodes"].items()) if i["state"] == "failed"]
        raise BenchError(f"submission {status['id']} {status['state']}: " + "; ".join(reasons))
    return {"total": total, "committed": committed, "polls": polls, "version": status["version"],
            "nodes": len(status["nodes"])}


async def time_global_copy(head: str, token: str, timeout: float) -> dict[str, Any]:
    component = GlobalComponent(head, token)
    try:
        start = time.perf_counter()
        await component.start(HOST, 0)
        registered = time.perf_counter() - start
        try:
            await asyncio.wait_for(component.ready.wait(), timeout)
        except TimeoutError:
            raise BenchError(f"global component had no full copy after {timeout:g} s "
                             f"(counters {dict(component.counters)})") from None
        total = time.perf_counter() - start
        catalog = component.catalog
    finally:
        await component.close()
    return {"total": total, "registered": registered, "boxes": len(catalog.boxes), "version": catalog.version,
            "updates": component.counters["updates_received"]}


async def time_get_catalog(head: str) -> dict[str, Any]:
    async with PeerClient(None) as peers:
        start = time.perf_counter()
        text = await peers.text(f"{head}/catalog")
        total = time.perf_counter() - start
    start = time.perf_counter()
    doc = read_document(text, f"{head}/catalog")
    assert isinstance(doc, Update)
    catalog = apply_update(Catalog(), doc.items, doc.version or 0)
    parse = time.perf_counter() - start
    return {"total": total, "bytes": len(text.encode()), "parse": parse, "boxes": len(catalog.boxes)}


async def time_direct_updates(peers: PeerClient, app: str, dep: str, version: int,
                              peer_nodes: list[str]) -> dict[str, Any]:
    """Slice the planned catalog, and POST each node's slice as update XML to a fresh node, all at once."""
    plan = plan_submission(Catalog(), [read_document(app, "bench.xml"), read_document(dep, "bench_deploy.xml")])
    if not plan.ok:
        raise BenchError(f"the generated XML is invalid: {plan.problems[:3]}")
    catalog = plan.catalog
    catalog.version = version
    start = time.perf_counter()
    slices = node_slices(catalog)
    texts = {node: update_document(catalog_items(part), version=version, origin="head", id=f"v{version}")
             for node, part in slices.items()}
    built = time.perf_counter() - start
    if len(texts) != len(peer_nodes):
        raise BenchError(f"{len(texts)} node slices for {len(peer_nodes)} peer nodes")
    targets = dict(zip(sorted(texts), peer_nodes, strict=True))
    await asyncio.gather(*(peers.post_update(targets[node], text) for node, text in texts.items()))
    total = time.perf_counter() - start
    return {"total": total, "build": built, "send": total - built, "targets": targets,
            "bytes": sum(len(t.encode()) for t in texts.values())}


async def node_catalog(peers: PeerClient, endpoint: str) -> Catalog:
    text = await peers.text(endpoint_url(endpoint, "/catalog"))
    doc = read_document(text, f"catalog of {endpoint}")
    assert isinstance(doc, Update)
    return apply_update(Catalog(), doc.items, 0)


async def check_same(peers: PeerClient, targets: dict[str, str], boxes: int) -> None:
    """Every peer node holds what the Head gave its twin, and the nodes hold every box once."""
    pairs = await asyncio.gather(*(asyncio.gather(node_catalog(peers, node), node_catalog(peers, twin))
                                   for node, twin in targets.items()))
    held = 0
    for (node, twin), (mine, theirs) in zip(targets.items(), pairs, strict=True):
        if mine != theirs:
            raise BenchError(f"node {node} (deployed by the Head) and peer node {twin} (sent its slice "
                             f"directly) hold different catalogs: {len(mine.boxes)} vs {len(theirs.boxes)} boxes")
        held += len(mine.boxes)
    if held != boxes:
        raise BenchError(f"the nodes hold {held} boxes; the application has {boxes}")


# -- the run -------------------------------------------------------------------


async def measure(args: argparse.Namespace, procs: Processes, catalog_url: str, token: str) -> dict[str, Any]:
    ports = free_ports(1 + 2 * args.nodes)
    head_endpoint = f"{HOST}:{ports[0]}"
    head = endpoint_url(head_endpoint)
    nodes = [f"{HOST}:{p}" for p in ports[1:1 + args.nodes]]
    peer_nodes = [f"{HOST}:{p}" for p in ports[1 + args.nodes:]]
    app, dep = generate(args.boxes, nodes)
    print(f"application: {args.boxes} boxes over {args.nodes} nodes, {len(app) + len(dep):,} bytes of XML; "
          f"store {catalog_url}")

    start = time.perf_counter()
    procs.spawn("head", ["head", "--catalog", catalog_url, "--listen", head_endpoint])
    for n in nodes:
        procs.spawn(f"node {n}", ["node", "--endpoint", n, "--head", head])
    for n in peer_nodes:  # no --head: they only ever hear from the peer measurement
        procs.spawn(f"peer node {n}", ["node", "--endpoint", n])
    async with PeerClient(token, timeout=30.0) as direct:
        await wait_cluster(head, nodes, peer_nodes, procs, direct)
        print(f"cluster up in {time.perf_counter() - start:.1f} s: Head {head}, {len(nodes)} nodes "
              f"(+{len(peer_nodes)} peer nodes)")

        deploy = await time_submission(head, token, app, dep, args.timeout)
        print(f"deployed catalog version {deploy['version']} to {deploy['nodes']} nodes")
        copy = await time_global_copy(head, token, args.timeout)
        if copy["boxes"] != args.boxes:
            raise BenchError(f"the global component's catalog has {copy['boxes']} boxes, not {args.boxes}")
        get = await time_get_catalog(head)
        direct_updates = await time_direct_updates(direct, app, dep, deploy["version"], peer_nodes)
        await check_same(direct, direct_updates["targets"], args.boxes)
        procs.check()
    return {"deploy": deploy, "copy": copy, "get": get, "direct": direct_updates}


def report(args: argparse.Namespace, r: dict[str, Any]) -> None:
    deploy, copy, get, direct = r["deploy"], r["copy"], r["get"], r["direct"]
    rows = [
        (f"submit -> deployed ({args.boxes} boxes, {args.nodes} nodes)", TARGETS["deploy"][args.store],
         deploy["total"], f"direct update XML to {args.nodes} fresh nodes", direct["total"]),
        (f"global component full copy ({copy['boxes']} boxes)", TARGETS["copy"][args.store],
         copy["total"], "plain GET /catalog", get["total"]),
    ]
    head = ("figure", "target", "time", "verdict", "peer", "peer time", "ratio")
    lines = []
    for name, target, t, peer, pt in rows:
        verdict = "-" if target is None else ("meets" if t < target else "MISSES")
        lines.append((name, "-" if target is None else f"< {target:g} s", f"{t:.3f} s", verdict, peer,
                      f"{pt:.3f} s", f"{t / pt:.1f}x" if pt > 0 else "-"))
    widths = [max(len(str(row[i])) for row in [head, *lines]) for i in range(len(head))]
    print()
    for row in [head, *lines]:
        print("  ".join(str(c).ljust(w) if i in (0, 3, 4) else str(c).rjust(w)
                        for i, (c, w) in enumerate(zip(row, widths, strict=True))).rstrip())
    print()
    print(f"deploy: Head answered the POST (validated + committed) after {deploy['committed']:.3f} s, "
          f"all nodes acknowledged {deploy['total'] - deploy['committed']:.3f} s later ({deploy['polls']} polls)")
    print(f"peer:   slice + encode {direct['build']:.3f} s, send {direct['send']:.3f} s "
          f"({direct['bytes']:,} bytes of update XML); nodes hold the same catalogs either way")
    print(f"copy:   registered (Head committed <global>) after {copy['registered']:.3f} s, "
          f"{copy['updates']} update document(s); GET /catalog is {get['bytes']:,} bytes, "
          f"parsing it here takes another {get['parse']:.3f} s")
    if TARGETS["deploy"][args.store] is None:
        print("(the deploy target is stated for the embedded store only)")


def _interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--boxes", type=int, default=1000)
    parser.add_argument("--nodes", type=int, default=20)
    parser.add_argument("--store", choices=("sqlite", "zk"), default="sqlite",
                        help="the Head's catalog store: embedded (default) or a local ZooKeeper server")
    parser.add_argument("--timeout", type=float, default=120.0,
                        help="seconds before a deployment or copy that never completes is an error (default 120)")
    parser.add_argument("--keep-logs", action="store_true", help="keep the temporary directory and its logs")
    args = parser.parse_args()
    if args.nodes < 1 or args.boxes < args.nodes:
        parser.error("need --nodes >= 1 and --boxes >= --nodes")

    began = time.perf_counter()
    signal.signal(signal.SIGTERM, _interrupt)
    tmp = Path(tempfile.mkdtemp(prefix="boreas-bench-deploy-"))
    token = new_token()
    env = {k: v for k, v in os.environ.items() if k not in ("BOREAS_HEAD", "BOREAS_CATALOG")}
    env[TOKEN_ENV] = token
    procs = Processes(tmp, env)
    zk = None
    code = 1
    try:
        if args.store == "zk":
            from boreas.catalog.store.zkserver import LocalZooKeeper

            zk = LocalZooKeeper(tmp / "zk")
            catalog_url = f"zk://{zk.start()}/bench-deploy-{uuid.uuid4().hex[:8]}"
        else:
            catalog_url = f"sqlite:///{str(tmp / 'c.db').lstrip('/')}"
        report(args, asyncio.run(measure(args, procs, catalog_url, token)))
        code = 0
    except (BenchError, StoreError) as exc:  # StoreError: e.g. no ZooKeeper installed
        print(f"error: {exc}", file=sys.stderr)
        procs.dump_logs()
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        code = 130
    except Exception:  # noqa: BLE001 -- a library error: show it, then still clean up
        traceback.print_exc()
        procs.dump_logs()
    finally:
        previous = {s: signal.signal(s, signal.SIG_IGN) for s in (signal.SIGINT, signal.SIGTERM)}
        try:
            procs.stop()
            if zk is not None:
                zk.close()
        finally:
            if args.keep_logs:
                print(f"logs kept in {tmp}", file=sys.stderr)
            else:
                shutil.rmtree(tmp, ignore_errors=True)
            for s, handler in previous.items():
                signal.signal(s, handler)
    print(f"whole run: {time.perf_counter() - began:.1f} s")
    return code


if __name__ == "__main__":
    sys.exit(main())
