"""``revisionfilter`` and ``revisionmap``: Borealis's revision boxes, as a filter and a map over a changelog.

In Borealis a revision tuple replaces or deletes an earlier tuple, and a
revision box emits revisions of what it emitted before.  In Boreas that is
a changelog (docs/operators.md, "Revision boxes"): a deletion is the row at
weight -1, a replacement the old row at -1 and the new one at +1.  A filter
and a map already pass each row's weight on, so a revision filter or map
is the plain one run on the batch as a changelog -- a plain batch's rows
are insertions, weight +1 -- and its out stream is always a changelog
(catalog/changelog.py), so whatever reads it sees the revisions.  Neither
keeps state: a row's image does not depend on other rows.

A revisionmap appends Borealis's ``revised_value`` string field, null:
the new value of a replacement is the +1 row itself.

The plain operator is built from the box without the revision parameters
(:func:`boreas.catalog.revision_params.plain_box`), so both run the same
code, columns and rows alike.
"""

from __future__ import annotations

import pyarrow as pa

from boreas.catalog.model import Box, Schema
from boreas.catalog.revision_params import RevisionParamError, check_revision_params, plain_box
from boreas.wire.columns import Columns, arrow_schema, weighted

from .base import Emitted, Operator, OperatorError
from .filter import FilterOperator
from .map import MapOperator


def as_changelog(batch: list[tuple] | Columns, schema: Schema) -> Columns:
    """The batch as a changelog: its own weights, or +1 for each row of a plain batch (insertions)."""
    if isinstance(batch, Columns):
        if batch.weights is not None:
            return batch
        return Columns(batch.batch, weights=pa.repeat(pa.scalar(1, pa.int64()), len(batch)))
    out = weighted(batch, [1] * len(batch), schema)
    assert isinstance(out, Columns)
    return out


def checked(box: Box) -> Box:
    """``box``'s plain counterpart, once its revision parameters are checked (OperatorError naming it)."""
    try:
        check_revision_params(box)
    except RevisionParamError as exc:
        raise OperatorError(str(exc)) from None
    return plain_box(box)


class RevisionFilterOperator(Operator):
    """A filter over a changelog: each row goes, with its weight, to the port its predicates pick."""

    takes_columns = True  # a changelog's weights travel only with columns

    def __init__(self, box: Box, inputs: list[Schema], outputs: list[Schema]):
        super().__init__(box, inputs, outputs)
        self.check_outputs()
        self._filter = FilterOperator(checked(box), inputs, outputs)

    def process(self, port: int, rows: list[tuple] | Columns, now: float) -> Emitted:
        if not rows:
            return []
        return self._filter.process(port, as_changelog(rows, self.inputs[0]), now)


class RevisionMapOperator(Operator):
    """A map over a changelog: out row i weighs what in row i weighed; ``revised_value`` is null."""

    takes_columns = True

    def __init__(self, box: Box, inputs: list[Schema], outputs: list[Schema]):
        super().__init__(box, inputs, outputs)
        self.check_outputs()
        out = outputs[0]
        self._map = MapOperator(checked(box), inputs, [Schema(out.name, out.fields[:-1])])
        self._target = arrow_schema(out)

    def process(self, port: int, rows: list[tuple] | Columns, now: float) -> Emitted:
        if not rows:
            return []
        emitted = []
        for out_port, mapped in self._map.process(port, as_changelog(rows, self.inputs[0]), now):
            assert isinstance(mapped, Columns) and mapped.weights is not None
            n = len(mapped)
            columns = [*mapped.batch.columns, pa.nulls(n, self._target.field(len(self._target) - 1).type)]
            emitted.append((out_port, Columns(pa.RecordBatch.from_arrays(columns, schema=self._target),
                                              weights=mapped.weights)))
        return emitted
