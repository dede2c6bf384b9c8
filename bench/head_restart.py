"""Benchmark: a Head's restart on a large catalog, in process, on each store, CPU and wall (issue 37).

bench/control_plane.py restarts a Head over 20 node processes, which at
100,000 boxes needs a deployment of minutes first and measures mostly the
machine's load.  This builds bench/catalog.py's application through the
store API alone (``apply_submission`` in ``--parts`` commits on the Head's
index, no node, no HTTP), saves the index as a leading Head does
(catalog/index_checkpoint.py), then starts a Head on that store in a fresh
process until it serves (``HeadService.start``: read the catalog, load its
index, slice every node), closes it, and starts a second one: the restart.
Each start prints its CPU and wall seconds, its phases (the Head's own log:
head/service.py logs them) and the RSS it added; the machine's load
average is printed beside them.

``--store zk`` runs the Debian zookeeper (catalog/store/zkserver.py
``LocalZooKeeper``, 16 MB requests) for the store; ``--store both`` runs the
embedded store, then ZooKeeper.  ``--profile`` writes each start's cProfile
to ``head_restart_<store>_<n>.prof``.

Usage: .venv/bin/python bench/head_restart.py [--boxes 100000] [--parts 10] [--store both] [--profile]
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import contextlib
import logging
import multiprocessing
import resource
import statistics
import tempfile
import time
from collections.abc import Iterator
from dataclasses import replace

from boreas.catalog import Catalog, Change, open_store, read_document
from boreas.catalog.elements import apply_commit, catalog_from_snapshot, commit_touched
from boreas.catalog.index import CatalogIndex
from boreas.catalog.index_checkpoint import save_index
from boreas.catalog.submission import apply_submission
from boreas.catalog.xmlcodec import to_text
from boreas.head.bulk import bulk_step, declared
from boreas.head.service import HeadService
from boreas.m3.boxtype import box_types
from catalog import generate_parts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--boxes", type=int, default=100_000)
    parser.add_argument("--parts", type=int, default=10)
    parser.add_argument("--nodes", type=int, default=20)
    parser.add_argument("--store", choices=("sqlite", "zk", "both"), default="both")
    parser.add_argument("--starts", type=int, default=2, help="Heads started one after the other")
    parser.add_argument("--profile", action="store_true", help="write each start's cProfile")
    args = parser.parse_args()
    for kind in (("sqlite", "zk") if args.store == "both" else (args.store,)):
        with store_url(kind) as url:
            build(url, args.boxes, args.nodes, args.parts)
            for n in range(1, args.starts + 1):
                profile = f"head_restart_{kind}_{n}.prof" if args.profile else None
                cpu, wall = in_fresh_process(url, f"{kind}, start {n}", profile)
                print(f"{kind}: Head start {n} at {args.boxes:,} boxes: {cpu:.2f} s CPU, {wall:.2f} s wall "
                      f"(load average {load()})", flush=True)
            time_commits(url)


@contextlib.contextmanager
def store_url(kind: str) -> Iterator[str]:
    with tempfile.TemporaryDirectory() as tmp:
        if kind == "sqlite":
            yield f"sqlite:///{tmp}/c.db"
            return
        from boreas.catalog.store.zkserver import LocalZooKeeper

        with LocalZooKeeper() as zk:
            yield f"zk://{zk.address}/boreas"


def build(url: str, boxes: int, nodes: int, parts: int) -> None:
    """Commit the application in ``parts`` submissions, each checked on the index, and save the index."""
    cpu, wall = time.process_time(), time.perf_counter()
    registry = box_types()  # the Head's (its saved index names them: another registry's is not used)
    with open_store(url) as store:
        store.snapshot()  # as the Head that deploys does: a ZooKeeper store then keeps whole copies as it commits
        catalog = Catalog()
        index = CatalogIndex.build(catalog, registry)
        for app, dep in generate_parts(boxes, nodes, parts):
            docs = [read_document(app, "bench.xml"), read_document(dep, "bench_deploy.xml")]
            with bulk_step(sum(map(declared, docs))):
                applied = apply_submission(store, docs, registry=registry, base=catalog, index=index)
            touched = commit_touched(applied.commit)
            with bulk_step(sum(map(len, touched.values())), keep=True):
                catalog = apply_commit(catalog, applied.commit)
                index = index.derive(catalog, touched)
        size = save_index(store, index)
    print(f"{url.split(':')[0]}: built {len(catalog.boxes):,} boxes (version {catalog.version}) in "
          f"{time.process_time() - cpu:.1f} s CPU, {time.perf_counter() - wall:.1f} s wall; index "
          f"{size / 1e6:.1f} MB (load average {load()})", flush=True)


#: One-box commits timed after the build (each box's text written again with its node changed).
COMMITS = 30


def time_commits(url: str) -> None:
    """Print the median CPU and wall time of a one-box commit (as a move commits) through a store that read the
    catalog first, as the Head's does."""
    with open_store(url) as store:
        catalog = catalog_from_snapshot(store.snapshot())
        cpu, wall = commits(store, catalog)
    print(f"{url.split(':')[0]}: one-box commit at {len(catalog.boxes):,} boxes, median of {COMMITS}: "
          f"{cpu * 1000:.1f} ms CPU, {wall * 1000:.1f} ms wall (load average {load()})", flush=True)


def commits(store, catalog: Catalog) -> tuple[float, float]:
    """Median CPU and wall seconds of :data:`COMMITS` one-box commits through ``store``; then undone."""
    cpu, wall = [], []
    version = catalog.version
    boxes = sorted(catalog.boxes)[:COMMITS]
    for name in boxes:
        box = catalog.boxes[name]
        moved = to_text(replace(box, node="elsewhere:15000"))
        c, w = time.process_time(), time.perf_counter()
        version = store.commit(version, [Change("box", name, moved)]).version
        cpu.append(time.process_time() - c)
        wall.append(time.perf_counter() - w)
    store.commit(version, [Change("box", n, to_text(catalog.boxes[n])) for n in boxes])
    return statistics.median(cpu), statistics.median(wall)


def in_fresh_process(url: str, how: str, profile: str | None) -> tuple[float, float]:
    """:func:`head_start` in a new process (nothing of this one's in its RSS or its collector)."""
    with multiprocessing.get_context("spawn").Pool(1) as pool:
        return pool.apply(run_head_start, (url, how, profile))


def run_head_start(url: str, how: str, profile: str | None) -> tuple[float, float]:
    logging.basicConfig(level=logging.WARNING, format="  %(message)s")
    logging.getLogger("boreas.catalog.index_checkpoint").setLevel(logging.INFO)  # its index decoded or checked
    logging.getLogger("boreas.head.service").setLevel(logging.DEBUG)  # the start's phases
    return asyncio.run(head_start(url, how, profile))


async def head_start(url: str, how: str, profile: str | None) -> tuple[float, float]:
    """CPU and wall seconds of one ``HeadService.start`` on ``url`` (it serves when it returns); then closed."""
    head = HeadService(url, token=None, snapshot_interval=0)
    rss = rss_mb()
    profiler = cProfile.Profile() if profile else None
    if profiler is not None:
        profiler.enable()
    cpu, wall = time.process_time(), time.perf_counter()
    await head.start("127.0.0.1", 0)
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    if profiler is not None:
        profiler.disable()
        profiler.dump_stats(profile)
    rss = rss_mb() - rss
    closing = time.process_time()
    await head.close()
    print(f"  ({how}) {len(head.catalog.boxes):,} boxes at version {head.catalog.version}: RSS +{rss:.0f} MB; "
          f"close {time.process_time() - closing:.2f} s CPU", flush=True)
    return cpu, wall


def rss_mb() -> float:
    """The process's resident set now, in MB (Linux)."""
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * resource.getpagesize() / (1024 * 1024)


def load() -> str:
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


if __name__ == "__main__":
    logging.basicConfig(level=logging.WARNING)
    main()
