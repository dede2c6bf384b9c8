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
"""

from __future__ import annotations

from collections import deque
from typing import Any

from boreas.catalog.model import Box, Schema

from .base import Emitted, Operator
from .join_rows import JoinSpec, compile_probes

SIDES = ("left", "right")


class AuroraJoinOperator(Operator):
    """Two buffers of tuples; each arriving tuple trims the other side's, then probes it."""

    def __init__(self, box: Box, inputs: list[Schema], outputs: list[Schema]):
        super().__init__(box, inputs, outputs)
        self.check_outputs()
        if box.param("timeout") is not None:
            raise self.param_error("timeout", "not supported for an aurorajoin yet")
        self._sizes = (float(self.number("down-size", low=0, required=True)),  # type: ignore[arg-type]
                       float(self.number("up-size", low=0, required=True)))  # type: ignore[arg-type]
        self._by_values = [self.choice(f"{side}-order-by", ("VALUES", "TUPLES"), "TUPLES") == "VALUES"
                           for side in SIDES]
        self._orders: list[int | None] = [
            self.field_index(schema, box.param(f"{side}-order-on-field") or "", f"{side}-order-on-field")
            if any(self._by_values) else None for side, schema in zip(SIDES, inputs)]
        spec = JoinSpec(box.param("predicate") or "", tuple(self.indexed("out-field")), self._sizes,
                        (self._orders[0], self._orders[1]), None)
        self._probes = compile_probes(box, inputs, spec)
        self._buffers: list[deque[tuple]] = [deque(), deque()]

    def process(self, port: int, rows: list[tuple], now: float) -> Emitted:
        out: list[tuple] = []
        own, other = self._buffers[port], self._buffers[1 - port]
        side = 1 - port
        probe = self._probes[port]
        for row in rows:
            row = tuple(row)
            own.append(row)
            if self._by_values[side]:
                self._trim_values(other, side, row[self._orders[port]])  # type: ignore[index]
            else:
                while len(other) > int(self._sizes[side]):
                    other.popleft()
            probe(row, other, out.append)
        return [(0, out)] if out else []

    def _trim_values(self, buffer: deque, side: int, value: Any) -> None:
        if value is None:  # an arriving null order value says nothing of age: nothing is trimmed
            return
        at = self._orders[side]
        while buffer:
            oldest = buffer[0][at]
            if oldest is not None and not value - oldest > self._sizes[side]:
                return
            buffer.popleft()  # too old, or a null order value, which cannot be placed

    def state_entries(self) -> int:
        return len(self._buffers[0]) + len(self._buffers[1])

    def state(self) -> dict[str, Any]:
        return {"buffers": [[list(r) for r in b] for b in self._buffers]}

    def restore(self, state: dict[str, Any], now: float | None = None) -> None:
        self._buffers = [deque(tuple(r) for r in b) for b in state["buffers"]]
