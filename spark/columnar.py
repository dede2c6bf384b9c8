"""The Arrow path of a Spark publish: each partition's record batches go to the nodes as Arrow batches.

The row path (:func:`~boreas.spark.sender.send_partition`) makes every row a
Python object twice in the executor: Spark pickles it out of the JVM, and
:class:`~boreas.spark.sender.RowShaper` puts it in field order and checks
it.  Here the DataFrame runs ``mapInArrow``: the JVM hands the Python worker
Arrow record batches, which are cut into batches of ``batch_size`` rows
(:func:`cut`), brought to the stream's Arrow schema
(:func:`~boreas.wire.publish_columns.conform`) and checked as columns
(:func:`~boreas.wire.columns.check`), and go to the node as one Arrow IPC
message each (``Batch.fmt`` ARROW).  A good batch never becomes rows.

Exactly-once under task retry is the row path's argument (the producer is
``prefix:partition``, batches are cut by row count only), with one more
rule, :func:`cut`'s: a batch never spans two of the record batches Spark
hands over.  A task whose input fails upstream (a Python UDF, a corrupt
file) does not fail its ``mapInArrow`` function: the function sees its
input end normally after the last record batch the JVM completed, and the
task fails afterwards.  Record batches are made the same way on every
attempt (``spark.sql.execution.arrow.maxRecordsPerBatch`` rows, or fewer by
``maxBytesPerBatch``), so a cut attempt's batches are a prefix of the
retry's; a batch spanning a record-batch boundary could be cut short and
then differ from the retry's batch with the same sequence number (refused
by its digest: before digests, its other rows were silently dropped).

Values: the driver's ``select`` converts as for the row path before
``mapInArrow`` (timestamp and date columns to ``unix_micros``, decimals to
double), so a row carries the same values on either path; a ``single``
field's values are float32 in Arrow (the row path sends doubles).

A batch with a bad row (a null, a value out of its field's range, a string
too long) is checked as rows instead, by the same
:class:`~boreas.spark.sender.RowShaper`, so refusals name the same rows with
the same reasons, and its good rows go as a row batch.  A DataFrame that
:func:`arrow_misfit` refuses, or with text columns to parse, is checked as
rows throughout, still read through ``mapInArrow`` (the same cut).  Only an
RDD takes the row path of :func:`~boreas.spark.sender.send_partition`.

>>> import pyarrow as pa
>>> from boreas.catalog.model import Field, FieldType, Schema
>>> schema = Schema("S", (Field("id", FieldType.INT), Field("name", FieldType.STRING, 3)))
>>> spark_batches = [pa.record_batch({"id": pa.array(range(i, i + 3), pa.int64()), "name": ["a", "b", "toolong"]})
...                  for i in (0, 3)]
>>> [b.num_rows for b in cut(spark_batches, 2)]
[2, 1, 2, 1]
>>> [(c.read, type(c.good).__name__, list(c.numbers), [b[:2] for b in c.bad])
...  for c in checked_batches(spark_batches[:1], schema, 2)]
[(2, 'Columns', [0, 1], []), (1, 'list', [], [(2, 'name')])]
>>> [(c.read, c.good) for c in checked_batches(spark_batches[:1], schema, 2, as_rows=True)]
[(2, [(0, 'a'), (1, 'b')]), (1, [])]
"""

from __future__ import annotations

import logging
import pickle
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING

import pyarrow as pa

from boreas.catalog.model import Schema
from boreas.wire.columns import check
from boreas.wire.publish_columns import conform

from .sender import Checked, PartitionReport, RowShaper, send_chunks
from .target import StreamTarget

if TYPE_CHECKING:
    from pyspark.sql import DataFrame
    from pyspark.sql.types import StructType

log = logging.getLogger(__name__)

_INTEGRAL = ("byte", "short", "int", "long", "timestamp")
_FLOATING = ("single", "double")


def arrow_misfit(columns: StructType, target: StreamTarget) -> str | None:
    """Why the selected ``columns`` (one per field, converted as the row path converts them) must take the
    row path; None when the Arrow path fits.

    The Arrow path fits when every column's Spark type is of its field's
    kind: integral types for integral and timestamp fields, integral or
    floating for floating fields, strings for string fields.  Anything else
    (strings or doubles into an int field, booleans) the row path refuses row
    by row, naming each, where an Arrow cast would convert it instead.
    """
    from pyspark.sql import types as T

    integral = (T.ByteType, T.ShortType, T.IntegerType, T.LongType)
    fits = {**{k: integral for k in _INTEGRAL}, **{k: integral + (T.FloatType, T.DoubleType) for k in _FLOATING},
            "string": (T.StringType,)}
    for (name, kind, _), column in zip(target.fields, columns.fields):
        if not isinstance(column.dataType, fits.get(kind, ())):
            return f"column {name!r} is {column.dataType.simpleString()}, field {name!r} is {kind}"
    return None


def cut(batches: Iterable[pa.RecordBatch], size: int) -> Iterator[pa.RecordBatch]:
    """Each record batch cut into batches of ``size`` rows (its last one shorter), in order (zero-copy slices).

    Only row counts decide where a batch ends, and no batch spans two record
    batches (see the module docstring), so the same record batches give the
    same batches on every attempt, and a cut-short attempt's are a prefix.
    """
    for batch in batches:
        for offset in range(0, batch.num_rows, size):
            yield batch.slice(offset, size)


def checked_batches(batches: Iterable[pa.RecordBatch], schema: Schema, size: int,
                    text_fields: frozenset[int] = frozenset(), as_rows: bool = False) -> Iterator[Checked]:
    """Each batch of at most ``size`` rows as the stream's columns; a batch with a bad row, and every batch
    ``as_rows``, checked as rows instead (``text_fields`` parsed as ``boreas publish --file`` does)."""
    shaper: RowShaper | None = None
    first = 0
    for batch in cut(batches, size):
        n = batch.num_rows
        if not as_rows:
            columns, errors = check(conform(batch, schema), schema)
            if not errors:
                yield Checked(n, columns, range(first, first + n), [])
                first += n
                continue
        shaper = shaper or RowShaper(schema, text_fields)
        good, numbers, bad = shaper.check(batch.to_pylist(), first)
        yield Checked(n, good, numbers, bad)
        first += n


def _partition_job(target: StreamTarget, prefix: str, batch_size: int, text_fields: frozenset[int], as_rows: bool,
                   timeout: float, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """Runs in the executor (``mapInArrow``): the partition's batches sent, and its report as one row."""
    from pyspark import TaskContext

    index = TaskContext.get().partitionId()
    chunks = checked_batches(batches, target.schema(), batch_size, text_fields, as_rows)
    report = send_chunks(target, f"{prefix}:{index}", index, chunks, timeout)
    yield pa.record_batch({"report": pa.array([pickle.dumps(report)], pa.binary())})


def send_dataframe(df: DataFrame, target: StreamTarget, prefix: str, batch_size: int, timeout: float,
                   text_fields: frozenset[int] = frozenset()) -> list[PartitionReport]:
    """Publish ``df`` (one column per field, in field order) with ``mapInArrow``; every partition's report.

    Its batches are checked as rows when there are ``text_fields`` to parse
    or :func:`arrow_misfit` says so (logged), as columns otherwise.
    """
    import functools

    why = "text columns to parse" if text_fields else arrow_misfit(df.schema, target)
    if why is not None:
        log.info("publishing to %s as rows: %s", target.stream, why)
    job = functools.partial(_partition_job, target, prefix, batch_size, text_fields, why is not None, timeout)
    return [pickle.loads(row.report) for row in df.mapInArrow(job, "report binary").collect()]
