"""The executor side of :func:`~boreas.spark.load_view`: one map's Spark partition sent to its owners as Arrow parts.

The driver runs one ``mapInArrow`` per map over the map's defining query
(columns ``k0, ..., value``, sorted within partitions by key).  The JVM
hands each task Arrow record batches; here each one is brought to the
runtime's column types (:func:`shape`), its rows are given their owners by
the layout's slot hash over whole columns (:func:`holders`, the nodes' own
hash over whole columns, :func:`~boreas.node.cumulus.loading.key_slots`), and every member's
rows go to it in parts of at most ``chunk`` rows (``POST
/segments/{box}/load?job=J&part=K``, one Arrow IPC stream whose schema
metadata names the map; DATE keys as ``date32``, i.e. day numbers since
1970-01-01).  No row becomes a Python object in the executor.

Exactly once across Spark task retries: part numbers are fixed per (map,
Spark partition, part within the task), and a part never spans two of the
record batches Spark hands over.  Record batches are made the same way on
every attempt from the same sorted partition, and a task whose input fails
upstream sees its input end normally after the last complete record batch
(see :mod:`.columnar`), so every part a cut attempt posted is one of the
retry's, the very same rows under the same number; a member ignores a
``(job, part)`` it already took.  A task keeps up to :data:`IN_FLIGHT`
parts posted at once (a member's round trip logs the part before it
answers), so which of its parts a cut attempt got in need not be a prefix;
each is still taken once.

>>> import pyarrow as pa, datetime as dt
>>> batch = pa.record_batch({"k0": [1, None, 3], "k1": [dt.date(1970, 1, 2)] * 3, "value": [2.0, 5.0, None]})
>>> shaped, nulls = shape(batch, ("INT", "DATE"), "INT")
>>> shaped.to_pylist(), nulls
([{'k0': 1, 'k1': datetime.date(1970, 1, 2), 'value': 2}], 1)
>>> shaped.schema.field("value").type
DataType(int64)
"""

from __future__ import annotations

import asyncio
import pickle
from collections.abc import Iterator
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from boreas.m3.cumulus import Layout
from boreas.m3.cumulus.layout import EVERYWHERE
from boreas.node.cumulus.loading import ARROW, key_slots
from boreas.wire.client import PeerClient

from .load_tasks import PARTS_PER_TASK, LoadRefused, LoadTarget, TaskReport, post_part
from .target import run_sync

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

#: Spark partitions per map in part numbers: part = 1 + (map * TASKS_PER_MAP + partition) * PARTS_PER_TASK + n
TASKS_PER_MAP = 1_000_000
#: parts one task has posted and not yet seen taken: a member's round trip (logging the part) overlaps the next
#: parts' shaping and the other member's round trips
IN_FLIGHT = 4
_TYPES = {"INT": pa.int64(), "FLOAT": pa.float64(), "STRING": pa.string(), "DATE": pa.date32()}


def shape(batch: pa.RecordBatch, kinds: tuple[str, ...], value_type: str) -> tuple[pa.RecordBatch, int]:
    """``batch`` (``k0, ..., value`` as Spark made them) in the runtime's types, without rows whose value is
    NULL (nothing to load) or with a NULL key column (counted: the second item).

    Keys become int64, float64, string or date32 by kind (DECIMAL to its
    integer or double, timestamps to their day); an INT value becomes int64
    when every value is integral (a DECIMAL sum), double otherwise, as the
    row path's values did.
    """
    columns = batch.columns
    valued = pc.is_valid(columns[-1])
    keyed = valued
    for column in columns[:-1]:
        keyed = pc.and_(keyed, pc.is_valid(column))
    kept = pc.sum(keyed).as_py() or 0
    nulls = (pc.sum(valued).as_py() or 0) - kept
    if kept < batch.num_rows:
        batch = batch.filter(keyed)
    out = [_as_kind(c, kind) for c, kind in zip(batch.columns[:-1], kinds)]
    value = batch.columns[-1]
    if value_type == "INT" and not pa.types.is_integer(value.type):
        doubles = pc.cast(value, pa.float64())
        whole = pc.all(pc.equal(pc.floor(doubles), doubles)).as_py() is not False
        value = pc.cast(doubles, pa.int64()) if whole else doubles
    else:
        value = pc.cast(value, pa.int64() if value_type == "INT" and pa.types.is_integer(value.type) else pa.float64())
    names = [f"k{i}" for i in range(len(kinds))] + ["value"]
    return pa.record_batch(out + [value], names=names), nulls


def _as_kind(column: pa.Array, kind: str) -> pa.Array:
    if kind == "DATE" and pa.types.is_timestamp(column.type):
        column = pc.cast(column, pa.timestamp(column.type.unit))  # its day as written, zone dropped
    if kind == "INT" and pa.types.is_decimal(column.type):
        column = pc.cast(column, pa.float64())
    if kind == "INT" and pa.types.is_floating(column.type):
        return pc.cast(column, pa.int64(), safe=False)
    return pc.cast(column, _TYPES[kind])


def holders(layout: Layout, name: str, kinds: tuple[str, ...], batch: pa.RecordBatch) -> np.ndarray | None:
    """Each row's owning member (int64), or None for a map every member holds (replicated)."""
    col = layout.column(name)
    if col == EVERYWHERE:
        return None
    if col is None:
        return np.full(batch.num_rows, layout.home, dtype=np.int64)
    owners = np.asarray(layout.owners, dtype=np.int64)
    return owners[key_slots(batch.column(col), kinds[col])]


def encode(name: str, batch: pa.RecordBatch) -> bytes:
    """One part's body: an Arrow IPC stream of ``batch`` whose schema metadata names the map."""
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, batch.schema.with_metadata({"map": name})) as writer:
        writer.write_batch(batch)
    return sink.getvalue().to_pybytes()


def parts(layout: Layout, name: str, kinds: tuple[str, ...], batch: pa.RecordBatch,
          chunk: int) -> Iterator[tuple[int, pa.RecordBatch, bool]]:
    """``(member, rows, counted)`` for one shaped record batch: each member's rows in pieces of at most
    ``chunk``, members in order; ``counted`` is False for the copies a replicated map sends past its first
    member (an entry counts once)."""
    owner = holders(layout, name, kinds, batch)
    for member in range(len(layout.members)):
        mine = batch if owner is None else batch.filter(pa.array(owner == member))
        for offset in range(0, mine.num_rows, chunk):
            yield member, mine.slice(offset, chunk), owner is not None or member == 0


async def _send(target: LoadTarget, map_index: int, index: int, batches: Iterator[pa.RecordBatch]) -> TaskReport:
    layout = Layout.from_dict(target.layout)
    name, kinds, value_type = target.maps[map_index]
    report = TaskReport(index, {n: 0 for n, _, _ in target.maps})
    first = 1 + (map_index * TASKS_PER_MAP + index) * PARTS_PER_TASK
    window = asyncio.Semaphore(IN_FLIGHT)

    async def post(member: int, number: int, rows: pa.RecordBatch, counted: bool) -> None:
        try:
            await post_part(peers, target.box, member, layout.members[member], target.job, number,
                            encode(name, rows), target.timeout, ARROW)
        finally:
            window.release()
        if counted:
            report.entries[name] += rows.num_rows

    async with PeerClient(target.token, timeout=max(target.timeout, 10.0)) as peers:
        try:
            async with asyncio.TaskGroup() as posts:  # owns the parts in flight; one refused cancels the rest
                for raw in batches:  # a part never spans two record batches (module docstring)
                    batch, nulls = shape(raw, kinds, value_type)
                    report.null_keys += nulls
                    for member, rows, counted in parts(layout, name, kinds, batch, target.chunk):
                        if report.parts + 1 >= PARTS_PER_TASK:
                            raise ValueError(f"Spark partition {index} of map {name} needs more than "
                                             f"{PARTS_PER_TASK} parts; use more partitions or a larger chunk")
                        report.parts += 1
                        await window.acquire()
                        posts.create_task(post(member, first + report.parts, rows, counted))
        except* LoadRefused as group:
            exc = group.exceptions[0]
            report.refused = (exc.member, exc.endpoint, exc.status, str(exc))
    return report


def _map_job(target: LoadTarget, map_index: int, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """Runs in the executor (``mapInArrow``): the partition's parts sent, and its report as one row."""
    from pyspark import TaskContext

    index = TaskContext.get().partitionId()
    report = run_sync(lambda: _send(target, map_index, index, batches))
    yield pa.record_batch({"report": pa.array([pickle.dumps(report)], pa.binary())})


def send_map(df: DataFrame, target: LoadTarget, map_index: int) -> DataFrame:
    """The map's query ``df`` (``k0, ..., value``, in a fixed order within partitions) sending its entries when
    collected: one report row per Spark partition."""
    import functools

    return df.mapInArrow(functools.partial(_map_job, target, map_index), "report binary")


def reports(frames: list[DataFrame]) -> list[TaskReport]:
    """Run every map's sending as one Spark job; every task's report."""
    import functools

    union = functools.reduce(lambda a, b: a.unionAll(b), frames)
    return [pickle.loads(row.report) for row in union.collect()]
