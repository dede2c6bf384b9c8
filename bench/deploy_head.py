"""Benchmark: the Head's part of a deployment, in process, in CPU seconds per phase (issue 37).

bench/control_plane.py times a deployment end to end over 20 node processes;
on a shared machine its wall time is mostly the load.  This runs the Head's
own path for bench/catalog.py's application, submitted in ``--parts``
consecutive submissions, in one process with no network, and prints the
CPU time (``time.process_time``, which the machine's other work inflates
least) of each phase per part:

* **read**: hardened parse, XSD and decode of the application and deployment XML;
* **plan+commit**: ``apply_submission`` on the Head's index (merge, incremental
  check, diff, SQLite commit);
* **follow**: what the Head does with its commit: decode it, derive its index;
* **slice**: ``NodeSlices.advance`` (the nodes whose slice changed; the first part, which declares the
  schema, slices its nodes whole, every later part patches them: the last line compares the two per
  new box);
* **encode**: each changed node's update XML against what it held.

A phase whose time grows from part to part costs the size of the catalog,
not of the part.

``--start`` then times a Head's start on the store the parts were committed
to (``HeadService.start`` until it serves: read, decode, index, slice every
node), twice in the same run: first with no saved index (the catalog checked
whole, as every start did before), then, after the first Head saved its index
on close, from the saved index (catalog/index_checkpoint.py) and the boxes saved with it
(catalog/saved_boxes.py).  Each start runs
in a fresh process, so what it adds to that process's RSS is the Head's memory
for the catalog (its catalog, index, slices and node syncs), printed per box.

Usage: .venv/bin/python bench/deploy_head.py [--boxes 10000] [--parts 1] [--nodes 20] [--start]
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import logging
import resource
import tempfile
import time

from boreas.catalog import Catalog, open_store, read_document
from boreas.catalog.elements import apply_commit, commit_touched
from boreas.catalog.index import CatalogIndex
from boreas.catalog.index_checkpoint import KEY
from boreas.catalog.replicate import update_items
from boreas.catalog.node_slices import NodeSlices
from boreas.catalog.submission import apply_submission
from boreas.catalog.updates import update_document
from boreas.head.bulk import bulk_step, declared
from boreas.head.service import HeadService
from catalog import generate_parts

PHASES = ("read", "plan+commit", "follow", "slice", "encode")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--boxes", type=int, default=10_000)
    parser.add_argument("--parts", type=int, default=1)
    parser.add_argument("--nodes", type=int, default=20)
    parser.add_argument("--start", action="store_true", help="then time a Head's start: checked whole, then decoded")
    args = parser.parse_args()
    held: dict[str, Catalog] = {}
    totals = dict.fromkeys(PHASES, 0.0)
    slicing: list[float] = []  # each part's slice phase
    with tempfile.TemporaryDirectory() as tmp, open_store(f"sqlite:///{tmp}/c.db") as store:
        catalog = Catalog()
        index, slices = CatalogIndex.build(catalog), NodeSlices()
        for k, (app, dep) in enumerate(generate_parts(args.boxes, args.nodes, args.parts)):
            marks = [time.process_time()]
            docs = [read_document(app, "bench.xml"), read_document(dep, "bench_deploy.xml")]
            marks.append(time.process_time())
            with bulk_step(sum(map(declared, docs))):  # (as HeadService.submit and _advance: head/bulk.py)
                applied = apply_submission(store, docs, base=catalog, index=index)
            marks.append(time.process_time())
            touched = commit_touched(applied.commit)
            with bulk_step(sum(map(len, touched.values())), keep=True):
                after = apply_commit(catalog, applied.commit)
                index = index.derive(after, touched)
                marks.append(time.process_time())
                changed = slices.advance(index)
                marks.append(time.process_time())
            for node, new in changed.items():
                new = new or Catalog()
                update_document(update_items(held.get(node, Catalog()), new), version=after.version,
                                origin="head", id=f"v{after.version}")
                held[node] = new
            marks.append(time.process_time())
            catalog = after
            took = dict(zip(PHASES, (b - a for a, b in zip(marks, marks[1:])), strict=True))
            for phase, t in took.items():
                totals[phase] += t
            slicing.append(took["slice"])
            print(f"part {k + 1}/{args.parts}: " + ", ".join(f"{p} {t:.2f}" for p, t in took.items()), flush=True)
        total = sum(totals.values())
        phases = ", ".join(f"{p} {t:.2f}" for p, t in totals.items())
        print(f"{args.boxes:,} boxes in {args.parts} part(s), CPU s: {phases}; total {total:.2f} "
              f"({total / args.boxes * 1000:.3f} ms a box)", flush=True)
        if len(slicing) > 1:  # the first part declares the schema, so it is sliced whole; the rest are patched
            per_part = args.boxes / args.parts
            later = sum(slicing[1:]) / (len(slicing) - 1)
            print(f"slicing per new box: first part (sliced whole) {slicing[0] / per_part * 1e6:.1f} us, "
                  f"later parts (patched) {later / per_part * 1e6:.1f} us on average "
                  f"({later / slicing[0]:.1f}x)", flush=True)
        if args.start:
            del index, slices, held, catalog, after
            url = f"sqlite:///{tmp}/c.db"
            whole = in_fresh_process(url, "no saved index: checked whole")
            assert store.get_blob(KEY) is not None, "the Head saved no index on close"
            decoded = in_fresh_process(url, "from the saved index")
            print(f"Head start at {args.boxes:,} boxes: {decoded:.2f} s CPU from the saved index against "
                  f"{whole:.2f} s checked whole: {whole / decoded:.1f}x less (target: \"in seconds\")")


def in_fresh_process(url: str, how: str) -> float:
    """:func:`head_start` in a new process (nothing of this one's in its RSS or its collector)."""
    with multiprocessing.get_context("spawn").Pool(1) as pool:
        return pool.apply(run_head_start, (url, how))


def run_head_start(url: str, how: str) -> float:
    logging.basicConfig(level=logging.WARNING, format="  %(message)s")
    logging.getLogger("boreas.catalog.index_checkpoint").setLevel(logging.INFO)  # decoded or checked, in how long
    logging.getLogger("boreas.catalog.saved_boxes").setLevel(logging.INFO)  # boxes from the saved blob, or why not
    return asyncio.run(head_start(url, how))


async def head_start(url: str, how: str) -> float:
    """CPU seconds of one ``HeadService.start`` on ``url`` (it serves when it returns); then closed (saving
    its index, timed apart)."""
    head = HeadService(url, token=None, snapshot_interval=0)
    rss = rss_mb()
    cpu, wall = time.process_time(), time.perf_counter()
    await head.start("127.0.0.1", 0)
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    rss = rss_mb() - rss
    saved = time.process_time()
    await head.close()
    print(f"Head start ({how}): {cpu:.2f} s CPU, {wall:.2f} s wall; RSS +{rss:.0f} MB "
          f"({rss * 1024 * 1024 / max(1, len(head.catalog.boxes)) / 1024:.1f} KiB a box); "
          f"close (saving the index if not saved) {time.process_time() - saved:.2f} s CPU", flush=True)
    return cpu


def rss_mb() -> float:
    """The process's resident set now, in MB (Linux)."""
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * resource.getpagesize() / (1024 * 1024)


if __name__ == "__main__":
    logging.basicConfig(level=logging.WARNING)
    main()
