"""The Q3 workload of bench/m3.py: the schema and query, the event stream, and applying it to a runtime.

Every measurement of the Q3 view (bench/m3.py's Python runtime against
DuckDB, its native backend in bench/m3_native.py, Pathway's child processes
in bench/m3_pathway.py) runs over these same events, so they live here, apart
from any one measurement: the peers import the stream without importing the
driver (or DuckDB).
"""

from __future__ import annotations

import datetime
import gc
import random
import time

from boreas.m3 import Runtime

SCHEMA = """
CREATE STREAM customer(c_custkey INT, c_mktsegment VARCHAR);
CREATE STREAM orders(o_orderkey INT, o_custkey INT, o_orderdate DATE, o_shippriority INT);
CREATE STREAM lineitem(l_orderkey INT, l_extendedprice DECIMAL(15,2), l_discount DECIMAL(15,2), l_shipdate DATE);
"""
QUERY = """SELECT l.l_orderkey, o.o_orderdate, o.o_shippriority, SUM(l.l_extendedprice * (1 - l.l_discount)) AS revenue
FROM customer c, orders o, lineitem l
WHERE c.c_mktsegment = 'BUILDING' AND c.c_custkey = o.o_custkey AND l.l_orderkey = o.o_orderkey
  AND o.o_orderdate < DATE '1995-03-15' AND l.l_shipdate > DATE '1995-03-15'
GROUP BY l.l_orderkey, o.o_orderdate, o.o_shippriority"""
COLUMN_KINDS = {"customer": ("INT", "STRING"), "orders": ("INT", "INT", "DATE", "INT"),
                "lineitem": ("INT", "FLOAT", "FLOAT", "DATE")}
SEGMENTS = ["BUILDING", "AUTOMOBILE", "MACHINERY", "HOUSEHOLD", "FURNITURE"]
DAY0 = datetime.date(1992, 1, 1)
DATES = [DAY0 + datetime.timedelta(days=i) for i in range(7 * 365)]


class Stream:
    """Customers, orders (to existing customers) and lineitems (to recent orders); some deletes.

    Shares of events: 2% customers, 18% orders, 75% lineitems, 5% deletes.
    """

    def __init__(self, seed: int = 42):
        self.rnd = random.Random(seed)
        self.customers = 0
        self.orders = 0
        self.live_orders: list[tuple] = []
        self.live_items: list[tuple] = []

    def take(self, n: int) -> list[tuple]:
        rnd = self.rnd.random
        randrange = self.rnd.randrange
        out = []
        append = out.append
        for _ in range(n):
            p = rnd()
            if p < 0.02 or self.customers == 0:
                self.customers += 1
                append(("customer", 1, (self.customers, SEGMENTS[randrange(5)])))
            elif p < 0.20 or self.orders == 0:
                self.orders += 1
                row = (self.orders, 1 + randrange(self.customers), DATES[randrange(len(DATES))], randrange(3))
                self.live_orders.append(row)
                append(("orders", 1, row))
            elif p < 0.95:
                ok = max(1, self.orders - randrange(min(self.orders, 2000)))
                row = (ok, randrange(100, 10_000_000) / 100, randrange(11) / 100, DATES[randrange(len(DATES))])
                self.live_items.append(row)
                append(("lineitem", 1, row))
            else:
                pool, rel = (self.live_items, "lineitem") if rnd() < 0.8 else (self.live_orders, "orders")
                if not pool:
                    continue
                i = len(pool) - 1 - randrange(min(len(pool), 5000))
                pool[i], pool[-1] = pool[-1], pool[i]
                append((rel, -1, pool.pop()))
        return out


def run_incremental(rt: Runtime, events: list[tuple], batch: int) -> float:
    """Seconds to apply ``events`` in batches (the view is fresh after each). GC is off while timing, as in timeit."""
    apply = rt.apply_batch
    gc.collect()
    gc.disable()
    try:
        t0 = time.perf_counter()
        for i in range(0, len(events), batch):
            apply(events[i:i + batch])
            rt.changes()
        return time.perf_counter() - t0
    finally:
        gc.enable()


def preload(rt: Runtime, stream: Stream, events: int) -> None:
    """Apply ``events`` events of ``stream`` untimed, in large batches."""
    while events > 0:
        chunk = stream.take(min(events, 50_000))
        rt.apply_batch(chunk)
        events -= len(chunk)
