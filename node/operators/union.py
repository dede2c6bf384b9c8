"""``union``: merge in streams of one tuple layout, in arrival order.

Each batch is passed on as it arrives, whichever in port it came from, so
the out stream's order is the order the node delivered batches in.  The
union keeps no state.  With several out streams each gets every tuple.

A batch of Arrow columns (:class:`~boreas.wire.columns.Columns`) is passed
on as columns, never turned into rows: the same object, with its IPC bytes,
when its Arrow schema is the out stream's; relabelled (the same arrays under
the out stream's field names, no copy) when the out schema names its fields
otherwise.  A changelog batch keeps its weights either way (the catalog
refuses a union of a changelog with a plain stream: catalog/changelog.py).
"""

from __future__ import annotations

import pyarrow as pa

from boreas.catalog.model import Box, Schema
from boreas.wire.columns import Columns, arrow_schema

from .base import Emitted, Operator


class UnionOperator(Operator):
    takes_columns = True  # columns pass through as they are

    def __init__(self, box: Box, inputs: list[Schema], outputs: list[Schema]):
        super().__init__(box, inputs, outputs)
        if not inputs:
            raise self.error("needs at least one in stream")
        self.check_outputs()
        self._ports = range(len(outputs))
        self._targets = [arrow_schema(s) for s in outputs]

    def process(self, port: int, rows: list[tuple] | Columns, now: float) -> Emitted:
        if not rows:
            return []
        if isinstance(rows, Columns):
            return [(p, _labelled(rows, self._targets[p])) for p in self._ports]
        return [(p, rows) for p in self._ports]


def _labelled(columns: Columns, target: pa.Schema) -> Columns:
    if columns.batch.schema.equals(target):
        return columns
    return columns.with_batch(pa.RecordBatch.from_arrays(columns.batch.columns, schema=target))
