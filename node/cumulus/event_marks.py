"""Event time in a partitioned windowed ``m3`` box: the coordinators' watermarks, carried to every member
(docs/cumulus.md §3.13).

A watermark is a property of the stream, the least over its producers; a member must close a window when
the *stream's* watermark passes its end, though most producers' rows route to other members.  So:

* each coordinator adds the window columns to its producers' rows before routing them (one copy per window a
  row falls in: the maps are keyed by window, so the copies go where their groups live), and keeps its
  producers' watermarks (:class:`StampedTime`, a :class:`~boreas.node.operators.m3event_time.Windows` that never
  closes anything: its ``closed`` stays -inf);
* its ``Close(e)``, sent to *every* member on the ordered per-member links, carries per windowed port
  (:meth:`StampedTime.marks`) two marks: the least of its *active* producers' (None: none is active; +inf once
  all ended) and the greatest of its *idle* ones' (None: none is idle), both None while none of its producers
  sent a row;
* each member, when it passes that ``Close`` in the version order (after every version of ``e`` of that
  coordinator), takes the marks (:meth:`EpochFrontier.heard`) and applies the stream-wide rule of
  node/watermarks.py over all coordinators: per port, the least active mark of any coordinator; when no
  coordinator has an active producer, the greatest idle mark (an idle producer holds nothing back, though it is
  its coordinator's only one); +inf once every coordinator that heard a producer saw all of them end; the least
  over ports.  Every member passes every ``Close`` at the same
  point of the one total order, so every member's frontier, its closed windows and its late rows are the same
  function of the input, on any node and in any replay.

Windows close at most an epoch (``epoch-ms``) after the watermark passes them.  A row whose every window the
frontier closed before its version applies is late at the member that would have kept it: counted there, left
out (:meth:`EpochFrontier.admit`); the box's ``late_tuples`` sums the members hosted on a node.

>>> import math
>>> f = EpochFrontier({0: 5000})
>>> f.heard(0, [[0, 5000.0, None]]), f.heard(1, [[0, None, None]]), f.heard(1, [[0, 3000.0, None]])
(5000.0, 5000.0, 3000.0)
>>> f.heard(1, [[0, None, 2000.0]]), f.heard(0, [[0, None, 7000.0]]), f.heard(1, [[0, "inf", None]])
(5000.0, 7000.0, 7000.0)
>>> f.closed = 5000.0
>>> f.admit(0, [(1, 4999, 0, 5000), (1, 5001, 5000, 5010), (1, 4000, 0, 4000)], time=1)
[(1, 5001, 5000, 5010)]
>>> f.late
2
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import pyarrow.compute as pc

from boreas.m3.compiler.sessionfn import Session
from boreas.wire.columns import Columns, read_columns, weighted

from ..operators import m3columns
from ..operators.m3event_time import Windows

# [[port, active, idle]]: the least active producer's mark (a float, None: none active, "inf": all ended) and the
# greatest idle one's (a float or None)
Marks = list[list]


def _encode(mark: float) -> float | str | None:
    return None if mark == -math.inf else "inf" if mark == math.inf else mark


def _encode_or_none(mark: float | None) -> float | str | None:
    return None if mark is None else _encode(mark)


def _decode(mark: float | str | None) -> float | None:
    return None if mark is None else math.inf if mark == "inf" else float(mark)


@dataclass
class StampedTime:
    """A coordinator's event time: its producers' rows given their windows, and their watermarks."""

    windows: Windows

    def assign(self, port: int, producer: str, rows: list | Columns, now: float) -> list | Columns:
        """The rows of a batch of ``producer`` on windowed ``port``, one copy per window each falls in (the
        window columns appended); the producer's watermark moved by it (rows without an event time counted late)."""
        windows = self.windows
        if isinstance(windows.ports[port].window, Session):
            return self._heard(port, producer, rows, now)
        if isinstance(rows, Columns):
            assigned = windows.admit_columns(port, producer, rows, now)
            if assigned is not None:
                return assigned
            plain = rows.weights is None
            adds, takes = m3columns.by_sign(rows)
            out, weights = windows.admit(port, producer, adds + takes, None if plain else
                                         [1] * len(adds) + [-1] * len(takes), now)
            return weighted(out, weights, windows.ports[port].schema)
        return windows.admit(port, producer, list(rows), None, now)[0]

    def _heard(self, port: int, producer: str, rows: list | Columns, now: float) -> list | Columns:
        """A ``SESSION`` port's batch: its rows as they are (their member holds them in their sessions,
        node/cumulus/sessions.py), but those without an event time (counted late); the watermark moved."""
        windows, time = self.windows, self.windows.ports[port].time
        if isinstance(rows, Columns):
            column = rows.batch.column(time)
            nulls = column.null_count
            newest = pc.max(column).as_py() if len(column) > nulls else None
            if nulls:
                rows = rows.filter(pc.is_valid(column))
        else:
            kept = [row for row in rows if row[time] is not None]
            nulls, newest = len(rows) - len(kept), max((row[time] for row in kept), default=None)
            rows = kept
        windows.heard(port, producer, -math.inf if newest is None else newest, nulls, now)
        return rows

    def end(self, port: int | None, producer: str | None) -> None:
        """``producer`` ended its input on ``port`` (port None: on every port; None, None: every producer of every
        port did)."""
        if port is None and producer is None:
            self.windows.end()
        elif port is None:
            for wp in self.windows.ports.values():
                wp.marks.end(producer)
        elif port in self.windows.ports:
            self.windows.ports[port].marks.end(producer)

    def marks(self, now: float) -> Marks:
        """Per windowed port its active producers' least mark and its idle ones' greatest, as its ``Close``
        carries them (the member combines them over coordinators: module docstring)."""
        out = []
        for port, wp in self.windows.ports.items():
            tracker = wp.marks
            if tracker.all_ended or (tracker.newest and tracker.ended.issuperset(tracker.newest)):
                out.append([port, "inf", None])
            else:
                out.append([port, *tracker.split(now)])
        return out

    def hand_away(self, producer: str, now: float) -> list:
        """``producer``'s watermarks, handed to another coordinator with it: ``[[port, entry]]`` (see
        :meth:`WatermarkTracker.hand_away`); they hold here too until :meth:`forget`."""
        out = []
        for port, wp in self.windows.ports.items():
            entry = wp.marks.hand_away(producer, now)
            if entry is not None:
                out.append([port, entry])
        return out

    def forget(self, producer: str) -> None:
        """The coordinator ``producer`` was handed to took it: its watermarks count there alone."""
        for wp in self.windows.ports.values():
            wp.marks.forget(producer)

    def take_over(self, producer: str, entries: list, now: float) -> None:
        """``producer`` handed here with its watermarks (:meth:`hand_away`'s)."""
        for port, entry in entries:
            wp = self.windows.ports.get(int(port))
            if wp is not None:
                wp.marks.take_over(producer, entry, now)

    @property
    def late(self) -> int:
        return self.windows.late

    def state(self) -> dict:
        return self.windows.state()

    def restore(self, state: dict, now: float | None) -> None:
        if state:
            self.windows.restore(state, now)


@dataclass
class EpochFrontier:
    """A member's event time: the marks each coordinator's last ``Close`` carried, the frontier it closed up to,
    its late rows.  ``slides``: each windowed port's slide (a TUMBLE's is its size)."""

    slides: dict[int, int]
    # coordinator -> port -> [least active mark, greatest idle mark] of its last Close (None: no such producer)
    heard_marks: dict[int, dict[int, list]] = field(default_factory=dict)
    closed: float = -math.inf
    late: int = 0

    def heard(self, coordinator: int, marks: Marks, members: int | None = None) -> float:
        """A ``Close`` of ``coordinator`` passed with ``marks``: the frontier now.  ``members``: the partition's
        members now (a retired member's coordinator closes no more epochs: its last marks stop counting; its
        producers went to others with their watermarks, node/cumulus/handing.py).  The frontier moves at the
        last coordinator's ``Close`` of an epoch only: at an earlier one's, versions of that epoch stamped by the
        coordinators after it are still to apply, and a producer first heard of by one of those (no mark from
        it yet) would find its rows of that epoch judged by the others' marks alone.  A coordinator's marks are
        those of its last Close: they may go back (a producer handed to it, one waking from idleness), the
        frontier a member closed up to never does."""
        if members is not None:
            for gone in [c for c in self.heard_marks if c >= members]:
                del self.heard_marks[gone]
        mine = self.heard_marks.setdefault(coordinator, {})
        for port, active, *idle in marks:  # (a Close of a version before idle marks: [port, mark])
            mine[int(port)] = [_decode(active), _decode(idle[0]) if idle else None]
        if members is not None and coordinator < members - 1:
            return self.closed  # (the epoch's later coordinators' versions are not applied yet: see frontier)
        return self.frontier()

    def frontier(self) -> float:
        """Per windowed port the stream's watermark over the coordinators (module docstring), the least of those."""
        least = math.inf
        for port in self.slides:
            pairs = [pair for by in self.heard_marks.values() if (pair := by.get(port)) is not None]
            active = [a for a, _ in pairs if a is not None and a != math.inf]
            idle = [i for _, i in pairs if i is not None]
            mark = (min(active) if active else max(idle) if idle else
                    math.inf if any(a == math.inf for a, _ in pairs) else -math.inf)
            least = min(least, mark)
        return least

    def admit(self, port: int, rows: list | bytes | Columns, time: int) -> list | Columns:
        """A Work's rows of windowed ``port`` (window start and end their last two columns, the event time at
        ``time``) without the copies of closed windows; a row is late, and counted, when the copy of its last
        window (the one its time is in the slide after the start of) is left out."""
        closed = self.closed
        if closed == -math.inf:
            return rows
        slide = self.slides[port]
        if isinstance(rows, bytes):
            rows = read_columns(rows)
        if isinstance(rows, Columns):
            batch = rows.batch
            ends = batch.column(batch.num_columns - 1)
            keep = pc.greater(ends, closed)
            if pc.all(keep).as_py():
                return rows
            gone = pc.invert(keep)
            lasts = pc.less(batch.column(time), pc.add(batch.column(batch.num_columns - 2), slide))
            counted = np.asarray(pc.and_(gone, lasts).to_numpy(zero_copy_only=False), dtype=bool)
            weights = None if rows.weights is None else np.abs(rows.weights.to_numpy(zero_copy_only=False))
            self.late += int(counted.sum()) if weights is None else int(weights[counted].sum())
            return rows.filter(keep)
        kept = [row for row in rows if row[-1] > closed]
        if len(kept) != len(rows):
            self.late += sum(1 for row in rows if row[-1] <= closed and row[time] < row[-2] + slide)
        return kept

    def state(self) -> dict:
        return {"closed": _encode(self.closed), "late": self.late,
                "marks": [[c, [[p, _encode_or_none(a), _encode_or_none(i)] for p, (a, i) in by.items()]]
                          for c, by in self.heard_marks.items()]}

    def join(self, state: dict) -> None:
        """Start from a source member's :meth:`state` at the same point of the order (a layout change's first
        epoch, its final chunk: node/cumulus/windowing.py): the greater frontier, and the marks of the
        coordinators not heard here.  A member joining by that change has passed no ``Close`` yet; for any other
        it changes nothing (every member passed the same ``Close``\\s).  Late rows stay counted at the source."""
        closed = _decode(state.get("closed"))
        if closed is not None and closed > self.closed:
            self.closed = closed
        for c, by in state.get("marks", []):
            self.heard_marks.setdefault(int(c), {int(p): [_decode(a), _decode(i[0]) if i else None]
                                                 for p, a, *i in by})

    def restore(self, state: dict) -> None:
        closed = _decode(state.get("closed"))
        self.closed = -math.inf if closed is None else closed
        self.late = int(state.get("late", 0))
        self.heard_marks = {int(c): {int(p): [_decode(a), _decode(i[0]) if i else None] for p, a, *i in by}
                            for c, by in state.get("marks", [])}
