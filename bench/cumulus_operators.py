"""Where a partitioned box's CPU goes: its members' operators alone, in one process, against 1 member.

``bench/cumulus.py`` measures the Q3 view partitioned over real node
processes; its figure, the busiest node's CPU per event at 4 nodes over
that of 1 node, mixes two costs: the members' own work (coordinating,
serving, applying: :class:`~boreas.node.cumulus.part.PartOperator`) and the
data plane's cost of carrying their messages (encoding, links,
acknowledgements, the receiving dataflow).  This script measures the first
alone: the same members, fed the same Q3 workload (``bench/cumulus.py``'s
generator, 5% deletes) in batches of 500 rows by producers spread over the
members, with their messages handed from one to the next in memory (the
simulation the property tests use, ``tests/support/cumulus_sim.py``), and
the CPU each member's operator calls take.  The difference between the two
benches is what the messages between processes cost.

Usage::

    .venv/bin/python bench/cumulus_operators.py [--members 1,2,4] [--events 300000] [--profile]
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "tests"))

import cumulus_q3 as q3  # noqa: E402  (the SQL and the workload of bench/cumulus.py)
from boreas.m3 import compile_sql  # noqa: E402
from boreas.m3.cumulus import place  # noqa: E402
from boreas.m3.cumulus.layout import even_layout  # noqa: E402
from support.cumulus_sim import Sim  # noqa: E402

BATCH = 500
SEGMENTS = 16


def run(members: int, events: int, seed: int = 13) -> dict:
    """CPU seconds of each member's operator calls for ``events`` Q3 events over ``members`` members."""
    program = compile_sql(q3.SQL)
    placement = place(program, box="v")
    layout = even_layout("v", [f"m{i}" for i in range(members)], SEGMENTS,
                         maps=[(m.map, m.column) for m in placement.maps])
    sim = Sim(q3.SQL, layout, random.Random(seed))
    sim.single.apply_grouped = lambda batches: 0  # the simulation's own oracle is not what is measured
    cpu = [0.0] * members

    def timed(i: int, call):
        def wrapper(*args, **kwargs):
            t0 = time.process_time()
            try:
                return call(*args, **kwargs)
            finally:
                cpu[i] += time.process_time() - t0
        return wrapper

    for i, op in enumerate(sim.members):
        op.process_from, op.process, op.poll = timed(i, op.process_from), timed(i, op.process), timed(i, op.poll)
    data = q3.workload(events, seed=seed)
    batches = [(rel, data[rel][i:i + BATCH]) for rel in ("customer", "orders", "lineitem")
               for i in range(0, len(data[rel]), BATCH)]
    random.Random(seed + 1).shuffle(batches)
    for k, (relation, rows) in enumerate(batches):
        sim.publish(k % members, relation, [(r[0], r[1:]) for r in rows])
        while sim.deliver_one():
            pass
        if k % 20 == 0:  # ~an epoch per 10,000 rows: epochs end while work flows
            sim.tick(0.1)
    sim.settle()
    return {"members": members, "events": events, "cpu_s": cpu,
            "busiest_us_per_event": max(cpu) / events * 1e6, "total_us_per_event": sum(cpu) / events * 1e6}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--members", default="1,2,4", help="member counts, comma separated (default 1,2,4)")
    parser.add_argument("--events", type=int, default=300_000)
    parser.add_argument("--profile", action="store_true", help="print the largest member count's cProfile")
    args = parser.parse_args()
    counts = [int(x) for x in args.members.split(",")]
    results = []
    for n in counts:
        if args.profile and n == counts[-1]:
            import cProfile
            import pstats
            with cProfile.Profile() as prof:
                results.append(run(n, args.events))
            pstats.Stats(prof).sort_stats("tottime").print_stats(20)
        else:
            results.append(run(n, args.events))
    print(f"Q3 members' operators in one process (no data plane): {args.events:,} events, batches of {BATCH}, "
          f"{SEGMENTS} segments")
    print(f"{'members':>7} {'busiest us/ev':>13} {'sum us/ev':>9}  per member us/ev")
    for r in results:
        per = " ".join(f"{c / r['events'] * 1e6:.2f}" for c in r["cpu_s"])
        print(f"{r['members']:>7} {r['busiest_us_per_event']:>13.2f} {r['total_us_per_event']:>9.2f}  {per}")
    base = results[0]["busiest_us_per_event"] if counts[0] == 1 else None
    ratios = {r["members"]: r["busiest_us_per_event"] / base for r in results[1:]} if base else {}
    for n, ratio in ratios.items():
        print(f"busiest member's CPU per event, {n} members / 1: {ratio:.2f}x (bench/cumulus.py's target: 0.35x "
              "for whole node processes)")
    print(json.dumps({"bench": "cumulus_operators", "runs": results, "ratios": ratios}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
