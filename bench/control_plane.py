"""Benchmark: the control plane at scale -- what one small change costs in a big catalog (issue 37).

For each catalog size (default 1,000 and 10,000 boxes; ``--huge`` adds
100,000) it starts a real Head and ``--nodes`` node processes (default 20)
on loopback with a fresh store (embedded; ``--store zk`` a local
ZooKeeper), deploys bench/catalog.py's application of that size (chains of
filters, one per node; a catalog over :data:`PART_BYTES`, such as 100,000
boxes in 24 MB, as consecutive submissions of at most that size, the
deploy figure the sum of their submit-to-deployed times), then
times, ``--repeat`` times each, the median of:

* **submit**: ``boreas submit`` of a one-box application and its deployment,
  until every node acknowledged (the CLI call, wall, end to end);
* **move**: ``boreas move`` of the last box of node 0's chain to node 1 (and
  back on the next round), until the Head's catalog shows it and every node
  is in sync;
* **connect** / **disconnect**: ``boreas connect`` of a filter before that
  box, then ``boreas disconnect`` of it;
* **nodes**: ``boreas nodes``;

(each CLI call printed with its own process's CPU seconds -- interpreter
start and imports -- and the Head's and the nodes' CPU seconds over it:
all they did meanwhile, background work included; and the load average);
* **full copy**: an in-process global component from ``start()`` until its
  full copy is in (bench/deploy.py's figure), and a plain ``GET /catalog``;
* **Head restart**: the Head killed with SIGKILL and started again, until it
  answers ``GET /status`` at the catalog's version, and until every node is
  alive and in sync with it again.

It prints each figure per size beside the issue's targets: a single-object
operation at the largest size within 1.5x of the same operation at the
smallest size and under 0.5 s; deploying 100,000 boxes under 30 s; a full copy of 100,000 boxes under 3 s.  The
Head's resident memory after the deployment is printed too (per box: the
difference between sizes over the difference in boxes).  Timing never fails
the run; the exit status is non-zero only on errors.  CLI calls are whole
processes (interpreter start and imports included: that is what a user
waits for).

Usage: .venv/bin/python bench/control_plane.py [--sizes 1000,10000] [--huge] [--nodes 20]
                                               [--repeat 3] [--store sqlite|zk] [--keep-logs]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import resource
import statistics
import subprocess
import sys
import time
import uuid
from typing import Any

from boreas.catalog.store import StoreError
from boreas.wire.client import PeerClient, PeerError
from boreas.wire.server import MAX_BODY
import procs
from deploy import generate_parts, time_get_catalog, time_global_copy, time_submission
from procs import BenchError, Run, cpu_seconds, loopback_endpoints, run_bench, sqlite_catalog, start_node, wait_ready

#: Single-object operations: at the largest size within RATIO of the smallest, and under LIMIT seconds.
SINGLE = ("submit", "move", "connect", "disconnect", "nodes")
RATIO, LIMIT = 1.5, 0.5
#: A full copy of this many boxes under COPY_LIMIT seconds, and deploying them under DEPLOY_LIMIT.
COPY_BOXES, COPY_LIMIT, DEPLOY_LIMIT = 100_000, 3.0, 30.0
#: Bytes of XML per submission at most: under the Head's 16 MiB request cap, and read within its 10 s
#: validation budget (head/api.py) on a loaded machine (a 12 MB part was refused at load average 20;
#: 2.4 MB, 10,000 boxes, was read).
PART_BYTES = 2_500_000
BUDGET_RETRIES = 3

FILTER = """<box name="{name}" type="filter"><in stream="{stream}"/><out stream="{name}_out"/>
  <parameter name="expression.0" value="value &gt; 0.5"/></box>"""


def rss_bytes(pid: int) -> int:
    """Resident memory of a live process, from /proc (0 if it is gone)."""
    try:
        with open(f"/proc/{pid}/status") as fh:
            for line in fh:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


class Cluster:
    """One size's Head and nodes, and the ``boreas`` command line pointed at them."""

    def __init__(self, run: Run, catalog_url: str, nodes: int):
        self.run = run
        head_endpoint, *self.nodes = loopback_endpoints(1 + nodes)
        self.head_proc = run.procs.boreas("head", ["head", "--catalog", catalog_url, "--listen", head_endpoint,
                                                   "--snapshot-interval", "0"])
        self.head = f"http://{head_endpoint}"
        self.node_procs = [start_node(run.procs, n, self.head) for n in self.nodes]
        self.env = {**run.procs.env, "BOREAS_HEAD": self.head}
        self.cli_cpu = 0.0  # the last CLI call's own CPU seconds

    def boreas(self, *argv: str) -> float:
        """Run ``boreas argv...`` to completion; its wall time (a BenchError if it fails).  The CLI process's
        own CPU seconds are kept in ``cli_cpu`` (interpreter start, imports, its part of the call)."""
        start, before = time.perf_counter(), resource.getrusage(resource.RUSAGE_CHILDREN)
        done = subprocess.run([sys.executable, "-m", "boreas.cli.main", *argv], env=self.env, cwd=self.run.tmp,
                              capture_output=True, text=True, timeout=300)
        took = time.perf_counter() - start
        after = resource.getrusage(resource.RUSAGE_CHILDREN)  # (only the CLI was reaped meanwhile)
        self.cli_cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
        if done.returncode != 0:
            raise BenchError(f"boreas {' '.join(argv)} exited {done.returncode}: {done.stderr.strip()[-800:]}")
        return took

    def write(self, name: str, text: str) -> str:
        path = self.run.tmp / name
        path.write_text(text)
        return str(path)

    async def version(self) -> int:
        async with PeerClient(None) as peers:
            return int((await peers.call("GET", f"{self.head}/status"))["version"])

    async def restart_head(self) -> dict[str, float]:
        """Kill the Head (SIGKILL) and start it again: until it serves the same version, and until every
        node is alive and in sync with it."""
        version = await self.version()
        start = time.perf_counter()
        self.head_proc = self.run.procs.restart(self.head_proc, kill=True)
        async with PeerClient(None, timeout=2.0) as peers:
            while True:
                self.run.procs.check()
                try:
                    if int((await peers.call("GET", f"{self.head}/status"))["version"]) >= version:
                        break
                except PeerError:
                    pass
                if time.perf_counter() - start > 120:
                    raise BenchError(f"the restarted Head did not serve version {version} within 120 s")
                await asyncio.sleep(0.02)
        serving = time.perf_counter() - start
        await wait_ready(self.run.procs, self.head, self.nodes, in_sync=True)
        return {"serving": serving, "in_sync": time.perf_counter() - start}


async def deploy_catalog(cluster: Cluster, token: str, app: str, dep: str, timeout: float) -> dict[str, Any]:
    """Submit the catalog and wait until every node holds it.  A node the Head could not reach in time
    (on a loaded machine: the Head busy validating) is retried by the Head: then the figure runs
    until every node is in sync, and says so."""
    start = time.perf_counter()
    try:
        status = await time_submission(cluster.head, token, app, dep, timeout)
        return {"total": status["total"], "note": f" (committed after {status['committed']:.2f} s)"}
    except BenchError as exc:
        if "node unreachable" not in str(exc):
            raise
    await wait_ready(cluster.run.procs, cluster.head, cluster.nodes, in_sync=True)
    return {"total": time.perf_counter() - start,
            "note": " (some nodes timed out on the first push and were brought in sync by the Head's retry)"}


def deploy_part(cluster: Cluster, token: str, app: str, dep: str, timeout: float) -> dict[str, Any]:
    """One part deployed; a part the Head refused for its validation budget (head/api.py: read within 10 s,
    which a loaded machine misses) is submitted again, at most BUDGET_RETRIES times, the failed attempts'
    time counted in."""
    spent = 0.0
    for attempt in range(BUDGET_RETRIES + 1):
        start = time.perf_counter()
        try:
            step = asyncio.run(deploy_catalog(cluster, token, app, dep, timeout))
        except BenchError as exc:
            if "(413)" not in str(exc) or attempt == BUDGET_RETRIES:
                raise
            spent += time.perf_counter() - start
            print("  (the Head refused a part for its validation budget; submitting it again)", flush=True)
            continue
        return {"total": spent + step["total"], "note": step["note"] + (" after a refusal" if spent else "")}
    raise AssertionError("unreachable")


def measure_size(run: Run, args: argparse.Namespace, boxes: int, catalog_url: str) -> dict[str, Any]:
    cluster = Cluster(run, catalog_url, args.nodes)
    size = sum(len(a.encode()) + len(d.encode()) for a, d in generate_parts(boxes, cluster.nodes, 1))
    parts = generate_parts(boxes, cluster.nodes, -(-size // min(PART_BYTES, MAX_BODY)))
    started = time.perf_counter()
    asyncio.run(wait_ready(run.procs, cluster.head, cluster.nodes, in_sync=True))
    print(f"\n== {boxes:,} boxes over {args.nodes} nodes ({size:,} bytes of XML in {len(parts)} "
          f"submission{'s' if len(parts) > 1 else ''}); cluster up in {time.perf_counter() - started:.1f} s; "
          f"load average {os.getloadavg()[0]:.1f}", flush=True)
    deploy = {"total": 0.0, "note": ""}
    head_cpu, nodes_cpu = cpu_seconds(cluster.head_proc.pid), sum(cpu_seconds(p.pid) for p in cluster.node_procs)
    for k, (app, dep) in enumerate(parts):
        part_head, part_nodes = cpu_seconds(cluster.head_proc.pid), sum(cpu_seconds(p.pid) for p in cluster.node_procs)
        step = deploy_part(cluster, run.token, app, dep, args.timeout)
        deploy = {"total": deploy["total"] + step["total"], "note": deploy["note"] or step["note"]}
        if len(parts) > 1:  # (each part's CPU too: a cost growing with the catalog shows as parts growing)
            print(f"  part {k + 1}/{len(parts)}: {step['total']:.2f} s{step['note']}; CPU: Head "
                  f"{cpu_seconds(cluster.head_proc.pid) - part_head:.2f} s, nodes "
                  f"{sum(cpu_seconds(p.pid) for p in cluster.node_procs) - part_nodes:.2f} s", flush=True)
    # CPU seconds, which the machine's other work inflates less than wall time (the Head is one process;
    # the nodes share the cores with it).
    deploy["head_cpu"] = cpu_seconds(cluster.head_proc.pid) - head_cpu
    deploy["nodes_cpu"] = sum(cpu_seconds(p.pid) for p in cluster.node_procs) - nodes_cpu
    print(f"deployed in {deploy['total']:.2f} s{deploy['note']}; CPU: Head {deploy['head_cpu']:.1f} s, "
          f"nodes {deploy['nodes_cpu']:.1f} s in all; load average {os.getloadavg()[0]:.1f}", flush=True)
    settle = time.perf_counter()
    asyncio.run(wait_ready(run.procs, cluster.head, cluster.nodes, in_sync=True))  # (a node behind: not timed)
    print(f"every node in sync {time.perf_counter() - settle:.2f} s later", flush=True)
    figures: dict[str, list[float]] = {name: [] for name in (*SINGLE, "copy", "get", "restart", "in_sync")}

    chains = args.nodes
    box = f"b{boxes - chains}"  # the last box of node 0's chain
    stream = f"b{boxes - 2 * chains}_t" if boxes >= 2 * chains else "in0"  # what it reads
    for r in range(args.repeat):
        name = f"extra{r}"
        one_app = cluster.write(f"{name}.xml", f'<borealis>{FILTER.format(name=name, stream="in0")}</borealis>')
        one_dep = cluster.write(f"{name}_deploy.xml", f'<deploy><node endpoint="{cluster.nodes[0]}" '
                                                      f'query="{name}"/></deploy>')
        filter_xml = cluster.write(f"f{r}.xml", FILTER.format(name=f"f{r}", stream=stream))
        for key, argv in (("submit", ("submit", one_app, one_dep)),
                          ("move", ("move", box, cluster.nodes[1 if r % 2 == 0 else 0])),
                          ("connect", ("connect", box, "--box", filter_xml)),
                          ("disconnect", ("disconnect", f"f{r}_out")), ("nodes", ("nodes",))):
            head_cpu = cpu_seconds(cluster.head_proc.pid)
            node_cpu = [cpu_seconds(p.pid) for p in cluster.node_procs]
            figures[key].append(cluster.boreas(*argv))
            took = cpu_seconds(cluster.head_proc.pid) - head_cpu  # (the Head's CPU over the call, all it did)
            nodes_took = [cpu_seconds(p.pid) - c for p, c in zip(cluster.node_procs, node_cpu, strict=True)]
            print(f"    {key} {figures[key][-1]:.3f} s, CLI CPU {cluster.cli_cpu:.3f} s, Head CPU {took:.3f} s, "
                  f"nodes' CPU {sum(nodes_took):.3f} s (most {max(nodes_took):.3f} s); load average "
                  f"{os.getloadavg()[0]:.1f}", flush=True)  # (said at once)
        copy = asyncio.run(time_global_copy(cluster.head, run.token, args.timeout))
        if copy["boxes"] < boxes:
            raise BenchError(f"the global component's copy has {copy['boxes']} boxes, not {boxes} or more")
        figures["copy"].append(copy["total"])
        figures["get"].append(asyncio.run(time_get_catalog(cluster.head))["total"])
        print(f"  round {r + 1}: " + ", ".join(f"{k} {v[-1]:.3f}" for k, v in figures.items() if v), flush=True)
    rss = rss_bytes(cluster.head_proc.pid)
    for _ in range(args.repeat):
        restart = asyncio.run(cluster.restart_head())
        figures["restart"].append(restart["serving"])
        figures["in_sync"].append(restart["in_sync"])
    print(f"  Head restarts: serving after {', '.join(f'{t:.2f}' for t in figures['restart'])} s; "
          f"nodes in sync after {', '.join(f'{t:.2f}' for t in figures['in_sync'])} s", flush=True)
    run.procs.check()
    run.procs.stop()  # this size's Head and nodes: the next size starts afresh
    return {"boxes": boxes, "deploy": deploy["total"], "rss": rss, "head_cpu": deploy["head_cpu"],
            "nodes_cpu": deploy["nodes_cpu"],
            "median": {k: statistics.median(v) for k, v in figures.items()}}


LABELS = {"submit": "one-box submit (CLI)", "move": "move (CLI)", "connect": "connect (CLI)",
          "disconnect": "disconnect (CLI)", "nodes": "boreas nodes (CLI)", "copy": "global component full copy",
          "get": "GET /catalog", "restart": "Head restart: serving", "in_sync": "Head restart: nodes in sync"}


def report(args: argparse.Namespace, results: list[dict[str, Any]]) -> None:
    small, large = results[0], results[-1]
    head = ["figure (median, s)", *(f"{r['boxes']:,}" for r in results), "large/small", "target", "verdict"]
    rows = [head]
    for key, label in LABELS.items():
        times = [r["median"][key] for r in results]
        ratio = times[-1] / times[0] if times[0] > 0 else float("inf")
        target, verdict = "-", "-"
        if key in SINGLE and len(results) > 1:
            target = f"<= {RATIO:g}x and < {LIMIT:g} s"
            verdict = "meets" if ratio <= RATIO and times[-1] < LIMIT else "MISSES"
        elif key == "copy" and large["boxes"] >= COPY_BOXES:
            target, verdict = f"< {COPY_LIMIT:g} s at {COPY_BOXES:,}", "meets" if times[-1] < COPY_LIMIT else "MISSES"
        rows.append([label, *(f"{t:.3f}" for t in times), f"{ratio:.1f}x", target, verdict])
    deploy_target, deploy_verdict = "-", "-"
    if large["boxes"] >= COPY_BOXES:
        deploy_target = f"< {DEPLOY_LIMIT:g} s at {COPY_BOXES:,}"
        deploy_verdict = "meets" if large["deploy"] < DEPLOY_LIMIT else "MISSES"
    rows.append(["deploy the catalog (submit -> deployed)", *(f"{r['deploy']:.3f}" for r in results), "-",
                 deploy_target, deploy_verdict])
    rows.append(["deploy: Head CPU (s)", *(f"{r['head_cpu']:.1f}" for r in results), "-", "-", "-"])
    rows.append(["deploy: nodes' CPU, all (s)", *(f"{r['nodes_cpu']:.1f}" for r in results), "-", "-", "-"])
    rows.append(["Head RSS after deploy (MB)", *(f"{r['rss'] / 2**20:.0f}" for r in results), "-", "-", "-"])
    widths = [max(len(row[i]) for row in rows) for i in range(len(head))]
    print()
    for row in rows:
        print("  ".join(c.ljust(w) if i in (0, len(head) - 2, len(head) - 1) else c.rjust(w)
                        for i, (c, w) in enumerate(zip(row, widths, strict=True))).rstrip())
    if len(results) > 1 and large["boxes"] > small["boxes"]:
        per_box = (large["rss"] - small["rss"]) / (large["boxes"] - small["boxes"])
        print(f"\nHead memory: about {per_box / 1024:.1f} KiB per box (RSS difference between "
              f"{small['boxes']:,} and {large['boxes']:,} boxes)")
    print(f"store: {args.store}; {args.nodes} node processes; {args.repeat} rounds per figure; "
          f"machine: {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f} at the end")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,10000", help="catalog sizes in boxes (default 1000,10000)")
    parser.add_argument("--huge", action="store_true", help=f"add {COPY_BOXES:,} boxes to the sizes")
    parser.add_argument("--nodes", type=int, default=20)
    parser.add_argument("--repeat", type=int, default=3, help="rounds per figure; the median is printed")
    parser.add_argument("--store", choices=("sqlite", "zk"), default="sqlite",
                        help="the Head's catalog store: embedded (default) or a local ZooKeeper server")
    parser.add_argument("--timeout", type=float, default=600.0,
                        help="seconds before a deployment or copy that never completes is an error")
    parser.add_argument("--keep-logs", action="store_true", help="keep the temporary directory and its logs")
    args = parser.parse_args()
    procs.READY_TIMEOUT = args.timeout  # a 10,000-box catalog on a loaded machine syncs slower than procs' 60 s
    sizes = sorted({int(s) for s in args.sizes.split(",") if s} | ({COPY_BOXES} if args.huge else set()))
    if args.nodes < 2 or not sizes or sizes[0] < args.nodes or args.repeat < 1:
        parser.error("need --nodes >= 2, every size >= --nodes, --repeat >= 1")

    def body(run: Run) -> None:
        zk_address = None
        if args.store == "zk":
            from boreas.catalog.store.zkserver import LocalZooKeeper

            zk = LocalZooKeeper(run.tmp / "zk")
            run.cleanups.append(zk.close)
            zk_address = zk.start()
        results = []
        for boxes in sizes:
            url = (f"zk://{zk_address}/bench-cp-{uuid.uuid4().hex[:8]}" if zk_address
                   else sqlite_catalog(run.tmp / f"c{boxes}.db"))
            results.append(measure_size(run, args, boxes, url))
        report(args, results)

    return run_bench("control-plane", body, args.keep_logs, errors=(BenchError, StoreError), dump_nodes=1)


if __name__ == "__main__":
    sys.exit(main())
