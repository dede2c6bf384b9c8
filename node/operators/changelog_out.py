"""Batches in and out of a box that reads rows with weights and writes a changelog (``sunion``, ``soutput``, ``sjoin``).

A batch comes as rows (a plain stream: every row +1) or as
:class:`~boreas.wire.columns.Columns` (a changelog's carry weights); what
goes out is always a changelog batch.  A stream with no fields (the
control streams of ``sunion`` and ``soutput``) still has rows: Arrow keeps
their count in a batch of no columns.

>>> from boreas.catalog.model import Schema
>>> batch = changelog([(), ()], [1, -1], Schema("Empty", ()))
>>> len(batch), batch.weight_list(), batch.rows()
(2, [1, -1], [(), ()])
"""

from __future__ import annotations

import pyarrow as pa

from boreas.catalog.model import Schema
from boreas.wire.columns import Columns, arrow_schema, weighted


def rows_and_weights(batch: list[tuple] | Columns) -> tuple[list[tuple], list[int]]:
    """A batch's rows and each row's weight (+1 for every row of a plain batch)."""
    if isinstance(batch, Columns):
        return batch.rows(), batch.weight_list()
    return list(batch), [1] * len(batch)


def changelog(rows: list[tuple], weights: list[int], schema: Schema) -> Columns:
    """Rows with weights as the changelog batch of ``schema`` they go out in."""
    if schema.fields:
        out = weighted(rows, weights, schema)
        assert isinstance(out, Columns)
        return out
    empty = pa.RecordBatch.from_struct_array(pa.array([{}] * len(rows), pa.struct([])))
    empty = empty.replace_schema_metadata(arrow_schema(schema).metadata)
    return Columns(empty, weights=pa.array(weights, pa.int64()))


def grouped(items: list[tuple[int, tuple, int]], schemas: list[Schema]) -> list[tuple[int, Columns]]:
    """``(out port, row, weight)`` items, in order, as one batch per run of one port (the order kept)."""
    out: list[tuple[int, Columns]] = []
    start = 0
    for i in range(1, len(items) + 1):
        if i == len(items) or items[i][0] != items[start][0]:
            port = items[start][0]
            run = items[start:i]
            out.append((port, changelog([r for _, r, _ in run], [w for _, _, w in run], schemas[port])))
            start = i
    return out
