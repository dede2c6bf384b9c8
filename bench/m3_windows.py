"""Benchmark: event-time windows in an ``m3`` view (TUMBLE, HOP, SESSION) against its peers in the same run.

The workload: bids ``(auction, price, ts)`` with event times in
milliseconds (10 per ms of event time, up to ``--disorder`` ms out of
order), made as Arrow batches before the clock starts, fed in process to
each box's operator (what a node runs, no wire), as bench/m3box.py does.
The peers, each counting bids and summing prices per auction:

* ``m3 never closed``: the same per-10-second counts as a view without
  event time (``GROUP BY auction, ts - MOD(ts, 10000)``): what such a view
  cost before, every window's rows kept and updated forever;
* ``m3 TUMBLE 10s``, ``m3 HOP 10s/2s``: the windowed views, a window's rows
  emitted once it closes (docs/m3.md, "Event time");
* ``m3 SESSION 20ms``: per auction, sessions of bids less than 20 ms
  apart (an auction bids every 10 ms on average, so sessions of a few
  bids): not the same counts as the others, but the cost class of a
  session, whose rows are held until it closes (its state entries are those
  rows, the disorder's worth);
* ``aggregate TUMBLE 10s``: Borealis's ``aggregate`` box with value windows
  over ``ts``, grouped by auction (``slack``, in tuples of a group, set to
  about the disorder's worth, so it keeps what the views' watermark delay keeps).

Printed per peer: events/s, the ratio to the aggregate box, rows emitted,
and the state's entries at each quarter of the run: flat for the windowed
views (closed windows dropped), growing with the auctions seen for the
unwindowed one.

Usage: ``python bench/m3_windows.py [--events 1000000] [--batch 10000] [--auctions 100] [--disorder 3000]``
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import pyarrow as pa

SQL = {
    "m3 never closed": "SELECT auction, ts - MOD(ts, 10000) AS window_start, COUNT(*) AS n, SUM(price) AS total "
                       "FROM Bid GROUP BY auction, ts - MOD(ts, 10000)",
    "m3 TUMBLE 10s": "CREATE STREAM Bid(auction INT, price INT, ts INT, WATERMARK FOR ts AS ts - {delay});\n"
                     "SELECT auction, window_start, window_end, COUNT(*) AS n, SUM(price) AS total FROM "
                     "TABLE(TUMBLE(TABLE Bid, DESCRIPTOR(ts), INTERVAL '10' SECOND)) "
                     "GROUP BY auction, window_start, window_end",
    "m3 HOP 10s/2s": "CREATE STREAM Bid(auction INT, price INT, ts INT, WATERMARK FOR ts AS ts - {delay});\n"
                     "SELECT auction, window_start, window_end, COUNT(*) AS n, SUM(price) AS total FROM "
                     "TABLE(HOP(TABLE Bid, DESCRIPTOR(ts), INTERVAL '2' SECOND, INTERVAL '10' SECOND)) "
                     "GROUP BY auction, window_start, window_end",
    "m3 SESSION 20ms": "CREATE STREAM Bid(auction INT, price INT, ts INT, WATERMARK FOR ts AS ts - {delay});\n"
                       "SELECT auction, window_start, window_end, COUNT(*) AS n, SUM(price) AS total FROM "
                       "TABLE(SESSION(TABLE Bid PARTITION BY auction, DESCRIPTOR(ts), INTERVAL '20' MILLISECOND)) "
                       "GROUP BY auction, window_start, window_end",
}
PEER = "aggregate TUMBLE 10s"
EVENTS_PER_MS = 10


def schema():
    from boreas.catalog.model import Field, FieldType, Schema
    return Schema("BidTuple", (Field("auction", FieldType.INT), Field("price", FieldType.INT),
                               Field("ts", FieldType.LONG)))


def operator(name: str, delay: int, slack: int = 0):
    """The box of peer ``name``, built as a node builds it."""
    from boreas.catalog.boxtypes import builtin_registry
    from boreas.catalog.model import Box, InPort
    from boreas.m3.boxtype import infer_m3
    from boreas.node.operators import build_operator

    bid = schema()
    if name == PEER:
        params = (("aggregate-function.0", "count()"), ("aggregate-function-output-name.0", "n"),
                  ("aggregate-function.1", "sum(price)"), ("aggregate-function-output-name.1", "total"),
                  ("window-size-by", "VALUES"), ("window-size", "10000"), ("order-by", "FIELD"),
                  ("order-on-field", "ts"), ("group-by", "auction"), ("independent-window-alignment", "1"),
                  ("slack", str(slack)), ("drop-empty-outputs", "1"))
        box = Box("agg", "aggregate", (InPort("Bid"),), ("Out",), params)
        return build_operator(box, [bid], builtin_registry().infer(box, [bid]))
    box = Box("w", "m3", (InPort("Bid"),), ("Out",), (("sql", SQL[name].format(delay=delay)),))
    return build_operator(box, [bid], infer_m3(box, [bid]))


def batches(events: int, size: int, auctions: int, disorder: int, seed: int = 0) -> list:
    """The bids as Arrow batches (``Columns``), made before any clock starts."""
    from boreas.wire.columns import Columns

    rng = np.random.default_rng(seed)
    out = []
    for start in range(0, events, size):
        n = min(size, events - start)
        ts = np.arange(start, start + n, dtype=np.int64) // EVENTS_PER_MS + rng.integers(0, disorder + 1, n)
        out.append(Columns(pa.record_batch([pa.array(rng.integers(0, auctions, n).astype(np.int32)),
                                            pa.array(rng.integers(1, 10**6, n).astype(np.int32)), pa.array(ts)],
                                           names=["auction", "price", "ts"])))
    return out


def run(name: str, fed: list, delay: int, slack: int) -> tuple[float, int, list[int]]:
    """(seconds, rows emitted, state entries at each quarter) of one peer over the batches."""
    op = operator(name, delay, slack)
    quarters = {len(fed) * q // 4 - 1 for q in (1, 2, 3, 4)}
    emitted, entries, spent = 0, [], 0.0
    for i, batch in enumerate(fed):
        began = time.perf_counter()
        out = op.process_from(0, batch, float(i), ("Bid", "bench", i))
        spent += time.perf_counter() - began
        emitted += sum(len(rows) for _, rows in out)
        if i in quarters:
            entries.append(op.state_entries() or 0)
    return spent, emitted, entries


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--batch", type=int, default=10_000)
    parser.add_argument("--auctions", type=int, default=100)
    parser.add_argument("--disorder", type=int, default=3000, help="ms an event time may lag (the watermark delay)")
    args = parser.parse_args(argv)
    fed = batches(args.events, args.batch, args.auctions, args.disorder)
    slack = args.disorder * EVENTS_PER_MS // args.auctions  # a group's tuples in the disorder's milliseconds
    results = {name: run(name, fed, args.disorder, slack) for name in (PEER, *SQL)}
    peer_rate = args.events / results[PEER][0]
    print(f"{args.events:,} bids, {args.auctions} auctions, batches of {args.batch:,}, disorder {args.disorder} ms")
    print(f"{'peer':<22} {'events/s':>12} {'vs aggregate':>13} {'rows out':>10}  state entries at each quarter")
    for name, (seconds, emitted, entries) in results.items():
        rate = args.events / seconds
        print(f"{name:<22} {rate:>12,.0f} {rate / peer_rate:>12.2f}x {emitted:>10,}  {entries}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
