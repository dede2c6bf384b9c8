"""``aurorajoin``: Borealis's older join (``AuroraJoinQBox``), a tuple at a time.

Its buffers are sized by ``down-size`` (the left one) and ``up-size`` (the
right one), each by ``TUPLES`` or ``VALUES`` of its side's
``*-order-on-field``.  Unlike ``join``'s, a buffer is trimmed when a tuple
arrives on the *other* side, just before that tuple probes it: a tuple
arriving on one side enters its own buffer, then the other side's buffer
drops its oldest tuples while it holds more than its size (``TUPLES``), or
while the arriving tuple's order value is more than its size past the
oldest one's (``VALUES``; a buffered null order value cannot be placed, so
it goes; an arriving one trims nothing), then the arriving tuple is joined with every tuple left there,
oldest first: one out tuple per pair the predicate holds for, its
``out-field.N`` values or the left tuple's fields then the right's (the
predicate and fields compiled as a ``join``'s,
:func:`~.join_rows.compile_probes`).  A buffer is trimmed only so, so a
side that keeps receiving while the other is silent keeps every tuple.

Borealis's ``VALUES`` trim reads the other buffer's order field out of the
arriving tuple's bytes (the same offset in the other schema); Boreas reads
the arriving tuple's own ``*-order-on-field``, which is what that offset
holds when the two schemas agree (catalog: a ``VALUES`` side needs both
order fields).  ``timeout`` is refused (not built).  State: both buffers.

Two paths, one semantics, as ``join``'s: a batch at a time on Arrow columns
(:mod:`.aurorajoin_columns`) where the predicate and out fields translate
exactly (``join``'s pair translation, :class:`~.join_columns.PairPlan`),
else a tuple at a time (:class:`AuroraRows`, the reference).  A batch of
few (tuple, buffered tuple) pairs is joined by the row path even on a
columnar box, the buffers handed over (the columns' fixed cost per batch is
more than its probes); rows arriving at a columnar aurorajoin for its
columns are made columns and its out tuples rows again; a batch of rows the
columns cannot hold as they are (an int in a double field) hands the
buffers to the row path for good, through ``state()`` (both paths, the
size choice and the hand-overs owned by :class:`~.join_paths.JoinPaths`,
as ``join``'s).
"""

from __future__ import annotations

from collections import deque
from typing import Any

from boreas.catalog.model import Box, Schema
from boreas.wire.columns import Columns, arrow_schema
from boreas.wire.row_errors import SchemaMismatch

from .aurorajoin_columns import AuroraColumns
from .base import Emitted, Operator
from .join_columns import PairPlan, PairTranslator
from .join_paths import AURORAJOIN_COSTS, JoinPaths
from .join_rows import JoinSpec, Probe, compile_probes

SIDES = ("left", "right")


class AuroraRows:
    """The row path: both buffers as tuples, a tuple at a time (the module docstring)."""

    def __init__(self, probes: list[Probe], sizes: tuple[float, float], by_values: list[bool],
                 orders: list[int | None]) -> None:
        self.probes = probes
        self.sizes = sizes
        self.by_values = by_values
        self.orders = orders
        self.buffers: list[deque[tuple]] = [deque(), deque()]

    def process(self, port: int, rows: list[tuple], now: float = 0.0) -> list[tuple]:
        """The out tuples of ``rows`` arriving on ``port`` (``now``: unused, an aurorajoin has no timeout)."""
        out: list[tuple] = []
        own, other = self.buffers[port], self.buffers[1 - port]
        side = 1 - port
        probe = self.probes[port]
        for row in rows:
            row = tuple(row)
            own.append(row)
            if self.by_values[side]:
                self._trim_values(other, side, row[self.orders[port]])  # type: ignore[index]
            else:
                while len(other) > int(self.sizes[side]):
                    other.popleft()
            probe(row, other, out.append)
        return out

    def _trim_values(self, buffer: deque, side: int, value: Any) -> None:
        if value is None:  # an arriving null order value says nothing of age: nothing is trimmed
            return
        at = self.orders[side]
        while buffer:
            oldest = buffer[0][at]
            if oldest is not None and not value - oldest > self.sizes[side]:
                return
            buffer.popleft()  # too old, or a null order value, which cannot be placed

    def entries(self) -> int:
        return len(self.buffers[0]) + len(self.buffers[1])

    def buffered(self, side: int) -> int:
        return len(self.buffers[side])

    def state(self) -> dict[str, Any]:
        return {"buffers": [[list(r) for r in b] for b in self.buffers]}

    def restore(self, state: dict[str, Any]) -> None:
        self.buffers = [deque(tuple(r) for r in b) for b in state["buffers"]]


class AuroraJoinOperator(Operator):
    """Two buffers of tuples; each arriving tuple trims the other side's, then probes it."""

    takes_columns = True  # Arrow batches are joined as columns where the box's shape allows (.aurorajoin_columns)

    def __init__(self, box: Box, inputs: list[Schema], outputs: list[Schema], *, columnar: bool = True):
        """``columnar=False``: the row path only (the property tests' reference; bench/aurorajoin_tables.py)."""
        super().__init__(box, inputs, outputs)
        self.check_outputs()
        if box.param("timeout") is not None:
            raise self.param_error("timeout", "not supported for an aurorajoin yet")
        sizes = (float(self.number("down-size", low=0, required=True)),  # type: ignore[arg-type]
                 float(self.number("up-size", low=0, required=True)))  # type: ignore[arg-type]
        by_values = [self.choice(f"{side}-order-by", ("VALUES", "TUPLES"), "TUPLES") == "VALUES" for side in SIDES]
        orders: list[int | None] = [
            self.field_index(schema, box.param(f"{side}-order-on-field") or "", f"{side}-order-on-field")
            if any(by_values) else None for side, schema in zip(SIDES, inputs)]
        spec = JoinSpec(box.param("predicate") or "", tuple(self.indexed("out-field")), sizes,
                        (orders[0], orders[1]), None)
        probes = compile_probes(box, inputs, spec)
        columns: AuroraColumns | None = None
        if columnar:
            translator = PairTranslator(inputs[0], inputs[1], per_row=True, nullable=True)  # (flagged pairs: row code)
            plan = PairPlan.make(translator, spec.predicate, spec.out_fields, outputs[0])
            try:
                schemas = [arrow_schema(s) for s in inputs]
            except SchemaMismatch:
                plan = None
            if plan is not None:
                columns = AuroraColumns(schemas, plan, probes, sizes, by_values, orders)
        self.paths = JoinPaths("aurorajoin", box.name, AuroraRows(probes, sizes, by_values, orders), columns,
                               self.error, AURORAJOIN_COSTS)

    @property
    def columnar(self) -> bool:
        """Whether batches are joined on columns (the predicate and out fields translate, no row batch misfit)."""
        return self.paths.columns is not None

    def process(self, port: int, rows: list[tuple] | Columns, now: float) -> Emitted:
        return self.paths.process(port, rows, now)

    def state_entries(self) -> int:
        return self.paths.engine.entries()

    def state(self) -> dict[str, Any]:
        return self.paths.state()

    def restore(self, state: dict[str, Any], now: float | None = None) -> None:
        self.paths.restore(state)
