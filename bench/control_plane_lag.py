"""Benchmark: what the Head's background work costs its event loop, at each catalog size (issue 37).

bench/control_plane.py found single-object CLI calls taking seconds at
100,000 boxes while the Head's own CPU for them was a few milliseconds.
Work costing the catalog's size runs in a worker thread after a change
(the copy built ahead, head/copy_ahead.py; the index saved,
head/index_saver.py), and a thread computing holds the GIL: the loop,
woken by a request's bytes or a node's answer, waits for it.  This builds
bench/catalog.py's application in process (bench/control_plane_head.py's
``build``), then, for each piece of work, runs it in a worker thread as the
Head does while the loop runs two probes, and prints:

* **lag**: a 1 ms timer's lateness, median, 90th percentile and largest;
* **waits**: the wall time of 20 waits of 0.1 ms in a row (each one the
  loop blocked in its selector, the GIL released, and taken back when it
  wakes, as for each of a request's reads and writes), median;

with the work's checkpoint yielding (head/yielding.py's ``Yielder``, as the
Head runs it) and not (a ``Yielder`` that never yields: as before it), one
after the other in the same minutes, and once with no work at all.
Wall-clock figures on a shared machine: compare within one run, and read
them with the load average printed.

Usage: .venv/bin/python bench/control_plane_lag.py [--sizes 20000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import tempfile
import time
from collections.abc import Callable

from boreas.catalog import open_store
from boreas.catalog.index_codec import encode_index
from boreas.head.catalog_copy import CatalogCopies
from boreas.head.yielding import Yielder
from control_plane_head import Head, build

TURNS = 20


async def _probe_lag(stop: asyncio.Event, lags: list[float]) -> None:
    loop = asyncio.get_running_loop()
    while not stop.is_set():
        start = loop.time()
        await asyncio.sleep(0.001)
        lags.append(loop.time() - start - 0.001)


async def _probe_turns(stop: asyncio.Event, turns: list[float]) -> None:
    while not stop.is_set():
        start = time.perf_counter()
        for _ in range(TURNS):
            await asyncio.sleep(0.0001)
        turns.append(time.perf_counter() - start)
        await asyncio.sleep(0.005)


async def measure(work: Callable[[], object]) -> dict[str, float]:
    """``work`` in a worker thread, the probes on the loop meanwhile."""
    stop, lags, turns = asyncio.Event(), [], []
    probes = [asyncio.create_task(_probe_lag(stop, lags)), asyncio.create_task(_probe_turns(stop, turns))]
    start = time.perf_counter()
    await asyncio.to_thread(work)
    wall = time.perf_counter() - start
    stop.set()
    await asyncio.gather(*probes)
    lags.sort()
    return {"wall": wall, "lag50": lags[len(lags) // 2] * 1e3, "lag90": lags[int(len(lags) * 0.9)] * 1e3,
            "lagmax": lags[-1] * 1e3, "turns": statistics.median(turns) * 1e3 if turns else float("nan")}


def works(head: Head) -> dict[str, Callable[[Yielder], object]]:
    return {
        "copy build": lambda y: CatalogCopies(lambda: head.catalog, "head", y).serialize(),
        "index encode": lambda y: encode_index(head.index, y),
    }


async def run_size(head: Head, repeat: int) -> list[tuple[str, dict[str, float]]]:
    rows = [("no work", await measure(lambda: time.sleep(0.5)))]
    for name, work in works(head).items():
        for label, yielder in (("not yielding", lambda: Yielder(slice=float("inf"))), ("yielding", Yielder)):
            runs = [await measure(lambda w=work, y=yielder: w(y())) for _ in range(repeat)]
            rows.append((f"{name}, {label}", {k: statistics.median(r[k] for r in runs) for k in runs[0]}))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="20000")
    parser.add_argument("--nodes", type=int, default=4)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    for boxes in (int(s) for s in args.sizes.split(",")):
        with tempfile.TemporaryDirectory() as tmp, open_store(f"sqlite:///{tmp}/c.db") as store:
            head = build(boxes, args.nodes, store)
            rows = asyncio.run(run_size(head, args.repeat))
        print(f"\n== {boxes:,} boxes; medians of {args.repeat}; load average {os.getloadavg()[0]:.1f}")
        print(f"{'work in a worker thread':34} {'wall s':>7} {'lag ms: p50':>12} {'p90':>6} {'max':>6} "
              f"{f'{TURNS} waits ms':>13}")
        for name, r in rows:
            print(f"{name:34} {r['wall']:7.2f} {r['lag50']:12.1f} {r['lag90']:6.1f} {r['lagmax']:6.1f} "
                  f"{r['turns']:13.1f}")


if __name__ == "__main__":
    main()
