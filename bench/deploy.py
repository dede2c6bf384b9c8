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
import importlib.util
import re
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import aiohttp
from boreas.catalog import Catalog, plan_submission, read_document
from boreas.catalog.document_model import Update
from boreas.catalog.replicate import apply_update, catalog_items
from boreas.catalog.slices import node_slices
from boreas.catalog.store import StoreError
from boreas.catalog.updates import update_document
from boreas.catalog.xmlsafe import XmlLimits
from boreas.regional.global_component import GlobalComponent
from boreas.wire.addressing import endpoint_url
from boreas.wire.client import PeerClient, PeerError, PeerRefused
from procs import (
    HOST,
    BenchError,
    Processes,
    Run,
    loopback_endpoints,
    run_bench,
    sqlite_catalog,
    start_head,
    start_node,
    wait_ready,
)

TARGETS = {"deploy": {"sqlite": 3.0, "zk": None}, "copy": {"sqlite": 1.0, "zk": 1.0}}


def _generator():
    """bench/catalog.py's generate(boxes, nodes): the same application, nodes named node{c}:15000."""
    spec = importlib.util.spec_from_file_location("_bench_catalog", Path(__file__).with_name("catalog.py"))
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.generate_parts


def generate(boxes: int, endpoints: list[str]) -> tuple[str, str]:
    """Application and deployment XML, with the generator's placeholder nodes moved to ``endpoints``."""
    return generate_parts(boxes, endpoints, 1)[0]


def generate_parts(boxes: int, endpoints: list[str], parts: int) -> list[tuple[str, str]]:
    """:func:`generate`'s catalog as ``parts`` submissions to make in order (bench/catalog.py's
    ``generate_parts``): a catalog over the Head's request cap goes in that way."""
    result = []
    for app, dep in _generator()(boxes, len(endpoints), parts):
        dep, n = re.subn(r'"node(\d+):15000"', lambda m: f'"{endpoints[int(m[1])]}"', dep)
        assert parts > 1 or n == 2 * len(endpoints), "bench/catalog.py's deployment XML changed shape"
        result.append((app, dep))
    return result


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
    # The Head wrote it (no XSD gate, as for a client reading it), and it may be over a submission's limits:
    # 100,000 boxes are 26 MB.
    limits = XmlLimits(max_bytes=len(text.encode()) + 1, max_elements=10**8, max_attributes=10**8)
    doc = read_document(text, f"{head}/catalog", limits, check_schema=False)
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
    head_endpoint, *others = loopback_endpoints(1 + 2 * args.nodes)
    nodes, peer_nodes = others[:args.nodes], others[args.nodes:]
    app, dep = generate(args.boxes, nodes)
    print(f"application: {args.boxes} boxes over {args.nodes} nodes, {len(app) + len(dep):,} bytes of XML; "
          f"store {catalog_url}")

    start = time.perf_counter()
    head = start_head(procs, catalog_url, head_endpoint)
    for n in nodes:
        start_node(procs, n, head)
    for n in peer_nodes:  # no Head: they only ever hear from the peer measurement
        start_node(procs, n, None, name=f"peer node {n}")
    async with PeerClient(token, timeout=30.0) as direct:

        async def peers_waiting() -> list[str]:
            """The peer nodes that do not answer yet (asked with the peer's own client, so its
            connections are warm like the Head's)."""
            waiting = []
            for n in peer_nodes:
                try:
                    await direct.call("GET", endpoint_url(n, "/status"))
                except PeerError:
                    waiting.append(n)
            return waiting

        await wait_ready(procs, head, nodes, in_sync=True, others=peers_waiting)
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

    def body(run: Run) -> None:
        if args.store == "zk":
            from boreas.catalog.store.zkserver import LocalZooKeeper

            zk = LocalZooKeeper(run.tmp / "zk")
            run.cleanups.append(zk.close)
            catalog_url = f"zk://{zk.start()}/bench-deploy-{uuid.uuid4().hex[:8]}"
        else:
            catalog_url = sqlite_catalog(run.tmp / "c.db")
        report(args, asyncio.run(measure(args, run.procs, catalog_url, run.token)))

    # StoreError: e.g. no ZooKeeper installed.  The Head's and the first node's logs say enough.
    return run_bench("deploy", body, args.keep_logs, errors=(BenchError, StoreError), dump_nodes=1)


if __name__ == "__main__":
    sys.exit(main())
