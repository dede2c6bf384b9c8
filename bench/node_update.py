"""Benchmark: a node's CPU per one-box update, by how many boxes it holds (issue 37, the node's side).

bench/control_plane_head.py times the Head's side of each single-object
operation; this times what node0 does with the update XML the Head sends it
for each: bench/catalog.py's application over ``--nodes`` nodes (so node0
holds ``size`` boxes of ``size * nodes``) built through the store API, node0
given its whole slice, then, ``--repeat`` times, a one-box filter added and
deleted, b40 moved to node1 and back, and a filter connected before b40 and
disconnected, each as node/api.py's ``handle_update`` applies it (read,
preview, ``Dataflow.refusals``, apply, ``reconfigure``: bench/deploy_node.py's
``apply_all``), in CPU seconds (``time.process_time``).  The figure is the
median per operation; a change should cost what it touches, so the largest
size's against the smallest is the one to read.

To compare with another checkout in the same minutes, run this file with
``PYTHONPATH`` naming a directory whose ``boreas`` is that checkout (the
bench uses only APIs both have).

Usage: .venv/bin/python bench/node_update.py [--sizes 50,5000,20000] [--nodes 2] [--repeat 5] [--profile OP]
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import logging
import os
import pstats
import statistics
import tempfile
import time

from boreas.catalog import Catalog, open_store
from boreas.catalog.replicate import update_items
from boreas.catalog.updates import update_document
from control_plane_head import OPS, build, run_op
from deploy_node import NODE, apply_all


def node_updates(size: int, nodes: int, repeat: int) -> tuple[int, list[str], list[str]]:
    """node0's boxes, its update documents (its whole slice first) and each one's operation."""
    with tempfile.TemporaryDirectory() as tmp, open_store(f"sqlite:///{tmp}/c.db") as store:
        head = build(size * nodes, nodes, store)
        held = head.held[NODE]
        documents = [update_document(update_items(Catalog(), held), version=head.catalog.version, origin="head")]
        ops = ["slice"]
        for k in range(repeat):
            for op in OPS:
                run_op(head, op, k, away="node1:15000")
                if NODE in head.last:
                    documents.append(head.last[NODE])
                    ops.append(op)
    return len(held.boxes), documents, ops


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="50,5000,20000", help="boxes node0 holds")
    parser.add_argument("--nodes", type=int, default=2)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--profile", choices=OPS, help="print a cProfile of this operation at the largest size")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    results: dict[int, dict[str, float]] = {}
    for size in sizes:
        boxes, documents, ops = node_updates(size, args.nodes, args.repeat)
        each: list[float] = []
        asyncio.run(apply_all(documents, profile=False, each=each))
        by_op = {op: statistics.median(t for o, t in zip(ops, each) if o == op) for op in OPS if op in ops}
        results[size] = by_op
        print(f"node0 holding {boxes:,} boxes (load {os.getloadavg()[0]:.1f}), CPU ms per update, median of "
              f"{args.repeat}: " + ", ".join(f"{op} {t * 1000:.2f}" for op, t in by_op.items()), flush=True)
        if args.profile and size == sizes[-1]:
            _profile(documents, ops, args.profile)
    if len(sizes) > 1:
        small, large = sizes[0], sizes[-1]
        print(f"{large:,} against {small:,} boxes, load {os.getloadavg()[0]:.1f}: "
              + ", ".join(f"{op} {results[large][op] / max(results[small][op], 1e-9):.1f}x"
                          for op in results[large] if op in results[small]))


def _profile(documents: list[str], ops: list[str], op: str) -> None:
    """cProfile of applying the updates of ``op`` (after the slice and the updates before them)."""
    profiler = cProfile.Profile()
    marks: list[float] = []

    async def run() -> None:
        from boreas.catalog import read_document
        from boreas.m3.boxtype import box_types
        from boreas.node.dataflow import Dataflow
        from boreas.node.local_catalog import LocalCatalog
        local = LocalCatalog(NODE)
        flow = Dataflow(NODE, None, f"{NODE}#bench", box_types=box_types())
        for k, (body, this) in enumerate(zip(documents, ops)):
            if this == op:
                profiler.enable()
            start = time.process_time()
            update = read_document(body.encode(), f"update #{k}")
            candidate = local.preview(update)
            assert not flow.refusals(candidate, f"update #{k}", touched=local.touched)
            flow.reconfigure(local.apply(update, candidate))
            marks.append(time.process_time() - start)
            profiler.disable()

    asyncio.run(run())
    pstats.Stats(profiler).sort_stats("tottime").print_stats(25)
    pstats.Stats(profiler).sort_stats("cumulative").print_stats(40)


if __name__ == "__main__":
    logging.basicConfig(level=logging.WARNING)
    main()
