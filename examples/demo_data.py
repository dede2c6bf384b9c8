"""The data part of ``make demo``: readings go in through Spark, averages come out of the network.

A Spark job writes ten minutes of sensor readings to parquet and publishes them into
the ``Reading`` input stream (each partition straight to the node where the
stream enters).  They flow through the three-node chain (filter, map,
aggregate) and the per-sensor one-minute averages come out at a subscriber.
Then Spark SQL computes the same averages from the same file, and the two
are compared window by window.  Exit status 1 if they disagree.

``demo_data.py q3-publish`` and ``demo_data.py q3-check`` are the M3 step:
customers, orders and lineitems go into the ``q3`` box (TPC-H Q3's shape,
examples/xml/tpch_q3.xml) and, after ``boreas query`` has shown the view,
Spark SQL computes Q3 over the same rows and every order's revenue is
compared with what the node's query API answers.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import math
import os
import random
import sys
import tempfile
from pathlib import Path

from boreas.client.publisher import Publisher
from boreas.client.query import QueryClient
from boreas.client.subscriber import Subscriber
from boreas.spark import local_session, publish_file, verify

SENSORS = (1, 2, 3, 4)
MINUTES = 10

CROSS_CHECK = """
SELECT sensor, CAST(floor(time / 60) * 60 AS INT) AS start,
       avg(celsius * 9.0 / 5.0 + 32.0) AS fahrenheit, count(*) AS readings
FROM readings
WHERE celsius > -50.0 AND celsius < 60.0 AND time < {end}  -- the filter as the demo modified it
GROUP BY sensor, CAST(floor(time / 60) * 60 AS INT)
"""


def readings() -> list[tuple[int, int, float]]:
    rows = []
    for time in range(MINUTES * 60):
        for sensor in SENSORS:
            celsius = round(15 + 10 * math.sin(time / 40 + sensor), 2)
            if time and (time * sensor) % 23 == 0:
                celsius = 999.0  # a broken reading: the filter drops it
            rows.append((sensor, time, celsius))
    rows += [(sensor, MINUTES * 60, 0.0) for sensor in SENSORS]  # closes the last minute
    return rows


async def main(head: str, token: str) -> int:
    spark = local_session()
    workdir = Path(tempfile.mkdtemp(prefix="boreas-demo-"))
    path = workdir / "readings.parquet"
    # The aggregate windows each sensor's readings in time order, so keep a sensor's readings in
    # one partition, sorted: partitions are published concurrently, each one in order.
    frame = spark.createDataFrame(readings(), "sensor int, time int, celsius double")
    frame.repartition(4, "sensor").sortWithinPartitions("sensor", "time").write.parquet(str(path))
    expected = {(r["sensor"], r["start"]): r for r in
                verify(CROSS_CHECK.format(end=MINUTES * 60), {"readings": str(path)}, spark)}

    got: dict[tuple[int, int], tuple] = {}
    async with Subscriber(head, "Average", token) as subscriber:
        published = await asyncio.to_thread(publish_file, path, "Reading", head, token, spark=spark)
        print(f"Spark published {published} readings from {path.name} in 4 partitions")

        async def read() -> None:
            async for row in subscriber:
                got[(row[0], row[1])] = row
                if len(got) >= len(expected):
                    return

        try:
            await asyncio.wait_for(read(), 60)
        except asyncio.TimeoutError:
            print(f"timed out: {len(got)} of {len(expected)} averages arrived", file=sys.stderr)
    print(f"the network produced {len(got)} one-minute averages; Spark SQL computed {len(expected)}")
    print(f"{'sensor':>6} {'minute':>6} {'boreas °F':>10} {'spark °F':>10} {'n':>4}")
    bad = 0
    for key in sorted(expected):
        want = expected[key]
        have = got.get(key)
        agree = (have is not None and have[3] == want["readings"]
                 and math.isclose(have[2], want["fahrenheit"], rel_tol=1e-9))
        bad += not agree
        if key[1] == 0 or not agree:
            shown = f"{have[2]:10.3f}" if have else f"{'missing':>10}"
            print(f"{key[0]:>6} {key[1] // 60:>6} {shown} {want['fahrenheit']:10.3f} {want['readings']:>4}"
                  + ("" if agree else "  DISAGREE"))
    if bad or set(got) != set(expected):
        print(f"Spark cross-check FAILED: {bad} windows disagree", file=sys.stderr)
        return 1
    print(f"Spark cross-check: all {len(expected)} windows agree")
    return 0


# -- the M3 step ---------------------------------------------------------------------------

Q3_TABLES = {"Customer": ("customer", "c_custkey int, c_mktsegment string"),
             "Orders": ("orders", "o_orderkey int, o_custkey int, o_orderdate date, o_shippriority int"),
             "Lineitem": ("lineitem", "l_orderkey int, l_extendedprice double, l_discount double, l_shipdate date")}
Q3_BATCH = 100


def q3_rows() -> dict[str, list[tuple]]:
    """A small, fixed TPC-H-like data set: 100 customers, 1,000 orders, 4,000 lineitems."""
    rnd = random.Random(3)
    day = lambda: dt.date(1995, 1, 1) + dt.timedelta(days=rnd.randrange(150))
    segments = ("BUILDING", "AUTOMOBILE", "MACHINERY", "HOUSEHOLD")
    return {
        "Customer": [(c, rnd.choice(segments)) for c in range(100)],
        "Orders": [(o, rnd.randrange(100), day(), rnd.randrange(3)) for o in range(1000)],
        "Lineitem": [(rnd.randrange(1000), rnd.randrange(400, 40000) / 4, rnd.choice((0.0, 0.05, 0.1)), day())
                     for _ in range(4000)],
    }


def _micros(value: object) -> object:
    """Dates travel as timestamps (microseconds at midnight UTC), as the m3 box's DATE columns expect."""
    if isinstance(value, dt.date):
        return (value - dt.date(1970, 1, 1)).days * 86_400_000_000
    return value


async def q3_publish(head: str, token: str) -> int:
    batches = 0
    for stream, rows in q3_rows().items():
        async with Publisher(head, stream, token, batch_size=Q3_BATCH) as publisher:
            await publisher.send([tuple(_micros(v) for v in row) for row in rows])
        batches += math.ceil(len(rows) / Q3_BATCH)
        print(f"published {len(rows)} rows to {stream}")
    async with QueryClient(head, token) as client:  # one M3 batch per published batch
        for _ in range(600):
            if (await client.query("q3", agg="sum")).version >= batches:
                break
            await asyncio.sleep(0.05)
        result = await client.query("q3", stable=True)
    print(f"q3 on {result.node} applied {result.version} batches; its view has {len(result.rows)} orders")
    return 0


async def q3_check(head: str, token: str) -> int:
    spark = local_session()
    frames = {table: spark.createDataFrame(rows, columns)
              for stream, rows in q3_rows().items() for table, columns in [Q3_TABLES[stream]]}
    async with QueryClient(head, token) as client:
        boreas = (await client.query("q3", stable=True)).as_dict()
    expected = {(r["l_orderkey"], r["o_orderdate"], r["o_shippriority"]): r["revenue"]
                for r in verify(_box_sql(), frames, spark)}
    bad = [k for k in expected.keys() | boreas.keys()
           if k not in boreas or k not in expected or not math.isclose(boreas[k], expected[k], rel_tol=1e-9)]
    top = sorted(expected.items(), key=lambda kv: -kv[1])[:3]
    for (order, day, priority), revenue in top:
        print(f"order {order:>4} {day} priority {priority}: boreas {boreas.get((order, day, priority), 0):12.2f}"
              f"  spark {revenue:12.2f}")
    if bad:
        print(f"Spark cross-check of q3 FAILED: {len(bad)} of {len(expected)} orders disagree", file=sys.stderr)
        return 1
    print(f"Spark cross-check of q3: all {len(expected)} orders' revenues agree")
    return 0


def _box_sql() -> str:
    """The q3 box's SQL, from the example application (Spark runs its SELECT)."""
    from boreas.catalog import read_file

    app = read_file(str(Path(__file__).parent / "xml" / "tpch_q3.xml"))
    return next(d for d in app.declarations if getattr(d, "name", None) == "q3").param("sql")


if __name__ == "__main__":
    steps = {"q3-publish": q3_publish, "q3-check": q3_check}
    step = steps.get(sys.argv[1] if len(sys.argv) > 1 else "", main)
    sys.exit(asyncio.run(step(os.environ["BOREAS_HEAD"], os.environ["BOREAS_TOKEN"])))
