"""A Structured Streaming sink: ``writeStream.foreachBatch(stream_sink(...))``.

Spark's micro-batch engine gives at-least-once delivery to a
``foreachBatch`` function: after a failure or a restart from the
checkpoint, the last micro-batch (whose commit was not recorded) runs again
with the same ``batch_id`` and the same source offsets.  The sink makes that
exactly-once by publishing each micro-batch's partition ``p`` as producer
``spark:QUERY:BATCH:p``, where QUERY is the query's id -- which Spark keeps
in the checkpoint, so it is the same after a restart -- and the
micro-batch's rows are batched deterministically
(:mod:`boreas.spark.sender`): the replay re-sends batches the node already
has, and it drops them.

The stream is looked up on the Head at every micro-batch (one small request
next to a Spark job), so a long-running query follows the stream if it is
published at another node later.

Usage::

    query = (spark.readStream.schema(s).json("in/")
             .writeStream.foreachBatch(stream_sink("Ticks", head=HEAD, token=token))
             .option("checkpointLocation", "ckpt/").start())
"""

from __future__ import annotations

from boreas.catalog.words import counted
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

from .publish import RowsRefused, run_job
from .target import lookup_target

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

log = logging.getLogger(__name__)

QUERY_ID_PROPERTY = "sql.streaming.queryId"  # a local property Spark sets while a query runs a batch

BatchFunction = Callable[["DataFrame", int], None]


def _log_refused(exc: RowsRefused) -> None:
    log.warning("%s", exc)


def stream_sink(stream: str, head: str, token: str | None = None, batch_size: int = 1000, *,
                sink_id: str | None = None, on_refused: Callable[[RowsRefused], None] | None = None,
                timeout: float = 60.0) -> BatchFunction:
    """A ``foreachBatch`` function that publishes every micro-batch into input stream ``stream``.

    Refused rows (schema violations) are passed to ``on_refused`` as a
    :class:`RowsRefused` (default: logged as a warning, and the query goes
    on); let it raise to stop the query.  ``sink_id`` replaces the query id
    in producer ids, for a query whose checkpoint is recreated but whose
    already-published batches must still be recognised.
    """
    report = on_refused or _log_refused

    def publish_batch(df: DataFrame, batch_id: int) -> None:
        query = sink_id or df.sparkSession.sparkContext.getLocalProperty(QUERY_ID_PROPERTY)
        if not query:
            raise RuntimeError("stream_sink found no streaming query id; use it with writeStream.foreachBatch "
                               "or pass sink_id=")
        target = lookup_target(head, stream, token)
        result = run_job(df, target, f"spark:{query}:{batch_id}", batch_size, timeout=timeout)
        again = (f" ({counted(result.duplicates, 'batch')} {'was' if result.duplicates == 1 else 'were'} already "
                 "delivered)") if result.duplicates else ""
        log.info("micro-batch %d of query %s: %d rows published to %s%s", batch_id, query, result.published,
                 stream, again)
        if result.refused_count:
            report(RowsRefused(result))

    return publish_batch
