"""What a windowed ``m3`` box knows of event time: its windowed ports' watermarks, the frontier it has closed
up to, and its late rows (node/operators/m3windows.py has the whole picture).

:class:`Windows` is the one owner of that state: it admits each batch (one copy of a row per open window it
falls in, the window columns appended, late rows counted and left out), moves the producers' watermarks, and
says how far windows may close; the box (:class:`~boreas.node.operators.m3windows.WindowedM3Operator`) closes
them.  Its :meth:`Windows.state` rides in the box's, so it moves and is snapshotted with the maps.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa

from boreas.catalog.model import Box, Field, FieldType, Input, Schema
from boreas.catalog.watermarks import read_idle_timeout, read_watermark
from boreas.m3.boxtype import BoxPlan
from boreas.m3.compiler.sessionfn import Session
from boreas.m3.compiler.windowfn import WINDOW_COLUMNS, Window
from boreas.node.watermarks import WatermarkTracker
from boreas.wire.columns import Columns

from .late import LateLog

log = logging.getLogger(__name__)


@dataclass
class WindowedPort:
    """One in port read through a window: the window, where the event time is in its rows, its watermark."""

    window: Window | Session
    time: int  # the event time's position in the port's rows
    marks: WatermarkTracker
    schema: Schema  # the port's rows with the window columns appended


def windowed_ports(plan: BoxPlan, inputs: list[Schema], idle: float | None) -> dict[int, WindowedPort]:
    """The box's in ports read through a window, each with its watermark (its ``WATERMARK FOR`` delay, else 0,
    and the box's ``idle`` timeout)."""
    delays = {m.relation.lower(): m.delay for m in plan.watermarks}
    ports = {}
    for port, pp in enumerate(plan.ports):
        window = next((w for w in plan.windows if w.relation.lower() == pp.relation.lower()), None)
        if window is None:
            continue
        schema = inputs[port]
        time = next(i for i, f in enumerate(schema.fields) if f.name.lower() == window.time.lower())
        extended = Schema(f"{schema.name}.windows", schema.fields + tuple(
            Field(name, FieldType.LONG) for name in WINDOW_COLUMNS))
        ports[port] = WindowedPort(window, time, WatermarkTracker(delays.get(pp.relation.lower(), 0), idle), extended)
    return ports


def declare_inputs(box: Box, ports: Mapping[int, WindowedPort], inputs: Mapping[str, Input],
                   idle: float | None) -> None:
    """The node's ``<input>`` declarations: a windowed stream's ``watermark`` (and ``idle-timeout``) is the
    stream's, and wins over the box's own ``WATERMARK FOR`` (docs/m3.md, "Event time")."""
    for port, wp in ports.items():
        declared = inputs.get(box.in_name(port))
        if declared is None or declared.watermark is None:
            continue
        column, delay = read_watermark(declared.watermark)
        if column.lower() != wp.window.time.lower():
            log.warning("m3 box %r: stream %r's watermark is on %s but its window reads %s; the box's own "
                        "watermark applies", box.name, declared.stream, column, wp.window.time)
            continue
        wp.marks.declare(delay, read_idle_timeout(declared.idle_timeout) if declared.idle_timeout else idle)


@dataclass
class Windows:
    """Owns a box's event time: its windowed ports' watermarks, the frontier it has closed up to, late rows."""

    ports: dict[int, WindowedPort]
    closed: float = -math.inf  # windows ending at or before this have been emitted and dropped
    late: int = 0
    at: float = 0.0  # the flow clock last seen (to shift idle timers when the box moves)
    polled: float = -math.inf  # the flow clock of the last idle timer fired
    logged: LateLog = field(default_factory=lambda: LateLog(""))

    def admit(self, port: int, producer: str, rows: list[tuple], weights: list[int] | None,
              now: float) -> tuple[list[tuple], list[int] | None]:
        """The rows of a batch on ``port`` with their windows' columns, one copy per open window (the late rows
        left out and counted), and their weights; the producer's watermark moved by the batch after."""
        wp, closed, self.at = self.ports[port], self.closed, now
        size, assign, t = wp.window.size, wp.window.assign, wp.time
        out: list[tuple] = []
        out_weights: list[int] | None = None if weights is None else []
        newest = -math.inf
        for i, row in enumerate(rows):
            when = row[t]
            if when is None:
                self.late += 1 if weights is None else abs(weights[i])
                continue
            newest = max(newest, when)
            starts = [s for s in assign(when) if s + size > closed]
            if not starts:
                self.late += 1 if weights is None else abs(weights[i])
                continue
            out.extend(row + (s, s + size) for s in starts)
            if out_weights is not None:
                out_weights.extend([weights[i]] * len(starts))
        if newest > -math.inf:
            wp.marks.observe(producer, newest, now)
        else:
            wp.marks.heard_from(producer, now)
        self.logged.note(self.late, now)
        return out, out_weights

    def admit_columns(self, port: int, producer: str, columns: Columns, now: float) -> Columns | None:
        """:meth:`admit` for an Arrow batch, with numpy over whole columns: the rows of every window a row may
        fall in (TUMBLE one, HOP ``size / slide``) taken from the batch at once (:func:`_windowed`); None when
        its event times hold a null (the row path counts those)."""
        wp, closed, self.at = self.ports[port], self.closed, now
        batch = columns.batch
        column = batch.column(wp.time)
        if column.null_count:
            return None
        times = column.to_numpy(zero_copy_only=False)
        whole = np.floor(times).astype(np.int64) if times.dtype.kind == "f" else times.astype(np.int64)
        size, slide = wp.window.size, wp.window.slide
        last = whole - whole % slide
        kept = np.zeros(len(times), dtype=bool)
        at, starts_at = [], []  # per window a row may fall in: the rows in one, and their windows' starts
        for j in range(-(-size // slide)):
            starts = last - j * slide
            mask = (starts > times - size) & (starts + size > closed)
            if not mask.any():
                continue
            kept |= mask
            rows = np.flatnonzero(mask)
            at.append(rows)
            starts_at.append(starts[rows])
        late = ~kept
        if late.any():
            self.late += int(late.sum()) if columns.weights is None else \
                int(np.abs(columns.weights.to_numpy(zero_copy_only=False)[late]).sum())
        if len(times):
            wp.marks.observe(producer, times.max().item(), now)
        else:
            wp.marks.heard_from(producer, now)
        self.logged.note(self.late, now)
        return _windowed(columns, at, starts_at, size)

    def heard(self, port: int, producer: str, newest: float, late: int, now: float) -> None:
        """A batch on ``port`` whose rows another owner admitted (a session's): its newest event time moves the
        producer's watermark, and ``late`` of its rows were late."""
        wp, self.at = self.ports[port], now
        if newest > -math.inf:
            wp.marks.observe(producer, newest, now)
        else:
            wp.marks.heard_from(producer, now)
        self.late += late
        self.logged.note(self.late, now)

    def frontier(self, now: float) -> float:
        """The least watermark of the windowed streams at flow clock ``now``: windows ending by it are closed."""
        self.advance(now)
        return min(wp.marks.watermark(now) for wp in self.ports.values())

    def advance(self, now: float) -> None:
        """The flow clock reached ``now`` (rows or not): a restore shifts the idle timers by the clock since."""
        self.at = max(self.at, now)

    def end(self, port: int | None = None) -> None:
        """Every producer of the stream on in port ``port`` ended (the router's end of input; None: of every
        in stream): that port's watermark is +infinity, every producer of it (and rows fed without a producer
        id, producer ``""``) included.  The other windowed ports' watermarks still hold the frontier: windows
        all close only once every windowed stream ended.  Kept in the port's tracker, so in :meth:`state`."""
        for at, wp in self.ports.items():
            if port is None or at == port:
                wp.marks.end()

    def next_deadline(self) -> float | None:
        """When a producer of a windowed stream next turns idle (after the last timer fired)."""
        times = [d for wp in self.ports.values() if (d := wp.marks.next_deadline(self.polled)) is not None]
        return min(times) if times else None

    def state(self) -> dict:
        return {"closed": None if self.closed == -math.inf else self.closed, "late": self.late, "at": self.at,
                "polled": None if self.polled == -math.inf else self.polled,
                "marks": {str(port): wp.marks.state() for port, wp in self.ports.items()}}

    def restore(self, state: dict, now: float | None) -> None:
        """Continue from :meth:`state`; ``now`` (the restoring node's clock) shifts the idle timers."""
        shift = 0.0 if now is None else now - float(state.get("at", 0.0))
        closed, polled = state.get("closed"), state.get("polled")
        self.closed = -math.inf if closed is None else closed
        self.polled = -math.inf if polled is None else polled + shift
        self.late = int(state.get("late", 0))
        self.at = float(state.get("at", 0.0)) + shift
        for port, marks in state.get("marks", {}).items():
            self.ports[int(port)].marks.restore(marks, shift)
        self.logged.restored(self.late)


def _windowed(columns: Columns, at: list[np.ndarray], starts: list[np.ndarray], size: int) -> Columns:
    """``columns``' rows at ``at`` (per window a row may fall in, in that order), each with its window's
    ``starts`` and end appended (``WINDOW_COLUMNS``): one ``take`` of the batch however many windows a row
    falls in (HOP's ``size / slide``), none when every row falls in one window (a TUMBLE batch with no late
    row: its columns as they are)."""
    batch = columns.batch
    names = [*batch.schema.names, *WINDOW_COLUMNS]
    if not at:
        return Columns(pa.RecordBatch.from_arrays(
            [*batch.slice(0, 0).columns, pa.array([], pa.int64()), pa.array([], pa.int64())], names=names))
    rows, picked = (at[0], starts[0]) if len(at) == 1 else (np.concatenate(at), np.concatenate(starts))
    whole = len(at) == 1 and len(rows) == batch.num_rows  # (then ``rows`` is every row, in order)
    taken = None if whole else pa.array(rows)
    body = batch if whole else batch.take(taken)
    weights = columns.weights if whole or columns.weights is None else columns.weights.take(taken)
    out = pa.RecordBatch.from_arrays([*body.columns, pa.array(picked, pa.int64()), pa.array(picked + size, pa.int64())],
                                     names=names)
    return Columns(out, weights=weights)
