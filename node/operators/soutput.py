"""``soutput``: the companion at a fault-tolerant diagram's end (Borealis's ``SOutputQBox``), as a changelog's pass.

Borealis's SOutput stood before the client: it removed the boundary
tuples the sunions put on their streams, and after a node recovered from a
checkpoint it dropped the stable tuples the replay produced again (and
undid the tentative ones), announcing the end of that on its control
stream (REC_DONE).  Boreas has neither to do: no boundary row flows (an
sunion's buckets are its own state), and a replayed batch keeps its
``(producer, seq)``, so receivers drop it (docs/architecture.md,
"Durability and recovery"): exactly once for every row that went out.

So an soutput passes its in stream's rows on, with their weights, on out
port 1: a tentative row, its retraction and the stable row after it all
reach subscribers as the changelog they are (docs/operators.md,
"Fault-tolerance boxes").  Its control stream (out port 0, no fields)
carries nothing.  No state.
"""

from __future__ import annotations

from boreas.catalog.model import Box, Schema
from boreas.wire.columns import Columns

from .base import Emitted, Operator
from .changelog_out import changelog, rows_and_weights


class SOutputOperator(Operator):
    """Passes each row with its weight to out port 1 (plain rows at +1)."""

    takes_columns = True

    def __init__(self, box: Box, inputs: list[Schema], outputs: list[Schema]):
        super().__init__(box, inputs, outputs)
        self.check_outputs()

    def process(self, port: int, rows: list[tuple] | Columns, now: float) -> Emitted:
        if not rows:
            return []
        if isinstance(rows, Columns) and rows.weights is not None:
            return [(1, rows)]
        values, weights = rows_and_weights(rows)
        return [(1, changelog(values, weights, self.outputs[1]))]
