"""A node's side of a deployment, in process: one node applying its update documents, CPU seconds per box.

bench/control_plane.py times a deployment end to end over 20 node processes;
this bench takes one of those nodes apart.  The Head's side runs as
bench/deploy_head.py runs it (bench/catalog.py's application in ``--parts``
submissions over ``--nodes`` nodes, each node's slice advanced per commit);
the update documents the first node is sent are then applied as
node/api.py's ``handle_update`` applies them (the collector paused for a
bulk update, node/gcpause.py; read and decode, preview,
``Dataflow.refusals`` building and checking the boxes, apply,
``reconfigure``), timed per phase in CPU seconds (``time.process_time``:
the figure a loaded machine distorts least).

Peer, in the same run: building the same filters with their code shared
per expression shape (node/compile_shapes.py) against compiled per box
(``SharedCode(0)``, what every node did before), and the ratio.  ``--profile``
prints cProfile's view of the last update's apply.

    python bench/deploy_node.py [--boxes 20000] [--parts 2] [--nodes 20] [--profile] [--documents FILE]
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import json
import pstats
import tempfile
import time
from pathlib import Path

from boreas.catalog import Catalog, open_store, read_document
from boreas.catalog.elements import apply_commit, commit_touched
from boreas.catalog.index import CatalogIndex
from boreas.catalog.model import Box
from boreas.catalog.replicate import update_items
from boreas.catalog.node_slices import NodeSlices
from boreas.catalog.submission import apply_submission
from boreas.catalog.updates import update_document
from boreas.head.bulk import bulk_step, declared
from boreas.m3.boxtype import box_types
from boreas.node.compile_shapes import SharedCode
from boreas.node.dataflow import Dataflow
from boreas.node.gcpause import bulk_update
from boreas.node.local_catalog import LocalCatalog
from boreas.node.operators.filter import FilterOperator
from catalog import generate_parts

NODE = "node0:15000"
PHASES = ("read", "preview", "refusals", "apply")


def node_documents(boxes: int, nodes: int, parts: int) -> tuple[list[str], Catalog]:
    """The update documents the Head sends :data:`NODE`, one per part, and the last slice."""
    documents, held = [], Catalog()
    with tempfile.TemporaryDirectory() as tmp, open_store(f"sqlite:///{tmp}/c.db") as store:
        catalog = Catalog()
        index, slices = CatalogIndex.build(catalog), NodeSlices()
        for app, dep in generate_parts(boxes, nodes, parts):
            docs = [read_document(app, "bench.xml"), read_document(dep, "bench_deploy.xml")]
            with bulk_step(sum(map(declared, docs))):  # (as HeadService.submit: head/bulk.py)
                applied = apply_submission(store, docs, base=catalog, index=index)
            touched = commit_touched(applied.commit)
            with bulk_step(sum(map(len, touched.values())), keep=True):
                after = apply_commit(catalog, applied.commit)
                index = index.derive(after, touched)
                new = slices.advance(index).get(NODE)
            if new is not None:
                documents.append(update_document(update_items(held, new), version=after.version,
                                                 origin="head", id=f"v{after.version}"))
                held = new
            catalog = after
    return documents, held


async def apply_all(documents: list[str], profile: bool,
                    each: list[float] | None = None) -> tuple[dict[str, float], int]:
    """Apply ``documents`` to a fresh node as node/api.py does; CPU seconds per phase, boxes built (and each
    document's CPU seconds appended to ``each``)."""
    local = LocalCatalog(NODE)
    flow = Dataflow(NODE, None, f"{NODE}#bench", box_types=box_types())
    totals = dict.fromkeys(PHASES, 0.0)
    profiler = cProfile.Profile() if profile else None
    for k, body in enumerate(documents):
        last = profiler is not None and k == len(documents) - 1
        if last:
            profiler.enable()
        data = body.encode()
        marks = [time.process_time()]
        with bulk_update(len(data)):
            update = read_document(data, f"update #{k}")
        marks.append(time.process_time())
        candidate = local.preview(update)
        marks.append(time.process_time())
        with bulk_update(len(data)):
            problems = flow.refusals(candidate, f"update #{k}", touched=local.touched)
            if problems:
                raise SystemExit(f"the node refused update #{k}: {problems[0]['reason']}")
            marks.append(time.process_time())
            flow.reconfigure(local.apply(update, candidate))
        marks.append(time.process_time())
        if last:
            profiler.disable()
        for phase, a, b in zip(PHASES, marks, marks[1:]):
            totals[phase] += b - a
        if each is not None:
            each.append(marks[-1] - marks[0])
    if profiler is not None:
        pstats.Stats(profiler).sort_stats("cumulative").print_stats(30)
    return totals, len(local.catalog.boxes)


def build_filters(boxes: list[Box], held: Catalog, shared: SharedCode) -> float:
    """CPU seconds building ``boxes`` (filters) with ``shared``; their schemas from ``held``'s single input."""
    schema = next(iter(held.schemas.values()))
    start = time.process_time()
    for box in boxes:
        FilterOperator(box, [schema], [schema] * len(box.outputs), shared=shared)
    return time.process_time() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--boxes", type=int, default=20_000)
    parser.add_argument("--parts", type=int, default=2)
    parser.add_argument("--nodes", type=int, default=20)
    parser.add_argument("--profile", action="store_true", help="cProfile the last update's apply")
    parser.add_argument("--documents", type=Path, help="a JSON file of the update documents: read if it exists "
                        "(the Head's path not run again: another checkout applies the same ones in a fresh "
                        "process), else written")
    args = parser.parse_args()
    if args.documents is not None and args.documents.exists():
        documents = json.loads(args.documents.read_text())
        totals, built = asyncio.run(apply_all(documents, args.profile))
        print(f"{NODE}: {built:,} boxes in {len(documents)} update(s) from {args.documents}, CPU s: "
              + ", ".join(f"{p} {t:.3f}" for p, t in totals.items())
              + f"; total {sum(totals.values()):.3f} ({sum(totals.values()) / max(built, 1) * 1000:.3f} ms a box)")
        return
    documents, held = node_documents(args.boxes, args.nodes, args.parts)
    if args.documents is not None:
        args.documents.write_text(json.dumps(documents))
    totals, built = asyncio.run(apply_all(documents, args.profile))
    total = sum(totals.values())
    print(f"{NODE}: {built:,} boxes in {len(documents)} update(s), CPU s: "
          + ", ".join(f"{p} {t:.3f}" for p, t in totals.items())
          + f"; total {total:.3f} ({total / max(built, 1) * 1000:.3f} ms a box)", flush=True)
    filters = [b for b in held.boxes.values() if b.type == "filter"]
    shared = build_filters(filters, held, SharedCode())
    alone = build_filters(filters, held, SharedCode(0))
    print(f"building its {len(filters):,} filters, CPU s: shared per shape {shared:.3f} "
          f"({shared / max(len(filters), 1) * 1000:.3f} ms a box), peer compiled per box {alone:.3f} "
          f"({alone / max(len(filters), 1) * 1000:.3f} ms a box): {alone / max(shared, 1e-9):.1f}x", flush=True)


if __name__ == "__main__":
    main()
