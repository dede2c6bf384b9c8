"""``revisionaggregate``: Borealis's revision aggregate, as an aggregate that retracts.

Borealis's RevisionAggregateQBox re-computes a window's result when a
revision touches one of its tuples and emits the revised result.  Boreas's
aggregate over a changelog does just that (:mod:`.aggregate_changes`): it
keeps, per group and window, accumulators a row's weight adds to or takes
from, and after each batch emits each changed result as -old/+new.  A
revision aggregate is that, whatever it reads (a plain batch's rows are
insertions, weight +1), so its out stream is always a changelog.

The semantics, for users (docs/operators.md, "Revision boxes"): windows by
VALUES of ``order-on-field``, ``[s, s + window-size)`` for every ``s`` a
multiple of ``advance``; they never close, since a revision may come at any
time.  The net of everything emitted so far (each row's weights summed) is,
for every group and window holding rows, the row the plain aggregate would
give over the net input: a result is emitted as soon as its window has a
row and revised as rows come and go, where Borealis emitted it once the
window closed and revised it later.  Functions are named ``agg_N`` unless
told otherwise, and the out row ends with Borealis's ``revised_value``
string field, null.

State (``state()``/``restore()``): the accumulators of every (group,
window), as :class:`~.aggregate_changes.Retracting` keeps them.
"""

from __future__ import annotations

from boreas.catalog.model import Box, Schema
from boreas.wire.columns import Columns, weighted

from .aggregate_changes import Retracting
from .base import Emitted, Operator
from .revision import as_changelog, checked


class RevisionAggregateOperator(Operator):
    takes_columns = True  # a changelog's weights travel only with columns

    def __init__(self, box: Box, inputs: list[Schema], outputs: list[Schema]):
        super().__init__(box, inputs, outputs)
        self.check_outputs()
        plain = checked(box)
        schema = inputs[0]
        out = outputs[0]
        self.size = self.number("window-size", positive=True, required=True)
        self.advance = self.number("advance", self.size, positive=True)
        on = box.param("order-on-field")
        if not on:
            raise self.error("needs parameter 'order-on-field' (windows by VALUES)")
        order = self.field_index(schema, on, "order-on-field")
        emit_start = self.choice("order-by", ("FIELD", "TUPLENUM"), "TUPLENUM") == "FIELD"
        functions = [value for name, value in sorted(
            ((n, v) for n, v in plain.params if n.startswith("aggregate-function.")),
            key=lambda p: int(p[0].rsplit(".", 1)[1]))]
        try:
            self._retracting = Retracting(functions, schema, Schema(out.name, out.fields[:-1]),
                                          groups=self.group_indexes(schema), size=self.size,
                                          advance=self.advance, order=order, emit_start=emit_start)
        except ValueError as exc:
            raise self.error(str(exc)) from None

    def process(self, port: int, rows: list[tuple] | Columns, now: float) -> Emitted:
        if not rows:
            return []
        batch = as_changelog(rows, self.inputs[0])
        out, weights = self._retracting.apply(batch.rows(), batch.weight_list())
        if not out:
            return []
        return [(0, weighted([(*row, None) for row in out], weights, self.outputs[0]))]

    @property
    def ignored(self) -> int:
        """Rows with no order value: in no window (counted, as the plain aggregate counts them)."""
        return self._retracting.ignored

    def state_entries(self) -> int:
        return len(self._retracting.entries)

    def state(self) -> dict:
        return self._retracting.state()

    def restore(self, state: dict, now: float | None = None) -> None:
        self._retracting.restore(state)
