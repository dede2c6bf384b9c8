"""The tuple-window aggregate (``window-size-by TUPLES``) on Arrow columns: a batch a stretch at a time.

The row path (:meth:`~.aggregate_windows.GroupWindows.by_tuples`) takes a
group's tuples one by one: a tuple opens a window when its group has none or
its newest holds ``advance`` tuples, enters every open window of its group,
and the windows at the front that now hold ``window-size`` tuples are
emitted.  So where a group's windows open and close inside a batch depends
only on the counts its windows held before the batch: a window holding
``c`` tuples closes on the group's ``(window-size - c)``-th tuple of the
batch, a new one opens ``advance`` tuples after the newest opened (or right
after the last one closed, when none is left).  :class:`TupleRuns` works
those positions out per group with a few Python steps per *window* (not per
tuple), cuts each group's rows (sorted by group, stably, so in arrival
order) where a window opens or ends into *stretches*, computes every
stretch's partials with one numpy ``reduceat`` per function
(:class:`~.aggregate_runs.Runs`, the value windows' machinery) and adds to
each window the stretches it holds, in order
(:func:`~.aggregate_columns.add_part`).

What the row path does in batch order, this does in the same order: new
windows take their numbers (``seq``) in the order of the tuples that open
them, closed windows are emitted in the order of the tuples that close
them (one tuple closes at most one window of its group), the timeouts of
the windows still open start in number order, and a group's window list
is left as the row path leaves it -- so outputs, their order, ``state()``
and moves are the row path's (``tests/test_aggregate_tuples.py``).  One
difference, as on value windows: a float sum or average adds a stretch's
values pairwise before adding them to the window, so the last bits can
differ.  Timeouts fire between batches (the box's ``expire`` before each),
as on rows.

Shapes: the functions :func:`~.aggregate_columns.columnar_functions` takes
(else the box reads rows); a batch that :func:`~.aggregate_exact.exact` or
the expression columns refuse, a float group-by field with a NaN or a zero,
or more stretches than :data:`~.aggregate_runs.MAX_RUNS_PER_ROW` of its rows
(small windows or many groups: numpy would not pay) is read as rows, whole,
before anything changes.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from boreas.catalog.model import Schema

from . import aggregate_runs
from .accumulators import COUNT, SEQ, START, T0
from .aggregate_args import ArgumentColumns
from .aggregate_columns import add_part, columnar_functions
from .aggregate_groups import group_codes
from .aggregate_exact import exact
from .aggregate_runs import Function, Runs
from .aggregate_tumbling import TumblingTuples
from .aggregate_windows import GroupWindows, WindowSpec


@dataclass
class _Span:
    """One window's share of a group's rows in a batch: local rows ``first`` to ``last`` (inclusive)."""

    window: list | None  # None: opened by this batch (made when the batch is applied)
    first: int
    last: int
    closes: bool  # whether the batch's row ``last`` closes it


@dataclass
class _Group:
    """One group's rows in a batch (``offset`` .. ``offset + m`` in group order) and its windows' spans."""

    key: Any
    offset: int
    m: int
    spans: list[_Span]
    points: list[int]  # where its stretches start (local rows)


class TupleRuns:
    """Takes a plain batch of columns through an aggregate's tuple windows (module doc); no state of its own,
    so a batch on columns and the next on rows continue each other exactly."""

    def __init__(self, functions: list[Function], groups: list[int], start_field: int | None, spec: WindowSpec,
                 windows: GroupWindows, args: ArgumentColumns):
        self._functions, self._groups, self._start_field = functions, groups, start_field
        self._size, self._advance = int(spec.size), int(spec.advance)
        self._slots = spec.slots
        self._windows, self._args = windows, args
        self._tumbling: TumblingTuples | None = None  # tumbling windows of any size: .aggregate_tumbling
        self._keyf: Callable[[tuple], Any] | None = None
        if groups:  # the row path's key, as the box makes it (in C)
            self._keyf = operator.itemgetter(*groups)

    @classmethod
    def make(cls, functions: list[str], schema: Schema, groups: list[int], start_field: int | None,
             spec: WindowSpec, windows: GroupWindows) -> "TupleRuns | None":
        """The columnar path of a TUPLES box, or None when the box reads rows (its functions: module doc).
        ``start_field``: the order field whose first value a window emits (``order-by`` FIELD), or None."""
        if spec.by_values:
            return None
        taken = columnar_functions(functions, schema)
        if taken is None:
            return None
        runs = cls(taken[0], groups, start_field, spec, windows, taken[1])
        runs._tumbling = TumblingTuples.make(taken[0], taken[1].schema, start_field, spec, windows)
        return runs

    def process(self, batch: pa.RecordBatch, now: float, out: list[tuple]) -> None:
        """Add a plain batch to the tuple windows, emitting what closes, exactly as the row path would."""
        n = batch.num_rows
        if not n:
            return
        extended = self._args.extend(batch)
        plan = None
        if extended is not None and exact(extended, self._functions):
            if self._tumbling is not None:
                grouped = self._grouped(extended)
                if grouped is not None:
                    self._tumbling.take(extended, *grouped, now, out)
                    return
            plan = self._plan(extended)
        if plan is None:
            rows = list(zip(*[c.to_pylist() for c in batch.columns])) if batch.num_columns else [()] * n
            self._windows.by_tuples(rows, self._keyf, self._start_field, now, out)
            return
        self._apply(extended, *plan, now, out)  # type: ignore[arg-type]

    def _grouped(self, batch: pa.RecordBatch) -> tuple[np.ndarray, list[int], list] | None:
        """The rows in group order (stably), where each group starts (and the end), and the groups' keys;
        None when Arrow's grouping is not Python's (.aggregate_groups)."""
        n = batch.num_rows
        codes, keys_of, distinct = group_codes(batch, self._groups)
        if codes is None:
            return None
        if not self._groups:
            return np.arange(n), [0, n], [None]
        perm = np.argsort(codes.astype(np.int16) if distinct < 2 ** 15 else codes, kind="stable")
        sc = codes[perm]
        at = np.concatenate(([0], np.flatnonzero(sc[1:] != sc[:-1]) + 1))
        return perm, [*at.tolist(), n], [keys_of(c) for c in sc[at].tolist()]

    # -- where windows open and close ------------------------------------------------

    def _plan(self, batch: pa.RecordBatch) -> tuple[np.ndarray, list[_Group], np.ndarray] | None:
        """Each group's spans and stretch starts, the row order (by group, stably) and the stretch starts in
        it; None (nothing changed) when the batch is to be read as rows."""
        n = batch.num_rows
        size, adv = self._size, self._advance
        limit = max(1.0, aggregate_runs.MAX_RUNS_PER_ROW * n)
        if n / min(size, adv) > limit:  # at least one stretch per window opened: too many
            return None
        codes, keys_of, distinct = group_codes(batch, self._groups)
        if codes is None:
            return None
        if self._groups:
            perm = np.argsort(codes.astype(np.int16) if distinct < 2 ** 15 else codes, kind="stable")
            sc = codes[perm]
            bounds = [0, *(np.flatnonzero(sc[1:] != sc[:-1]) + 1).tolist(), n]
        else:
            perm, sc, bounds = np.arange(n), codes, [0, n]
        if len(bounds) - 1 > limit:
            return None
        plan: list[_Group] = []
        starts: list[int] = []
        for o, end in zip(bounds, bounds[1:]):
            key = keys_of(int(sc[o]))
            group = self._group(key, o, end - o)
            plan.append(group)
            starts += [o + p for p in group.points]
            if len(starts) > limit:
                return None
        return perm, plan, np.asarray(starts, dtype=np.int64)

    def _group(self, key: Any, offset: int, m: int) -> _Group:
        """One group's spans: its open windows', then those its ``m`` rows open (module doc)."""
        size, adv = self._size, self._advance
        spans: list[_Span] = []
        nxt = 0
        for w in self._windows.tuple_windows(key):
            close = max(0, size - w[COUNT] - 1)
            spans.append(_Span(w, 0, min(close, m - 1), close < m))
            nxt = min(max(adv - w[COUNT], 0), close + 1)  # the newest window's: when the next opens
        while nxt < m:
            close = nxt + size - 1
            spans.append(_Span(None, nxt, min(close, m - 1), close < m))
            nxt = min(nxt + adv, close + 1)
        points = sorted({s.first for s in spans} | {s.last + 1 for s in spans if s.last + 1 < m})
        return _Group(key, offset, m, spans, points)

    # -- the batch applied ------------------------------------------------------------

    def _apply(self, batch: pa.RecordBatch, perm: np.ndarray, plan: list[_Group], starts: np.ndarray,
               now: float, out: list[tuple]) -> None:
        n = batch.num_rows
        runs = Runs(batch, self._functions, perm, np.zeros(n, np.int64), np.ones(n, bool), starts,
                    [None] * len(starts), np.zeros(len(starts), np.int64))
        parts = runs.whole
        functions, windows, slots = self._functions, self._windows, self._slots
        opened: list[tuple[int, Any, list]] = []  # (batch row that opens it, key, window)
        closed: list[tuple[int, Any, list]] = []  # (batch row that closes it, key, window)
        bases = np.cumsum([0, *(len(group.points) for group in plan)]).tolist()
        # groups in the order of their first rows: a new group joins the book where the row path adds it
        for g in sorted(range(len(plan)), key=lambda g: int(perm[plan[g].offset])):
            group, base = plan[g], bases[g]
            index = {p: base + i for i, p in enumerate(group.points)}
            index[group.m] = base + len(group.points)
            still: list[list] = []
            for span in group.spans:
                w = span.window
                if w is None:
                    w = [None, None, now, -1, 0, *slots]
                    opened.append((int(perm[group.offset + span.first]), group.key, w))
                for i in range(index[span.first], index[span.last + 1]):
                    add_part(functions, w, parts[i])
                if span.closes:
                    closed.append((int(perm[group.offset + span.last]), group.key, w))
                else:
                    still.append(w)
            windows.set_tuple_windows(group.key, still)
        opened.sort(key=lambda e: e[0])
        first = windows.number(len(opened))
        values = (batch.column(self._start_field).take(pa.array([r for r, _, _ in opened], pa.int64())).to_pylist()
                  if self._start_field is not None and opened else [None] * len(opened))
        for i, ((_, _, w), v) in enumerate(zip(opened, values)):
            w[SEQ], w[START], w[T0] = first + i, v, now
        closed.sort(key=lambda e: e[0])
        emit = windows.emit
        for _, key, w in closed:
            emit(key, w, out)
        gone = {id(w) for _, _, w in closed}
        windows.retime([w for _, _, w in closed], [(key, w) for _, key, w in opened if id(w) not in gone])

