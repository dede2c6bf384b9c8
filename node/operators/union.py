"""``union``: merge in streams of one tuple layout, in arrival order.

Each batch is passed on as it arrives, whichever in port it came from, so
the out stream's order is the order the node delivered batches in.  The
union keeps no state.  With several out streams each gets every tuple.
"""

from __future__ import annotations

from boreas.catalog.model import Box, Schema

from .base import Emitted, Operator


class UnionOperator(Operator):
    def __init__(self, box: Box, inputs: list[Schema], outputs: list[Schema]):
        super().__init__(box, inputs, outputs)
        if not inputs:
            raise self.error("needs at least one in stream")
        self.check_outputs()
        self._ports = range(len(outputs))

    def process(self, port: int, rows: list[tuple], now: float) -> Emitted:
        if not rows:
            return []
        return [(p, rows) for p in self._ports]
