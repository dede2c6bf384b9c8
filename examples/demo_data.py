"""The data part of ``make demo``: readings go in through Spark, averages come out of the network.

A Spark job writes ten minutes of sensor readings to parquet and publishes them into
the ``Reading`` input stream (each partition straight to the node where the
stream enters).  They flow through the three-node chain (filter, map,
aggregate) and the per-sensor one-minute averages come out at a subscriber.
Then Spark SQL computes the same averages from the same file, and the two
are compared window by window.  Exit status 1 if they disagree.
"""

from __future__ import annotations

import asyncio
import math
import os
import sys
import tempfile
from pathlib import Path

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


if __name__ == "__main__":
    sys.exit(asyncio.run(main(os.environ["BOREAS_HEAD"], os.environ["BOREAS_TOKEN"])))
