"""Aggregate arguments that are expressions (``sum(x * 2.0)``), evaluated on a batch's columns.

The columnar aggregate (:mod:`.aggregate_columns`) reduces *fields*.  An
argument that is an expression is evaluated once per batch by the columnar
expression compiler of filter and map (:mod:`.arrow_exprs`) and appended to
the batch as a column; the function then reads that column like a field.
The extended batch is what every later step reads, rows included: the row
path's generated ``add`` reads only the box's own fields (the leading
columns) and evaluates the expression itself, so a row with trailing
argument columns gives it what the plain row gives.

Exact, as :mod:`.arrow_exprs` is, with the aggregate's own row code for the
rows that need it: the translator is filter's and map's (``per_row``,
``nullable``), so a row on which Python might compute otherwise than the
columns (a zero divisor, an int64 overflow, ``sqrt(-1)``, ``ln(0)``, text
that is not a plain number) gets its argument from the row code of the
same expression -- None where it fails, which every function but
``count(*)`` skips, as the row path's ``add`` skips it -- and the batch
stays columns.  An expression over ``nullable`` fields is read with SQL's
three-valued logic; its NULLs are skipped the same way, and a ``sum`` of it
keeps its count of values beside it (:func:`reads_nullable`), as the row
path's accumulator does.  An expression it does not translate keeps the box
on rows (:meth:`ArgumentColumns.add` says None); a batch whose row values a
column cannot hold (a Python int beyond int64) raises
:class:`~.arrow_exprs.Fallback`, and :meth:`ArgumentColumns.extend` says
None: that batch is read as rows, whole, before anything changes.  Only
numeric expressions whose row value is of their inferred type's kind (no
conversion by the row path) are taken.
"""

from __future__ import annotations

from collections.abc import Callable

import pyarrow as pa

from boreas.catalog.expressions import ExpressionError, Scope, field_references, parse_expression
from boreas.catalog.model import Field, FieldType, Schema
from boreas.node.compile import CodeBuilder, kind_of

from . import arrow_exprs


#: The expression types taken: the row value is exactly the column's (a ``single`` column would round a double).
_TAKEN = (FieldType.BYTE, FieldType.SHORT, FieldType.INT, FieldType.LONG, FieldType.DOUBLE)


def reads_nullable(schema: Schema, arg: str) -> bool:
    """Whether ``arg`` reads a ``nullable`` field of ``schema``: its sum keeps a count of values (accumulators.py's
    test, so the columnar slots are the row path's)."""
    return any(f is not None and f.nullable
               for f in (schema.field(n) for _, n in field_references(parse_expression(arg))))


class ArgumentColumns:
    """The expression arguments of one box, each a column appended after the in stream's fields."""

    def __init__(self, schema: Schema):
        self._schema = schema
        self._translator = arrow_exprs.Translator(schema, per_row=True, nullable=True)
        self._runs: list[Callable[[pa.RecordBatch], pa.Array]] = []
        self._fields: list[Field] = []

    def add(self, arg: str) -> int | None:
        """The column index the argument ``arg`` will have in an extended batch, or None (rows, module doc)."""
        try:
            t = CodeBuilder(Scope.single(self._schema), ["row"]).translate(arg)
        except ExpressionError:
            return None
        if t.type not in _TAKEN or t.kind != kind_of(t.type):
            return None
        try:
            run = self._translator.value(arg, t.type)
        except (arrow_exprs.Unsupported, ExpressionError):
            return None
        self._runs.append(run)
        self._fields.append(Field(f"_arg{len(self._fields)}", t.type))
        return len(self._schema.fields) + len(self._fields) - 1

    @property
    def any(self) -> bool:
        return bool(self._runs)

    @property
    def schema(self) -> Schema:
        """The in stream's schema with the argument columns after its fields."""
        return Schema(self._schema.name, self._schema.fields + tuple(self._fields))

    def extend(self, batch: pa.RecordBatch) -> pa.RecordBatch | None:
        """The batch with its argument columns appended, or None when one would not be exact (module doc)."""
        if not self._runs:
            return batch
        try:
            extra = [run(batch) for run in self._runs]
        except arrow_exprs.Fallback:
            return None
        names = [*batch.schema.names, *(f.name for f in self._fields)]
        return pa.RecordBatch.from_arrays([*batch.columns, *extra], names=names)
