"""``join``: a symmetric windowed join of two streams, as Borealis's JoinQBox.

Each side keeps a buffer.  A tuple arriving on one side is first joined with
every tuple in the *other* side's buffer (oldest first; one out tuple per
pair whose ``predicate`` holds), then enters its own buffer, which is then
trimmed:

* ``<side>-order-by`` TUPLES (default): the buffer keeps the newest
  ``<side>-buffer-size`` tuples;
* ``<side>-order-by`` VALUES: oldest tuples leave while the new tuple's
  ``<side>-order-on-field`` value is ``>= buffer-size`` past theirs (the
  buffer is assumed ordered on that field, as Borealis assumes).

A size of 0 keeps nothing on that side.  ``timeout`` (seconds, optional)
also drops buffered tuples that arrived that long ago.

Order: Borealis's JoinQBox has no ``slack`` and drops no tuple for being out
of order -- every tuple is joined, then buffered -- so this operator does the
same, and the Head refuses a ``slack`` on a join instead of ignoring it (an
aggregate is where slack applies; docs/operators.md).

Out tuples are ``out-field.N`` expressions over ``left.x``/``right.y``,
named ``out-field-name.N``; with none, the left tuple's fields followed by
the right's.  A predicate that fails on a pair is false; an out field that
fails is None.
"""

from __future__ import annotations

from collections import deque
from typing import Any

from boreas.catalog.expressions import ExpressionError, Scope
from boreas.catalog.model import Box, Schema
from boreas.node.compile import STR, CodeBuilder, kind_of

from .base import Emitted, OperatorError
from .timers import Timed

SIDES = ("left", "right")


class JoinOperator(Timed):
    def __init__(self, box: Box, inputs: list[Schema], outputs: list[Schema]):
        super().__init__(box, inputs, outputs)
        if len(inputs) != 2:
            raise self.error(f"needs 2 in streams, has {len(inputs)}")
        predicate = box.param("predicate")
        if not predicate:
            raise self.error("needs parameter 'predicate'")
        self.check_outputs()
        self._sizes: list[float] = []
        self._orders: list[int | None] = []
        for side, schema in zip(SIDES, inputs):
            by_values = self.choice(f"{side}-order-by", ("VALUES", "TUPLES"), "TUPLES") == "VALUES"
            size = self.number(f"{side}-buffer-size", low=0, required=True)
            if by_values:
                on = box.param(f"{side}-order-on-field")
                if not on:
                    raise self.error(f"needs parameter '{side}-order-on-field' ({side}-order-by VALUES)")
                index = self.field_index(schema, on, f"{side}-order-on-field")
                if kind_of(schema.fields[index].type) == STR:
                    raise self.param_error(f"{side}-order-on-field", "order-by VALUES needs a numeric field")
                self._orders.append(index)
                self._sizes.append(size)  # type: ignore[arg-type]
            else:
                self._orders.append(None)
                self._sizes.append(int(size))  # type: ignore[arg-type]  # Borealis truncates
        timeout = self.number("timeout", None, low=0)
        self.timeout: float | None = float(timeout) if timeout is not None else None
        self._probes = self._compile(box, inputs, predicate)
        self._buffers: list[deque[tuple]] = [self._new_buffer(i) for i in range(2)]
        self._times: list[deque[float]] | None = (
            [self._new_buffer(i) for i in range(2)] if self.timeout is not None else None)

    def _new_buffer(self, side: int, items: Any = ()) -> deque:
        maxlen = self._sizes[side] if self._orders[side] is None else None
        return deque(items, maxlen=maxlen)  # type: ignore[arg-type]

    def _compile(self, box: Box, inputs: list[Schema], predicate: str) -> list[Any]:
        builder = CodeBuilder(Scope.join(inputs[0], inputs[1]), ["left", "right"], label=box.name)
        try:
            pred = builder.translate(predicate).source
            expressions = self.indexed("out-field")
            fields = [builder.value(e).source for e in expressions]
        except ExpressionError as exc:
            raise OperatorError(f"join box {box.name!r}: {exc}") from None
        if fields:
            display = "(" + "".join(f + ", " for f in fields) + ")"
            slow = ["def _slow(left, right):"]
            for i, f in enumerate(fields):
                slow += ["    try:", f"        v{i} = {f}", "    except _ERRORS:", f"        v{i} = None"]
            slow.append("    return (" + "".join(f"v{i}, " for i in range(len(fields))) + ")")
            builder.namespace["_slow"] = builder.define("\n".join(slow) + "\n", "_slow")
        else:
            display = "(left + right)"
            builder.namespace["_slow"] = None
        probes = []
        for new, other in (("left", "right"), ("right", "left")):
            source = (
                f"def _probe({new}, buffer, append):\n"
                f"    for {other} in buffer:\n"
                f"        try:\n"
                f"            ok = {pred}\n"
                f"        except _ERRORS:\n"
                f"            continue\n"
                f"        if ok:\n"
                f"            try:\n"
                f"                append({display})\n"
                f"            except _ERRORS:\n"
                f"                append(_slow(left, right))\n"
            )
            probes.append(builder.define(source, "_probe"))
        return probes

    # -- the data path ---------------------------------------------------------------

    def process(self, port: int, rows: list[tuple], now: float) -> Emitted:
        self.tick(now)
        if port not in (0, 1):
            raise self.error(f"has no in port {port}")
        if self._times is not None:
            self._expire(now)
        out: list[tuple] = []
        append = out.append
        probe = self._probes[port]
        other, own = self._buffers[1 - port], self._buffers[port]
        times = self._times[port] if self._times is not None else None
        oi, size = self._orders[port], self._sizes[port]
        for row in rows:
            if other:
                probe(row, other, append)
            own.append(row)
            if times is not None:
                times.append(now)
            if oi is not None:
                self._trim(own, times, row[oi], oi, size)
        return [(0, out)] if out else []

    @staticmethod
    def _trim(own: deque, times: deque | None, new: Any, oi: int, size: float) -> None:
        """Borealis FieldJoinBuffer: drop the oldest while ``new - oldest >= size``."""
        while own:
            try:
                too_old = new - own[0][oi] >= size
            except TypeError:  # a None order value: it cannot be placed, so it goes
                too_old = True
            if not too_old:
                return
            own.popleft()
            if times is not None:
                times.popleft()

    def _expire(self, now: float) -> None:
        limit = now - self.timeout  # type: ignore[operator]
        for buffer, times in zip(self._buffers, self._times):  # type: ignore[arg-type]
            while times and times[0] <= limit:
                times.popleft()
                buffer.popleft()

    # -- state ----------------------------------------------------------------------------

    def shift_times(self, delta: float) -> None:
        if self._times is not None:
            self._times = [deque((t + delta for t in times), maxlen=times.maxlen) for times in self._times]

    def state_entries(self) -> int:
        """Tuples buffered on both sides."""
        return sum(map(len, self._buffers))

    def state(self) -> dict:
        return {
            "clock": self.clock_state(),
            "buffers": [[list(r) for r in b] for b in self._buffers],
            "times": [list(t) for t in self._times] if self._times is not None else None,
        }

    def restore(self, state: dict, now: float | None = None) -> None:
        try:
            self._buffers = [self._new_buffer(i, (tuple(r) for r in state["buffers"][i])) for i in range(2)]
            if self._times is not None:
                saved = state.get("times") or [[], []]
                self._times = [self._new_buffer(i, (float(t) for t in saved[i])) for i in range(2)]
                for buffer, times in zip(self._buffers, self._times):
                    if len(buffer) != len(times):
                        raise ValueError("buffer and arrival times differ in length")
        except (KeyError, IndexError, TypeError, ValueError) as exc:
            raise self.error(f"cannot restore state: {exc!r}") from None
        self.restore_clock(state.get("clock"), now)
