"""Borealis's table boxes: ``insert``, ``update``, ``delete`` and ``select`` over a ``<table>``'s keyed rows.

Each box runs its ``sql`` parameter (catalog/table_params.py) once per
input tuple, in arrival order, against the rows of its table
(:class:`~.table_rows.KeyedRows`, shared by every box of the node that
accesses the table):

* insert: the row the values make goes in, replacing the row of its key;
* update: every row the ``where`` predicate holds for (over ``input.x``
  and ``T.y``) gets the ``set`` values, all computed from the old row; a
  changed key moves the row (replacing a row that had the new key);
* delete: every matching row goes (``pass-deletions``: emitted, in table
  order);
* select: every matching row is emitted (the selected fields, in table
  order); ``pass-on-no-results``: an input nothing matched goes to port 1.

``pass-input`` passes each input tuple on once the box has applied it.
A row-at-a-time semantics: how a stream is cut into batches changes
nothing (tests/test_table_operators.py checks it against a reference).
None of these boxes reads or writes a changelog: a select's rows are
answers to its input tuples, not revisions of a view.

State (``state()``/``restore()``): the table's rows and version, in every
one of its boxes' state (node/operators/table_rows.py says why that
restores and moves the table once).

``select``, ``joinstatic`` and ``delete`` read a batch of Arrow columns
as a nested-loop join of the batch with the table's rows, ``insert``
evaluates its values on it (:mod:`.table_columns`), ``update`` applies it
on columns where no tuple's writes change what a later tuple matches
(:mod:`.table_update`), where their expressions translate exactly; else,
and for a batch the columns cannot treat exactly, a tuple at a time.  The
choice is made in one place, :meth:`TableOperator.read`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import numpy as np
import pyarrow as pa

from boreas.catalog.expressions import ExpressionError, Scope
from boreas.catalog.model import Box, Field, Schema
from boreas.catalog.table_params import (
    NUMERIC,
    TableParamError,
    TableSql,
    bound_table,
    flag,
    parse_sql,
    scope_of,
    selected,
)
from boreas.node.compile import CodeBuilder
from boreas.wire.columns import Columns, arrow_schema, as_rows

from .arrow_nodes import Fallback
from .base import Emitted, Operator, OperatorError, field_caster
from .join_paths import conformed
from .join_buffer import Unfit, rows_batch
from .table_columns import InsertValues, TableColumns
from .table_rows import KeyedRows
from .table_update import UpdateColumns

Pair = Callable[[tuple, tuple], Any]
R = TypeVar("R")


def compiled(text: str, scope: Scope, label: str) -> Pair:
    """``(input, row) -> value`` for an expression over the input tuple and a table row (None when it fails)."""
    builder = CodeBuilder(scope, ["inp", "row"][:len(scope.schemas)], label)
    value = builder.value(text)
    args = "inp, row" if len(scope.schemas) == 2 else "inp, row=None"
    return builder.define(f"def _expr({args}):\n    try:\n        return {value.source}\n"
                          f"    except _ERRORS:\n        return None\n", "_expr")


class TableOperator(Operator):
    """What the four table boxes share: their table, their SQL compiled, their state."""

    def __init__(self, box: Box, inputs: list[Schema], outputs: list[Schema]):
        super().__init__(box, inputs, outputs)
        self.check_outputs()
        try:
            self.table = bound_table(box)
            self.flags = {name: flag(box, name) for name in ("pass-input", "pass-deletions", "pass-on-no-results")}
            if box.type == "joinstatic":  # a predicate over left. (the input) and right. (a row), no SQL
                self.sql = TableSql("select", self.table.name, ("*",), where=box.param("predicate"))
                self.scope = Scope.join(inputs[0], self.table.schema)
            else:
                self.sql = parse_sql(box)
                self.scope = scope_of(self.sql, inputs[0], self.table.schema)
        except TableParamError as exc:
            raise OperatorError(str(exc)) from None
        schema = self.table.schema
        keys = tuple(i for i, f in enumerate(schema.fields) if f.name in self.table.keys)
        self.rows = KeyedRows(keys)  # its own until the node gives it the table's (attach)
        self.columns: TableColumns | InsertValues | UpdateColumns | None = None  # set by a box with a columnar path
        try:
            self.where: Pair | None = (compiled(self.sql.where, self.scope, box.name)
                                       if self.sql.where is not None else None)
        except ExpressionError as exc:
            raise self.error(str(exc)) from None

    def attach(self, rows: KeyedRows) -> None:
        """Work on the node's rows of the table (every box of the node that accesses it gets the same); rows
        this box restored before are kept when newer."""
        if rows is not self.rows:
            rows.adopt(self.rows.state())
            self.rows = rows

    @property
    def table_name(self) -> str:
        return self.table.name

    @property
    def key_indexes(self) -> tuple[int, ...]:
        return self.rows.keys

    def matches(self, tuple_in: tuple) -> list[tuple]:
        where = self.where
        if where is None:
            return self.rows.rows()
        return self.rows.matching(lambda row: bool(where(tuple_in, row)))

    def values(self, texts: list[tuple[int, str]]) -> list[tuple[int, Pair, Callable[[Any], Any]]]:
        """(table field index, expression, caster) for each (index, text): a value is stored as its field's type."""
        fields = self.table.schema.fields
        try:
            return [(i, compiled(text, self.scope, self.box.name),
                     field_caster(fields[i]) if kind_numeric(fields[i]) else _same) for i, text in texts]
        except ExpressionError as exc:
            raise self.error(str(exc)) from None

    def state_entries(self) -> int:
        return len(self.rows)

    @property
    def columnar(self) -> bool:
        """Whether batches are read on columns (where the box's expressions and schemas translate)."""
        return self.columns is not None

    def read(self, rows: list[tuple] | Columns, on_columns: Callable[[list[tuple] | Columns, pa.RecordBatch], R],
             on_rows: Callable[[list[tuple]], R]) -> R:
        """What ``on_columns`` makes of the batch where the columns are exact, else ``on_rows`` of its rows: the
        one place a table box chooses, batch by batch.  ``on_columns`` raises :class:`~.arrow_exprs.Fallback` or
        :class:`~.join_buffer.Unfit` (before it changes anything) for a batch, or a version of the table, the
        columns cannot treat exactly."""
        if isinstance(rows, Columns) and rows.weights is not None:  # the catalog refuses this
            raise self.error("cannot read a changelog: its rows answer input tuples, they do not revise a view")
        batch = self._column_batch(rows)
        if batch is not None:
            try:
                return on_columns(rows, batch)
            except (Fallback, Unfit):  # this batch (or this version of the table) is read as rows
                pass
        return on_rows(as_rows(rows))

    def _column_batch(self, rows: list[tuple] | Columns) -> pa.RecordBatch | None:
        """A batch as the columnar path reads it, or None when it is read as rows (no columnar path, or rows
        the columns cannot hold as they are)."""
        columns = self.columns
        if columns is None:
            return None
        if isinstance(rows, Columns):
            batch = conformed(rows.batch, columns.inputs)
            if batch is not None:
                return batch
        try:
            return rows_batch(as_rows(rows), columns.inputs)
        except Unfit:
            return None

    def state(self) -> dict:
        return self.rows.state()

    def restore(self, state: dict, now: float | None = None) -> None:
        self.rows.adopt(state)


def kind_numeric(field: Field) -> bool:
    return field.type in NUMERIC


def _same(value: Any) -> Any:
    return value


def _cast(caster: Callable[[Any], Any], value: Any) -> Any:
    return None if value is None else caster(value)


class InsertOperator(TableOperator):
    takes_columns = True  # a batch of Arrow columns has its values evaluated on columns (.table_columns)

    def __init__(self, box: Box, inputs: list[Schema], outputs: list[Schema], *, columnar: bool = True):
        """``columnar=False``: the row path only (the property tests' reference)."""
        super().__init__(box, inputs, outputs)
        self._values = self.values(list(enumerate(self.sql.values)))
        self.columns = InsertValues.make(inputs[0], self.table.schema, self.sql.values) if columnar else None

    def process(self, port: int, rows: list[tuple] | Columns, now: float) -> Emitted:
        made = self.read(rows, self._on_columns, self._on_rows)
        for row in made:
            self.rows.put(row)
        if not (self.flags["pass-input"] and rows):
            return []
        return [(0, rows if isinstance(rows, Columns) else list(rows))]

    def _on_columns(self, rows: list[tuple] | Columns, batch: pa.RecordBatch) -> list[tuple]:
        assert isinstance(self.columns, InsertValues)
        return self.columns.rows(batch)

    def _on_rows(self, rows: list[tuple]) -> list[tuple]:
        return [tuple(_cast(cast, value(tuple_in)) for _, value, cast in self._values) for tuple_in in rows]


class UpdateOperator(TableOperator):
    takes_columns = True  # a batch of Arrow columns is applied on columns where that is exact (.table_update)

    def __init__(self, box: Box, inputs: list[Schema], outputs: list[Schema], *, columnar: bool = True):
        """``columnar=False``: the row path only (the property tests' reference)."""
        super().__init__(box, inputs, outputs)
        names = [f.name for f in self.table.schema.fields]
        sets = [(names.index(name), text) for name, text in self.sql.sets]
        self._sets = self.values(sets)
        self.columns = (UpdateColumns.make(inputs[0], self.table.schema, self.sql.table, self.sql.where, sets)
                        if columnar else None)

    def process(self, port: int, rows: list[tuple] | Columns, now: float) -> Emitted:
        self.read(rows, self._on_columns, self._on_rows)
        if not (self.flags["pass-input"] and rows):
            return []
        return [(0, rows if isinstance(rows, Columns) else list(rows))]

    def _on_columns(self, rows: list[tuple] | Columns, batch: pa.RecordBatch) -> None:
        """The batch's writes found on columns, then made in the row path's order (:mod:`.table_update`)."""
        assert isinstance(self.columns, UpdateColumns)
        for old, new in self.columns.changes(batch, self.rows):
            if self.rows.holds(old):  # not overwritten by an earlier row of this batch that took its key
                self.rows.replace(old, new)

    def _on_rows(self, rows: list[tuple]) -> None:
        for tuple_in in rows:
            for old in self.matches(tuple_in):
                if not self.rows.holds(old):  # replaced by an earlier row of this update that took its key
                    continue
                new = list(old)
                for i, value, cast in self._sets:
                    new[i] = _cast(cast, value(tuple_in, old))
                self.rows.replace(old, tuple(new))


class DeleteOperator(TableOperator):
    takes_columns = True  # a batch of Arrow columns is read on columns where the where translates (.table_columns)

    def __init__(self, box: Box, inputs: list[Schema], outputs: list[Schema], *, columnar: bool = True):
        """``columnar=False``: the row path only (the property tests' reference)."""
        super().__init__(box, inputs, outputs)
        self.columns = (TableColumns.make(inputs[0], self.table.schema, ("input", self.sql.table), self.sql.where)
                        if columnar else None)
        if self.columns is not None and self.flags["pass-deletions"]:
            self._target = arrow_schema(outputs[0])
            if [f.type for f in self._target] != [f.type for f in self.columns.table]:
                self.columns = None

    def process(self, port: int, rows: list[tuple] | Columns, now: float) -> Emitted:
        deleted = self.read(rows, self._on_columns, self._on_rows)
        out: Emitted = []
        if self.flags["pass-deletions"] and deleted:
            out.append((0, deleted))
        if self.flags["pass-input"] and rows:
            out.append((1 if self.flags["pass-deletions"] else 0, rows if isinstance(rows, Columns) else list(rows)))
        return out

    def _on_columns(self, rows: list[tuple] | Columns, batch: pa.RecordBatch) -> list[tuple] | Columns:
        columns = self.columns
        assert isinstance(columns, TableColumns)
        table = columns.rows_batch(self.rows)
        gone = columns.first_matches(batch, table)
        if not len(gone):
            return []
        held = self.rows.rows()
        deleted = [held[j] for j in gone.tolist()]
        for row in deleted:
            self.rows.remove(row)
        if not self.flags["pass-deletions"] or not isinstance(rows, Columns):
            return deleted
        return Columns(pa.RecordBatch.from_arrays(table.take(pa.array(gone)).columns, schema=self._target))

    def _on_rows(self, rows: list[tuple]) -> list[tuple]:
        deleted: list[tuple] = []
        for tuple_in in rows:
            for row in self.matches(tuple_in):
                self.rows.remove(row)
                deleted.append(row)
        return deleted


class SelectOperator(TableOperator):
    takes_columns = True  # a batch of Arrow columns is read on columns where the where translates (.table_columns)

    def __init__(self, box: Box, inputs: list[Schema], outputs: list[Schema], *, columnar: bool = True):
        """``columnar=False``: the row path only (the property tests' reference; bench/aurorajoin_tables.py)."""
        super().__init__(box, inputs, outputs)
        names = [f.name for f in self.table.schema.fields]
        self._columns = [names.index(f.name) for f in selected(box, self.sql, self.table)]
        self.columns = (TableColumns.make(inputs[0], self.table.schema, ("input", self.sql.table), self.sql.where)
                        if columnar else None)
        if self.columns is not None:
            self._target = arrow_schema(outputs[0])
            if [f.type for f in self._target] != [self.columns.table.field(i).type for i in self._columns]:
                self.columns = None

    def process(self, port: int, rows: list[tuple] | Columns, now: float) -> Emitted:
        return self.read(rows, self._on_columns, self._on_rows)

    def _on_columns(self, rows: list[tuple] | Columns, batch: pa.RecordBatch) -> Emitted:
        columns = self.columns
        assert isinstance(columns, TableColumns)
        kept, counts = columns.matched(batch, columns.rows_batch(self.rows))
        offset = batch.num_columns
        found = [pa.RecordBatch.from_arrays([k.column(offset + i) for i in self._columns], schema=self._target)
                 for k in kept]
        out: Emitted = []
        if found:
            joined = found[0] if len(found) == 1 else pa.Table.from_batches(
                found, self._target).combine_chunks().to_batches()[0]
            out.append((0, Columns(joined) if isinstance(rows, Columns) else Columns(joined).rows()))
        if self.flags["pass-on-no-results"] and not counts.all():
            missed = np.flatnonzero(counts == 0)
            if isinstance(rows, Columns):
                out.append((1, Columns(batch.take(pa.array(missed)))))
            else:
                out.append((1, [rows[i] for i in missed.tolist()]))
        return out

    def _on_rows(self, rows: list[tuple]) -> Emitted:
        found: list[tuple] = []
        unmatched: list[tuple] = []
        for tuple_in in rows:
            matched = self.matches(tuple_in)
            found += [tuple(row[i] for i in self._columns) for row in matched]
            if not matched:
                unmatched.append(tuple_in)
        out: Emitted = [(0, found)] if found else []
        if self.flags["pass-on-no-results"] and unmatched:
            out.append((1, unmatched))
        return out


class JoinStaticOperator(TableOperator):
    """``joinstatic``: each input tuple joined with every table row its ``predicate`` holds for (in table order),
    as ``out-field.N`` over ``left.``/``right.``, or the input's fields then the row's."""

    takes_columns = True  # a batch of Arrow columns is joined on columns where the box translates (.table_columns)

    def __init__(self, box: Box, inputs: list[Schema], outputs: list[Schema], *, columnar: bool = True):
        """``columnar=False``: the row path only (the property tests' reference; bench/aurorajoin_tables.py)."""
        super().__init__(box, inputs, outputs)
        texts = [box.param(f"out-field.{i}") for i in range(len(outputs[0].fields))]
        try:
            self._fields = ([compiled(str(t), self.scope, box.name) for t in texts]
                            if box.param("out-field.0") is not None else None)
        except ExpressionError as exc:
            raise self.error(str(exc)) from None
        outs = tuple(str(t) for t in texts) if self._fields is not None else ()
        self.columns = (TableColumns.make(inputs[0], self.table.schema, ("left", "right"), self.sql.where, outs,
                                          outputs[0]) if columnar else None)

    def process(self, port: int, rows: list[tuple] | Columns, now: float) -> Emitted:
        return self.read(rows, self._on_columns, self._on_rows)

    def _on_columns(self, rows: list[tuple] | Columns, batch: pa.RecordBatch) -> Emitted:
        columns = self.columns
        assert isinstance(columns, TableColumns)
        kept, _ = columns.matched(batch, columns.rows_batch(self.rows))
        if not kept:
            return []
        joined = columns.out(kept)
        return [(0, Columns(joined) if isinstance(rows, Columns) else Columns(joined).rows())]

    def _on_rows(self, rows: list[tuple]) -> Emitted:
        out: list[tuple] = []
        fields = self._fields
        for tuple_in in rows:
            for row in self.matches(tuple_in):
                out.append(tuple(f(tuple_in, row) for f in fields) if fields is not None else tuple_in + row)
        return [(0, out)] if out else []


#: The operator of each table box type (node/operators/registry.py).
TABLE_OPERATORS = (("insert", InsertOperator), ("update", UpdateOperator), ("delete", DeleteOperator),
                   ("select", SelectOperator), ("joinstatic", JoinStaticOperator))
