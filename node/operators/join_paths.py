"""A two-input join's two paths -- Arrow columns and rows -- and the one owner of which holds its buffers.

``join`` (:mod:`.join`) and ``aurorajoin`` (:mod:`.aurorajoin`) each have
a columnar engine (:class:`~.join_columns.ColumnJoin`,
:class:`~.aurorajoin_columns.AuroraColumns`), built where the box's
predicate and out fields translate exactly, and a row engine
(:class:`~.join_rows.RowJoin`, :class:`~.aurorajoin.AuroraRows`), the
reference.  Exactly one of them holds the buffers at a time.
:class:`JoinPaths` is the one place that says which, and the one place
that hands them over: a batch of rows the columns cannot hold as they are
(an int in a double field), or restored rows that do not fit, sends the
buffers to the row path for good, through the same ``state()`` a move
carries.  Columns in give columns out (except an aurorajoin batch small
enough to probe as rows, ``probe_below``, or one that falls back: rows);
rows in are made columns and their out tuples rows again.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, Protocol

import pyarrow as pa

from boreas.wire.columns import Columns, as_rows

from .base import Emitted
from .join_buffer import Unfit, rows_batch

log = logging.getLogger(__name__)


class Engine(Protocol):
    """What both engines of a join offer (``data``: a record batch for the columnar one, rows for the other)."""

    def process(self, port: int, data: Any, now: float) -> pa.RecordBatch | list[tuple]: ...

    def entries(self) -> int: ...

    def state(self) -> dict: ...

    def restore(self, state: dict) -> None: ...


class ColumnEngine(Engine, Protocol):
    schemas: list[pa.Schema]  # each in port's Arrow schema


class JoinPaths:
    """A join box's two engines; the columnar one, while it lasts, holds the buffers (the module docstring)."""

    def __init__(self, kind: str, name: str, rows: Engine, columns: ColumnEngine | None,
                 error: Callable[[str], Exception]) -> None:
        self.kind = kind  # the box type, for the log
        self.name = name
        self.rows = rows
        self.columns = columns
        self.error = error  # the box's error for a message (OperatorError naming it)

    @property
    def engine(self) -> Engine:
        """The engine that holds the buffers now."""
        return self.columns if self.columns is not None else self.rows

    def process(self, port: int, rows: list[tuple] | Columns, now: float) -> Emitted:
        """The out tuples of a batch arriving on ``port``, by whichever engine holds the buffers."""
        if port not in (0, 1):
            raise self.error(f"has no in port {port}")
        if isinstance(rows, Columns) and rows.weights is not None:  # the catalog refuses this (changelog.py)
            raise self.error("cannot read a changelog: a windowed join cannot apply a retraction")
        columns = self.columns
        if columns is not None:
            batch = conformed(rows.batch, columns.schemas[port]) if isinstance(rows, Columns) else None
            if batch is not None:
                out = columns.process(port, batch, now)
                if isinstance(out, list):
                    return [(0, out)] if out else []
                return [(0, Columns(out))] if out.num_rows else []
            try:
                batch = rows_batch(as_rows(rows), columns.schemas[port])
            except Unfit as exc:
                self._to_rows(str(exc))
            else:
                out = columns.process(port, batch, now)
                if not isinstance(out, list):
                    out = Columns(out).rows()
                return [(0, out)] if out else []
        out = self.rows.process(port, as_rows(rows), now)
        return [(0, out)] if out else []

    def _to_rows(self, why: str) -> None:
        """Rows the columns cannot hold came: the buffers go to the row path, for good."""
        assert self.columns is not None
        log.info("%s box %r: %s; joining on rows from now on", self.kind, self.name, why)
        self.rows.restore(self.columns.state())
        self.columns = None

    def state(self) -> dict:
        return self.engine.state()

    def restore(self, state: dict) -> None:
        """Both buffers from either engine's :meth:`state`; restored rows the columns cannot hold go to rows."""
        if self.columns is not None:
            try:
                self.columns.restore(state)
                return
            except Unfit as exc:
                log.info("%s box %r: restored rows do not fit its columns (%s); joining on rows", self.kind,
                         self.name, exc)
                self.columns = None
        self.rows.restore(state)


def conformed(batch: pa.RecordBatch, schema: pa.Schema) -> pa.RecordBatch | None:
    """``batch`` under its side's Arrow schema (names and metadata aside, the types must be the same);
    None if they are not (it is read as rows)."""
    if batch.schema.equals(schema):
        return batch
    if [f.type for f in batch.schema] != [f.type for f in schema]:
        return None
    return pa.RecordBatch.from_arrays(batch.columns, schema=schema)
