"""The join's row path: a tuple at a time over buffers of Python tuples (the definition of its semantics).

:class:`RowJoin` owns both sides' buffers as deques of tuples (and, with a
``timeout``, their arrival times).  A tuple arriving on one side is joined
with every tuple of the other side's buffer, oldest first, by generated
code (:func:`compile_probes`), then enters its own buffer, which is then
trimmed (:mod:`.join`'s docstring says how).  The columnar path
(:mod:`.join_columns`) gives exactly what this gives; the property tests
(tests/test_join_columns.py) hold it to that.  A box runs here when its
shape has no columnar translation, and each batch the columns cannot treat
exactly probes with these functions.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from boreas.catalog.expressions import ExpressionError, Scope
from boreas.catalog.model import Box, Schema
from boreas.node.compile import CodeBuilder

from .base import OperatorError

#: ``probe(new, buffer, append)``: append the out tuple of each pair of ``new`` with a ``buffer`` tuple that matches.
Probe = Callable[[tuple, Any, Callable[[tuple], None]], None]


@dataclass(frozen=True)
class JoinSpec:
    """A join box's parameters, read once (:class:`~.join.JoinOperator`); per side: left, then right."""

    predicate: str
    out_fields: tuple[str, ...]  # out-field.N; none: the left tuple's fields followed by the right's
    sizes: tuple[float, float]  # buffer sizes: a count of tuples, or a range of order values
    orders: tuple[int | None, int | None]  # the order-on-field index with order-by VALUES, None for TUPLES
    timeout: float | None


def compile_probes(box: Box, inputs: list[Schema], spec: JoinSpec) -> list[Probe]:
    """The probe of a left tuple against the right buffer, and of a right tuple against the left one.

    A predicate that fails on a pair is false; an out field that fails is None.
    """
    builder = CodeBuilder(Scope.join(inputs[0], inputs[1]), ["left", "right"], label=box.name)
    try:
        pred = builder.translate(spec.predicate).source
        fields = [builder.value(e).source for e in spec.out_fields]
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


def trim(own: deque, times: deque | None, new: Any, oi: int, size: float) -> None:
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


class RowJoin:
    """Both sides' buffers as tuples, and the join of a batch of rows against them (the module docstring)."""

    def __init__(self, spec: JoinSpec, probes: list[Probe]) -> None:
        self.spec = spec
        self.probes = probes
        self.buffers: list[deque[tuple]] = [self._new_buffer(i) for i in range(2)]
        self.times: list[deque[float]] | None = (
            [self._new_buffer(i) for i in range(2)] if spec.timeout is not None else None)

    def _new_buffer(self, side: int, items: Any = ()) -> deque:
        maxlen = int(self.spec.sizes[side]) if self.spec.orders[side] is None else None
        return deque(items, maxlen=maxlen)

    def process(self, port: int, rows: list[tuple], now: float) -> list[tuple]:
        if self.times is not None:
            self._expire(now)
        out: list[tuple] = []
        append = out.append
        probe = self.probes[port]
        other, own = self.buffers[1 - port], self.buffers[port]
        times = self.times[port] if self.times is not None else None
        oi, size = self.spec.orders[port], self.spec.sizes[port]
        for row in rows:
            if other:
                probe(row, other, append)
            own.append(row)
            if times is not None:
                times.append(now)
            if oi is not None:
                trim(own, times, row[oi], oi, size)
        return out

    def _expire(self, now: float) -> None:
        limit = now - self.spec.timeout  # type: ignore[operator]
        for buffer, times in zip(self.buffers, self.times):  # type: ignore[arg-type]
            while times and times[0] <= limit:
                times.popleft()
                buffer.popleft()

    def shift_times(self, delta: float) -> None:
        if self.times is not None:
            self.times = [deque((t + delta for t in times), maxlen=times.maxlen) for times in self.times]

    def entries(self) -> int:
        return sum(map(len, self.buffers))

    def buffered(self, side: int) -> int:
        return len(self.buffers[side])

    def state(self) -> dict:
        """The buffers (and arrival times) as :meth:`~.join.JoinOperator.state` saves them."""
        return {
            "buffers": [[list(r) for r in b] for b in self.buffers],
            "times": [list(t) for t in self.times] if self.times is not None else None,
        }

    def restore(self, state: dict) -> None:
        """From :meth:`state` (either path's); raises KeyError, IndexError, TypeError or ValueError if it is not one."""
        self.buffers = [self._new_buffer(i, (tuple(r) for r in state["buffers"][i])) for i in range(2)]
        if self.times is not None:
            saved = state.get("times") or [[], []]
            self.times = [self._new_buffer(i, (float(t) for t in saved[i])) for i in range(2)]
            for buffer, times in zip(self.buffers, self.times):
                if len(buffer) != len(times):
                    raise ValueError("buffer and arrival times differ in length")
