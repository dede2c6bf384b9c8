"""Benchmark: the Head's CPU for one learnt move, reading both nodes again against patching them (issue 37).

A/B in one process, rounds interleaved: bench/control_plane_head.py's
Head (bench/catalog.py's application over ``--nodes`` nodes, SQLite) moves
``b40`` from node0 to node1 and back; each round times, in CPU seconds:

* **commit**: the move's commit, follow, slice and encode
  (``control_plane_head.run_op``: the same on both sides);
* **read** (what ``main`` does after every move): each of the two nodes'
  catalogs serialized as its ``GET /catalog`` answers (the node's CPU,
  shown apart) and decoded by the Head (as head/node_sync.py ``_held_of`` does),
  then the difference to its new slice (``update_items``);
* **patch** (the move report, wire/move_report.py): each node's written
  items, as node/handover.py computes them from the source's catalog,
  applied to the Head's record (``NodeSync.patch``), then the same
  difference.

The Head's CPU per move is commit + read (``main``) against commit + patch
(the branch); medians of ``--repeat`` rounds.

Usage: .venv/bin/python bench/move_report.py [--sizes 20000,100000] [--nodes 4] [--repeat 5]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import tempfile
import time

from boreas.catalog import Catalog, open_store
from boreas.catalog.model import Schema
from boreas.catalog.replicate import apply_update, update_items
from boreas.catalog.updates import update_document
from boreas.catalog.documents import read_document
from boreas.head.node_sync import NodeSync
from boreas.head.pending import PendingRequests
from boreas.node.handover import source_items, target_items
from boreas.node.local_catalog import LocalCatalog
from boreas.wire.move_report import Written, serial_id
from control_plane_head import build, run_op

SOURCE, TARGET = "node0:15000", "node1:15000"  # (both hold a quarter of the boxes with 4 nodes)


class _Flow:
    """What node/handover.py reads of a node's dataflow: the schema of each stream of the moved box."""

    def __init__(self, streams: list[str], schema: Schema):
        self.schemas = {s: schema for s in streams}


def _written(held: dict[str, Catalog], box: str, source: str, target: str) -> dict[str, list]:
    """The items the source and the target write for moving ``box`` (node/mover.py), from the source's catalog."""
    local = held[source]
    moved = local.boxes[box]
    schema = next(iter(local.schemas.values()))
    flow = _Flow([p.stream for p in moved.inputs] + list(moved.outputs), schema)
    return {target: target_items(local, flow, [moved], source, target),  # type: ignore[arg-type]
            source: source_items(local, flow, [moved], source, target)}  # type: ignore[arg-type]


def _read(node_holds: Catalog, desired: Catalog, endpoint: str) -> tuple[float, float]:
    """(node CPU, Head CPU) of reading a node again: its GET /catalog, the Head's decode and difference."""
    local = LocalCatalog(endpoint)
    local.catalog = node_holds
    t0 = time.process_time()
    text = local.as_update_xml(id=serial_id("bench", 1))
    t1 = time.process_time()
    doc = read_document(text, f"catalog of node {endpoint}", check_schema=False)  # (NodeSync's decode of it)
    held = apply_update(Catalog(), doc.items, doc.version or 0)
    update_items(held, desired)
    return t1 - t0, time.process_time() - t1


def _patch(record: Catalog, items: list, desired: Catalog, endpoint: str) -> float:
    """Head CPU of patching its record of a node with the node's written items, and the difference."""
    sync = NodeSync(endpoint, None, PendingRequests(), lambda: None)  # type: ignore[arg-type]
    sync.held, sync.serial = record, ("bench", 1)
    text = update_document(items)
    t0 = time.process_time()
    assert sync.patch(Written(endpoint, "bench", 1, 2, text))
    assert sync.held is not None
    update_items(sync.held, desired)
    return time.process_time() - t0


async def _round(head, k: int) -> dict[str, float]:
    out: dict[str, float] = {"commit": 0.0, "read": 0.0, "read_node": 0.0, "patch": 0.0}
    for op, box_to, box_from in (("move", TARGET, SOURCE), ("move back", SOURCE, TARGET)):
        before = {e: head.held.get(e, Catalog()) for e in (box_from, box_to)}
        written = _written(before, "b40", box_from, box_to)
        node_holds = {e: apply_update(before[e], written[e], before[e].version) for e in written}
        out["commit"] += sum(run_op(head, op, k, away=TARGET).values())
        for endpoint in (box_from, box_to):
            desired = head.held[endpoint]
            if k % 2:  # (interleaved: the order of the two sides alternates by round)
                out["patch"] += _patch(before[endpoint], written[endpoint], desired, endpoint)
                node, took = _read(node_holds[endpoint], desired, endpoint)
            else:
                node, took = _read(node_holds[endpoint], desired, endpoint)
                out["patch"] += _patch(before[endpoint], written[endpoint], desired, endpoint)
            out["read"] += took
            out["read_node"] += node
    return {name: value / 2 for name, value in out.items()}  # (per move: two moves a round)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="20000,100000")
    parser.add_argument("--nodes", type=int, default=4)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    for size in (int(s) for s in args.sizes.split(",")):
        with tempfile.TemporaryDirectory() as tmp, open_store(f"sqlite:///{tmp}/c.db") as store:
            started = time.process_time()
            head = build(size, args.nodes, store)
            print(f"{size:,} boxes over {args.nodes} nodes built in {time.process_time() - started:.1f} s CPU "
                  f"(load {os.getloadavg()[0]:.1f})", flush=True)
            rounds = [asyncio.run(_round(head, k)) for k in range(args.repeat)]
            med = {name: statistics.median(r[name] for r in rounds) for name in rounds[0]}
            main_cpu, branch_cpu = med["commit"] + med["read"], med["commit"] + med["patch"]
            print(f"  one move, Head CPU: main (read both nodes) {main_cpu * 1000:.1f} ms = commit "
                  f"{med['commit'] * 1000:.1f} + read {med['read'] * 1000:.1f}; branch (patch) "
                  f"{branch_cpu * 1000:.1f} ms = commit + patch {med['patch'] * 1000:.2f}; "
                  f"{main_cpu / max(branch_cpu, 1e-9):.1f}x; the two nodes' GET /catalog "
                  f"{med['read_node'] * 1000:.1f} ms more on main (load {os.getloadavg()[0]:.1f})", flush=True)


if __name__ == "__main__":
    main()
