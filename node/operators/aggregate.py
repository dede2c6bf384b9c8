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

Over a changelog (a batch with weights) the aggregate retracts instead: see
:mod:`.aggregate_changes`.  A stream is one or the other (the catalog sees
to that: catalog/changelog.py), so one box only ever uses one of the two.
"""

from __future__ import annotations

import logging
import operator
from typing import Any

from boreas.catalog.model import Box, Schema
from boreas.node.compile import STR, kind_of

from .accumulators import (
    COUNT,
    END,
    FIRST_SLOT,
    SEQ,
    START,
    T0,
    AggregateSpecError,
    compile_accumulators,
)
from boreas.wire.columns import Columns, weighted

from .aggregate_changes import Retracting
from .aggregate_loop import CLOSED, BatchLoop, compile_loop, hot_window
from .base import Emitted, OperatorError, field_caster, group_key_from, group_key_parts
from .late import LateLog
from .timers import Timed

log = logging.getLogger(__name__)

#: More empty windows than this for one gap are skipped rather than opened.
MAX_GAP_WINDOWS = 10_000


class AggregateOperator(Timed):
    takes_columns = True  # a changelog's weights come with its columns; a plain batch is read as rows

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
        if self.by_values or self.emit_start:
            on = box.param("order-on-field")
            if not on:
                raise self.error("needs parameter 'order-on-field' (window-size-by VALUES or order-by FIELD)")
            self.order = self.field_index(schema, on, "order-on-field")
            order_field = schema.fields[self.order]
            if self.by_values and kind_of(order_field.type) == STR:
                raise self.param_error("order-on-field", "windows by VALUES need a numeric field")
            self._start_cast = field_caster(order_field) if kind_of(order_field.type) != STR else str
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
        self._add, self._result, self._initial = acc.add, acc.result, list(acc.initial)
        self._retracting: Retracting | None = None  # made for the first changelog batch
        self._retract_args = dict(functions=functions, schema=schema, out=outputs[0], groups=groups,
                                  size=self.size, advance=self.advance, order=self.order if self.by_values else None,
                                  emit_start=self.emit_start)
        # A value window ends with one more slot, after the functions' slots: how many closing
        # tuples it has seen, or CLOSED.
        self._beyond = FIRST_SLOT + len(self._initial)
        # The batch loop with the in-order tuple inlined; None runs every tuple through _place (tests
        # compare the two with ``fast=False``).
        self._loop: BatchLoop | None = None
        if self.by_values and fast:
            self._loop = compile_loop(acc.add_body, acc.namespace, groups, self.order,  # type: ignore[arg-type]
                                      box.name)
        # key -> the group's hot window (aggregate_loop.hot_window); only ever a subset of the truth:
        # a missing key sends its next tuple through _place, which puts it back.
        self._hot: dict[Any, list] = {}
        # key -> [next window start (VALUES), [windows], horizon (VALUES: the end of the newest
        # closed window; a tuple below it that enters no window is late)]
        self._groups: dict[Any, list] = {}
        self._timeouts: dict[int, tuple[Any, list]] | None = {} if self.timeout is not None else None
        self._seq = 0
        self.ignored = 0  # tuples in no window (late, a None order value, between hopping windows)
        self.late = 0     # of those, the ones whose window had already closed
        self._late_log = LateLog(box.name)

    def counters(self) -> dict[str, int]:
        """``late_tuples``: dropped for arriving after their window closed; ``ignored_tuples``: every
        tuple in no window (the late ones, a None order value, a value between hopping windows)."""
        ignored = self.ignored + (self._retracting.ignored if self._retracting is not None else 0)
        return {"late_tuples": self.late, "ignored_tuples": ignored}

    # -- the data path --------------------------------------------------------------

    def process(self, port: int, rows: list[tuple] | Columns, now: float) -> Emitted:
        if isinstance(rows, Columns):
            if rows.weights is not None:
                return self._changes(rows)
            rows = rows.rows()
        self.tick(now)
        out: list[tuple] = []
        if self._timeouts:
            self._expire(now, out)
        if self.by_values:
            self._by_values(rows, now, out)
        else:
            self._by_tuples(rows, now, out)
        self._late_log.note(self.late, now)
        return [(0, out)] if out else []

    def _by_values(self, rows: list[tuple], now: float, out: list[tuple]) -> None:
        """The generated loop (:mod:`.aggregate_loop`): the common tuple inline, the rest via :meth:`_place`."""
        if self._loop is not None:
            self._loop(rows, now, out, self._hot, self._place_hot)
            return
        keyf, oi, place = self._key, self.order, self._place
        for row in rows:
            place(row, keyf(row) if keyf is not None else None, row[oi], now, out)  # type: ignore[index]

    def _place_hot(self, row: tuple, key: Any, v: Any, now: float, out: list[tuple]) -> None:
        """:meth:`_place`, then the group's hot window as it is now."""
        self._place(row, key, v, now, out)
        g = self._groups.get(key)
        w = hot_window(g, self._beyond) if g is not None else None
        if w is not None:
            self._hot[key] = w
        else:
            self._hot.pop(key, None)

    def _place(self, row: tuple, key: Any, v: Any, now: float, out: list[tuple]) -> None:
        """One tuple of a value-window aggregate, any case: the reference semantics of the data path."""
        if v is None:
            self.ignored += 1
            return
        groups, slack, beyond = self._groups, self.slack, self._beyond
        g = groups.get(key)
        if g is None:
            start = v - v % self.advance if self.aligned else v
            g = groups[key] = [start, [], start]
        if v >= g[0]:
            self._open(key, g, v, now)
        placed = closed = False
        for w in g[1]:
            if v < w[START]:
                break  # windows are in start order: none further holds v
            seen = w[beyond]
            if seen == CLOSED:
                continue
            if v >= w[END]:  # a closing tuple for w
                seen += 1
                if seen > slack and (seen > 1 or w[COUNT]):
                    w[beyond] = CLOSED
                    closed = True
                    g[2] = max(g[2], w[END])
                else:
                    w[beyond] = seen
            else:
                self._add(w, row)
                placed = True
        if closed:
            self._emit_closed(key, g[1], out)
        if not placed:
            self.ignored += 1
            if v < g[2]:
                self.late += 1

    def _open(self, key: Any, g: list, v: Any, now: float) -> None:
        """Open every window that starts at or before ``v`` (Borealis: ``while value >= next``)."""
        nxt, adv = g[0], self.advance
        n = int((v - nxt) // adv) + 1
        if n > MAX_GAP_WINDOWS:
            keep = int(self.size // adv) + 2  # enough to still hold every window containing v
            log.warning("aggregate box %r: skipping %d empty windows before %r in group %r",
                        self.box.name, n - keep, v, key)
            nxt += (n - keep) * adv
            g[2] = max(g[2], nxt)  # the skipped windows count as closed: tuples in them are late
        wins, timeouts, size = g[1], self._timeouts, self.size
        while v >= nxt:
            w = [nxt, nxt + size, now, self._seq, 0, *self._initial, 0]
            self._seq += 1
            wins.append(w)
            if timeouts is not None:
                timeouts[w[SEQ]] = (key, w)
            nxt += adv
        g[0] = nxt

    def _emit_closed(self, key: Any, wins: list, out: list[tuple]) -> None:
        """Emit the closed windows at the front of a group's list, in start order."""
        timeouts, beyond = self._timeouts, self._beyond
        while wins and wins[0][beyond] == CLOSED:
            w = wins.pop(0)
            if timeouts is not None:
                timeouts.pop(w[SEQ], None)
            self._emit(key, w, out)

    def _by_tuples(self, rows: list[tuple], now: float, out: list[tuple]) -> None:
        groups, keyf, add = self._groups, self._key, self._add
        size, adv, timeouts = self.size, self.advance, self._timeouts
        oi = self.order if self.emit_start else None
        for row in rows:
            key = keyf(row) if keyf is not None else None
            g = groups.get(key)
            if g is None:
                g = groups[key] = [None, [], None]
            wins = g[1]
            if not wins or wins[-1][COUNT] >= adv:
                w = [row[oi] if oi is not None else None, None, now, self._seq, 0, *self._initial]
                self._seq += 1
                wins.append(w)
                if timeouts is not None:
                    timeouts[w[SEQ]] = (key, w)
            for w in wins:
                add(w, row)
            while wins and wins[0][COUNT] >= size:
                w = wins.pop(0)
                if timeouts is not None:
                    timeouts.pop(w[SEQ], None)
                self._emit(key, w, out)

    def _emit(self, key: Any, w: list, out: list[tuple]) -> None:
        if self.drop_empty and not w[COUNT]:
            return
        prefix = () if self._width == 0 else (key,) if self._width == 1 else key
        if self.emit_start:
            start = w[START]
            prefix = prefix + ((self._start_cast(start) if start is not None else None),)
        out.append(prefix + self._result(w))

    def _changes(self, columns: Columns) -> Emitted:
        """A changelog batch: retracted and re-emitted per changed group (:mod:`.aggregate_changes`)."""
        if self._retracting is None:
            self._retracting = self._retractor()
        out, weights = self._retracting.apply(columns.rows(), columns.weight_list())
        return [(0, weighted(out, weights, self.outputs[0]))] if out else []

    def _retractor(self) -> Retracting:
        try:
            return Retracting(**self._retract_args)
        except ValueError as exc:
            raise OperatorError(f"aggregate box {self.box.name!r}: {exc}") from None

    # -- timeouts ---------------------------------------------------------------------

    def _expire(self, now: float, out: list[tuple]) -> None:
        timeouts, timeout = self._timeouts, self.timeout
        assert timeouts is not None and timeout is not None
        while timeouts:
            seq = next(iter(timeouts))
            key, w = timeouts[seq]
            if w[T0] + timeout > now:
                break
            del timeouts[seq]
            self._hot.pop(key, None)  # its windows change here, not in _place
            g = self._groups[key]
            wins = g[1]
            for i, other in enumerate(wins):
                if other is w:
                    del wins[i]
                    break
            self._emit(key, w, out)
            if self.by_values:
                g[2] = max(g[2], w[END])
                self._emit_closed(key, wins, out)  # windows that closed and only waited for w

    def poll(self, now: float) -> Emitted:
        self.tick(now)
        if not self._timeouts:
            return []
        out: list[tuple] = []
        self._expire(now, out)
        return [(0, out)] if out else []

    def next_deadline(self) -> float | None:
        if not self._timeouts:
            return None
        _, w = next(iter(self._timeouts.values()))
        return w[T0] + self.timeout  # type: ignore[operator]

    def end_of_input(self, now: float) -> Emitted:
        """Every producer of the input ended (``Publisher.close(final=True)``): emit every open window,
        in start order per group, as a timeout would; a tuple arriving after that opens new ones."""
        self.tick(now)
        out: list[tuple] = []
        for key, g in self._groups.items():
            for w in g[1]:
                self._emit(key, w, out)
            g[1], g[2] = [], (max(g[2], g[0]) if self.by_values else None)  # below the next start: late
        self._hot, self._timeouts = {}, ({} if self._timeouts is not None else None)
        return [(0, out)] if out else []

    # -- state --------------------------------------------------------------------------

    def shift_times(self, delta: float) -> None:
        for g in self._groups.values():
            for w in g[1]:
                w[T0] += delta

    def state_entries(self) -> int:
        """Open groups (each with its window's accumulators), and a changelog's (group, window) entries."""
        return len(self._groups) + (len(self._retracting.entries) if self._retracting is not None else 0)

    def state(self) -> dict:
        return {
            "clock": self.clock_state(),
            "seq": self._seq,
            "ignored": self.ignored,
            "late": self.late,
            "groups": [[group_key_parts(k, self._width), g[0], [list(w) for w in g[1]], g[2]]
                       for k, g in self._groups.items()],
            **({"changelog": self._retracting.state()} if self._retracting is not None else {}),
        }

    def restore(self, state: dict, now: float | None = None) -> None:
        try:
            self._seq = int(state["seq"])
            self.ignored = int(state.get("ignored", 0))
            self.late = int(state.get("late", 0))
            self._late_log.restored(self.late)
            groups: dict[Any, list] = {}
            for entry in state["groups"]:
                parts, nxt, wins = entry[0], entry[1], [list(w) for w in entry[2]]
                if self.by_values:
                    for w in wins:  # state saved before windows counted their closing tuples
                        if len(w) == self._beyond:
                            w.append(0)
                    horizon = entry[3] if len(entry) > 3 else (wins[0][START] if wins else nxt)
                else:
                    horizon = None
                groups[group_key_from(list(parts), self._width)] = [nxt, wins, horizon]
        except (KeyError, IndexError, TypeError, ValueError) as exc:
            raise self.error(f"cannot restore state: {exc!r}") from None
        self._groups = groups
        self._hot = {}
        self._retracting = None
        if "changelog" in state:
            self._retracting = self._retractor()
            self._retracting.restore(state["changelog"])
        if self._timeouts is not None:
            opened = sorted(((w[SEQ], key, w) for key, g in groups.items() for w in g[1]),
                            key=operator.itemgetter(0))
            self._timeouts = {seq: (key, w) for seq, key, w in opened}
        self.restore_clock(state.get("clock"), now)
