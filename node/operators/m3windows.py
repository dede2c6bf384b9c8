"""Event-time windows in an ``m3`` box: rows assigned their windows, late rows dropped, closed windows emitted
once and their state dropped.

A view over ``TABLE(TUMBLE(...))``, ``TABLE(HOP(...))`` or ``TABLE(SESSION(...))``
(m3/compiler/windowfn.py) reads its stream with two more columns, ``window_start`` and ``window_end``.
:class:`WindowedM3Operator` is the ``m3`` box of such a view; :class:`Windows` owns what it knows of time:

* each arriving row gets one copy per window it falls in (TUMBLE one, HOP ``size / slide``), the window
  columns appended, before the maps see it;
* a row every window of which has already closed is *late*: never folded in, counted in the box's
  ``late_tuples`` (the Borealis aggregate's metric, node/operators/late.py) and logged, rate-limited; a HOP
  row some of whose windows closed is folded into the open ones only;
* the watermark of each windowed stream (node/watermarks.py) moves with every batch, an idle producer's
  timeout, a producer's final mark and the end of that stream (+infinity); the box's *frontier* is the
  least of its windowed streams' watermarks (one stream's end leaves the others holding it), and a window
  whose end is at or before it is closed: its view rows are emitted then, once, as plain
  insertions (final rows, no -old/+new while it is open), and every map entry keyed by a closed window is
  deleted (``Runtime.remove_at_most``), so the maps hold the open windows only, however long the stream.

A ``SESSION`` port's rows are held per key in their open sessions (node/operators/m3sessions.py) and reach
the maps only when their session closes, with its final bounds: then they are folded in, emitted and
dropped at once.  A box reads through sessions or through TUMBLE/HOP, not both.

Everything here is box state: :meth:`Windows.state` rides in the box's, so it moves and is snapshotted with
its maps.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping

from boreas.catalog.boxtypes import BoxError
from boreas.catalog.model import Box, Input, Schema
from boreas.m3.boxtype import box_topn, box_windows
from boreas.m3.compiler.sessionfn import Session
from boreas.wire.columns import Columns, weighted

from . import m3columns
from .base import Emitted, OperatorError
from .late import LateLog
from .m3closing import Closing
from .m3event_time import Windows, declare_inputs, windowed_ports
from .m3box import M3Operator
from .m3winjoin import StageEmit
from .m3sessions import SessionBuffer, SessionPort
from .m3topn import TopNM3Operator

log = logging.getLogger(__name__)


class WindowedM3Operator(M3Operator):
    """An ``m3`` box whose SQL reads a stream through TUMBLE, HOP or SESSION: its views' rows leave when their window
    closes, once, and the window's state goes (module docstring)."""

    emits_changes = False  # an open window's changes are not emitted: its final rows are, when it closes

    def __init__(self, box: Box, inputs: list[Schema], outputs: list[Schema]):
        super().__init__(box, inputs, outputs)
        self._idle = idle = self.number("idle-timeout", None, positive=True)
        ports, sessions = windowed_ports(self.plan, self.inputs, idle), {}
        for port, wp in ports.items():
            if isinstance(wp.window, Session):
                names = [f.name.lower() for f in self.inputs[port].fields]
                sessions[port] = SessionPort(wp.window, wp.time, tuple(names.index(c.lower()) for c in wp.window.partition))
        if sessions and len(sessions) != len(ports):
            raise self.error("reads one stream through SESSION and another through TUMBLE or HOP; a box reads "
                             "through sessions or through fixed windows (use one box for each)")
        # per port the STRING columns nothing reads, blanked before a batch is copied per window (.m3columns);
        # a SESSION's partition columns are read by this box itself (the program never sees them), so kept
        self._blank = {port: m3columns.unread_strings(self.plan.program, self.plan.ports[port])
                       - frozenset(sessions[port].partition if port in sessions else ()) for port in ports}
        self.windows = Windows(ports, logged=LateLog(box.name, kind="m3", allowance="its stream's watermark delay"))
        self.sessions = SessionBuffer(sessions)
        self.closing = Closing.of(self.plan, self.error)
        # a window join: its views are the leaves, its rows the stages' (.m3winjoin)
        self._stages = (StageEmit(self.plan.stages, self.outputs[0], self.closing, self.runtime)
                        if self.plan.stages is not None else None)

    # -- the data plane ----------------------------------------------------------------

    def process(self, port: int, rows, now: float) -> Emitted:
        return self.process_from(port, rows, now, ("", "", 0))

    def process_from(self, port: int, rows, now: float, origin: tuple[str, str, int]) -> Emitted:
        """Fold the batch's on-time rows into their open windows, then emit the windows its watermark closes."""
        if port in self.sessions.ports:
            return self._hold(port, rows, now, origin[1])
        admitted = None
        if port in self.windows.ports and isinstance(rows, Columns):
            rows = m3columns.blank_unread(rows, self.plan.ports[port], self._blank[port])
            admitted = self.windows.admit_columns(port, origin[1], rows, now)
        if admitted is not None:
            rows = admitted
        elif port in self.windows.ports:
            weights = None
            if isinstance(rows, Columns):
                plain = rows.weights is None
                adds, takes = m3columns.by_sign(rows)
                rows = adds + takes
                weights = None if plain else [1] * len(adds) + [-1] * len(takes)
            rows, weights = self.windows.admit(port, origin[1], rows, weights, now)
            if weights is not None:
                rows = weighted(rows, weights, self.windows.ports[port].schema)
        if rows:
            super().process(port, rows, now)  # (emits nothing: emits_changes)
        return self._close(now)

    def _hold(self, port: int, rows, now: float, producer: str) -> Emitted:
        """A batch on a ``SESSION`` port: its rows held in their sessions, then the sessions it closes emitted.
        (The STRING columns nothing reads are blanked first: held rows would otherwise keep, and make Python
        strings of, values no view reads, as a TUMBLE's copies per window would.)"""
        if isinstance(rows, Columns):
            rows = m3columns.blank_unread(rows, self.plan.ports[port], self._blank[port])
        if isinstance(rows, Columns) and rows.weights is None:
            held = self.sessions.admit_columns(port, rows, self.windows.closed)
            if held is not None:
                self.windows.heard(port, producer, held[1], held[0], now)
                return self._close(now)
        if isinstance(rows, Columns):
            adds, takes = m3columns.by_sign(rows)
            if takes:
                raise self.error(f"a SESSION window reads insertions only; a deletion reached in port {port}")
            rows = adds
        late, newest = self.sessions.admit(port, rows, self.windows.closed)
        self.windows.heard(port, producer, newest, late, now)
        return self._close(now)

    def poll(self, now: float) -> Emitted:
        self.windows.polled = now
        return self._close(now)

    def next_deadline(self) -> float | None:
        return self.windows.next_deadline()

    def producer_ended(self, port: int, producer: str, now: float) -> Emitted:
        """A producer of a windowed stream ended: it holds the watermark back no more (+infinity)."""
        wp = self.windows.ports.get(port)
        if wp is None:
            return []
        wp.marks.end(producer)
        return self._close(now)

    def end_of_input(self, now: float, port: int | None = None) -> Emitted:
        """The stream on ``port`` ended (None: every in stream): its watermark is +infinity, so the windows
        close as far as the other windowed streams' watermarks allow; all of them once every one ended.  (A
        port not read through a window holds no window open: its end closes nothing.)"""
        self.windows.end(port)
        return self._close(now)

    def _close(self, now: float) -> Emitted:
        """Emit the rows of every window the frontier has passed, then delete every map entry of one."""
        frontier = self.windows.frontier(now)
        if frontier <= self.windows.closed:
            return []
        for port, parts in self.sessions.close_parts(frontier).items():  # folded in with their final bounds
            for rows in parts:  # (rows held one at a time; the runs of batches as one batch of columns)
                super().process(port, rows, now)
        everything = bool(self.sessions.ports)  # every entry in the maps is a session closed just now
        emitted: Emitted = []
        if self._stages is not None:  # a window join: its leaves' rows are the stages' (.m3winjoin)
            if joined := self._stages.emit(self.closing, self.runtime, frontier, everything):
                emitted.append((0, joined))
        else:
            closed = self.closing.closed_entries(self.runtime, frontier, everything)
            for out, view, _, _, pairs in self.closing.rows(self.runtime, frontier, closed, everything):
                if pairs:
                    emitted.append((out, self._emit[out](pairs)))
        dropped = self.runtime.remove_at_most(self.closing.bounds(frontier, everything))
        log.debug("m3 box %r: windows up to %s closed, %d map entries dropped", self.box.name, frontier, dropped)
        self.windows.closed = frontier
        return emitted

    def follow_inputs(self, inputs: Mapping[str, Input]) -> None:
        """The node's ``<input>`` declarations: a windowed stream's ``watermark`` (and ``idle-timeout``) is the
        stream's, and wins over the box's own ``WATERMARK FOR`` (docs/m3.md, "Event time")."""
        declare_inputs(self.box, self.windows.ports, inputs, self._idle)

    # -- what it knows -----------------------------------------------------------------

    def counters(self) -> dict[str, int]:
        return {**super().counters(), "late_tuples": self.windows.late}

    def state_entries(self) -> int:
        """Entries of every map, and the rows held in open sessions."""
        return super().state_entries() + self.sessions.held()

    def state(self) -> dict:
        return {**super().state(), "windows": self.windows.state(), "sessions": self.sessions.state()}

    def restore(self, state: dict, now: float | None = None) -> None:
        super().restore(state, now)
        try:
            self.windows.restore(state.get("windows", {}), now)
            self.sessions.restore(state.get("sessions", {}))
        except (KeyError, TypeError, ValueError) as exc:
            raise self.error(f"cannot restore its windows: {exc}") from None


def m3_operator(box: Box, inputs: list[Schema], outputs: list[Schema]) -> M3Operator:
    """The operator of an ``m3`` box: :class:`WindowedM3Operator` when its SQL reads a window, else
    :class:`.m3box.M3Operator`."""
    try:
        windows, _ = box_windows(box)
        ranked = box_topn(box) is not None
    except BoxError as exc:
        raise OperatorError(str(exc)) from None
    if ranked and not windows:  # (a top-N over a window is refused by its plan)
        return TopNM3Operator(box, inputs, outputs)
    return (WindowedM3Operator if windows else M3Operator)(box, inputs, outputs)


def follow_watermarks(operators: Iterable[object], inputs: Mapping[str, Input]) -> None:
    """Tell every windowed ``m3`` box among ``operators`` the node's ``<input>`` declarations (a new local
    catalog: node/operator_host.py); a member of a partitioned one (node/cumulus/windowing.py) has the same
    ``follow_inputs``."""
    for op in operators:
        follow = getattr(op, "follow_inputs", None)
        if follow is not None:
            follow(inputs)
