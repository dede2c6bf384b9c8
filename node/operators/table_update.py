"""An ``update``'s batch applied on Arrow columns where that is provably what the per-tuple statement does.

The row path (``UpdateOperator`` in :mod:`.table`) runs the statement once
per input tuple against the table as the tuples before it left it: for
tuple i, every row its ``where`` holds for, in the table's order then, gets
the ``set`` values computed from (tuple i, the old row), and
:meth:`~.table_rows.KeyedRows.replace` writes it (a changed key moves the
row; a row a move overwrote is skipped, ``holds``).

Let T0 be the table when the batch comes and J_i the T0 rows tuple i
matches.  When

* **A** -- every T0 row is matched by at most one tuple (the J_i are
  disjoint), and
* **B** -- no row an update writes matches a *later* tuple of the batch,

the rows tuple i finds are J_i, in T0's order, less the ones an earlier
tuple's key move overwrote: an earlier update only wrote rows that do not
match i (B), never touched a row of J_i (A), and moves take rows to the
end or overwrite in place, keeping the others' order.  So the row path's
writes are the pairs (i, j) of the columnar match of the batch with T0,
ordered by i then j, each new row computed from T0's row -- which is what
:meth:`UpdateColumns.changes` computes on columns (the pairs by
``select``'s :class:`~.table_columns.TableColumns`, the ``set`` values by
``join``'s pair translation), and the operator writes them in that order
with the same ``holds``/``replace`` (so the same versions, moves and
overwrites).

A batch for which A or B does not hold -- found on columns before anything
is written -- raises :class:`PerTuple` and that batch alone takes the
per-tuple path; so does a batch the columns cannot treat exactly
(:class:`~.arrow_exprs.Fallback`, :class:`~.join_buffer.Unfit`).  A box
whose ``where`` or ``set`` values have no exact translation, or a ``set``
value not already of its field's kind in an int, double or string column
(the row path's ``int()``/``float()`` would change it), keeps the row path
(:meth:`UpdateColumns.make` says None).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pyarrow as pa

from boreas.catalog.model import Schema

from .arrow_nodes import Fallback
from .join_columns import PairTranslator
from .table_columns import TableColumns, stored_value
from .table_rows import KeyedRows


class PerTuple(Fallback):
    """The batch repeats a row's match or an updated row matches a later tuple: it takes the per-tuple path."""


class UpdateColumns:
    """An update's ``where`` and ``set`` values on columns (the module docstring)."""

    def __init__(self, pairs: TableColumns, sets: list[tuple[int, Callable[[pa.RecordBatch], pa.Array]]]) -> None:
        self.pairs = pairs
        self.sets = sets  # (table field index, pair batch -> column of the field's Arrow type)
        self.inputs = pairs.inputs

    @classmethod
    def make(cls, inputs: Schema, table: Schema, name: str, where: str | None,
             sets: list[tuple[int, str]]) -> "UpdateColumns | None":
        """The columnar path of ``update <name> set ... [where ...]``, or None (the box keeps its row path)."""
        pairs = TableColumns.make(inputs, table, ("input", name), where)
        if pairs is None:
            return None
        translator = PairTranslator(inputs, table, ("input", name), per_row=True, nullable=True)
        values = [(i, stored_value(translator, text, table.fields[i], pairs.table.field(i))) for i, text in sets]
        if any(value is None for _, value in values):
            return None
        return cls(pairs, values)  # type: ignore[arg-type]

    def changes(self, batch: pa.RecordBatch, rows: KeyedRows) -> list[tuple[tuple, tuple]]:
        """(old row, new row) of every write the batch's tuples make, in the row path's order; nothing is
        written here.  :class:`PerTuple` when A or B fails, :class:`~.arrow_exprs.Fallback` or
        :class:`~.join_buffer.Unfit` when the columns cannot be exact."""
        table = self.pairs.rows_batch(rows)
        found = []
        seen = np.zeros(table.num_rows, dtype=bool)
        for block in self.pairs.held(batch, table):  # A checked block by block: no n x m pairs kept to refuse
            matched = block[2]
            if seen[matched].any() or len(np.unique(matched)) != len(matched):
                raise PerTuple("a table row matched by two tuples of the batch")
            seen[matched] = True
            found.append(block)
        if not found:
            return []
        i = np.concatenate([f[1] for f in found])
        j = np.concatenate([f[2] for f in found])
        kept = found[0][0] if len(found) == 1 else pa.Table.from_batches([f[0] for f in found]).combine_chunks(
            ).to_batches()[0]
        values = {at: value(kept) for at, value in self.sets}
        updated = table.take(pa.array(j, pa.int64()))
        written = pa.RecordBatch.from_arrays([values.get(k, c) for k, c in enumerate(updated.columns)],
                                             schema=table.schema)
        for later, n in ((f[1], f[2]) for f in self.pairs.held(batch, written)):
            if (later > i[n]).any():
                raise PerTuple("an updated row matches a later tuple of the batch")
        held = rows.rows()
        olds = [held[k] for k in j.tolist()]
        news = [list(old) for old in olds]
        for at, column in values.items():
            for new, value in zip(news, column.to_pylist()):
                new[at] = value
        return list(zip(olds, map(tuple, news)))
