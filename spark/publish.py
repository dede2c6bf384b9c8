"""Publishing a DataFrame (or RDD, or file) into an input stream with a Spark job.

The driver looks the stream up once (:func:`~boreas.spark.target.lookup_target`),
then one Spark task per partition sends its rows straight to the stream's
entry nodes; nothing but a small report per partition comes back to the
driver.  A DataFrame's partitions go as Arrow record batches
(``mapInArrow``, :mod:`boreas.spark.columnar`), with no row made in the
executors; an RDD's go as rows (:mod:`boreas.spark.sender`).  Each partition sends as producer
``spark:JOB:PARTITION`` with deterministic batches, so retried and
speculative tasks deliver every row exactly once.

Refused rows -- ones that violate the stream's schema -- are not sent; the
rest are.  :func:`publish` then raises :class:`RowsRefused`, whose
``result`` says how many rows were published and which were refused (row
number, field, reason, values; at most 100 per partition are described, all
are counted).  Raising rather than returning a count makes a partly refused
publish impossible to mistake for a complete one; the good rows are in the
stream either way, and catching :class:`RowsRefused` is how to carry on.

Usage::

    from boreas.spark import publish
    n = publish(spark.read.parquet("ticks/"), "Ticks", head="http://localhost:14000", token=token)
"""

from __future__ import annotations

from boreas.catalog.words import counted
import functools
import logging
import uuid
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from boreas.client.publisher import PublishRefused
from boreas.wire.tuples import RowError

from .sender import PartitionReport, send_partition
from .target import StreamTarget, lookup_target

if TYPE_CHECKING:
    from pyspark import RDD
    from pyspark.sql import Column, DataFrame, SparkSession

log = logging.getLogger(__name__)

_INTEGRAL = ("byte", "short", "int", "long")
_FLOATING = ("single", "double")


@dataclass(frozen=True)
class RefusedRow(RowError):
    """A row the stream's schema refused.

    ``row`` numbers the rows of the whole input from 0 in partition order
    (the order of ``df.collect()``); ``partition`` and ``values`` help find it.
    """

    partition: int = 0
    values: str = ""

    def __str__(self) -> str:
        where = f"field {self.field!r}: " if self.field else ""
        return f"row {self.row} (partition {self.partition}) {where}{self.reason}: {self.values}"


@dataclass
class PublishResult:
    """What a publish did: rows read, published and refused."""

    stream: str
    producer_prefix: str
    rows: int = 0
    published: int = 0
    refused_count: int = 0
    refused: list[RefusedRow] = field(default_factory=list)
    batches: int = 0
    arrow_batches: int = 0  # of them, sent as Arrow columns (the others as rows)
    duplicates: int = 0  # batches the nodes already had: retried or speculative tasks, replays
    refusals: list[str] = field(default_factory=list)  # whole batches a node refused

    @classmethod
    def from_reports(cls, stream: str, prefix: str, reports: Iterable[PartitionReport]) -> PublishResult:
        result = cls(stream, prefix)
        for report in sorted(reports, key=lambda r: r.partition):
            result.refused += [RefusedRow(result.rows + row, name, reason, report.partition, values)
                               for row, name, reason, values in report.refused]
            result.rows += report.rows
            result.published += report.sent
            result.refused_count += report.refused_count
            result.batches += report.batches
            result.arrow_batches += report.arrow_batches
            result.duplicates += report.duplicates
            result.refusals += report.refusals
        return result


class RowsRefused(ValueError):
    """Some rows violated the stream's schema; the others were published.  See ``result``."""

    def __init__(self, result: PublishResult):
        shown = "; ".join(str(r) for r in result.refused[:3])
        more = "" if result.refused_count <= 3 else f"; ... ({result.refused_count - 3} more)"
        super().__init__(f"{result.refused_count} of {counted(result.rows, 'row')} refused by stream {result.stream!r} "
                         f"({result.published} published): {shown}{more}")
        self.result = result


# -- the Spark job ------------------------------------------------------------------


def _partition_job(target: StreamTarget, prefix: str, batch_size: int, text_fields: frozenset[int],
                   timeout: float, index: int, rows: Iterator[Any]) -> Iterator[PartitionReport]:
    """Runs in the executor: one report per partition."""
    yield send_partition(target, f"{prefix}:{index}", index, rows, batch_size, text_fields, timeout)


def run_job(data: DataFrame | RDD, target: StreamTarget, prefix: str, batch_size: int = 1000,
            coerce: bool = False, timeout: float = 60.0) -> PublishResult:
    """Send ``data`` to ``target`` with producers ``prefix:PARTITION``; the collected result.

    A DataFrame goes through ``mapInArrow`` (:mod:`boreas.spark.columnar`:
    sent as Arrow batches, no row made in the executors, unless its columns
    need checking as rows); an RDD has no columns and takes the row path
    (:mod:`boreas.spark.sender`).
    """
    if batch_size < 1:
        raise ValueError("batch_size must be at least 1")
    df, rdd, text_fields = _prepared(data, target, coerce)
    if df is not None:
        from .columnar import send_dataframe

        reports = send_dataframe(df, target, prefix, batch_size, timeout, text_fields)
    else:
        job = functools.partial(_partition_job, target, prefix, batch_size, text_fields, timeout)
        reports = rdd.mapPartitionsWithIndex(job).collect()
    result = PublishResult.from_reports(target.stream, prefix, reports)
    if result.refusals:
        raise PublishRefused(f"stream {target.stream!r}: {result.refusals[0]} "
                             f"({counted(len(result.refusals), 'batch')} refused)")
    log.info("published %d of %d rows to %s as %s in %d batches (%d as Arrow; %d refused rows, %d batches "
             "already delivered)", result.published, result.rows, target.stream, prefix, result.batches,
             result.arrow_batches, result.refused_count, result.duplicates)
    return result


def publish(data: DataFrame | RDD, stream: str, head: str, token: str | None = None, batch_size: int = 1000,
            *, job_id: str | None = None, timeout: float = 60.0) -> int:
    """Publish every row of ``data`` into input stream ``stream``; the number of rows published.

    The count includes rows the nodes already had from an earlier run with
    the same ``job_id`` (they are not delivered again).

    ``data`` is a DataFrame (columns matched to the schema's fields by name;
    extra columns are ignored; timestamp and date columns become
    microseconds) or an RDD of Rows, mappings, or sequences in field order.
    Values are not converted otherwise: a string in an int field is refused.
    Raises :class:`RowsRefused` when rows violate the schema (the rest are
    published), :class:`~boreas.client.head_api.UnknownStream`, or
    :class:`~boreas.client.publisher.PublishRefused`.  Passing the
    ``job_id`` of an earlier publish of the same data re-runs it without
    duplicates (while the nodes remember it).  A DataFrame's batches are at
    most ``batch_size`` rows and never span two of Spark's Arrow record
    batches (``spark.sql.execution.arrow.maxRecordsPerBatch``, default
    10,000): see :mod:`boreas.spark.columnar`.
    """
    target = lookup_target(head, stream, token)
    result = run_job(data, target, f"spark:{job_id or uuid.uuid4().hex[:16]}", batch_size, timeout=timeout)
    if result.refused_count:
        raise RowsRefused(result)
    return result.published


def publish_file(path: str | Path, stream: str, head: str, token: str | None = None, batch_size: int = 1000,
                 *, spark: SparkSession | None = None, file_format: str | None = None,
                 timeout: float = 60.0) -> int:
    """Read a parquet or CSV file (or folder of them) with Spark and publish it; rows published.

    Columns are matched to the schema's fields by name and brought to the
    field types: numeric columns to int or double fields, anything to
    string fields, timestamps to microseconds.  Text columns (every CSV
    column: the file must have a header row) are parsed by the rules of
    ``boreas publish --file`` on the executors rather than cast by Spark,
    because a Spark cast turns bad text into null (or, in ANSI mode, fails
    the whole job) where the parser names the row, field and bad value.
    Raises like :func:`publish`.
    """
    target = lookup_target(head, stream, token)
    spark = spark or _session()
    kind = file_format or _file_format(Path(path))
    reader = spark.read
    if kind == "csv":
        from pyspark.sql import functions as F

        df = reader.option("header", True).option("inferSchema", False).csv(str(path))
        # Spark reads an empty cell as null; as text it is "" (a valid string, an invalid number),
        # which is what ``boreas publish --file`` makes of it.
        df = df.select(*[F.coalesce(_column(c), F.lit("")).alias(c) for c in df.columns])
    else:
        df = reader.format(kind).load(str(path))
    result = run_job(df, target, f"spark:{uuid.uuid4().hex[:16]}", batch_size, coerce=True, timeout=timeout)
    if result.refused_count:
        raise RowsRefused(result)
    return result.published


def _session() -> SparkSession:
    from .session import local_session

    return local_session()


def _file_format(path: Path) -> str:
    """``parquet`` or ``csv`` from the name, or from the files in a folder (as Spark writes them)."""
    names = [p.name for p in path.iterdir() if not p.name.startswith(("_", "."))] if path.is_dir() else [path.name]
    for name in names:
        suffixes = [s.lower() for s in Path(name).suffixes]
        if ".parquet" in suffixes or ".pq" in suffixes:
            return "parquet"
        if ".csv" in suffixes:
            return "csv"
    raise ValueError(f"{path}: cannot tell whether this is parquet or CSV; name it *.parquet or *.csv "
                     f"or pass file_format=")


# -- DataFrame columns to schema fields ------------------------------------------------


def _prepared(data: Any, target: StreamTarget, coerce: bool) -> tuple[DataFrame | None, RDD | None, frozenset[int]]:
    """A DataFrame's columns picked and converted (and which fields hold text to parse), or an RDD as it is."""
    from pyspark import RDD
    from pyspark.sql import DataFrame

    if isinstance(data, RDD):
        return None, data, frozenset()
    if not isinstance(data, DataFrame):
        raise TypeError(f"publish takes a pyspark DataFrame or RDD, not {type(data).__name__}")
    columns, text_fields = _columns(data, target, coerce)
    return data.select(*columns), None, text_fields


def _column(name: str) -> Column:
    """A column by its exact name (dots and spaces in it are not syntax)."""
    from pyspark.sql import functions as F

    return F.col("`" + name.replace("`", "``") + "`")


def _columns(df: DataFrame, target: StreamTarget, coerce: bool) -> tuple[list[Column], frozenset[int]]:
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    folded: dict[str, list[str]] = {}
    for c in df.columns:
        folded.setdefault(c.lower(), []).append(c)
    dtypes = {f.name: f.dataType for f in df.schema.fields}
    columns: list[Column] = []
    text: set[int] = set()
    missing: list[str] = []
    for index, (name, kind, _) in enumerate(target.fields):
        source = name if name in dtypes else None
        if source is None and len(folded.get(name.lower(), [])) == 1:
            source = folded[name.lower()][0]  # Spark resolves names case-insensitively, so do we
        if source is None:
            missing.append(name)
            continue
        col, dtype = _column(source), dtypes[source]
        if kind == "timestamp" and isinstance(dtype, (T.TimestampType, T.TimestampNTZType, T.DateType)):
            col = F.unix_micros(col.cast("timestamp"))
        elif kind in _FLOATING and isinstance(dtype, T.DecimalType):
            col = col.cast("double")
        elif coerce:
            if isinstance(dtype, T.StringType) and kind != "string":
                text.add(index)
            elif kind == "string" and not isinstance(dtype, T.StringType):
                col = col.cast("string")
            elif kind in _INTEGRAL + ("timestamp",) and isinstance(dtype, T.DecimalType):
                col = col.cast("double")  # integral values pass the check, fractions are refused
        columns.append(col.alias(name))
    if missing:
        raise ValueError(f"the data has no column for field(s) {', '.join(missing)} of stream "
                         f"{target.stream!r} (schema {target.schema_name}); its columns are {df.columns}")
    return columns, frozenset(text)
