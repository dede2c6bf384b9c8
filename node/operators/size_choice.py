"""Which of a box's two exact paths takes an Arrow batch of n rows: its columns, or its row code.

A ``filter`` or ``map`` box evaluates a batch that came as Arrow columns
with ``pyarrow.compute`` (:mod:`.arrow_exprs`): a few calls per operation,
each with a fixed cost of several µs whatever the batch's size.  Its row
code (the definition of the semantics) costs per row instead.  At 10,000
rows the columns cost 5-100x less; at 10 rows the row code over
``Columns.rows()`` costs 3-20x less (docs/dataplane.md, "Small batches").
Adaptive batching makes batches of 10-100 rows the normal case at moderate
rates, so a box takes a batch below its cut-over by its row code.

The cut-over grows with the expression: the columns' fixed cost is about
one set of calls per operation, the row code's cost per row grows more
slowly, so the sizes at which they cost the same were measured at 23-73
rows per operation (bench/columnar_calls.py, bench/columnar_small.py:
bench/dataplane.py's filter about 165 rows, its map about 70, wider boxes
380-510).  A box's cut-over is ``PER_OPERATION`` rows per operation its
expressions make on columns (an operator or function over a field: ``a *
2 + b`` is two; field references and constants none), at least
``LOWEST``.  It is a function of the box alone, never of a clock: which path
takes a batch decides whether rows or columns leave the box, and the
coalescer closes a batch where that changes, so a replay must choose as the
first run did (docs/dataplane.md, "Adaptive batching inside the cluster").

Both paths give every row exactly the same value (the property tests run
each one against the row path); the choice changes the cost, and the form
that leaves the box (rows, or columns with their frame's bytes).

>>> SizeChoice.of(["celsius > -90.0 and celsius < 60.0"]).rows_below
150
>>> choice = SizeChoice.of(["sensor", "time", "celsius * 9.0 / 5.0 + 32.0"])
>>> choice.rows_below, choice.on_rows(10), choice.on_rows(1000)
(150, True, False)
>>> SizeChoice.of(["sensor"]).rows_below, SizeChoice.fixed(True).on_rows(10**9)
(16, True)
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

from sqlglot import expressions as exp

from boreas.catalog.expressions import parse_expression

#: Rows of cut-over per operation on columns (measured 23-73: the module docstring).
PER_OPERATION = 50
#: The least cut-over (a map of field references alone: one ``RecordBatch`` made, against a row loop).
LOWEST = 16
_LEAVES = (exp.Column, exp.Literal, exp.Paren, exp.Boolean, exp.Null, exp.DataType, exp.Identifier)


@dataclass(frozen=True, slots=True)
class SizeChoice:
    """A box's cut-over: an Arrow batch of fewer than ``rows_below`` rows goes to its row code."""

    rows_below: int

    @classmethod
    def of(cls, expressions: list[str]) -> "SizeChoice":
        """The cut-over of a box evaluating ``expressions`` (each parsed as the box parses it)."""
        operations = sum(_operations(parse_expression(text)) for text in expressions)
        return cls(max(LOWEST, PER_OPERATION * operations))

    @classmethod
    def fixed(cls, on_rows: bool) -> "SizeChoice":
        """Every batch to one path (tests run each against the row path; benches compare them)."""
        return cls(sys.maxsize if on_rows else 0)

    def on_rows(self, n: int) -> bool:
        """Whether an Arrow batch of ``n`` rows goes to the row code."""
        return n < self.rows_below


def _operations(tree: exp.Expression) -> int:
    """The operations ``tree`` makes per batch on columns: nodes over a field, not a field or constant."""
    return sum(1 for node in tree.walk() if not isinstance(node, _LEAVES) and node.find(exp.Column) is not None)
