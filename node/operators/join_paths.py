"""A two-input join's two paths -- Arrow columns and rows -- and the one owner of which holds its buffers.

``join`` (:mod:`.join`) and ``aurorajoin`` (:mod:`.aurorajoin`) each have
a columnar engine (:class:`~.join_columns.ColumnJoin`,
:class:`~.aurorajoin_columns.AuroraColumns`), built where the box's
predicate and out fields translate exactly, and a row engine
(:class:`~.join_rows.RowJoin`, :class:`~.aurorajoin.AuroraRows`), the
reference.  Exactly one of them holds the buffers at a time.
:class:`JoinPaths` is the one place that says which, and the one place
that hands them over, for two reasons:

* **size**: a batch goes to the engine that costs less for it, costs
  counted in the row engine's probes of one (tuple, buffered tuple) pair
  (:meth:`JoinPaths.on_rows`, the box's :class:`Costs`): the rows cost the
  batch's tuples times the other side's buffered ones (plus ``per_tuple``
  for each tuple made a Python tuple and buffered); the columns a fixed
  cost per batch (``fixed``: a few dozen pyarrow and numpy calls, about
  0.1 ms) plus a cost per buffered tuple of the other side
  (``per_buffered``: its keys encoded, its order values scanned).  The engine holding the buffers keeps them until what it cost
  more than the other, summed over the batches since it last cost less
  (the regret), passes the hand-over's cost (``handover_fixed`` and
  ``per_handover`` per buffered tuple: one conversion through the engines'
  ``state()`` and ``restore()``, the old holder then emptied): sizes near the cut-over do not hand the buffers back and
  forth, and an engine the stream has outgrown (buffers filled while small
  batches went to rows) is left after a few batches, not kept for good.  The figures
  are bench/columnar_operators.py ``--joins``' (docs/benchmarks.md,
  "aurorajoin and join by batch size").  The buffers stay with whichever
  engine took the last batch: a stream of small batches never builds Arrow
  buffers, a stream of large ones never builds rows;
* **fit**: a batch of rows the columns cannot hold as they are (an int in
  a double field), or restored or handed-over rows that do not fit, sends
  the buffers to the row path for good.

Columns in give columns out when the columnar engine takes the batch
(except a batch that falls back: rows); rows in give rows out.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
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

    def buffered(self, side: int) -> int:
        """How many tuples ``side``'s buffer holds now (a batch's size choice reads it)."""
        ...

    def state(self) -> dict: ...

    def restore(self, state: dict) -> None: ...


class ColumnEngine(Engine, Protocol):
    schemas: list[pa.Schema]  # each in port's Arrow schema


@dataclass(frozen=True)
class Costs:
    """A box's costs for the size choice, in row-path pair probes (about 0.04 µs each), measured by
    bench/columnar_operators.py ``--joins`` (window 20 and 1,000, batches of 10 to 1,000)."""

    fixed: int  # the columns' cost per batch
    per_buffered: int  # the columns' cost per buffered tuple of the other side
    per_tuple: int  # the rows' cost per arriving tuple besides its pairs
    per_handover: int = 16  # a hand-over's per buffered tuple, both sides (0.5-2.6 µs a tuple one way)
    handover_fixed: int = 1600  # a hand-over's own cost, buffers empty or not (state() and restore(): 50-70 µs)

    def handover(self, entries: int) -> int:
        """The regret that pays for handing ``entries`` buffered tuples over: twice one hand-over, since a stream
        whose batch sizes swing around the cut-over would make the buffers come back (sizes alternating 50 and
        200 at window 20 otherwise moved them at every swing, each move costing what the batches saved)."""
        return 2 * (self.handover_fixed + self.per_handover * entries)


#: ``join``: about 0.11 ms a batch on columns and 0.25 µs a buffered tuple; rows 0.5 µs a tuple besides its pairs.
JOIN_COSTS = Costs(fixed=2800, per_buffered=6, per_tuple=12)
#: ``aurorajoin``: about 0.16 ms a batch on columns (the VALUES cut besides the pairs) and 0.28 µs a buffered tuple.
AURORAJOIN_COSTS = Costs(fixed=4000, per_buffered=7, per_tuple=12)


class JoinPaths:
    """A join box's two engines and which of them holds the buffers now (the module docstring)."""

    def __init__(self, kind: str, name: str, rows: Engine, columns: ColumnEngine | None,
                 error: Callable[[str], Exception], costs: Costs = JOIN_COSTS) -> None:
        self.kind = kind  # the box type, for the log
        self.name = name
        self.rows = rows
        self.columns = columns  # None: the box joins on rows for good
        self.error = error  # the box's error for a message (OperatorError naming it)
        self.costs = costs
        self._holder: Engine = columns if columns is not None else rows
        # Each engine's state with nothing buffered: what the one that hands its buffers over is left with
        self._empty = {id(rows): rows.state(), **({id(columns): columns.state()} if columns is not None else {})}
        self._regret = 0  # what the holder cost more than the other engine, in pairs, since it last cost less
        self._cut: int | None = None  # a plain cut-over in pairs instead of the costs (cut_at)

    def cut_at(self, pairs: int | None) -> None:
        """Join a batch of at most ``pairs`` (tuple, buffered tuple) pairs on rows, any other on columns, whoever
        holds the buffers (a plain cut-over, for tests and benches; -1: every batch on columns; None: the costs
        again)."""
        self._cut = pairs

    def on_rows(self, tuples: int, port: int) -> bool:
        """Whether a batch of ``tuples`` arriving on ``port`` goes to the row engine: the holder's regret after it
        against the hand-over's cost (the module docstring)."""
        other = self._holder.buffered(1 - port)
        if self._cut is not None:
            return tuples * other <= self._cut
        costs = self.costs
        rows = tuples * (other + costs.per_tuple)
        columns = costs.fixed + costs.per_buffered * other
        held = self._holder is self.rows
        regret = self._regret + (rows - columns if held else columns - rows + 1)
        if regret <= 0:  # the holder costs less (the common case: no need to count what a hand-over moves)
            self._regret = 0
            return held
        self._regret = regret
        if regret <= costs.handover(self._holder.entries()):
            return held
        self._regret = 0
        return not held

    @property
    def engine(self) -> Engine:
        """The engine that holds the buffers now."""
        return self._holder

    def process(self, port: int, rows: list[tuple] | Columns, now: float) -> Emitted:
        """The out tuples of a batch arriving on ``port``, by the engine its size and values choose."""
        if port not in (0, 1):
            raise self.error(f"has no in port {port}")
        if isinstance(rows, Columns) and rows.weights is not None:  # the catalog refuses this (changelog.py)
            raise self.error("cannot read a changelog: a windowed join cannot apply a retraction")
        columns = self.columns
        if columns is not None:
            if not self.on_rows(len(rows), port) and self._hold(columns):
                return self._on_columns(columns, port, rows, now)
            if self.columns is not None:
                self._hold(self.rows)
        out = self.rows.process(port, as_rows(rows), now)
        return [(0, out)] if out else []

    def _on_columns(self, columns: ColumnEngine, port: int, rows: list[tuple] | Columns, now: float) -> Emitted:
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
            out = self.rows.process(port, as_rows(rows), now)
        else:
            out = columns.process(port, batch, now)
            if not isinstance(out, list):
                out = Columns(out).rows()
        return [(0, out)] if out else []

    def _hold(self, engine: Engine) -> bool:
        """Hand the buffers to ``engine`` (a no-op if it holds them); False if they went to rows for good instead
        (handed-over rows the columns cannot hold)."""
        if engine is self._holder:
            return True
        state = self._holder.state()
        try:
            engine.restore(state)
        except Unfit as exc:  # only the columns refuse rows; the rows hold the buffers still
            log.info("%s box %r: its buffered rows do not fit its columns (%s); joining on rows from now on",
                     self.kind, self.name, exc)
            self.columns = None
            return False
        old, self._holder = self._holder, engine
        old.restore(self._empty[id(old)])  # one holder: the old one keeps no stale copy of the buffers
        return True

    def _to_rows(self, why: str) -> None:
        """Rows the columns cannot hold came: the buffers go to the row path, for good."""
        assert self.columns is not None
        log.info("%s box %r: %s; joining on rows from now on", self.kind, self.name, why)
        self._hold(self.rows)
        self.columns = None

    def state(self) -> dict:
        return self._holder.state()

    def restore(self, state: dict) -> None:
        """Both buffers from either engine's :meth:`state`; restored rows the columns cannot hold go to rows."""
        self._regret = 0  # (what the holder before cost more says nothing of the one restored)
        if self.columns is not None:
            try:
                self.columns.restore(state)
                self._holder = self.columns
                return
            except Unfit as exc:
                log.info("%s box %r: restored rows do not fit its columns (%s); joining on rows", self.kind,
                         self.name, exc)
                self.columns = None
        self.rows.restore(state)
        self._holder = self.rows


def conformed(batch: pa.RecordBatch, schema: pa.Schema) -> pa.RecordBatch | None:
    """``batch`` under its side's Arrow schema (names and metadata aside, the types must be the same);
    None if they are not (it is read as rows)."""
    if batch.schema.equals(schema):
        return batch
    if [f.type for f in batch.schema] != [f.type for f in schema]:
        return None
    return pa.RecordBatch.from_arrays(batch.columns, schema=schema)
