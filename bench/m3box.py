"""Benchmark: the ``m3`` box in process, fed Arrow batches, against the same program's native core.

Why in process: bench/columnar.py measures the node end to end (wire,
intake, outbox); this one isolates what the box itself does per batch
(Arrow to arrays, the C triggers, the view's changes read back as an Arrow
changelog) so a profile shows the box and nothing else.  The workload is
bench/columnar.py's (bench/cumulus_q3.py's ``workload``, a sign field first
in each schema); the batches are made before the clock starts.

Printed: events/s of the native core (``apply_grouped_columns`` fed
ready-made arrays), of the box (``M3Operator.process`` fed ``Columns``),
their ratio, and the changelog rows the box emitted.  ``--profile`` runs the
box under cProfile and prints the top functions by cumulative time.

Usage: ``python bench/m3box.py [--events 300000] [--batch 20000] [--repeat 3] [--profile]``
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from columnar import in_process_native, tables  # noqa: E402
from cumulus_q3 import STREAMS, expected_view, same_view, signed_app, workload  # noqa: E402


def box_operator():
    """A fresh ``m3`` box running the signed Q3 application, with its in schemas by port."""
    from boreas.catalog import Catalog, plan_submission, read_document
    from boreas.catalog.validate import stream_schemas
    from boreas.m3.boxtype import box_types
    from boreas.node.operators import build_operator

    types = box_types()
    plan = plan_submission(Catalog(), [read_document(signed_app(), "q3.xml")], types)
    if not plan.ok:
        raise SystemExit(f"the Q3 application does not validate: {plan.problems}")
    schemas = stream_schemas(plan.catalog, types)
    box = plan.catalog.boxes["q3"]
    return build_operator(box, [schemas[p.stream] for p in box.inputs], [schemas[s] for s in box.outputs])


def batches(data: dict[str, list[tuple]], batch: int, op) -> list[tuple[int, object]]:
    """``(port, Columns)`` in the order the publishers send them (customers, orders, lineitems)."""
    from boreas.wire.columns import Columns

    fields = {stream: [(f.name, f.type.value) for f in schema.fields]
              for (stream, _), schema in zip(STREAMS, op.inputs)}
    whole = tables(data, fields)
    out = []
    for port, (stream, _) in enumerate(STREAMS):
        for part in whole[stream].to_batches(max_chunksize=batch):
            out.append((port, Columns(part)))
    return out


def run_box(data: dict[str, list[tuple]], batch: int, profile=None) -> tuple[float, float, int, object]:
    """(events/s, CPU microseconds per event, changelog rows emitted, the operator) of one fresh box fed the workload's batches
    (``profile``: a ``cProfile.Profile`` enabled around the feeding only)."""
    op = box_operator()
    if op.backend != "native":
        raise SystemExit(f"no native backend here: {op.backend_reason}")
    fed = batches(data, batch, op)
    emitted = 0
    if profile is not None:
        profile.enable()
    began, cpu = time.perf_counter(), time.process_time()
    for port, cols in fed:
        for _, changed in op.process(port, cols, 0.0):
            emitted += len(changed)
    seconds, cpu = time.perf_counter() - began, time.process_time() - cpu
    if profile is not None:
        profile.disable()
    total = sum(len(rows) for rows in data.values())
    return total / seconds, cpu / total * 1e6, emitted, op


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=300_000)
    parser.add_argument("--batch", type=int, default=20_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--profile", action="store_true")
    args = parser.parse_args(argv)
    data = workload(args.events)
    if args.profile:
        import cProfile
        import pstats

        profile = cProfile.Profile()
        run_box(data, args.batch, profile)
        pstats.Stats(profile).sort_stats("tottime").print_stats(30)
        return 0
    cores, boxes, core_cpu, box_cpu = [], [], [], []
    op = None
    for _ in range(args.repeat):
        rate, cpu = in_process_native(data, args.batch)
        cores.append(rate)
        core_cpu.append(cpu)
        rate, cpu, emitted, op = run_box(data, args.batch)
        boxes.append(rate)
        box_cpu.append(cpu)
    want = expected_view(data)
    got = {k: v for k, v in op.runtime.view("Q1").items() if v}
    if not same_view(got, want):
        print("the box's view differs from the runtime's", file=sys.stderr)
        return 1
    core, box = statistics.median(cores), statistics.median(boxes)
    print(f"Q3 m3 box in process, {args.events:,} events, batches of {args.batch:,}, median of {args.repeat}")
    core_us, box_us = statistics.median(core_cpu), statistics.median(box_cpu)
    print(f"{'native core (arrays in)':<30}{core:>14,.0f} events/s  {core_us:.3f} CPU us/event")
    print(f"{'m3 box (Columns in and out)':<30}{box:>14,.0f} events/s  {box_us:.3f} CPU us/event")
    print(f"box / core: {box / core:.1%} by wall clock, {core_us / box_us:.1%} by CPU time; "
          f"changelog rows emitted per run: {emitted:,}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
