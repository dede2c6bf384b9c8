"""``aggregate``: windowed, grouped aggregates, as Borealis's AggregateQBox computes them.

Out tuples: the ``group-by`` fields, then (with ``order-by`` FIELD) the
window's start value in the ``order-on-field`` field, then one value per
``aggregate-function.N`` -- exactly the layout the catalog infers.

Windows, and with them the order of the stream, are kept **per group** (a
group is one combination of group-by values), as Borealis keeps its open
windows and next window start per group-by value: one sensor's odd reading
cannot make another sensor's readings late.

``window-size-by`` VALUES (needs ``order-on-field``, numeric)
    A group's first window starts at the order value of its first tuple
    (or, with ``independent-window-alignment``, at that value rounded down
    to a multiple of ``advance``).  Windows are ``[start, start+size)`` and
    a new one starts every ``advance`` (default: ``window-size``, i.e.
    tumbling; smaller gives sliding windows).  A tuple opens every window
    that starts at or before its value, then enters each open window that
    contains it.  A window closes on its ``slack + 1``-th tuple at or past
    its end (an empty one on at least its second: one out-of-order tuple
    never emits a run of empty windows, Boreas's one addition to Borealis);
    a group emits its windows in start order.  ``drop-empty-outputs``
    suppresses empty windows; a gap of more than :data:`MAX_GAP_WINDOWS`
    windows is skipped with a warning instead of opened.  A tuple that
    enters no window is dropped; it is *late* when a window it belonged to
    has already closed, counted in :meth:`counters` and logged (.late).
    docs/operators.md ("Order, slack and late tuples") says it for users.
``window-size-by`` TUPLES
    A group opens a window on its first tuple and whenever its newest window
    holds ``advance`` tuples; a window is emitted as soon as it holds
    ``window-size`` tuples.  With ``order-by`` FIELD its start value is the
    order field of its first tuple.  Nothing is late (Borealis's tuple
    windows have no slack; ``slack`` is accepted and has no effect).
``timeout`` (seconds, optional)
    A window still open ``timeout`` seconds after it was opened is emitted
    as it is (Borealis measures the age of the window, not idleness), from
    :meth:`poll` at :meth:`next_deadline` or from the next :meth:`process`.
    This also bounds how long slack keeps a window waiting.  At the end of
    the input (:meth:`end_of_input`) every open window is emitted so.

The parts, each owning its state: this box reads the parameters and
dispatches; :class:`~.aggregate_windows.GroupWindows` owns the groups'
windows, timeouts and counts; :class:`Emitter` makes a closed window's out
row; :mod:`.aggregate_columns` runs a batch of Arrow columns a run at a time
(windows by TUPLES: :mod:`.aggregate_tuples`; the shapes they take:
docs/operators.md, "aggregate on columns");
:mod:`.aggregate_changes` owns a changelog's retracting accumulators.

Over a changelog (a batch with weights) the aggregate retracts instead: see
:mod:`.aggregate_changes`.  A stream is one or the other (the catalog sees
to that: catalog/changelog.py), so one box only ever uses one of the two.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from boreas.catalog.model import Box, Schema
from boreas.node.compile import STR, kind_of
from boreas.wire.columns import Columns, weighted

from .accumulators import COUNT, START, AggregateSpecError, compile_accumulators
from .aggregate_changes import Retracting
from .aggregate_columns import ColumnRuns
from .aggregate_loop import BatchLoop, compile_loop
from .aggregate_retract import ColumnRetract
from .aggregate_tuples import TupleRuns
from .aggregate_windows import GroupWindows, WindowSpec
from .base import Emitted, OperatorError, field_caster, group_key_from, group_key_parts
from .late import LateLog
from .timers import Timed

@dataclass(frozen=True)
class Emitter:
    """A closed window's out row: the group fields, the window start (``order-by`` FIELD), the functions."""

    width: int
    start_cast: Callable[[Any], Any] | None  # None: no start field
    result: Callable[[list], tuple]
    drop_empty: bool

    def __call__(self, key: Any, w: list, out: list[tuple]) -> None:
        if self.drop_empty and not w[COUNT]:
            return
        prefix = () if self.width == 0 else (key,) if self.width == 1 else key
        if self.start_cast is not None:
            start = w[START]
            prefix = prefix + ((self.start_cast(start) if start is not None else None),)
        out.append(prefix + self.result(w))


class AggregateOperator(Timed):
    takes_columns = True  # a plain batch of columns runs on columns where its shape allows (.aggregate_columns)

    def __init__(self, box: Box, inputs: list[Schema], outputs: list[Schema], fast: bool = True):
        super().__init__(box, inputs, outputs)
        schema = inputs[0]
        if box.param("window-size-by") is None:
            raise self.error("needs parameter 'window-size-by' (VALUES or TUPLES)")
        self.by_values = self.choice("window-size-by", ("VALUES", "TUPLES")) == "VALUES"
        self.emit_start = self.choice("order-by", ("FIELD", "TUPLENUM"), "TUPLENUM") == "FIELD"
        whole = not self.by_values
        self.size = self.number("window-size", whole=whole, positive=True, required=True)
        self.advance = self.number("advance", self.size, whole=whole, positive=True)
        self.slack: int = self.number("slack", 0, whole=True, low=0)  # type: ignore[assignment]
        timeout = self.number("timeout", None, low=0)
        self.timeout: float | None = float(timeout) if timeout is not None else None
        self.aligned = self.flag("independent-window-alignment")
        self.drop_empty = self.flag("drop-empty-outputs")
        self.order: int | None = None
        start_cast: Callable[[Any], Any] | None = None
        if self.by_values or self.emit_start:
            on = box.param("order-on-field")
            if not on:
                raise self.error("needs parameter 'order-on-field' (window-size-by VALUES or order-by FIELD)")
            self.order = self.field_index(schema, on, "order-on-field")
            order_field = schema.fields[self.order]
            if self.by_values and kind_of(order_field.type) == STR:
                raise self.param_error("order-on-field", "windows by VALUES need a numeric field")
            start_cast = field_caster(order_field) if kind_of(order_field.type) != STR else str
        self.check_outputs()
        groups = self.group_indexes(schema)
        self._width = len(groups)
        self._key = operator.itemgetter(*groups) if groups else None
        functions = self.indexed("aggregate-function")
        if not functions:
            raise self.error("needs parameter 'aggregate-function.0'")
        try:
            acc = compile_accumulators(functions, schema, label=box.name)
        except AggregateSpecError as exc:
            raise self.error(str(exc)) from None
        spec = WindowSpec(self.by_values, self.size, self.advance, self.slack, self.timeout,  # type: ignore[arg-type]
                          self.aligned, tuple(acc.initial), box.name)
        self._windows = GroupWindows(spec, acc.add,
                                     Emitter(self._width, start_cast if self.emit_start else None, acc.result,
                                             self.drop_empty))
        self._retracting: Retracting | None = None  # made for the first changelog batch
        self._retract_args = dict(functions=functions, schema=schema, out=outputs[0], groups=groups,
                                  size=self.size, advance=self.advance, order=self.order if self.by_values else None,
                                  emit_start=self.emit_start)
        self._retract_columns = ColumnRetract.make(functions, schema, groups, self.order if self.by_values else None,
                                                   self.size, self.advance) if fast else None  # type: ignore[arg-type]
        # The batch loop with the in-order tuple inlined; None runs every tuple through GroupWindows.place
        # (tests compare the two with ``fast=False``).
        self._loop: BatchLoop | None = None
        self._runs: ColumnRuns | TupleRuns | None = None  # the columnar path, for the shapes it takes
        if not self.by_values and fast:
            self._runs = TupleRuns.make(functions, schema, groups, self.order if self.emit_start else None, spec,
                                        self._windows)
        if self.by_values and fast:
            self._loop = compile_loop(acc.add_body, acc.namespace, groups, self.order,  # type: ignore[arg-type]
                                      box.name)
            self._runs = ColumnRuns.make(functions, schema, groups, self.order, spec,  # type: ignore[arg-type]
                                         self._windows, self._loop)
        self._late_log = LateLog(box.name)

    @property
    def ignored(self) -> int:
        return self._windows.ignored

    @property
    def late(self) -> int:
        return self._windows.late

    def counters(self) -> dict[str, int]:
        """``late_tuples``: dropped for arriving after their window closed; ``ignored_tuples``: every
        tuple in no window (the late ones, a None order value, a value between hopping windows)."""
        ignored = self.ignored + (self._retracting.ignored if self._retracting is not None else 0)
        return {"late_tuples": self.late, "ignored_tuples": ignored}

    # -- the data path --------------------------------------------------------------

    def process(self, port: int, rows: list[tuple] | Columns, now: float) -> Emitted:
        self.tick(now)
        out: list[tuple] = []
        if isinstance(rows, Columns):
            if rows.weights is not None:
                return self._changes(rows)
            if self._runs is not None:
                self._windows.expire(now, out)
                self._runs.process(rows.batch, now, out)
                self._late_log.note(self.late, now)
                return [(0, out)] if out else []
            rows = rows.rows()
        self._windows.expire(now, out)
        if self.by_values:
            self._windows.by_values(rows, self._key, self.order, now, out, self._loop)  # type: ignore[arg-type]
        else:
            self._windows.by_tuples(rows, self._key, self.order if self.emit_start else None, now, out)
        self._late_log.note(self.late, now)
        return [(0, out)] if out else []

    def _changes(self, columns: Columns) -> Emitted:
        """A changelog batch: retracted and re-emitted per changed group (:mod:`.aggregate_changes`)."""
        if self._retracting is None:
            self._retracting = self._retractor()
        sums = None
        if self._retract_columns is not None:  # count/sum/avg of fields: summed per (group, window) on columns
            sums = self._retract_columns.sums(columns.batch, columns.weights, self._retracting.window_of)
        if sums is not None:
            out, weights = self._retracting.add_partials(*sums)
        else:
            out, weights = self._retracting.apply(columns.rows(), columns.weight_list())
        return [(0, weighted(out, weights, self.outputs[0]))] if out else []

    def _retractor(self) -> Retracting:
        try:
            return Retracting(**self._retract_args)
        except ValueError as exc:
            raise OperatorError(f"aggregate box {self.box.name!r}: {exc}") from None

    # -- timeouts ---------------------------------------------------------------------

    def poll(self, now: float) -> Emitted:
        self.tick(now)
        if not self._windows.pending():
            return []
        out: list[tuple] = []
        self._windows.expire(now, out)
        return [(0, out)] if out else []

    def next_deadline(self) -> float | None:
        return self._windows.next_deadline()

    def end_of_input(self, now: float, port: int | None = None) -> Emitted:
        """Every producer of the input ended (``Publisher.close(final=True)``): emit every open window,
        in start order per group, as a timeout would; a tuple arriving after that opens new ones."""
        self.tick(now)
        out: list[tuple] = []
        self._windows.close_all(out)
        return [(0, out)] if out else []

    # -- state --------------------------------------------------------------------------

    def shift_times(self, delta: float) -> None:
        self._windows.shift_times(delta)

    def state_entries(self) -> int:
        """Open groups (each with its window's accumulators), and a changelog's (group, window) entries."""
        return len(self._windows.groups) + (len(self._retracting.entries) if self._retracting is not None else 0)

    def state(self) -> dict:
        book = self._windows
        return {
            "clock": self.clock_state(),
            "seq": book.seq,
            "ignored": book.ignored,
            "late": book.late,
            "groups": [[group_key_parts(k, self._width), g[0], [list(w) for w in g[1]], g[2]]
                       for k, g in book.groups.items()],
            **({"changelog": self._retracting.state()} if self._retracting is not None else {}),
        }

    def restore(self, state: dict, now: float | None = None) -> None:
        beyond = self._windows.spec.beyond
        try:
            seq = int(state["seq"])
            ignored = int(state.get("ignored", 0))
            late = int(state.get("late", 0))
            groups: dict[Any, list] = {}
            for entry in state["groups"]:
                parts, nxt, wins = entry[0], entry[1], [list(w) for w in entry[2]]
                if self.by_values:
                    for w in wins:  # state saved before windows counted their closing tuples
                        if len(w) == beyond:
                            w.append(0)
                    horizon = entry[3] if len(entry) > 3 else (wins[0][START] if wins else nxt)
                else:
                    horizon = None
                groups[group_key_from(list(parts), self._width)] = [nxt, wins, horizon]
        except (KeyError, IndexError, TypeError, ValueError) as exc:
            raise self.error(f"cannot restore state: {exc!r}") from None
        self._windows.restore(groups, seq, ignored, late)
        self._late_log.restored(late)
        self._retracting = None
        if "changelog" in state:
            self._retracting = self._retractor()
            self._retracting.restore(state["changelog"])
        self.restore_clock(state.get("clock"), now)
