"""The executor side: one Spark partition sent to a stream's entry nodes.

Exactly-once across task retries rests on three things:

* the producer id is fixed by the driver (``prefix:partition``), so every
  attempt of a task -- a retry after a failure, or a speculative copy --
  sends under the same id;
* batching is deterministic: the partition's rows are cut into chunks of
  ``batch_size`` input rows in iteration order, and each chunk's good rows
  form the batch with the next sequence number (the :class:`OutboundLink`
  numbers from 0 per link), so an attempt re-sends identical
  ``(producer, seq)`` batches;
* the node drops a batch whose ``(stream, producer, seq)`` it has already
  taken (``wire/receiver.py``) and acknowledges it again.  Batches carry the
  digest of their payload (``wire/digests.py``), as every publisher's do, so
  an attempt whose batch ``k`` holds other rows (a partition that is not
  deterministic, or a ``job_id`` reused for other data) is refused rather
  than silently dropped.

A partition arrives either as rows (:func:`send_partition`, the row path) or
as Arrow record batches (:mod:`boreas.spark.columnar`); both are cut into
:class:`Checked` chunks that :func:`send_chunks` sends, one batch each.

Rows are checked here, on the executor, with the node's own checker
(:class:`~boreas.wire.tuples.RowType`), and bad rows are not sent.  Checking
locally is what makes refusals survive retries: the node acknowledges a
duplicate batch without repeating the errors it found the first time, so a
retried task could not learn them from the node.  Refusals the node still
reports (its schema differs from the one the driver looked up) are kept too.

This requires the partition's contents to be deterministic (true for files,
``parallelize`` and narrow transformations of them; not for the output of a
shuffle without a sort), since otherwise an attempt's batch ``k`` may hold
different rows than the first attempt's.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import itertools
import logging
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from boreas.catalog.model import FieldType, Schema
from boreas.wire.frames import Ack, Batch, Frame, Refused
from boreas.wire.links import OutboundLink
from boreas.wire.tuples import RowType, SchemaMismatch

from .target import StreamTarget

log = logging.getLogger(__name__)

#: refused rows described per partition (all are counted); bounds what a task returns to the driver
MAX_REPORTED = 100
#: on a failing task, how long to wait for batches already queued before giving up on them
FAILURE_FLUSH = 5.0


@dataclass
class PartitionReport:
    """What one task did; returned to the driver by ``collect``."""

    partition: int
    producer: str
    rows: int = 0  # rows read from the partition
    sent: int = 0  # rows sent (they passed the check)
    batches: int = 0
    arrow_batches: int = 0  # of them, sent as Arrow columns (spark/columnar.py) rather than rows
    duplicates: int = 0  # batches the node already had (a retried or speculative attempt)
    refused: list[tuple[int, str, str, str]] = field(default_factory=list)  # (row, field, reason, values)
    refused_count: int = 0
    refusals: list[str] = field(default_factory=list)  # whole batches refused: the stream left the node

    def refuse(self, row: int, field_name: str, reason: str, values: Any) -> None:
        self.refused_count += 1
        if len(self.refused) < MAX_REPORTED:
            self.refused.append((row, field_name, reason, _show(values)))


def _show(values: Any) -> str:
    text = repr(tuple(values) if isinstance(values, list) else values)
    return text if len(text) <= 200 else text[:197] + "..."


class RowShaper:
    """Puts a row into the schema's field order and checks it.

    Accepts Spark ``Row`` objects and mappings (by field name; extra names are
    ignored) and sequences (already in field order).  Values of ``text``
    fields that arrive as strings are parsed with the same rules as
    ``boreas publish --file`` (CSV); ``datetime`` values of timestamp fields
    become microseconds since the epoch.
    """

    def __init__(self, schema: Schema, text_fields: frozenset[int] = frozenset()):
        self.schema = schema
        self.names = [f.name for f in schema.fields]
        self.row_type = RowType(schema)
        self._text = {i: RowType(Schema(schema.name, (schema.fields[i],))) for i in text_fields}
        self._timestamps = [i for i, f in enumerate(schema.fields) if f.type == FieldType.TIMESTAMP]

    def shape(self, row: Any) -> list[Any]:
        """The row's values in field order; raises :class:`SchemaMismatch`."""
        fields = getattr(row, "__fields__", None)  # pyspark.sql.Row
        if fields is not None and list(fields) != self.names:
            row = row.asDict()
        if isinstance(row, Mapping):
            missing = [n for n in self.names if n not in row]
            if missing:
                raise SchemaMismatch(missing[0], "missing")
            values = [row[n] for n in self.names]
        elif isinstance(row, (list, tuple)):
            values = list(row)
        else:
            raise SchemaMismatch("", f"a row is a sequence or mapping, not {type(row).__name__}")
        if len(values) == len(self.names):
            for i, one in self._text.items():
                if isinstance(values[i], str):
                    values[i] = one.from_text([values[i]])[0]
            for i in self._timestamps:
                if isinstance(values[i], dt.datetime):
                    values[i] = _micros(values[i])
        return values

    def check(self, rows: list[Any], first: int) -> tuple[list[tuple], list[int], list[tuple[int, str, str, Any]]]:
        """Good rows, their row numbers, and ``(row, field, reason, values)`` of bad ones.

        Rows are numbered from ``first`` within the partition.
        """
        shaped: list[list[Any]] = []
        numbers: list[int] = []
        bad: list[tuple[int, str, str, Any]] = []
        for number, row in enumerate(rows, start=first):
            try:
                shaped.append(self.shape(row))
                numbers.append(number)
            except SchemaMismatch as exc:
                bad.append((number, exc.field, exc.reason, row))
        good, errors = self.row_type.check(shaped)
        if errors:
            refused = {e.row for e in errors}
            bad += [(numbers[e.row], e.field, e.reason, shaped[e.row]) for e in errors]
            numbers = [n for i, n in enumerate(numbers) if i not in refused]
            bad.sort(key=lambda b: b[0])
        return good, numbers, bad


def _micros(stamp: dt.datetime) -> int:
    """Microseconds since the epoch; a naive datetime is local time, as pyspark produces them."""
    whole = stamp.replace(microsecond=0).timestamp()
    return int(whole) * 1_000_000 + stamp.microsecond


def _chunks(rows: Iterable[Any], size: int) -> Iterator[list[Any]]:
    it = iter(rows)
    while chunk := list(itertools.islice(it, size)):
        yield chunk


@dataclass
class Checked:
    """One chunk of a partition, checked: what to send (rows, or Arrow columns), and what was refused.

    ``numbers`` are the partition's row numbers of the good rows (to name a
    row the node refuses); ``read`` counts the chunk's input rows.
    """

    read: int
    good: Any  # list[tuple] | boreas.wire.columns.Columns
    numbers: Sequence[int]
    bad: list[tuple[int, str, str, Any]]


def checked_rows(rows: Iterable[Any], batch_size: int, shaper: RowShaper) -> Iterator[Checked]:
    """The row path: rows cut into chunks of ``batch_size`` in iteration order, each checked by ``shaper``."""
    first = 0
    for chunk in _chunks(rows, batch_size):
        good, numbers, bad = shaper.check(chunk, first)
        yield Checked(len(chunk), good, numbers, bad)
        first += len(chunk)


def send_partition(target: StreamTarget, producer: str, index: int, rows: Iterable[Any], batch_size: int,
                   text_fields: frozenset[int] = frozenset(), timeout: float = 60.0) -> PartitionReport:
    """Send one partition's rows; blocks until every batch is acknowledged (or raises)."""
    chunks = checked_rows(rows, batch_size, RowShaper(target.schema(), text_fields))
    return send_chunks(target, producer, index, chunks, timeout)


def send_chunks(target: StreamTarget, producer: str, index: int, chunks: Iterable[Checked],
                timeout: float = 60.0) -> PartitionReport:
    """Send one partition's checked chunks, one batch each (the row path's or the Arrow path's,
    :mod:`boreas.spark.columnar`); blocks until every batch is acknowledged (or raises)."""
    return asyncio.run(_PartitionSender(target, producer, index, timeout).run(chunks))


class _PartitionSender:
    def __init__(self, target: StreamTarget, producer: str, index: int, timeout: float):
        self.target = target
        self.timeout = timeout
        self.report = PartitionReport(index, producer)
        self.links: list[OutboundLink] = []
        self._numbers: dict[int, Sequence[int]] = {}  # seq -> row numbers of the batch's rows (first link)

    async def run(self, chunks: Iterable[Checked]) -> PartitionReport:
        report = self.report
        try:
            for chunk in chunks:
                report.rows += chunk.read
                for number, field_name, reason, values in chunk.bad:
                    report.refuse(number, field_name, reason, values)
                if len(chunk.good):
                    await self._send(chunk.good, chunk.numbers)
                await asyncio.sleep(0)  # let the links' pumps run between chunks
            await self._flush(self.timeout)
        except Exception:
            # Deliver what this attempt already queued, so its retry finds it taken (and dropped).
            with contextlib.suppress(Exception):
                await self._flush(min(FAILURE_FLUSH, self.timeout))
            raise
        finally:
            for link in self.links:
                await link.abort()
        log.info("partition %d of %s: %d rows read, %d sent in %d batches (%d already delivered), %d refused",
                 report.partition, report.producer, report.rows, report.sent, report.batches,
                 report.duplicates, report.refused_count)
        return report

    async def _send(self, rows: Any, numbers: Sequence[int]) -> None:
        if not self.links:
            for endpoint in self.target.entries:
                link = OutboundLink(endpoint, self.target.token, self.report.producer, digests=True,
                                    on_reply=self._replied if not self.links else None)
                await link.start()
                self.links.append(link)
        for link in self.links:
            try:
                seq = await asyncio.wait_for(link.send(self.target.stream, rows), self.timeout)
            except TimeoutError:
                raise TimeoutError(self._stuck(link)) from None
            if link is self.links[0] and seq is not None:
                self._numbers[seq] = numbers
        self.report.sent += len(rows)
        self.report.batches += 1
        self.report.arrow_batches += not isinstance(rows, list)

    def _replied(self, batch: Batch, reply: Frame) -> None:
        numbers = self._numbers.pop(batch.seq, [])
        if isinstance(reply, Refused):
            self.report.refusals.append(reply.reason)
        elif isinstance(reply, Ack):
            if reply.duplicate:
                self.report.duplicates += 1
            for row, field_name, reason in reply.errors:  # the node's schema differs from the driver's
                self.report.sent -= 1
                self.report.refuse(numbers[row] if 0 <= row < len(numbers) else -1, field_name,
                                   f"refused by the node: {reason}", "")

    async def _flush(self, timeout: float) -> None:
        for link in self.links:
            try:
                await link.flush(timeout)
            except TimeoutError:
                raise TimeoutError(self._stuck(link)) from None

    def _stuck(self, link: OutboundLink) -> str:
        return (f"{link.endpoint} did not acknowledge {link.in_flight} batches of {self.target.stream} "
                f"within {self.timeout:g}s ({link.last_error or 'connected but not answering'})")
