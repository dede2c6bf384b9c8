"""Bulk-loading a partitioned ``m3`` box from tables with Spark, and checking a view against Spark SQL (docs/cumulus.md §7).

A partitioned box that starts over existing data (years of orders, say)
would otherwise replay every row through its triggers.  :func:`load_view`
computes each map's value once instead, from the relations' tables:

1. the driver reads the box's layout (``GET /boxes/{box}``) and program (the
   box's parameters and in-stream schemas in ``GET /catalog``, compiled as
   the nodes compile them), and checks the program against the maps a member
   runs (``GET /query/{box}/maps``);
2. each member is asked to take an empty part first, so a box that already
   holds data is refused (409) before Spark does anything;
3. every map's defining query becomes Spark SQL
   (:mod:`boreas.m3.cumulus.definitions`) over the tables, registered as
   temporary views named like the relations; the results of all maps form
   one RDD, sorted within partitions by key;
4. one ``mapInArrow`` per map (:mod:`.load_arrow`): each Spark task takes
   its partition of the map's result as Arrow record batches, computes each
   entry's owner over whole columns with the layout's slot hash (the nodes'
   own hash), and POSTs parts of at most ``chunk`` entries straight to the
   owning member (``POST /segments/{box}/load?job=J&part=K``, one Arrow IPC
   stream of columns ``k0, ..., value`` whose schema metadata names the
   map; DATE keys as ``date32``); the member installs them by columns.
   Every map's sending runs as one Spark job.

Exactly once across Spark task retries: part numbers are fixed per (map,
Spark partition, part within the task), a partition's entries are sorted by
key and a part never spans two of the record batches Spark hands over, so a
retried or speculative task sends the very same parts (a cut attempt's are a
prefix of them), and a member ignores a ``(job, part)`` it already took.
The load goes through each member's dataflow, so it is logged (as the Arrow
part) and replayed like input.  Loads go into an empty box, before its input
streams are published to; publishing may start once :func:`load_view`
returned.

Usage::

    from boreas.spark import load_view, verify_view
    counts = load_view("q3", {"customer": "customer.parquet", "orders": orders_df,
                              "lineitem": lineitem_df}, head="http://localhost:14000", token=token)
    # {'Q1_revenue': 1204, 'm1': ..., ...}: entries loaded per map
    check = verify_view("q3", Q3_SQL, tables, head="http://localhost:14000")
    assert check.ok, check

Here is :func:`load_view`, the driver's whole load; :mod:`.load_plan` reads
and checks the box (steps 1 and 2), :mod:`.load_arrow` is what each Spark
task runs (step 4), and :mod:`.view_check` has :func:`verify_view`.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from boreas.wire.client import PeerClient

from .load_arrow import reports as run_reports
from .load_arrow import send_map
from .load_plan import LoadPlan, check_members, plan_load
from .load_tasks import LoadError, LoadRefused, LoadTarget, TaskReport
from .target import run_sync
from .view_check import ViewCheck, compare_view, verify_view

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

# LoadPlan, plan_load, LoadError, LoadRefused, ViewCheck, compare_view and verify_view are re-exported:
# they were defined here, and are imported from here.
__all__ = ["DEFAULT_CHUNK", "LoadError", "LoadPlan", "LoadRefused", "ViewCheck", "compare_view", "load_view",
           "plan_load", "verify_view"]

log = logging.getLogger(__name__)

#: entries per POST to a member
DEFAULT_CHUNK = 20_000
#: the Spark setting that cuts a ``mapInArrow`` task's input into record batches
RECORDS_PER_BATCH = "spark.sql.execution.arrow.maxRecordsPerBatch"


def load_view(box: str, tables: Mapping[str, DataFrame | str | Path], head: str, token: str | None = None,
              spark: SparkSession | None = None, job: str | None = None, *, chunk: int = DEFAULT_CHUNK,
              partitions: int | None = None, timeout: float = 60.0) -> dict[str, int]:
    """Load the initial values of every map of partitioned ``m3`` box ``box`` from ``tables``; entries per map.

    ``tables`` maps each relation the box reads (names as in its SQL, case
    ignored) to a DataFrame or the path of a parquet or CSV file (or folder);
    extra tables are ignored.  The box must be empty: loads come before
    publishing.  ``job`` names the load (default: random); running the same
    job again after a failure sends nothing twice.  Each Spark task sends
    its entries in parts of at most ``chunk`` entries per member;
    ``partitions`` coalesces each map's result into that many tasks (fewer
    connections to the members, fewer parts).  Raises :class:`LoadError`
    when the box is unknown, not partitioned or a relation has no table, and
    :class:`LoadRefused` when a member refuses (409: it already holds data).
    """
    from .session import local_session
    from .verify import _read

    if chunk < 1 or (partitions is not None and partitions < 1):
        raise ValueError("chunk and partitions must be at least 1")
    head = head.rstrip("/")
    job = job or uuid.uuid4().hex[:16]
    plan = plan_load(box, head, token)
    given = {name.lower(): name for name in tables}
    missing = [r for r in plan.relations if r.lower() not in given]
    if missing:
        raise LoadError(f"box {box!r} reads relation(s) {', '.join(missing)} but no table was given for them "
                        f"(tables: {', '.join(tables) or 'none'})")

    async def check() -> None:
        async with PeerClient(token) as peers:
            await check_members(peers, plan, job)

    run_sync(check)
    spark = spark or local_session()
    for relation in plan.relations:
        table = tables[given[relation.lower()]]
        frame = _read(spark, Path(table)) if isinstance(table, (str, Path)) else table
        frame.createOrReplaceTempView(relation)
    maps = list(plan.program.maps)  # every one has a definition (plan_load wrote each as SQL)
    target = LoadTarget(box, plan.layout.to_dict(),
                        tuple((m.name, tuple(k.type for k in m.keys), m.value_type) for m in maps),
                        job, token, chunk, timeout)
    frames: list[DataFrame] = []
    for i, m in enumerate(maps):
        df = spark.sql(plan.sql[m.name])
        if m.keys:  # a fixed order within each partition: a retried task cuts the same parts
            df = df.sortWithinPartitions(*[f"k{j}" for j in range(len(m.keys))])
        if partitions is not None:
            df = df.coalesce(partitions)  # whole partitions, in order: still the same parts on a retry
        frames.append(send_map(df, target, i))
    started = time.monotonic()
    # record batches of a member's chunk each (Spark's default 10,000 rows would cut parts smaller): a part
    # never spans two record batches; the size is fixed for the job, so a retried task cuts the same parts
    before = spark.conf.get(RECORDS_PER_BATCH, None)
    spark.conf.set(RECORDS_PER_BATCH, str(chunk * len(plan.layout.members)))
    try:
        reports: list[TaskReport] = run_reports(frames)
    finally:
        if before is None:
            spark.conf.unset(RECORDS_PER_BATCH)
        else:
            spark.conf.set(RECORDS_PER_BATCH, before)
    counts = {m.name: 0 for m in maps}
    for report in reports:
        for name, n in report.entries.items():
            counts[name] += n
    refused = [r.refused for r in reports if r.refused]
    if refused:
        member, endpoint, status, message = refused[0]
        raise LoadRefused(f"{message} ({len(refused)} Spark task(s) refused; {sum(counts.values())} entries "
                          f"were loaded by the others)", member, endpoint, status)
    nulls = sum(r.null_keys for r in reports)
    if nulls:
        log.warning("load %s of box %s: %d entries with NULL key columns were not loaded", job, box, nulls)
    log.info("loaded %d entries into box %s (job %s, %d parts) in %.1f s", sum(counts.values()), box, job,
             sum(r.parts for r in reports), time.monotonic() - started)
    return counts

