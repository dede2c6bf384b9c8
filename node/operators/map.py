"""``map``: one out tuple per in tuple, field N computed by ``expression.N``.

Out field N is named ``output-field-name.N`` and has the type validation
infers for the expression; values are converted to it (``1=1`` gives int 1,
``min(i, d)`` a float).  An expression that fails on a tuple writes None
into that field and the others are still computed.

The batch is mapped by one generated list comprehension with every
expression inlined into one tuple display; if some expression fails on some
tuple, the batch is mapped again by a loop in which that tuple takes a
slower path that evaluates the fields one by one.  (Expressions are pure, so
doing the batch again gives what the loop alone would have.)

A batch that arrives as Arrow columns is mapped as columns: each expression
is translated once (:mod:`.arrow_exprs`) into a function of the batch, its
column converted as the row path converts the value (``coerce``) and cast
to the out field's Arrow type, and the box emits a
:class:`~boreas.wire.columns.Columns` of the out stream.  Rows on which some
field would fail or compute differently (a zero divisor, a None where Python
raises, an int64 overflow, ``sqrt(-1)``) get that field from the row code
alone -- None where it fails -- in place (:mod:`.arrow_exprs`, "Exact, row
by row"); nullable fields take its three-valued logic.  When an expression
has no columnar translation, or a value cannot be held by the out field's
Arrow type as the row path's tuple holds it (a Python int beyond int64, a
value out of the field's range: :class:`~.arrow_exprs.Fallback`), the batch
is mapped by the row code above.

A small Arrow batch goes the row code too, rows out: each pyarrow call has a
fixed cost of several µs, so below the box's cut-over (:mod:`.size_choice`,
from its expressions) the row code costs less.

A changelog batch keeps its weights: out row i is in row i's image, so it
weighs what row i weighed, on either path.
"""

from __future__ import annotations

import pyarrow as pa

from boreas.catalog.expressions import ExpressionError, Scope
from boreas.catalog.model import Box, Schema
from boreas.node.compile import CodeBuilder
from boreas.wire.columns import Columns, arrow_schema, weighted

from . import arrow_exprs
from .base import Emitted, Operator, OperatorError
from .size_choice import SizeChoice


class MapOperator(Operator):
    takes_columns = True  # Columns are mapped as columns (or read as rows when that is not exact)

    def __init__(self, box: Box, inputs: list[Schema], outputs: list[Schema], *, columnar: bool = True,
                 sizes: SizeChoice | None = None):
        """``columnar=False``: Arrow batches are read as rows (bench/columnar_operators.py compares the two);
        ``sizes``: which path takes an Arrow batch of each size (:mod:`.size_choice`; by default the box's
        cut-over)."""
        super().__init__(box, inputs, outputs)
        expressions = self.indexed("expression")
        names = self.indexed("output-field-name")
        if not expressions:
            raise self.error("needs parameter 'expression.0'")
        if len(names) != len(expressions):
            raise self.error(f"has {len(expressions)} expression.N but {len(names)} output-field-name.N")
        self.check_outputs()
        builder = CodeBuilder(Scope.single(inputs[0]), ["row"], label=box.name)
        try:
            sources = [builder.value(e).source for e in expressions]
        except ExpressionError as exc:
            raise OperatorError(f"map box {box.name!r}: {exc}") from None
        builder.namespace["_slow"] = builder.define(_slow_source(sources), "_slow")
        builder.namespace["_loop"] = builder.define(_batch_source(sources), "_map")
        self._batch = builder.define(_comprehension_source(sources), "_map_fast")
        self._ports = range(len(outputs))
        self._target = arrow_schema(outputs[0]) if outputs else None
        self._fields = _column_fields(inputs[0], expressions, outputs[0] if outputs else None) if columnar else None
        self.sizes = sizes if sizes is not None else SizeChoice.of(expressions)

    @property
    def columnar(self) -> bool:
        """Whether Arrow batches are mapped as columns (every expression translates)."""
        return self._fields is not None

    def process(self, port: int, rows: list[tuple] | Columns, now: float) -> Emitted:
        if not rows:
            return []
        out: list[tuple] | Columns | None = None
        if isinstance(rows, Columns):
            if self._fields is not None and not self.sizes.on_rows(len(rows)):
                try:
                    out = rows.with_batch(self._columns(rows.batch))
                except arrow_exprs.Fallback:
                    pass
            if out is None:  # (a small batch, or one the columns cannot take: rows out, as a row batch's)
                out = self._batch(rows.rows())
                if rows.weights is not None:
                    out = weighted(out, rows.weight_list(), self.outputs[0])
        else:
            out = self._batch(rows)
        return [(p, out) for p in self._ports]

    def _columns(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        assert self._fields is not None and self._target is not None
        return pa.RecordBatch.from_arrays([f(batch) for f in self._fields], schema=self._target)


def _column_fields(schema: Schema, expressions: list[str], out: Schema | None) -> list | None:
    """Each out field as ``batch -> column`` (:mod:`.arrow_exprs`); None when one has no columnar translation."""
    if out is None:
        return None
    translator = arrow_exprs.Translator(schema, per_row=True, nullable=True)
    try:
        return [translator.value(e, f.type) for e, f in zip(expressions, out.fields)]
    except arrow_exprs.Unsupported:
        return None


def _batch_source(sources: list[str]) -> str:
    display = "(" + "".join(s + ", " for s in sources) + ")"
    return (
        "def _map(rows):\n"
        "    out = []\n"
        "    append = out.append\n"
        "    for row in rows:\n"
        "        try:\n"
        f"            append({display})\n"
        "        except _ERRORS:\n"
        "            append(_slow(row))\n"
        "    return out\n"
    )


def _comprehension_source(sources: list[str]) -> str:
    display = "(" + "".join(s + ", " for s in sources) + ")"
    return (
        "def _map_fast(rows):\n"
        "    try:\n"
        f"        return [{display} for row in rows]\n"
        "    except _ERRORS:\n"
        "        return _loop(rows)\n"
    )


def _slow_source(sources: list[str]) -> str:
    lines = ["def _slow(row):"]
    for i, src in enumerate(sources):
        lines += ["    try:", f"        v{i} = {src}", "    except _ERRORS:", f"        v{i} = None"]
    lines.append("    return (" + "".join(f"v{i}, " for i in range(len(sources))) + ")")
    return "\n".join(lines) + "\n"
