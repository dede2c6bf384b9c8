"""Benchmark: the Head's per-commit work for one one-box commit, in process, in CPU seconds (issue 37).

What ``HeadService._advance`` does with a commit: derive the index and the
node slices (``_install``), and, with a global component registered, the
commit's update items for its feed (``update_items``, then the feed encodes
them), plus the web UI's index (``UiIndex.changed``) and a browser's change
(``changes_json``).  The catalog is bench/catalog.py's application committed
as bench/deploy_head.py commits it (SQLite store); the commit then moves one
box to another node.  Each item is timed two ways in the same run: comparing
the whole catalogs (how every commit worked before), and comparing only the
keys the commit wrote (``commit_touched``: how a followed commit works now;
the whole compare is left for a gap read whole from the store).  The CPU
time is ``time.process_time``, the median of ``--repeat`` runs.

Usage: .venv/bin/python bench/advance.py [--boxes 10000] [--nodes 20] [--repeat 7]
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
import statistics
import tempfile
import time
from collections.abc import Callable
from typing import Any

from boreas.catalog import Catalog, open_store, read_document
from boreas.catalog.elements import apply_commit, commit_touched, diff
from boreas.catalog.index import CatalogIndex
from boreas.catalog.replicate import update_items
from boreas.catalog.node_slices import NodeSlices
from boreas.catalog.store.base import Commit
from boreas.catalog.submission import apply_submission
from boreas.catalog.updates import update_document
from boreas.head.ui.feed import changes_json
from boreas.head.ui.index import UiIndex
from catalog import generate_parts


def cpu(fn: Callable[[], Any], repeat: int) -> float:
    """Median CPU seconds of ``fn()``."""
    runs = []
    for _ in range(repeat):
        start = time.process_time()
        fn()
        runs.append(time.process_time() - start)
    return statistics.median(runs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--boxes", type=int, default=10_000)
    parser.add_argument("--nodes", type=int, default=20)
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp, open_store(f"sqlite:///{tmp}/c.db") as store:
        before, index = Catalog(), CatalogIndex.build(Catalog())
        for app, dep in generate_parts(args.boxes, args.nodes, max(1, args.boxes // 50_000)):
            docs = [read_document(app, "bench.xml"), read_document(dep, "bench_deploy.xml")]
            applied = apply_submission(store, docs, base=before, index=index)
            after = apply_commit(before, applied.commit)
            index, before = index.derive(after, commit_touched(applied.commit)), after
        slices = NodeSlices()
        slices.advance(index)
        moved = before.copy()
        box = moved.boxes["b0"]
        moved.boxes["b0"] = dataclasses.replace(box, node="node1:15000" if box.node != "node1:15000" else "node2:15000")
        commit = Commit(before.version + 1, tuple(diff(before, moved)))
        after, touched = apply_commit(before, commit), commit_touched(commit)
        ui = UiIndex(before)

        install = cpu(lambda: slices.advance(index.derive(after, touched)), 1)  # (once: it moves them on)
        rows = []
        for name, fn in (
            ("feed items + encode", lambda t: update_document(update_items(before, after, t), version=after.version)),
            ("UI index", lambda t: _ui_again(ui, before, after, t)),
            ("browser change", lambda t: changes_json(before, after, t)),
        ):
            whole = cpu(lambda: fn(None), args.repeat)
            keyed = cpu(lambda: fn(touched), args.repeat)
            rows.append((name, whole, keyed))
        print(f"{args.boxes:,} boxes, {args.nodes} nodes; one commit moving one box ({len(commit.changes)} change(s));"
              f" CPU ms, median of {args.repeat}:")
        print(f"  _install (index derive + slices, unchanged; one run): {install * 1000:.2f}")
        for name, whole, keyed in rows:
            print(f"  {name}: whole compare {whole * 1000:.2f}, from the commit's keys {keyed * 1000:.3f} "
                  f"({whole / max(keyed, 1e-9):.0f}x)")
        total_whole = install + rows[0][1] + rows[1][1]  # (a browser's change only while one is connected)
        total_keyed = install + rows[0][2] + rows[1][2]
        print(f"  _advance with a global feed and the UI index: {total_whole * 1000:.2f} -> {total_keyed * 1000:.2f}"
              f" (+ a connected browser's change)")


def _ui_again(ui: UiIndex, before: Catalog, after: Catalog, touched: dict[str, set[str]] | None) -> None:
    ui.changed(before, after, touched)
    ui.changed(after, before, touched)  # back again, so every run follows the same commit


if __name__ == "__main__":
    logging.basicConfig(level=logging.WARNING)
    main()
