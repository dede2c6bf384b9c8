"""Benchmark: the Head's CPU per single-object operation, in process, at each catalog size (issue 37).

bench/control_plane.py times a ``boreas`` CLI call end to end over 20 node
processes; on the shared machine its wall time is mostly the load.  This
builds bench/catalog.py's application through the store API (SQLite), as
bench/deploy_head.py does, then times each operation's Head-side path in
CPU seconds (``time.process_time``), phase by phase:

* **check+commit**: a one-box submission read and planned on the Head's
  index and committed (``apply_submission``); a move, connect or disconnect
  built as the Head learns it (head/learning.py's ``*_changes``) and
  committed (``optimistic_commit``);
* **follow**: the commit decoded and the index derived (``apply_commit``,
  ``CatalogIndex.derive``);
* **slice**: the nodes whose slice changed (``NodeSlices.advance``);
* **encode**: each changed node's update XML against what it held
  (``update_items``, ``update_document``), as head/node_sync.py sends it;
* with ``--node``, the node's side of the submission's and the delete's
  updates at node0 holding its slice (bench/deploy_node.py's ``apply_all``:
  read, preview, refusals, apply).

Each operation is undone by the next (submit then delete, move there and
back, connect then disconnect), so every round sees the same catalog size;
the figure is the median of ``--repeat`` rounds, and the largest size's
against the smallest is the issue's 1.5x.

Usage: .venv/bin/python bench/control_plane_head.py [--sizes 1000,100000] [--repeat 7] [--node] [--profile OP]
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import dataclasses
import gc
import logging
import os
import pstats
import statistics
import tempfile
import time
from collections.abc import Callable

from boreas.catalog import Catalog, open_store, read_document
from boreas.catalog.document_model import Connect
from boreas.catalog.elements import apply_commit, commit_touched
from boreas.catalog.index import CatalogIndex
from boreas.catalog.model import Box, InPort
from boreas.catalog.replicate import update_items
from boreas.catalog.node_slices import NodeSlices
from boreas.catalog.store import CatalogStore, Commit
from boreas.catalog.submission import apply_submission, optimistic_commit
from boreas.catalog.updates import update_document
from boreas.head.bulk import bulk_step, declared
from boreas.head.learning import connect_changes, disconnect_changes, move_changes
from catalog import generate_parts
from deploy_node import NODE, apply_all

PHASES = ("check+commit", "follow", "slice", "encode")
OPS = ("submit", "delete", "move", "move back", "connect", "disconnect")


@dataclasses.dataclass
class Head:
    """What the Head holds between operations: its catalog, index, node slices and what each node holds."""

    store: CatalogStore
    catalog: Catalog
    index: CatalogIndex
    slices: NodeSlices
    held: dict[str, Catalog]
    last: dict[str, str] = dataclasses.field(default_factory=dict)  # node -> its last update document

    def follow(self, commit: Commit, marks: list[float]) -> None:
        """What ``HeadService._advance`` does with ``commit``: decode, derive, slice, push."""
        touched = commit_touched(commit)
        with bulk_step(sum(map(len, touched.values())), keep=True):
            after = apply_commit(self.catalog, commit)
            self.index = self.index.derive(after, touched)
            marks.append(time.process_time())
            changed = self.slices.advance(self.index)
            marks.append(time.process_time())
        self.last = {}
        for node, new in changed.items():
            new = new or Catalog()
            items = update_items(self.held.get(node, Catalog()), new)
            if items:
                self.last[node] = update_document(items, version=after.version, origin="head")
            self.held[node] = new
        marks.append(time.process_time())
        self.catalog = after


def build(boxes: int, nodes: int, store: CatalogStore) -> Head:
    parts = max(1, boxes // 10_000)
    head = Head(store, Catalog(), CatalogIndex.build(Catalog()), NodeSlices(), {})
    for app, dep in generate_parts(boxes, nodes, parts):
        docs = [read_document(app, "bench.xml"), read_document(dep, "bench_deploy.xml")]
        with bulk_step(sum(map(declared, docs))):
            applied = apply_submission(store, docs, base=head.catalog, index=head.index)
        head.follow(applied.commit, [])
    gc.collect()
    gc.freeze()  # (a long-lived Head's catalog sits in the oldest generation; head/bulk.py keeps it there)
    return head


def run_op(head: Head, op: str, k: int, away: str = "node7:15000") -> dict[str, float]:
    """One operation, phase by phase (CPU seconds); a move takes b40 to ``away`` and back."""
    marks = [time.process_time()]
    if op in ("submit", "delete"):
        commit = _submission(head, op, k)
    else:
        commit = _learned(head, op, away)
    marks.append(time.process_time())
    head.follow(commit, marks)
    return dict(zip(PHASES, (b - a for a, b in zip(marks, marks[1:])), strict=True))


def _submission(head: Head, op: str, k: int) -> Commit:
    if op == "submit":  # a one-box filter reading b1's stream, placed on node0 (as `boreas submit` sends it)
        app = ('<borealis><box name="extra" type="filter"><in stream="b1_t"/><out stream="extra_t"/>'
               f'<parameter name="expression.0" value="value &gt; {k}.5"/></box></borealis>')
        dep = '<deploy><node endpoint="node0:15000" query="extra"/></deploy>'
        docs = [read_document(app, "one.xml"), read_document(dep, "one_deploy.xml")]
    else:
        docs = [read_document('<borealis><delete box="extra"/></borealis>', "delete.xml")]
    return apply_submission(head.store, docs, base=head.catalog, index=head.index).commit


def _learned(head: Head, op: str, away: str) -> Commit:
    involved: set[str] = set()
    box = head.catalog.boxes["b40"]
    build: Callable[[Catalog], list | None]
    if op == "move":
        build = lambda c: move_changes(c, ["b40"], away, involved)  # noqa: E731
    elif op == "move back":
        build = lambda c: move_changes(c, ["b40"], "node0:15000", involved)  # noqa: E731
    elif op == "connect":  # a filter inserted before b40's in port, on b40's node
        upstream = box.inputs[0].stream
        filt = Box("ins", "filter", (InPort(upstream),), ("ins_out",), (("expression.0", "value > 1.5"),),
                   node=box.node)
        build = lambda c: connect_changes(c, Connect(filt, "b40", 0), involved)  # noqa: E731
    else:
        build = lambda c: disconnect_changes(c, "ins_out", involved, head.index)  # noqa: E731
    result = optimistic_commit(head.store, build, base=head.catalog)
    assert result is not None, op
    return result[1]


def node_side(head: Head, repeat: int) -> tuple[int, float]:
    """node0 given its whole slice, then the one-box submit's and delete's updates ``repeat`` times, as
    node/api.py applies them (bench/deploy_node.py's path); its boxes and the median CPU s of an update."""
    node = "node0:15000"
    held = head.held[node]
    documents = [update_document(update_items(Catalog(), held), version=head.catalog.version, origin="head")]
    for k in range(repeat):
        for op in ("submit", "delete"):
            run_op(head, op, k)
            documents.append(head.last[node])
    each: list[float] = []
    asyncio.run(apply_all(documents, profile=False, each=each))
    return len(held.boxes), statistics.median(each[1:])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,100000")
    parser.add_argument("--nodes", type=int, default=20)
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--node", action="store_true", help="and the node side of a one-box update at node0")
    parser.add_argument("--profile", choices=OPS, help="print a cProfile of this operation at the largest size")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    results: dict[int, dict[str, dict[str, float]]] = {}
    for size in sizes:
        with tempfile.TemporaryDirectory() as tmp, open_store(f"sqlite:///{tmp}/c.db") as store:
            started = time.process_time()
            head = build(size, args.nodes, store)
            print(f"{size:,} boxes built in {time.process_time() - started:.1f} s CPU "
                  f"(load {os.getloadavg()[0]:.1f})", flush=True)
            runs: dict[str, list[dict[str, float]]] = {op: [] for op in OPS}
            for k in range(args.repeat):
                for op in OPS:
                    runs[op].append(run_op(head, op, k))
            if args.profile and size == sizes[-1]:
                profiler = cProfile.Profile()
                for k in range(3):
                    for op in OPS:
                        if op == args.profile:
                            profiler.enable()
                        run_op(head, op, k)
                        profiler.disable()
                pstats.Stats(profiler).sort_stats("cumulative").print_stats(40)
            results[size] = {op: {p: statistics.median(r[p] for r in rs) for p in PHASES} for op, rs in runs.items()}
            for op, phases in results[size].items():
                total = sum(phases.values())
                print(f"  {op:>10}: {total * 1000:7.2f} ms CPU ("
                      + ", ".join(f"{p} {t * 1000:.2f}" for p, t in phases.items()) + ")", flush=True)
            if args.node:
                boxes, took = node_side(head, args.repeat)
                print(f"  node side: a one-box update at {NODE} holding {boxes:,} boxes: {took * 1000:.2f} ms CPU "
                      f"(median of {2 * args.repeat})", flush=True)
    if len(sizes) > 1:
        small, large = sizes[0], sizes[-1]
        print(f"{large:,} against {small:,} boxes (target: within 1.5x), load {os.getloadavg()[0]:.1f}:")
        for op in OPS:
            a, b = sum(results[small][op].values()), sum(results[large][op].values())
            print(f"  {op:>10}: {b / max(a, 1e-9):.2f}x {'met' if b <= 1.5 * a else 'MISSED'}")


if __name__ == "__main__":
    logging.basicConfig(level=logging.WARNING)
    main()
