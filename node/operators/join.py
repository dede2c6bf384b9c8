"""``join``: a symmetric windowed join of two streams, as Borealis's JoinQBox.

Each side keeps a buffer.  A tuple arriving on one side is first joined with
every tuple in the *other* side's buffer (oldest first; one out tuple per
pair whose ``predicate`` holds), then enters its own buffer, which is then
trimmed:

* ``<side>-order-by`` TUPLES (default): the buffer keeps the newest
  ``<side>-buffer-size`` tuples;
* ``<side>-order-by`` VALUES: oldest tuples leave while the new tuple's
  ``<side>-order-on-field`` value is ``>= buffer-size`` past theirs (the
  buffer is assumed ordered on that field, as Borealis assumes).

A size of 0 keeps nothing on that side.  ``timeout`` (seconds, optional)
also drops buffered tuples that arrived that long ago.

Order: Borealis's JoinQBox has no ``slack`` and drops no tuple for order of
arrival -- every tuple is joined, then buffered -- so this operator does the
same, and the Head refuses a ``slack`` on a join instead of ignoring it (an
aggregate is where slack applies; docs/operators.md).

Out tuples are ``out-field.N`` expressions over ``left.x``/``right.y``,
named ``out-field-name.N``; with none, the left tuple's fields followed by
the right's.  A predicate that fails on a pair is false; an out field that
fails is None.

Two paths, one semantics: a batch at a time on Arrow columns
(:mod:`.join_columns`, buffers in :mod:`.join_buffer`) where the predicate
and out fields translate exactly, else a tuple at a time (:mod:`.join_rows`,
the reference).  Rows arriving at a columnar join are made columns, and its
out tuples are rows again; a batch of rows whose values the columns cannot
hold as they are (an int in a double field) hands the buffers to the row
path for good, through the same ``state()`` a move carries.  A changelog is
refused at submission (catalog/changelog.py): a windowed join of arrivals
cannot apply a retraction.
"""

from __future__ import annotations

import logging

import pyarrow as pa

from boreas.catalog.model import Box, Schema
from boreas.node.compile import STR, kind_of
from boreas.wire.columns import Columns, as_rows

from .base import Emitted
from .join_buffer import Unfit, rows_batch
from .join_columns import ColumnJoin
from .join_rows import JoinSpec, RowJoin, compile_probes
from .timers import Timed

log = logging.getLogger(__name__)

SIDES = ("left", "right")


class JoinOperator(Timed):
    takes_columns = True  # Arrow batches are joined as columns where the box's shape allows (.join_columns)

    def __init__(self, box: Box, inputs: list[Schema], outputs: list[Schema], *, columnar: bool = True):
        """``columnar=False``: the row path only (the property tests' reference; bench/columnar_operators.py)."""
        super().__init__(box, inputs, outputs)
        if len(inputs) != 2:
            raise self.error(f"needs 2 in streams, has {len(inputs)}")
        predicate = box.param("predicate")
        if not predicate:
            raise self.error("needs parameter 'predicate'")
        self.check_outputs()
        self.spec = self._spec(box, inputs, predicate)
        probes = compile_probes(box, inputs, self.spec)
        self.rows = RowJoin(self.spec, probes)
        self.columns = ColumnJoin.make(self.spec, inputs, outputs[0], probes) if columnar else None

    def _spec(self, box: Box, inputs: list[Schema], predicate: str) -> JoinSpec:
        sizes: list[float] = []
        orders: list[int | None] = []
        for side, schema in zip(SIDES, inputs):
            by_values = self.choice(f"{side}-order-by", ("VALUES", "TUPLES"), "TUPLES") == "VALUES"
            size = self.number(f"{side}-buffer-size", low=0, required=True)
            if by_values:
                on = box.param(f"{side}-order-on-field")
                if not on:
                    raise self.error(f"needs parameter '{side}-order-on-field' ({side}-order-by VALUES)")
                index = self.field_index(schema, on, f"{side}-order-on-field")
                if kind_of(schema.fields[index].type) == STR:
                    raise self.param_error(f"{side}-order-on-field", "order-by VALUES needs a numeric field")
                orders.append(index)
                sizes.append(size)  # type: ignore[arg-type]
            else:
                orders.append(None)
                sizes.append(int(size))  # type: ignore[arg-type]  # Borealis truncates
        timeout = self.number("timeout", None, low=0)
        return JoinSpec(predicate, tuple(self.indexed("out-field")), (sizes[0], sizes[1]), (orders[0], orders[1]),
                        float(timeout) if timeout is not None else None)

    @property
    def columnar(self) -> bool:
        """Whether batches are joined on columns (the predicate and out fields translate, no row batch misfit)."""
        return self.columns is not None

    # -- the data path ---------------------------------------------------------------

    def process(self, port: int, rows: list[tuple] | Columns, now: float) -> Emitted:
        self.tick(now)
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
        out = self.rows.process(port, rows.rows() if isinstance(rows, Columns) else rows, now)
        return [(0, out)] if out else []

    def _to_rows(self, why: str) -> None:
        """Rows the columns cannot hold came: the buffers go to the row path, for good."""
        assert self.columns is not None
        log.info("join box %r: %s; joining on rows from now on", self.box.name, why)
        self.rows.restore(self.columns.state())
        self.columns = None

    # -- state ----------------------------------------------------------------------------

    def _engine(self) -> ColumnJoin | RowJoin:
        return self.columns if self.columns is not None else self.rows

    def shift_times(self, delta: float) -> None:
        self._engine().shift_times(delta)

    def state_entries(self) -> int:
        """Tuples buffered on both sides."""
        return self._engine().entries()

    def state(self) -> dict:
        return {"clock": self.clock_state(), **self._engine().state()}

    def restore(self, state: dict, now: float | None = None) -> None:
        try:
            if self.columns is not None:
                try:
                    self.columns.restore(state)
                except Unfit as exc:
                    self.columns = None
                    log.info("join box %r: restored rows do not fit its columns (%s); joining on rows", self.box.name,
                             exc)
            if self.columns is None:
                self.rows.restore(state)
        except (KeyError, IndexError, TypeError, ValueError) as exc:
            raise self.error(f"cannot restore state: {exc!r}") from None
        self.restore_clock(state.get("clock"), now)


def conformed(batch: pa.RecordBatch, schema: pa.Schema) -> pa.RecordBatch | None:
    """``batch`` under its side's Arrow schema (names and metadata aside, the types must be the same);
    None if they are not (it is read as rows)."""
    if batch.schema.equals(schema):
        return batch
    if [f.type for f in batch.schema] != [f.type for f in schema]:
        return None
    return pa.RecordBatch.from_arrays(batch.columns, schema=schema)
