"""Writes the example data files next to it: one CSV per input stream of examples/xml/, with a header.

The files are committed; run this only to change them (``python examples/data/generate.py``).
The rows are fixed (a seeded generator), small (a few hundred rows at most each), and
chosen so that every example produces output:

* ``readings.csv`` (Reading: sensor, time, celsius): three sensors, one reading every
  3 seconds for 3 minutes, a few broken (999.0) that the sensor chain's filter drops;
  the per-sensor one-minute averages of the first three minutes come out.
* ``packets.csv`` (Packet: time, protocol): packets over 20 time units.
* ``trades.csv`` / ``quotes.csv`` (Trade, Quote: time, symbol, price / bid).
* ``customer.csv``, ``orders.csv``, ``lineitem.csv`` (Customer, Orders, Lineitem): a small
  TPC-H-like data set for examples/xml/tpch_q3.xml; several orders of BUILDING customers
  placed on 1995-02-17 have items shipped after 1995-03-15, so ``boreas query q3 _ 1995-02-17``
  answers rows.
"""

from __future__ import annotations

import csv
import datetime as dt
import math
import random
from pathlib import Path

HERE = Path(__file__).parent


def write(name: str, header: list[str], rows: list[tuple]) -> None:
    with open(HERE / name, "w", newline="") as fh:
        out = csv.writer(fh, lineterminator="\n")
        out.writerow(header)
        out.writerows(rows)


def main() -> None:
    rnd = random.Random(15)
    readings = []
    for time in range(0, 181, 3):
        for sensor in (1, 2, 3):
            celsius = round(15 + 10 * math.sin(time / 40 + sensor), 2)
            if time and (time * sensor) % 41 == 0:
                celsius = 999.0
            readings.append((sensor, time, celsius))
    write("readings.csv", ["sensor", "time", "celsius"], readings)

    packets = sorted((round(rnd.uniform(0, 20), 3), rnd.choice(("tcp", "udp", "icmp"))) for _ in range(120))
    write("packets.csv", ["time", "protocol"], [(int(t * 10), p) for t, p in packets])

    symbols = ("ACME", "BOREAS", "GLOBEX")
    quotes = [(t, rnd.choice(symbols), round(rnd.uniform(90, 110), 2)) for t in range(0, 200, 2)]
    trades = [(t, rnd.choice(symbols), round(rnd.uniform(90, 110), 2)) for t in range(1, 200, 4)]
    write("quotes.csv", ["time", "symbol", "bid"], quotes)
    write("trades.csv", ["time", "symbol", "price"], trades)

    segments = ("BUILDING", "AUTOMOBILE", "MACHINERY", "HOUSEHOLD")
    customers = [(c, segments[c % 4] if c % 5 else "BUILDING") for c in range(40)]
    day = lambda lo, hi: dt.date(1995, 1, 1) + dt.timedelta(days=rnd.randrange(lo, hi))  # noqa: E731
    orders = []
    for o in range(150):
        placed = dt.date(1995, 2, 17) if o % 10 == 0 else day(0, 120)
        orders.append((o, rnd.randrange(40) if o % 10 else rnd.choice([c for c, s in customers if s == "BUILDING"]),
                       placed.isoformat(), rnd.randrange(3)))
    lineitems = []
    for o, _, placed, _ in orders:
        for _ in range(1 + (o % 2)):
            shipped = dt.date.fromisoformat(placed) + dt.timedelta(days=rnd.randrange(1, 60))
            if o % 10 == 0:
                shipped = max(shipped, dt.date(1995, 3, 20))
            lineitems.append((o, rnd.randrange(400, 40000) / 4, rnd.choice((0.0, 0.05, 0.1)), shipped.isoformat()))
    write("customer.csv", ["c_custkey", "c_mktsegment"], customers)
    write("orders.csv", ["o_orderkey", "o_custkey", "o_orderdate", "o_shippriority"], orders)
    write("lineitem.csv", ["l_orderkey", "l_extendedprice", "l_discount", "l_shipdate"], lineitems)


if __name__ == "__main__":
    main()
