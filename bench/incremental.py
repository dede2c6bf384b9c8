"""Benchmark: one small change to a large catalog, checked and sliced incrementally against checking everything.

Grows bench/catalog.py's application (chains of filters over 20 nodes) to
``--boxes`` boxes, then times, each as the median of a few runs, what one
change costs the Head: a one-box submission (merge + check), a ``<move>``
of one box, and, after the commit, working out which nodes' slices changed
and slicing them.  The peer, measured in the same run on the same catalog,
is the way before issue 37: the whole topology checked (``check_topology``)
and every node sliced from scratch (``node_slices``).  The ratio says how
much of the catalog's size a change still pays.

Usage: .venv/bin/python bench/incremental.py [--boxes 5000 10000] [--runs 5]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from catalog import generate  # noqa: E402  (bench/catalog.py: the same application)
from boreas.catalog import Catalog, plan_submission, read_document  # noqa: E402
from boreas.catalog.index import CatalogIndex  # noqa: E402
from boreas.catalog.node_slices import NodeSlices  # noqa: E402
from boreas.catalog.slices import node_slices  # noqa: E402

ONE_BOX = ('<borealis><box name="extra" type="filter"><in stream="b0_t"/><out stream="extra_t"/>'
           '<parameter name="expression.0" value="value &gt; 3"/></box></borealis>')
ONE_BOX_DEPLOY = '<deploy><node endpoint="node0:15000" query="extra"/></deploy>'
MOVE = '<deploy><move node="node1:15000" box="b0"/></deploy>'


def median_time(fn, runs: int) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def measure(boxes: int, runs: int) -> None:
    app, dep = generate(boxes, 20)
    catalog = plan_submission(Catalog(), [read_document(app, "bench.xml"), read_document(dep, "deploy.xml")]).catalog
    start = time.perf_counter()
    index = CatalogIndex.build(catalog)
    built = time.perf_counter() - start
    slices = NodeSlices()
    slices.advance(index)
    print(f"{boxes} boxes: index built in {built:.2f} s (once, when a Head starts)")
    for label, docs in [("one-box submit", [read_document(ONE_BOX, "x.xml"), read_document(ONE_BOX_DEPLOY, "d.xml")]),
                        ("move", [read_document(MOVE, "m.xml")])]:
        plan = plan_submission(catalog, docs, index=index)
        assert plan.ok, plan.problems
        derived = index.derive(plan.catalog)

        def incremental_slicing() -> None:
            copy = NodeSlices()
            copy.index, copy.slices = index, dict(slices.slices)
            copy.advance(derived)

        check_inc = median_time(lambda: plan_submission(catalog, docs, index=index), runs)
        check_all = median_time(lambda: plan_submission(catalog, docs), max(1, runs // 2))
        slice_inc = median_time(incremental_slicing, runs)
        slice_all = median_time(lambda: node_slices(plan.catalog), max(1, runs // 2))
        print(f"  {label:15s} check: indexed {check_inc * 1000:7.1f} ms, whole {check_all * 1000:7.0f} ms "
              f"-> {check_all / check_inc:6.0f}x   slicing: changed nodes {slice_inc * 1000:6.1f} ms, "
              f"every node {slice_all * 1000:6.0f} ms -> {slice_all / slice_inc:5.0f}x")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--boxes", type=int, nargs="+", default=[5000, 10000])
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    for boxes in args.boxes:
        measure(boxes, args.runs)


if __name__ == "__main__":
    main()
