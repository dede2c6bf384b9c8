"""``sunion``: Borealis's serializing union, its delay-process-correct model on a changelog.

Each row has a time: its ``order-on-field`` value, or, without one, the
instant it reached the box (milliseconds on the box's clock, counted from
the first row it saw).  Rows wait in buckets of ``interval``; a bucket goes
out once every in port has sent a row of a later bucket (stable), or,
when an in port stays silent past its ``max-delay.N``, without it
(tentative); when the silent port is heard again past the bucket, the
tentative rows are retracted (-1) and the bucket goes out stable
(:class:`~.sunion_buckets.Buckets` owns all that).  The out streams are
changelogs (catalog/changelog.py), so whatever reads them applies the
retraction: a filter, map or union passes it on, an aggregate or an
``m3`` view revises its result, an ``sjoin`` retracts the pairs.

Out port 0, the control stream (no fields), says when the box's output
has tentative rows: a row at +1 when it turns tentative, at -1 when it
is all stable again (Borealis's UP_FAILURE and REC_DONE).  With
``tentative-field``, each data row says it too (1 tentative, 0 stable; a
retraction has the flag of the row it retracts).  With one data out
stream the in streams are merged, serialised by time, then in port; with
one per in stream, each gets its own rows.

A row of a bucket already stable is late: dropped and counted
(``late_tuples``), since a stable row is never taken back.  ``benchmark``
``none`` (and the other plain ones) makes the box a union: rows pass at
once, stable; ``block`` never goes tentative.  An in stream that has
ended (node/stream_ends.py) is past every bucket and never away, so the
buckets the others passed go out stable; when every in stream has ended,
everything held goes out stable.
"""

from __future__ import annotations

from typing import Any

from boreas.catalog.fault_params import FaultParamError, sunion_params
from boreas.catalog.model import Box, Schema
from boreas.wire.columns import Columns

from .base import Emitted, OperatorError
from .changelog_out import grouped, rows_and_weights
from .sunion_buckets import CONTROL, Buckets, Out
from .timers import Timed


class SUnionOperator(Timed):
    """One sunion box: reads batches, asks its :class:`Buckets` what goes out, writes changelog batches."""

    takes_columns = True  # a changelog's weights travel only with columns

    def __init__(self, box: Box, inputs: list[Schema], outputs: list[Schema]):
        super().__init__(box, inputs, outputs)
        self.check_outputs()
        try:
            params = sunion_params(box)
        except FaultParamError as exc:
            raise OperatorError(str(exc)) from None
        self._plain = params.mode == "plain"
        self._merged = len(outputs) == 2
        self._flag = params.tentative_field is not None
        order = params.order_field
        self._orders = [None if order is None else self.field_index(s, order, "order-on-field") for s in inputs]
        self._buckets = Buckets(params.interval, tuple(d / 1000.0 for d in params.delays), params.stagger,
                                params.mode == "block")
        self._origin: float | None = None  # the instant a row's arrival time counts from (no order-on-field)
        self.ignored = 0  # rows whose order-on-field is null

    # -- the contract ------------------------------------------------------------------------

    def process(self, port: int, rows: list[tuple] | Columns, now: float) -> Emitted:
        self.tick(now)
        values, weights = rows_and_weights(rows)
        if self._plain:
            return self._emit([Out(port, r, w, False) for r, w in zip(values, weights)])
        out = self._buckets.release(now)
        if self._origin is None:
            self._origin = now
        at = self._orders[port]
        arrived = (now - self._origin) * 1000.0
        for row, weight in zip(values, weights):
            t = arrived if at is None else row[at]
            if t is None:
                self.ignored += 1
                continue
            out += self._buckets.add(port, float(t), tuple(row), weight, now)
        return self._emit(out)

    def poll(self, now: float) -> Emitted:
        self.tick(now)
        return self._emit(self._buckets.release(now))

    def next_deadline(self) -> float | None:
        return self._buckets.deadline()

    def end_of_input(self, now: float, port: int | None = None) -> Emitted:
        """The stream on ``port`` ended (None: every in stream): it holds no bucket back any more; everything
        held goes out stable only once every in stream ended (:meth:`Buckets.end`)."""
        self.tick(now)
        return self._emit(self._buckets.end(port, now))

    def counters(self) -> dict[str, int]:
        return {"late_tuples": self._buckets.late, "ignored_tuples": self.ignored}

    def state_entries(self) -> int:
        return self._buckets.entries()

    def state(self) -> dict[str, Any]:
        return {"clock": self.clock_state(), "origin": self._origin, "ignored": self.ignored,
                "buckets": self._buckets.state()}

    def restore(self, state: dict[str, Any], now: float | None = None) -> None:
        self._buckets.restore(state["buckets"])
        self._origin, self.ignored = state["origin"], state["ignored"]
        self.restore_clock(state.get("clock"), now)

    def shift_times(self, delta: float) -> None:
        self._buckets.shift_times(delta)
        if self._origin is not None:
            self._origin += delta

    # -- out ---------------------------------------------------------------------------------

    def _emit(self, out: list[Out]) -> Emitted:
        items = []
        for o in out:
            if o.port == CONTROL:
                items.append((0, (), o.weight))
                continue
            row = o.row + (int(o.tentative),) if self._flag else o.row
            items.append((1 if self._merged else 1 + o.port, row, o.weight))
        return grouped(items, self.outputs)  # type: ignore[return-value]
