"""``bench/cumulus.py --parts load``: Spark ``load_view`` of the Q3 rows against streaming them."""

from __future__ import annotations

import argparse
import asyncio
import functools
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from cumulus_q3 import READ_TIMEOUT, deployment, same_view, signed_app, tree_cpu_seconds  # noqa: E402
from cumulus_scaling import start_cluster  # noqa: E402
from procs import (
    BenchError,
    Run,
    cpu_seconds,
    progress,
)

SPARK_SCHEMAS = {
    "customer": "c_custkey INT, c_mktsegment STRING",
    "orders": "o_orderkey INT, o_custkey INT, o_orderdate DATE, o_shippriority INT",
    "lineitem": "l_orderkey INT, l_extendedprice DECIMAL(15,2), l_discount DECIMAL(15,2), l_shipdate DATE",
}


def write_tables(tables: dict[str, list[tuple]], folder: Path) -> dict[str, Path]:
    """The tables (``(sign, *row)`` rows) as CSV files without header (dates ISO), one per relation."""
    folder.mkdir(parents=True, exist_ok=True)
    paths = {}
    for name, rows in tables.items():
        path = paths[name] = folder / f"{name}.csv"
        with open(path, "w") as fh:
            fh.writelines(",".join(str(v) for v in row[1:]) + "\n" for row in rows)
    return paths


async def wait_view(head: str, token: str, expected: dict[tuple, float], timeout: float = READ_TIMEOUT) -> int:
    """Read the merged view until it equals ``expected``; how many reads it took."""
    from boreas.client.query import QueryClient

    deadline, reads = time.monotonic() + timeout, 0
    async with QueryClient(head, token) as reader:
        while True:
            got = (await reader.query("q3")).as_dict()
            reads += 1
            if same_view(got, expected):
                return reads
            if time.monotonic() > deadline:
                raise BenchError(f"the merged view of q3 still differs from the runtime's {timeout:g} s after the load")
            await asyncio.sleep(0.1)


def spark_load(args: argparse.Namespace, run: Run, paths: dict[str, Path], expected: dict[tuple, float],
               rows: int) -> dict[str, Any]:
    """``boreas.spark.load_view`` of the tables into a fresh, empty q3 over 2 members, timed until the
    merged view equals the runtime's (the Spark session's start is timed apart)."""
    from boreas.spark import load_view, plan_load
    from boreas.spark.session import local_session

    began = time.perf_counter()
    spark = local_session()
    run.cleanups.insert(0, spark.stop)
    session_s = time.perf_counter() - began
    cluster = asyncio.run(start_cluster(args, run, "spark", 2, signed_app(),
                                        lambda nodes: deployment(nodes, args.segments, True, args.epoch_ms,
                                                                              args.replicate)))
    # the tables in Spark's memory first, as the publishers' rows are in this process's: neither side is
    # timed reading files
    began = time.perf_counter()
    frames = {name: spark.read.schema(SPARK_SCHEMAS[name]).csv(str(path)).cache() for name, path in paths.items()}
    cached = sum(frame.count() for frame in frames.values())
    if cached != rows:
        raise BenchError(f"Spark read {cached:,} rows from the CSV files, not {rows:,}")
    cache_s = time.perf_counter() - began
    # and Spark warmed up, as it would be a few seconds into a load of the 10M rows: every map's
    # query, sorted and handed to the Python workers as Arrow and shaped as load_view does, once (the first run
    # costs about twice the next: code generation, JIT, the workers importing boreas)
    def shaped(kinds: tuple[str, ...], value_type: str, batches: Any) -> Any:
        """In a Spark worker (a local function: pickled by value): the map's record batches shaped as a load's
        task shapes them; how many rows."""
        import pyarrow as pa
        from boreas.spark.load_arrow import shape

        yield pa.record_batch({"rows": [sum(shape(b, kinds, value_type)[0].num_rows for b in batches)]})

    began = time.perf_counter()
    plan = plan_load("q3", cluster.head, run.token)
    for name, frame in frames.items():
        frame.createOrReplaceTempView(name)
    for m in plan.program.maps:
        df = spark.sql(plan.sql[m.name])
        if m.keys:
            df = df.sortWithinPartitions(*[f"k{j}" for j in range(len(m.keys))])
        df.mapInArrow(functools.partial(shaped, tuple(k.type for k in m.keys), m.value_type), "rows long").collect()
    warm_s = time.perf_counter() - began
    jvm = spark.sparkContext._gateway.proc.pid  # the JVM py4j started (its Python workers are its children)
    cpu0 = [cpu_seconds(p.pid) for p in cluster.node_procs]
    spark0, jvm0, own0 = tree_cpu_seconds(jvm), cpu_seconds(jvm), time.process_time()
    progress(f"load: Spark session up in {session_s:.1f} s, tables cached in {cache_s:.1f} s, warmed up in "
             f"{warm_s:.1f} s; load_view of {rows:,} rows into q3 over 2 nodes")
    t0 = time.perf_counter()
    counts = load_view("q3", frames, head=cluster.head, token=run.token, spark=spark, job="bench")
    t1 = time.perf_counter()
    spark_cpu, jvm_cpu, own_cpu = tree_cpu_seconds(jvm) - spark0, cpu_seconds(jvm) - jvm0, time.process_time() - own0
    reads = asyncio.run(wait_view(cluster.head, run.token, expected))
    t2 = time.perf_counter()
    cpu = [cpu_seconds(p.pid) - c for p, c in zip(cluster.node_procs, cpu0, strict=True)]
    run.procs.stop([*cluster.node_procs, cluster.head_proc])
    return {"rows": rows, "seconds": t2 - t0, "load_view_seconds": t1 - t0, "rows_per_s": rows / (t2 - t0),
            "session_start_seconds": session_s, "cache_seconds": cache_s, "warm_up_seconds": warm_s, "entries": sum(counts.values()), "entries_per_map": counts,
            "reads": reads, "node_cpu_s": cpu, "spark_cpu_s": spark_cpu, "jvm_cpu_s": jvm_cpu, "driver_cpu_s": own_cpu,
            "spark_master": spark.sparkContext.master}
