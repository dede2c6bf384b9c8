"""``aggregate``: windowed, grouped aggregates, as Borealis's AggregateQBox computes them.

Out tuples: the ``group-by`` fields, then (with ``order-by`` FIELD) the
window's start value in the ``order-on-field`` field, then one value per
``aggregate-function.N`` -- exactly the layout the catalog infers.

Windows are kept per group (a group is one combination of group-by values).

``window-size-by`` VALUES (needs ``order-on-field``, numeric)
    A group's first window starts at the order value of its first tuple
    (or, with ``independent-window-alignment``, at that value rounded down
    to a multiple of ``advance``).  Windows are ``[start, start+size)`` and
    a new one starts every ``advance`` (default: ``window-size``, i.e.
    tumbling; smaller gives sliding windows).  When a tuple arrives whose
    value reaches a window's end, that window is emitted (the tuple is not
    in it).  Windows for a gap in the values are opened and emitted empty
    (count 0), as Borealis does, unless ``drop-empty-outputs`` is set; a
    gap of more than :data:`MAX_GAP_WINDOWS` windows is skipped with a
    warning instead of flooding the out stream.  A tuple older than every
    open window of its group (out of order, or its window already emitted)
    is in no window and is ignored.
``window-size-by`` TUPLES
    A group opens a window on its first tuple and whenever its newest window
    holds ``advance`` tuples; a window is emitted as soon as it holds
    ``window-size`` tuples.  With ``order-by`` FIELD its start value is the
    order field of its first tuple.
``timeout`` (seconds, optional)
    A window still open ``timeout`` seconds after it was opened is emitted
    as it is (Borealis measures the age of the window, not idleness), from
    :meth:`poll` at :meth:`next_deadline` or from the next :meth:`process`.
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
    SEQ,
    START,
    T0,
    AggregateSpecError,
    compile_accumulators,
)
from .base import Emitted, field_caster, group_key_from, group_key_parts
from .timers import Timed

log = logging.getLogger(__name__)

#: More empty windows than this for one gap are skipped rather than emitted.
MAX_GAP_WINDOWS = 10_000


class AggregateOperator(Timed):
    def __init__(self, box: Box, inputs: list[Schema], outputs: list[Schema]):
        super().__init__(box, inputs, outputs)
        schema = inputs[0]
        if box.param("window-size-by") is None:
            raise self.error("needs parameter 'window-size-by' (VALUES or TUPLES)")
        self.by_values = self.choice("window-size-by", ("VALUES", "TUPLES")) == "VALUES"
        self.emit_start = self.choice("order-by", ("FIELD", "TUPLENUM"), "TUPLENUM") == "FIELD"
        whole = not self.by_values
        self.size = self.number("window-size", whole=whole, positive=True, required=True)
        self.advance = self.number("advance", self.size, whole=whole, positive=True)
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
        self._groups: dict[Any, list] = {}  # key -> [next window start (VALUES), [windows]]
        self._timeouts: dict[int, tuple[Any, list]] | None = {} if self.timeout is not None else None
        self._seq = 0
        self.ignored = 0  # tuples in no window (late, or a None order value)

    # -- the data path --------------------------------------------------------------

    def process(self, port: int, rows: list[tuple], now: float) -> Emitted:
        self.tick(now)
        out: list[tuple] = []
        if self._timeouts:
            self._expire(now, out)
        if self.by_values:
            self._by_values(rows, now, out)
        else:
            self._by_tuples(rows, now, out)
        return [(0, out)] if out else []

    def _by_values(self, rows: list[tuple], now: float, out: list[tuple]) -> None:
        groups, keyf, oi, add = self._groups, self._key, self.order, self._add
        for row in rows:
            key = keyf(row) if keyf is not None else None
            v = row[oi]  # type: ignore[index]
            if v is None:
                self.ignored += 1
                continue
            g = groups.get(key)
            if g is None:
                g = groups[key] = [v - v % self.advance if self.aligned else v, []]
            wins = g[1]
            if v >= g[0]:
                self._open(key, g, v, now)
            if wins and v >= wins[0][END]:
                self._close(key, wins, v, out)
            if not wins or wins[0][START] > v:
                self.ignored += 1
                continue
            for w in wins:
                if w[START] > v:
                    break
                add(w, row)

    def _open(self, key: Any, g: list, v: Any, now: float) -> None:
        """Open every window that starts at or before ``v`` (Borealis: ``while value >= next``)."""
        nxt, adv = g[0], self.advance
        n = int((v - nxt) // adv) + 1
        if n > MAX_GAP_WINDOWS:
            keep = int(self.size // adv) + 2  # enough to still hold every window containing v
            log.warning("aggregate box %r: skipping %d empty windows before %r in group %r",
                        self.box.name, n - keep, v, key)
            nxt += (n - keep) * adv
        wins, timeouts, size = g[1], self._timeouts, self.size
        while v >= nxt:
            w = [nxt, nxt + size, now, self._seq, 0, *self._initial]
            self._seq += 1
            wins.append(w)
            if timeouts is not None:
                timeouts[w[SEQ]] = (key, w)
            nxt += adv
        g[0] = nxt

    def _close(self, key: Any, wins: list, v: Any, out: list[tuple]) -> None:
        timeouts = self._timeouts
        while wins and v >= wins[0][END]:
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
                g = groups[key] = [None, []]
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
            wins = self._groups[key][1]
            for i, other in enumerate(wins):
                if other is w:
                    del wins[i]
                    break
            self._emit(key, w, out)

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

    # -- state --------------------------------------------------------------------------

    def shift_times(self, delta: float) -> None:
        for g in self._groups.values():
            for w in g[1]:
                w[T0] += delta

    def state(self) -> dict:
        return {
            "clock": self.clock_state(),
            "seq": self._seq,
            "ignored": self.ignored,
            "groups": [[group_key_parts(k, self._width), g[0], [list(w) for w in g[1]]]
                       for k, g in self._groups.items()],
        }

    def restore(self, state: dict, now: float | None = None) -> None:
        try:
            self._seq = int(state["seq"])
            self.ignored = int(state.get("ignored", 0))
            groups: dict[Any, list] = {}
            for parts, nxt, wins in state["groups"]:
                groups[group_key_from(list(parts), self._width)] = [nxt, [list(w) for w in wins]]
        except (KeyError, TypeError, ValueError) as exc:
            raise self.error(f"cannot restore state: {exc!r}") from None
        self._groups = groups
        if self._timeouts is not None:
            opened = sorted(((w[SEQ], key, w) for key, g in groups.items() for w in g[1]),
                            key=operator.itemgetter(0))
            self._timeouts = {seq: (key, w) for seq, key, w in opened}
        self.restore_clock(state.get("clock"), now)

