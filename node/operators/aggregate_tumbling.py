"""Tumbling windows by TUPLES on columns, any size: the windows a batch opens and closes built as columns.

:class:`~.aggregate_tuples.TupleRuns` works a batch out a *span* at a time,
with a few Python steps per window: fine for windows of many tuples, but a
window of 1 to 3 tuples costs more that way than the row path's tuple at a
time, so such batches read rows before branch colAggF.  With ``advance``
equal to ``window-size`` (tumbling, the common case) the windows are fixed
by counts alone, so this module places them with numpy for the whole batch:

* per group (rows sorted by group code, stably, so in arrival order), its
  one open window holding ``c`` tuples takes the group's first
  ``size - c`` rows (the *head*), and every later ``size`` rows are one new
  window; the group's last, shorter stretch stays open;
* each window's partials are one ``reduceat`` per function
  (:class:`~.aggregate_runs.Runs`), and the windows opened *and* closed
  inside the batch become out rows straight from those arrays
  (:func:`~.aggregate_emit.result_columns`): no window list is made;
* the head (an earlier batch's window) is added to and, when it fills,
  emitted by the box's emitter; a group's last stretch becomes its open
  window, as :meth:`~.aggregate_windows.GroupWindows.by_tuples` leaves it.

As on rows: closed windows leave in the batch order of the tuples that
close them (a stable argsort of those positions), windows take their
numbers (``seq``) in the order of the tuples that open them, timeouts start
in number order (:meth:`~.aggregate_windows.GroupWindows.retime`), and a new
group joins the book in the order of its first tuple -- so outputs, their
order, counters and ``state()`` are the row path's (tests/test_aggregate_tuples.py
and tests/test_aggregate_columns_nulls.py compare them).  Taken: tumbling
tuple windows whose functions :func:`~.aggregate_emit.vectorised` takes;
a function without a value in a window (a NULL argument throughout) gives
the accumulators' result of its untouched slots (:func:`~.aggregate_emit.no_values`).
"""

from __future__ import annotations

import operator
from typing import Any

import numpy as np
import pyarrow as pa

from boreas.catalog.model import Schema

from .accumulators import COUNT
from .aggregate_columns import add_part
from .aggregate_emit import RowShape, no_values, vectorised, window_rows
from .aggregate_runs import Function, Runs
from .aggregate_windows import GroupWindows, WindowSpec


class TumblingTuples:
    """A plain batch through tumbling tuple windows at once (module doc); no state of its own."""

    def __init__(self, functions: list[Function], start_field: int | None, spec: WindowSpec,
                 windows: GroupWindows, shape: RowShape):
        self._functions, self._start_field = functions, start_field
        self._size, self._slots = int(spec.size), spec.slots
        self._windows, self._shape = windows, shape
        self._empty = no_values(shape, spec)

    @classmethod
    def make(cls, functions: list[Function], schema: Schema, start_field: int | None, spec: WindowSpec,
             windows: GroupWindows) -> "TumblingTuples | None":
        """This path for a tumbling TUPLES box with :func:`~.aggregate_emit.vectorised` functions, else None."""
        shape = windows.emit
        if spec.by_values or spec.advance != spec.size or not isinstance(shape, RowShape):
            return None
        return cls(functions, start_field, spec, windows, shape) if vectorised(functions, schema) else None

    def take(self, batch: pa.RecordBatch, perm: np.ndarray, bounds: list[int], keys: list, now: float,
             out: list[tuple]) -> None:
        """Add a batch whose rows, in group order (``perm``), are the groups ``keys`` between ``bounds``."""
        n, size, windows = batch.num_rows, self._size, self._windows
        heads: list[list | None] = []
        head_len = np.zeros(len(keys), np.int64)
        for g, key in enumerate(keys):
            wins = windows.tuple_windows(key)
            heads.append(wins[0] if wins else None)  # tumbling: at most one open window
            if wins:
                head_len[g] = min(size - wins[0][COUNT], bounds[g + 1] - bounds[g])
        offsets = np.asarray(bounds[:-1], np.int64)
        sizes = np.diff(np.asarray(bounds, np.int64))
        local = np.arange(n, dtype=np.int64) - np.repeat(offsets, sizes)
        k0 = np.repeat(head_len, sizes)
        cut = (local == 0) | ((local >= k0) & ((local - k0) % size == 0))
        starts = np.flatnonzero(cut)
        runs = Runs(batch, self._functions, perm, np.zeros(n, np.int64), np.ones(n, bool), starts,
                    [None] * len(starts), np.zeros(len(starts), np.int64))
        group = np.repeat(np.arange(len(keys)), sizes)[starts]
        is_head = (local[starts] == 0) & (head_len[group] > 0)
        lengths = runs.length_array
        full = ~is_head & (lengths == size)
        ends = starts + lengths - 1
        closing_row, opening_row = perm[ends], perm[starts]
        # new windows take numbers in the order of their opening tuples (closed or not)
        new = np.flatnonzero(~is_head)
        rank = np.empty(len(new), np.int64)
        rank[np.argsort(opening_row[new], kind="stable")] = np.arange(len(new))
        first_seq = windows.number(len(new))
        seq = np.zeros(len(starts), np.int64)
        seq[new] = first_seq + rank
        # the earlier batches' windows: added to, emitted when full
        parts = runs.whole_part
        head_rows: list[tuple] = []
        head_at: list[int] = []
        closed_heads: list[list] = []
        for s in np.flatnonzero(is_head).tolist():
            w = heads[int(group[s])]
            add_part(self._functions, w, parts(s))  # type: ignore[arg-type]
            if w[COUNT] >= size:  # type: ignore[index]
                windows.emit(keys[int(group[s])], w, head_rows)
                head_at.append(int(closing_row[s]))
                closed_heads.append(w)  # type: ignore[arg-type]
        # each group's last new stretch, when shorter than a window: its open window
        still: dict[int, list] = {}
        opened: list[tuple[int, Any, list]] = []
        starts_of = self._start_values(batch, opening_row)
        for s in np.flatnonzero(~is_head & ~full).tolist():
            g = int(group[s])
            w = [starts_of(s), None, now, int(seq[s]), 0, *self._slots]
            add_part(self._functions, w, parts(s))
            still[g] = w
            opened.append((int(seq[s]), keys[g], w))
        for g in sorted(range(len(keys)), key=lambda g: int(perm[bounds[g]])):  # new groups in first-row order
            w = still.get(g)
            head = heads[g]
            windows.set_tuple_windows(keys[g], [w] if w is not None else
                                      [head] if head is not None and head[COUNT] < size else [])
        inner = np.flatnonzero(full)
        rows = self._rows(runs, inner, keys, group, starts_of)
        if head_rows:
            rows += head_rows
        if rows:
            at = np.concatenate((closing_row[inner], np.asarray(head_at, np.int64)))
            order = np.argsort(at, kind="stable").tolist()
            out.extend(operator.itemgetter(*order)(rows) if len(rows) > 1 else rows)
        opened.sort(key=lambda e: e[0])
        windows.retime(closed_heads, [(key, w) for _, key, w in opened])

    def _start_values(self, batch: pa.RecordBatch, opening_row: np.ndarray):
        """Window ``s``'s start value (the order field at its first tuple), or None without ``order-by`` FIELD."""
        if self._start_field is None:
            return lambda s: None
        values = batch.column(self._start_field).take(pa.array(opening_row, pa.int64())).to_pylist()
        return values.__getitem__

    def _rows(self, runs: Runs, inner: np.ndarray, keys: list, group: np.ndarray, starts_of) -> list[tuple]:
        """The out rows of the windows opened and closed inside the batch, in run order."""
        if not len(inner):
            return []
        shape = self._shape
        columns: list[list] = []
        if shape.width:
            picked = [keys[g] for g in group[inner].tolist()]
            columns += [picked] if shape.width == 1 else [list(c) for c in zip(*picked)]
        if shape.start_cast is not None:
            cast = shape.start_cast
            columns.append([None if v is None else cast(v) for v in (starts_of(s) for s in inner.tolist())])

        def slow(s: int) -> tuple:
            """An integer average beyond 2**53: the emitter's row."""
            rows: list[tuple] = []
            w = [starts_of(s), None, 0.0, -1, 0, *self._slots]
            add_part(self._functions, w, runs.whole_part(s))
            self._windows.emit(keys[int(group[s])], w, rows)
            return rows[0]
        return window_rows(self._functions, runs, inner, columns, self._empty, slow)
