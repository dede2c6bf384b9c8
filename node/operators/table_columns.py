"""A ``select``'s or ``joinstatic``'s batch joined with its table's rows on Arrow columns.

Neither box changes the table, so while it reads a batch every input tuple
sees the same rows, and the row path's output -- for each input tuple in
order, every row its ``where`` (``predicate``) holds for, in table order --
is the set of pairs (input i, row j) the predicate holds for, ordered by i
then j: a nested-loop join of the batch with the table's rows (narrowed to
equal keys where the predicate's top-level ``and`` terms hold an equality
of an input field and a row field, :func:`~.join_columns.equal_pairs`),
with the predicate and out fields evaluated by ``join``'s pair translation
(:class:`~.join_columns.PairPlan`, over ``input.x``/``T.y`` for a select,
``left.x``/``right.y`` for a joinstatic).

A ``delete`` reads a batch so too (:meth:`TableColumns.first_matches`):
it only removes rows, so the rows a tuple deletes are those it matches
that no earlier tuple of the batch matched.

An ``insert`` evaluates its values on the batch's columns
(:class:`InsertValues`) and puts the rows they make in order, as the row
path does; only where each value is already of its field's kind and the
field an int, double or string column (the row path's ``int()`` or
``float()`` then changes nothing).

The table's rows are made a batch once per version of the table
(:attr:`~.table_rows.KeyedRows.version` counts every change), so a stream
of reads between two writes converts the table once.

Exact or the row path: a box whose ``where``, out fields or schemas do not
translate keeps the row path (:meth:`TableColumns.make` says None); a pair
or input tuple on which Python might compute otherwise than the columns (a
zero divisor, ``sqrt(-1)``, an int64 overflow, text that is no plain
number) gets its value from the box's row code alone, and nullable fields
take its three-valued logic (:mod:`.arrow_exprs`, "Exact, row by row"); a
batch on which the columns still cannot be exact --
:class:`~.arrow_exprs.Fallback` (a Python int beyond int64), or table rows
the columns cannot hold as they are (:class:`~.join_buffer.Unfit`) -- is
read by the row path, which gives the same rows; nothing here is state.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import numpy as np
import pyarrow as pa

from boreas.catalog.expressions import ExpressionError, infer_type, parse_expression
from boreas.catalog.model import Field, Schema
from boreas.node.compile import BOOL, CodeBuilder, kind_of
from boreas.wire.columns import arrow_schema
from boreas.wire.row_errors import SchemaMismatch

from . import arrow_exprs
from .join_buffer import rows_batch
from .join_columns import PairPlan, PairTranslator, equal_pairs, suffix_pairs
from .table_rows import KeyedRows


class TableColumns:
    """The pairs of a batch and a table's rows that a ``where`` holds for (the module docstring)."""

    def __init__(self, inputs: pa.Schema, table: pa.Schema, plan: PairPlan) -> None:
        self.inputs = inputs
        self.table = table
        self.plan = plan
        self._cached: tuple[KeyedRows, int, pa.RecordBatch] | None = None

    @classmethod
    def make(cls, inputs: Schema, table: Schema, qualifiers: tuple[str, str], where: str | None,
             out_fields: tuple[str, ...] = (), output: Schema | None = None) -> "TableColumns | None":
        """The columnar path of a box reading ``table`` for each tuple of ``inputs``, or None (rows: also when the
        table is named as the input's qualifier, ``input``, which the row path's scope reads as the input tuple)."""
        if qualifiers[0].lower() == qualifiers[1].lower():
            return None
        try:
            schemas = arrow_schema(inputs), arrow_schema(table)
        except SchemaMismatch:
            return None
        translator = PairTranslator(inputs, table, qualifiers, per_row=True, nullable=True)
        if where is not None and not truth_kept(translator, where):
            return None
        plan = PairPlan.make(translator, where, out_fields, output)
        return cls(*schemas, plan) if plan is not None else None

    def rows_batch(self, rows: KeyedRows) -> pa.RecordBatch:
        """The table's rows as one batch, in table order (made again only when the table changed;
        :class:`~.join_buffer.Unfit` if the columns cannot hold them)."""
        cached = self._cached
        if cached is None or cached[0] is not rows or cached[1] != rows.version:
            cached = self._cached = (rows, rows.version, rows_batch(rows.rows(), self.table))
        return cached[2]

    def matched(self, batch: pa.RecordBatch, table: pa.RecordBatch) -> tuple[list[pa.RecordBatch], np.ndarray]:
        """The pairs the predicate holds for (batches of the input's then the row's columns, in output order),
        and how many rows each input tuple matched; :class:`~.arrow_exprs.Fallback` as the plan raises it."""
        counts = np.zeros(batch.num_rows, dtype=np.int64)
        kept_batches = []
        for kept, i, _ in self.held(batch, table):
            kept_batches.append(kept)
            counts += np.bincount(i, minlength=batch.num_rows)
        return kept_batches, counts

    def held(self, batch: pa.RecordBatch,
             table: pa.RecordBatch) -> Iterator[tuple[pa.RecordBatch, np.ndarray, np.ndarray]]:
        """Block by block, the pairs the predicate holds for: as a batch, and their input and table rows."""
        for i, j in self._candidates(batch, table):
            if not len(i):
                continue
            kept, which = self.plan.held(batch, table, i, j)
            if kept.num_rows:
                yield kept, i[which], j[which]

    def first_matches(self, batch: pa.RecordBatch, table: pa.RecordBatch) -> np.ndarray:
        """The table rows some input tuple matches, each once, ordered by the first tuple that matches it, then
        table order: what a ``delete`` takes, tuple after tuple (a row gone matches no later tuple)."""
        found = [(i, j) for _, i, j in self.held(batch, table)]
        if not found:
            return np.zeros(0, dtype=np.int64)
        i, j = np.concatenate([f[0] for f in found]), np.concatenate([f[1] for f in found])
        rows, first = np.unique(j, return_index=True)  # pairs come by input tuple: the first is the earliest
        return rows[np.lexsort((rows, i[first]))]

    def _candidates(self, batch: pa.RecordBatch, table: pa.RecordBatch) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        keys = self.plan.keys
        if keys is not None:
            yield equal_pairs(batch.column(keys[0]), table.column(keys[1]))
            return
        yield from suffix_pairs(np.zeros(batch.num_rows, dtype=np.int64), table.num_rows)

    def out(self, kept: list[pa.RecordBatch]) -> pa.RecordBatch:
        """A joinstatic's out tuples of the pairs :meth:`matched` kept."""
        assert self.plan.target is not None
        outs = [self.plan.out(k) for k in kept]
        return outs[0] if len(outs) == 1 else pa.Table.from_batches(
            outs, self.plan.target).combine_chunks().to_batches()[0]


class InsertValues:
    """An ``insert``'s values, one per table field, evaluated on a batch of input tuples (the module docstring)."""

    def __init__(self, inputs: pa.Schema, values: list) -> None:
        self.inputs = inputs
        self.values = values

    @classmethod
    def make(cls, inputs: Schema, table: Schema, texts: tuple[str, ...]) -> "InsertValues | None":
        """The columnar values of an insert into ``table``, or None when one has no exact translation (rows)."""
        try:
            arrow = arrow_schema(table)
            schema = arrow_schema(inputs)
        except SchemaMismatch:
            return None
        translator = arrow_exprs.Translator(inputs, per_row=True, nullable=True)
        values = [stored_value(translator, text, field, column)
                  for text, field, column in zip(texts, table.fields, arrow)]
        return cls(schema, values) if all(v is not None for v in values) else None

    def rows(self, batch: pa.RecordBatch) -> list[tuple]:
        """The table rows ``batch`` makes, in order; :class:`~.arrow_exprs.Fallback` as the translation raises it."""
        columns = [value(batch).to_pylist() for value in self.values]
        return list(zip(*columns))


def stored_value(translator: arrow_exprs.Translator, text: str, field: Field,
                 column: pa.Field) -> Callable[[pa.RecordBatch], pa.Array] | None:
    """``text``'s columnar value for table field ``field`` (an insert's value, an update's ``set``), or None when
    the row path's store could change it: only a value already of its field's kind into an int, double or string
    column (the row path's ``int()``/``float()`` then changes nothing), and only one with an exact translation."""
    if not (pa.types.is_integer(column.type) or pa.types.is_floating(column.type)
            or pa.types.is_string(column.type)):
        return None
    try:
        if kind_of(infer_type(parse_expression(text), translator.scope)) != kind_of(field.type):
            return None
        return translator.value(text, field.type)
    except (arrow_exprs.Unsupported, ValueError):
        return None


def truth_kept(translator: PairTranslator, where: str) -> bool:
    """Whether a table box's ``where`` holds on columns where its row path's does: that path converts the value to
    its inferred type before testing it (``compiled`` in :mod:`.table`), so ``input.d and T.w`` of 0.5 and 0.5 is
    int 0 there, false, where its truth on columns is true; only a value already of that type, or a bool, tests
    the same both ways (others keep the row path)."""
    try:
        translation = CodeBuilder(translator.scope).translate(where)
    except ExpressionError:  # (the columns' own translation refuses it and names why)
        return True
    return translation.kind in (kind_of(translation.type), BOOL)
