"""Spark publishing: a DataFrame's rows into an input stream through ``mapInArrow`` against the row path.

One Head, one memory-only node where input stream ``Ticks`` (long, double,
string, timestamp) enters, and Spark ``local[2]`` in this process.  The same
DataFrame of ``--rows`` rows (``spark.range`` in ``--partitions``
partitions: an id, a double, a short string, a timestamp column) is
published twice, each timed from the job's start until every batch is
acknowledged:

* ``arrow``: ``publish(df)``, the Arrow path (:mod:`boreas.spark.columnar`);
* ``rows``: ``publish(df.rdd)``, the row path (Spark pickles Rows to the
  Python workers, :class:`~boreas.spark.sender.RowShaper` checks each).

Both runs must publish every row (the node's input row counter says so too).
The issue's target (issue 30, item 6) is the Arrow path at 5x the row
path's rate at 10M rows; the ratio is printed against it.  A small publish
of each kind first starts Spark's Python workers, so neither run pays for
that.

Usage: ``python bench/spark_publish.py --rows 10000000``
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from procs import (  # noqa: E402
    BenchError,
    Run,
    loopback_endpoints,
    progress,
    run_bench,
    sqlite_catalog,
    start_head,
    start_node,
    wait_ready,
)

APP = """<borealis>
  <schema name="Tick"><field name="id" type="long"/><field name="price" type="double"/>
    <field name="symbol" type="string" size="12"/><field name="at" type="timestamp"/></schema>
  <input stream="Ticks" schema="Tick"/>
</borealis>"""
DEPLOY = """<deploy><node endpoint="{node}" query=""/><publish stream="Ticks" node="{node}"/></deploy>"""
TARGET = 5.0  # the Arrow path's rate over the row path's, at 10M rows (issue 30, item 6)


def frame(spark: Any, rows: int, partitions: int) -> Any:
    from pyspark.sql import functions as F

    return spark.range(0, rows, numPartitions=partitions).select(
        "id", (F.col("id") * 0.25).alias("price"), F.concat(F.lit("SYM"), (F.col("id") % 997).cast("string")).alias("symbol"),
        F.timestamp_micros(F.col("id") + 1_700_000_000_000_000).alias("at"))


def session() -> Any:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    spark = (SparkSession.builder.master("local[2]").appName("boreas-bench-spark-publish")
             .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def node_rows(head: str, node: str, token: str) -> int:
    from boreas.spark.target import run_sync
    from boreas.wire.addressing import endpoint_url
    from boreas.wire.client import PeerClient

    async def ask() -> int:
        async with PeerClient(token) as peers:
            status = await peers.call("GET", endpoint_url(node, "/status"))
        return int(status["data"]["in"].get("rows", 0))

    return run_sync(ask)


def timed(label: str, data: Any, target: Any, batch_size: int, rows: int) -> float:
    from boreas.spark import run_job

    started = time.perf_counter()
    result = run_job(data, target, f"spark:bench-{label}-{time.monotonic_ns()}", batch_size)
    seconds = time.perf_counter() - started
    if result.published != rows or result.refused_count:
        raise BenchError(f"{label}: published {result.published} of {rows} rows ({result.refused_count} refused)")
    arrow = f", {result.arrow_batches} of {result.batches} batches as Arrow"
    progress(f"{label}: {rows:,} rows in {seconds:.2f} s = {rows / seconds:,.0f} rows/s{arrow}")
    return rows / seconds


def body(args: argparse.Namespace, run: Run) -> None:
    from boreas.client.head_api import deploy_and_wait
    from boreas.spark import lookup_target
    from boreas.wire.client import PeerClient

    head_ep, node = loopback_endpoints(2)
    head = start_head(run.procs, sqlite_catalog(run.tmp / "catalog.db"), head_ep)
    start_node(run.procs, node, head)

    async def deploy() -> None:
        await wait_ready(run.procs, head, [node])
        async with PeerClient(run.token, timeout=60.0) as peers:
            await deploy_and_wait(peers, head, APP, "app.xml", timeout=60.0)
            await deploy_and_wait(peers, head, DEPLOY.format(node=node), "deploy.xml", timeout=60.0)

    asyncio.run(deploy())
    spark = session()
    target = lookup_target(head, "Ticks", run.token)
    warm = frame(spark, 20_000, args.partitions)
    timed("warm-up arrow", warm, target, args.batch_size, 20_000)
    timed("warm-up rows", warm.rdd, target, args.batch_size, 20_000)
    df = frame(spark, args.rows, args.partitions)
    rates = {"arrow": timed("arrow", df, target, args.batch_size, args.rows)}
    if not args.arrow_only:
        rates["rows"] = timed("rows", df.rdd, target, args.batch_size, args.rows)
    taken = node_rows(head, node, run.token)
    expected = 2 * 20_000 + len(rates) * args.rows
    if taken != expected:
        raise BenchError(f"the node took {taken:,} rows, not {expected:,}")
    print(f"spark publish, local[2], {args.partitions} partitions, batches of {args.batch_size}, {args.rows:,} rows:")
    for label, rate in rates.items():
        print(f"  {label:6} {rate:>12,.0f} rows/s")
    if "rows" in rates:
        ratio = rates["arrow"] / rates["rows"]
        verdict = "meets" if ratio >= TARGET else "misses"
        scale = "" if args.rows >= 10_000_000 else f" (measured at {args.rows:,} rows; the target is at 10M)"
        print(f"  arrow / rows = {ratio:.1f}x: {verdict} the target of {TARGET:g}x{scale}")
    spark.stop()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--batch-size", type=int, default=1000, help="publish's batch_size (its default: 1000)")
    parser.add_argument("--arrow-only", action="store_true", help="skip the row path (it is the slow one)")
    args = parser.parse_args()
    return run_bench("spark-publish", lambda run: body(args, run))


if __name__ == "__main__":
    sys.exit(main())
