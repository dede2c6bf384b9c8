"""One side's buffer of a join on columns: Arrow rows in arrival order, trimmed as Borealis trims them.

:class:`ColumnBuffer` is the one owner of a side's buffered tuples (an Arrow
table, appended a batch at a time and sliced from its oldest end) and, with
a ``timeout``, of their arrival times (a numpy array beside it).  It trims
exactly as the row path (:mod:`.join_rows`) does tuple by tuple:

* TUPLES: the newest ``size`` tuples stay;
* VALUES: after each new tuple, the oldest leave while the new one's order
  value is ``>= size`` past theirs (a None on either side: it leaves).  A
  batch whose order values, after what is buffered, never decrease (no
  None, no nan, ints a double holds exactly) is trimmed once, where the
  last tuple would leave it: with values in order, each tuple's cut is at
  or before the next one's.  Any other batch is trimmed value by value, as
  the row path does (an out-of-order stream is rare and still correct);
* ``timeout``: before each batch, tuples that arrived that long ago leave.

>>> import pyarrow as pa
>>> b = ColumnBuffer(pa.schema([("t", pa.int32())]), size=10, order=0, timed=False)
>>> b.append(pa.record_batch([pa.array([0, 5, 10, 14], pa.int32())], names=["t"]), 0.0)
>>> b.rows()
[(5,), (10,), (14,)]
>>> b.append(pa.record_batch([pa.array([20, 3], pa.int32())], names=["t"]), 0.0)  # 3 is out of order
>>> b.rows()
[(14,), (20,), (3,)]
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

#: Order values a double holds exactly with room for a difference: the fast trim compares in doubles.
EXACT = 2**52


class ColumnBuffer:
    """A side's buffered tuples and arrival times (the module docstring says how it trims)."""

    def __init__(self, schema: pa.Schema, size: float, order: int | None, timed: bool) -> None:
        self.schema = schema
        self.size = size
        self.order = order  # the order-on-field's index with VALUES; None: TUPLES
        self.table = schema.empty_table()
        self.times: np.ndarray | None = np.empty(0) if timed else None
        self._batch: pa.RecordBatch | None = None  # the table as one batch, until it changes

    def __len__(self) -> int:
        return self.table.num_rows

    def batch(self) -> pa.RecordBatch:
        """The buffered tuples as one record batch, oldest first (made once per change)."""
        if self._batch is None:
            table = self.table.combine_chunks()
            self.table = table
            batches = table.to_batches()
            self._batch = batches[0] if len(batches) == 1 else pa.RecordBatch.from_arrays(
                [pa.concat_arrays([b.column(i) for b in batches]) if batches else pa.array([], f.type)
                 for i, f in enumerate(self.schema)], schema=self.schema)
        return self._batch

    def rows(self) -> list[tuple]:
        batch = self.batch()
        columns = [c.to_pylist() for c in batch.columns]
        return list(zip(*columns)) if columns else [() for _ in range(batch.num_rows)]

    def expire(self, limit: float) -> None:
        """Drop the oldest tuples while they arrived at or before ``limit``."""
        assert self.times is not None
        late = self.times > limit
        drop = int(np.argmax(late)) if late.any() else len(self.times)
        self._drop(drop)

    def append(self, batch: pa.RecordBatch, now: float) -> None:
        """Buffer a batch's tuples (arrived at ``now``), then trim as the row path would after each."""
        if not batch.num_rows:
            return
        self.table = pa.concat_tables([self.table, pa.Table.from_batches([batch], self.schema)])
        self._batch = None
        if self.times is not None:
            self.times = np.concatenate([self.times, np.full(batch.num_rows, now)])
        if self.order is None:
            self._drop(max(0, len(self) - int(self.size)))
        else:
            self._drop(self._value_cut(len(self) - batch.num_rows))

    def _value_cut(self, first_new: int) -> int:
        """How many of the oldest tuples the VALUES trim drops, the new ones starting at ``first_new``."""
        column = self.table.column(self.order)
        values = column.to_numpy() if not column.null_count else None
        if values is not None and values.dtype.kind in "iu" and len(values) and np.abs(values).max() >= EXACT:
            values = None
        if values is not None:
            values = values.astype(np.float64, copy=False)
            if not np.isnan(values).any() and (len(values) < 2 or (np.diff(values) >= 0).all()):
                too_old = (values[-1] - values) >= self.size
                return int(np.argmin(too_old)) if not too_old.all() else len(values)
        return self._cut_by_rows(column.to_pylist(), first_new)

    def _cut_by_rows(self, values: list, first_new: int) -> int:
        """:func:`~.join_rows.trim` after each new value in turn: where the oldest kept tuple ends up."""
        cut, size = 0, self.size
        for k in range(first_new, len(values)):
            new = values[k]
            while cut <= k:
                try:
                    too_old = new - values[cut] >= size
                except TypeError:  # a None order value: it cannot be placed, so it goes
                    too_old = True
                if not too_old:
                    break
                cut += 1
        return cut

    def _drop(self, count: int) -> None:
        if count <= 0:
            return
        self.table = self.table.slice(count)
        self._batch = None
        if self.times is not None:
            self.times = self.times[count:]

    def shift_times(self, delta: float) -> None:
        if self.times is not None:
            self.times = self.times + delta

    def load(self, rows: list[tuple], times: list[float] | None) -> None:
        """Hold ``rows`` (arrived at ``times``) as they are, untrimmed (a restore)."""
        self.table = pa.Table.from_batches([rows_batch(rows, self.schema)], self.schema)
        self._batch = None
        if self.times is not None:
            self.times = np.array(times if times is not None else [], dtype=np.float64)
            if len(self.times) != len(self.table):
                raise ValueError("buffer and arrival times differ in length")


class Unfit(Exception):
    """Rows whose values the side's Arrow columns cannot hold as the rows have them: the box reads rows."""


def rows_batch(rows: list[tuple], schema: pa.Schema) -> pa.RecordBatch:
    """Rows as a batch of ``schema``, every value exactly as in the row (else :class:`Unfit`)."""
    columns = []
    for i, field in enumerate(schema):
        values = [r[i] for r in rows]
        try:
            column = pa.array(values, field.type)
        except (OverflowError, TypeError, pa.ArrowInvalid, pa.ArrowTypeError) as exc:
            raise Unfit(f"{field.name}: {exc}") from None
        if pa.types.is_floating(field.type) or pa.types.is_integer(field.type):
            back = column.to_pylist()
            if any(type(a) is not type(b) or a != b for a, b in zip(back, values) if a == a or b == b):
                raise Unfit(f"{field.name}: a value its Arrow type changes")
        columns.append(column)
    return pa.RecordBatch.from_arrays(columns, schema=schema)
