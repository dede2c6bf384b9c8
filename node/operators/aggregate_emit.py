"""Closing and emitting the windows of a batch at once: out rows built from the runs' arrays, not window by window.

When a batch of an in-order stream into tumbling windows by VALUES holds
many windows' worth of tuples (:meth:`~.aggregate_columns.ColumnRuns._chained`'s
case), each group's runs lie in consecutive windows: the first run may
finish the group's hot window, every other run *is* one window, which opens
and closes inside the batch, and the last run's window stays open.  The
windows in between never need a window list: their out row is their run's
partials (:class:`~.aggregate_runs.Partials`), their start the group's next
start advanced once per run.  :class:`BatchEmit` checks a whole batch for
that case (numpy over the runs, one Python step per *group*), then builds
the out rows of every window the batch closes as columns (group fields,
start, one column per function, with numpy), puts them in the order the row
path emits them (by the batch position of the run that closes each: a
stable argsort) and zips them into rows once.  Each group's hot window is
closed by :meth:`~.aggregate_windows.GroupWindows.close_hot` (it may hold
tuples of earlier batches) and its last window handed over open with
:meth:`~.aggregate_windows.GroupWindows.carry_on`, numbered as the row path
numbers it.

Exactness (tests/test_aggregate_columns.py checks it against the rows): a
window start is ``start + advance`` repeated, as the row path adds it
(``np.add.accumulate`` adds in order); a window's sum is ``0 + run sum`` as
``add`` makes it (``-0.0`` becomes ``0.0``); an average divides in float64
what Python divides (integer sums only below 2**53, else the per-window
path); count, min and max are exact.  Taken: count, sum, avg, min and max of
integer or floating fields (the result then needs no coercion) and
count(*); any other function, a bool field, mixed int and float window
bounds, or a run that breaks the chain leaves the batch, unchanged, to the
per-window path.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import Any, Protocol, runtime_checkable

import numpy as np
import pyarrow as pa

from boreas.catalog.model import Schema
from boreas.wire.columns import arrow_schema

from .accumulators import COUNT, END, START
from .aggregate_runs import Function, Part, Runs
from .aggregate_windows import GroupWindows, WindowSpec

#: The functions whose out value is built from the runs' arrays.
VECTORISED = ("count", "sum", "avg", "min", "max")

#: Fewer windows per group than this opening and closing inside a batch leave it to the per-window path
#: (measured with bench/aggregate_columns.py: at ~2 a group, batches of 2,000, the per-window path is
#: faster; at ~30 a group, batches of 20,000, this is 1.7x faster).
MIN_INNER = 8

_EXACT_INT = 2 ** 53  # below this an int64 converts to float64 exactly


@runtime_checkable
class RowShape(Protocol):
    """The out row of a closed window (the box's ``Emitter``): group fields, an optional start, the functions."""

    width: int
    start_cast: Callable[[Any], Any] | None
    result: Callable[[list], tuple]
    drop_empty: bool


def no_values(shape: RowShape, spec: WindowSpec) -> tuple:
    """Per function, its result for a window in which it saw no value (all NULL): the accumulators' result of
    untouched slots, which each function reads alone (its NULL, or its type's zero)."""
    return shape.result([None, None, 0.0, 0, 0, *spec.slots, 0])


class BatchEmit:
    """Emits a batch's closed windows as columns for :class:`~.aggregate_columns.ColumnRuns` (module doc)."""

    def __init__(self, functions: list[Function], spec: WindowSpec, windows: GroupWindows, shape: RowShape,
                 add: Callable[[list, Part], None]):
        self._functions, self._spec, self._windows, self._shape, self._add = functions, spec, windows, shape, add
        self._empty = no_values(shape, spec)

    @classmethod
    def make(cls, functions: list[Function], schema: Schema, spec: WindowSpec, windows: GroupWindows,
             add: Callable[[list, Part], None]) -> "BatchEmit | None":
        """The batch emission for a box of this shape, or None (the per-window path emits)."""
        shape = windows.emit
        if not isinstance(shape, RowShape) or spec.advance != spec.size or spec.slack or spec.timeout is not None:
            return None
        return cls(functions, spec, windows, shape, add) if vectorised(functions, schema) else None

    def take(self, runs: Runs, now: float, out: list[tuple]) -> bool:
        """Add the batch's runs and emit what closes, as the row path would; False, before anything changes,
        when the batch is not the chained case (module doc)."""
        windows, spec = self._windows, self._spec
        if not windows.chains() or not bool(runs.valid_array.all()):
            return False
        lo, hi, keys = runs.lo_array, runs.hi_array, runs.keys
        floats = lo.dtype.kind == "f"
        size = spec.size
        if not (_fits(size, floats) or floats and isinstance(size, int) and abs(size) < _EXACT_INT):
            return False
        n_runs = len(keys)
        bounds = np.flatnonzero(runs.codes[1:] != runs.codes[:-1]) + 1
        if n_runs - 2 * (len(bounds) + 1) < MIN_INNER * (len(bounds) + 1):
            return False  # few windows open and close inside the batch: the per-window path is cheaper
        firsts = [0, *bounds.tolist()]
        lasts = [*bounds.tolist(), n_runs]
        beyond = spec.beyond
        plan: list[tuple[Any, list, int, int, int]] = []  # key, hot window, first rolling run, its end, group
        starts = np.empty(n_runs, dtype=np.float64 if floats else np.int64)
        for a, b in zip(firsts, lasts):
            key = keys[a]
            w = windows.hot(key)
            g = windows.groups.get(key)
            if w is None or g is None or len(g[1]) != 1 or w[beyond] != 0 or not _fits(g[0], floats):
                return False
            inside = w[START] <= lo[a] and hi[a] < w[END]
            if not inside and not (w[COUNT] and w[END] <= lo[a]):
                return False
            r0 = a + 1 if inside else a
            if r0 < b:
                if floats:  # in order: start + advance repeated, as the row path adds
                    steps = np.full(b - r0, size, dtype=np.float64)
                    steps[0] = g[0]
                    starts[r0:b] = np.add.accumulate(steps)
                else:
                    starts[r0:b] = np.arange(b - r0, dtype=np.int64) * size + g[0]  # exact for ints
            plan.append((key, w, r0, b, a))
        rolling = np.ones(n_runs, bool)
        for _, _, r0, _, a in plan:
            rolling[a:r0] = False
        s = starts[rolling]
        if not (bool((s <= lo[rolling]).all()) and bool((hi[rolling] < s + size).all())):
            return False
        # the case holds: from here on the batch is taken
        add, part = self._add, runs.whole_part
        for _, w, r0, _, a in plan:
            if r0 > a:
                add(w, part(a))
        opened = np.flatnonzero(rolling)
        order = np.argsort(runs.first_row_array[opened], kind="stable")
        rank = np.empty(len(opened), np.int64)
        rank[order] = np.arange(len(opened))
        seq_of = dict(zip(opened.tolist(), (windows.number(len(opened)) + rank).tolist()))
        hot_rows: list[tuple] = []
        hot_at: list[int] = []
        inner: list[np.ndarray] = []
        for key, w, r0, b, _ in plan:
            if r0 == b:
                continue  # no run past the hot window: nothing closes
            windows.close_hot(key, hot_rows)
            if len(hot_rows) > len(hot_at):
                hot_at.append(runs.first_rows[r0])
            if b - r0 > 1:
                inner.append(np.arange(r0, b - 1))
            last = b - 1
            begin = starts[last].item()
            new = [begin, begin + size, now, seq_of[last], 0, *spec.slots, 0]
            add(new, part(last))
            horizon = (starts[last - 1] + size).item() if b - r0 > 1 else w[END]
            windows.carry_on(key, new, begin + spec.advance, horizon)
        closed = np.concatenate(inner) if inner else np.zeros(0, np.int64)
        rows = self._rows(runs, closed, starts) + hot_rows
        if not rows:
            return True
        at = np.concatenate((runs.first_row_array[closed + 1], np.asarray(hot_at, dtype=np.int64)))
        ordered = np.argsort(at, kind="stable").tolist()
        out.extend(operator.itemgetter(*ordered)(rows) if len(rows) > 1 else rows)
        return True

    def _rows(self, runs: Runs, closed: np.ndarray, starts: np.ndarray) -> list[tuple]:
        """The out rows of the windows of runs ``closed`` (each a whole window), as columns zipped once."""
        if not len(closed):
            return []
        shape = self._shape
        columns: list[list] = []
        if shape.width:
            keys = np.empty(len(runs.keys), dtype=object)
            keys[:] = runs.keys
            picked = keys[closed].tolist()
            columns += [picked] if shape.width == 1 else [list(c) for c in zip(*picked)]
        if shape.start_cast is not None:
            begin = starts[closed]
            if shape.start_cast is float:
                columns.append(begin.astype(np.float64).tolist())
            elif begin.dtype.kind == "i":
                columns.append(begin.tolist())
            else:
                columns.append([shape.start_cast(x) for x in begin.tolist()])
        return window_rows(self._functions, runs, closed, columns, self._empty,
                           lambda r: self._slow_row(runs, r, starts))

    def _slow_row(self, runs: Runs, r: int, starts: np.ndarray) -> tuple:
        """Run ``r``'s window's row as the emitter makes it (an integer average beyond 2**53)."""
        rows: list[tuple] = []
        begin = starts[r].item()
        w = [begin, begin + self._spec.size, 0.0, 0, 0, *self._spec.slots, 0]
        self._add(w, runs.whole_part(r))
        self._windows.emit(runs.keys[r], w, rows)
        return rows[0]


def vectorised(functions: list[Function], schema: Schema) -> bool:
    """Whether every function's out value can be built from the runs' arrays: :data:`VECTORISED` functions of
    integer or floating fields (bool and the rest: the result's coercion is the per-window path's) or count(*)."""
    arrow = arrow_schema(schema)
    for f in functions:
        if f.func not in VECTORISED:
            return False
        if f.field is not None:
            kind = arrow.field(f.field).type
            if not (pa.types.is_integer(kind) or pa.types.is_floating(kind)):
                return False
    return True


def result_columns(functions: list[Function], runs: Runs, closed: np.ndarray,
                   empty: tuple) -> tuple[list[list], np.ndarray]:
    """One out column per function for the windows that are runs ``closed`` (each a whole window), as the
    accumulators' ``result`` makes them (a function that saw no value: its ``empty`` result, :func:`no_values`),
    and a mask of the windows whose values there are placeholders: an integer average beyond 2**53 (those
    windows' rows are the emitter's: :func:`window_rows`)."""
    columns: list[list] = []
    bad = np.zeros(len(closed), bool)
    lengths = runs.length_array[closed]
    for f, partial, zero in zip(functions, runs.partials, empty):
        if f.field is None:
            columns.append(lengths.tolist())
            continue
        counts = partial.counts[closed]  # type: ignore[index]
        if f.func == "count":
            columns.append(counts.tolist())
            continue
        values = partial.values[closed]  # type: ignore[index]
        if f.func == "sum":
            column = (values + 0.0 if values.dtype.kind == "f" else values).tolist()
        elif f.func == "avg":
            if values.dtype.kind != "f":
                bad |= np.asarray(np.abs(values) >= _EXACT_INT, bool) & (counts > 0)
                values = values.astype(np.float64)  # exact below 2**53; the rest are the emitter's
            column = ((values + 0.0) / np.maximum(counts, 1)).tolist()
        else:
            column = values.tolist()
        for i in np.flatnonzero(counts == 0).tolist():
            column[i] = zero
        columns.append(column)
    return columns, bad


def window_rows(functions: list[Function], runs: Runs, closed: np.ndarray, prefix: list[list], empty: tuple,
                slow: Callable[[int], tuple]) -> list[tuple]:
    """The out rows of the windows that are runs ``closed``: ``prefix`` (group and start columns) and
    :func:`result_columns` zipped once; a window :func:`result_columns` leaves is ``slow(run)``'s row."""
    results, bad = result_columns(functions, runs, closed, empty)
    rows = list(zip(*prefix, *results))
    for i in np.flatnonzero(bad).tolist():
        rows[i] = slow(int(closed[i]))
    return rows


def _fits(x: Any, floats: bool) -> bool:
    """Whether a window start computes in numpy as in Python: an int with int64 order values, a float with
    floating ones (a start stays the type it has; an int start among float values: the per-window path)."""
    if isinstance(x, bool):
        return False
    if floats:
        return isinstance(x, float)
    return isinstance(x, int) and abs(x) < 2 ** 62
