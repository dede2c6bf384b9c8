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
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

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

from .base import Emitted, Operator, OperatorError, field_caster
from .table_rows import KeyedRows

Pair = Callable[[tuple, tuple], Any]


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
    def __init__(self, box: Box, inputs: list[Schema], outputs: list[Schema]):
        super().__init__(box, inputs, outputs)
        self._values = self.values(list(enumerate(self.sql.values)))

    def process(self, port: int, rows: list[tuple], now: float) -> Emitted:
        for tuple_in in rows:
            self.rows.put(tuple(_cast(cast, value(tuple_in)) for _, value, cast in self._values))
        return [(0, list(rows))] if self.flags["pass-input"] and rows else []


class UpdateOperator(TableOperator):
    def __init__(self, box: Box, inputs: list[Schema], outputs: list[Schema]):
        super().__init__(box, inputs, outputs)
        names = [f.name for f in self.table.schema.fields]
        self._sets = self.values([(names.index(name), text) for name, text in self.sql.sets])

    def process(self, port: int, rows: list[tuple], now: float) -> Emitted:
        for tuple_in in rows:
            for old in self.matches(tuple_in):
                if not self.rows.holds(old):  # replaced by an earlier row of this update that took its key
                    continue
                new = list(old)
                for i, value, cast in self._sets:
                    new[i] = _cast(cast, value(tuple_in, old))
                self.rows.replace(old, tuple(new))
        return [(0, list(rows))] if self.flags["pass-input"] and rows else []


class DeleteOperator(TableOperator):
    def process(self, port: int, rows: list[tuple], now: float) -> Emitted:
        deleted: list[tuple] = []
        for tuple_in in rows:
            for row in self.matches(tuple_in):
                self.rows.remove(row)
                deleted.append(row)
        out: Emitted = []
        if self.flags["pass-deletions"] and deleted:
            out.append((0, deleted))
        if self.flags["pass-input"] and rows:
            out.append((1 if self.flags["pass-deletions"] else 0, list(rows)))
        return out


class SelectOperator(TableOperator):
    def __init__(self, box: Box, inputs: list[Schema], outputs: list[Schema]):
        super().__init__(box, inputs, outputs)
        names = [f.name for f in self.table.schema.fields]
        self._columns = [names.index(f.name) for f in selected(box, self.sql, self.table)]

    def process(self, port: int, rows: list[tuple], now: float) -> Emitted:
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

    def __init__(self, box: Box, inputs: list[Schema], outputs: list[Schema]):
        super().__init__(box, inputs, outputs)
        texts = [box.param(f"out-field.{i}") for i in range(len(outputs[0].fields))]
        try:
            self._fields = ([compiled(str(t), self.scope, box.name) for t in texts]
                            if box.param("out-field.0") is not None else None)
        except ExpressionError as exc:
            raise self.error(str(exc)) from None

    def process(self, port: int, rows: list[tuple], now: float) -> Emitted:
        out: list[tuple] = []
        fields = self._fields
        for tuple_in in rows:
            for row in self.matches(tuple_in):
                out.append(tuple(f(tuple_in, row) for f in fields) if fields is not None else tuple_in + row)
        return [(0, out)] if out else []


#: The operator of each table box type (node/operators/registry.py).
TABLE_OPERATORS = (("insert", InsertOperator), ("update", UpdateOperator), ("delete", DeleteOperator),
                   ("select", SelectOperator), ("joinstatic", JoinStaticOperator))
