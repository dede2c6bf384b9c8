"""``SESSION`` windows in an ``m3`` box: each key's open sessions, their rows held until the watermark closes them.

Why rows are held, not folded in as they come: a session's bounds move as
rows arrive (a row extends it, or bridges two into one), and its result is
emitted once, when it closes; a view's maps keyed by ``window_start`` would
have to move every aggregate (a MIN, a COUNT DISTINCT) from one key to
another on each merge.  Holding the rows of the open sessions instead, and
folding a session's rows into the maps when it closes, with its final
``window_start`` and ``window_end``, needs nothing of the aggregates: any
view that runs over TUMBLE runs over SESSION.  The cost is the rows of the
open sessions (not one aggregate per session), dropped when each closes.

:class:`SessionSet` owns one key's open sessions; :class:`SessionBuffer` owns
every key's, per windowed port, and rides in the box's state
(node/operators/m3windows.py asks it).

>>> keys = SessionSet(10_000)
>>> keys.add(0, ("a",)); keys.add(25_000, ("b",)); keys.bounds()
[(0, 10000), (25000, 35000)]
>>> keys.add(12_000, ("c",)); keys.bounds()     # within 10s of neither: a third session
[(0, 10000), (12000, 22000), (25000, 35000)]
>>> keys.add(9_000, ("d",)); keys.bounds()      # bridges the first two
[(0, 22000), (25000, 35000)]
>>> [(start, end, len(rows)) for start, end, rows in keys.close(30_000)], keys.bounds()
([(0, 22000, 3)], [(25000, 35000)])
"""

from __future__ import annotations

import bisect
import heapq
import itertools
import math
from collections.abc import Iterable
from dataclasses import dataclass, field

import pyarrow as pa

from boreas.m3.compiler.sessionfn import Session
from boreas.wire.columns import Columns
from boreas.wire.pyvalues import python_values

from .m3session_batch import Runs, runs
from .m3session_held import HeldRun, Pins, gathered, held_count, held_rows


@dataclass
class SessionSet:
    """Owns one key's open sessions: disjoint ``[start, end)`` intervals in order, each with its rows."""

    gap: float
    starts: list[float] = field(default_factory=list)
    ends: list[float] = field(default_factory=list)
    rows: list[list[tuple]] = field(default_factory=list)

    def holds(self, t: float) -> bool:
        """Whether ``t`` falls inside an open session (a row there cannot reach a closed one)."""
        i = bisect.bisect_right(self.starts, t) - 1
        return i >= 0 and t < self.ends[i]

    def add(self, t: float, row: tuple) -> None:
        """A row at event time ``t``: a session of its own, merged with every open one within ``gap`` of it."""
        ends = self.ends
        if ends and self.starts[-1] <= t < ends[-1]:  # in order, within the last session: the common case
            self.rows[-1].append(row)
            if t + self.gap > ends[-1]:
                ends[-1] = t + self.gap
            return
        lo = bisect.bisect_right(self.ends, t)  # the first session ending after t
        hi = bisect.bisect_left(self.starts, t + self.gap)  # the first starting gap or more after t
        if lo == hi:  # a session of its own
            self.starts.insert(lo, t)
            self.ends.insert(lo, t + self.gap)
            self.rows.insert(lo, [row])
            return
        rows = self.rows[lo]  # joined in place: a session's rows are copied never
        for held in self.rows[lo + 1:hi]:
            rows.extend(held)
        rows.append(row)
        start, end = min(t, self.starts[lo]), max(t + self.gap, self.ends[hi - 1])
        self.starts[lo:hi], self.ends[lo:hi], self.rows[lo:hi] = [start], [end], [rows]

    def add_run(self, low: float, high: float, rows: list[tuple]) -> None:
        """Rows of times ``low``..``high``, each less than ``gap`` from the next: as :meth:`add` of each row (a
        run's ``[low, high + gap)`` meets the open sessions its rows' ``[t, t + gap)`` meet; node/operators/
        m3session_batch.py), its rows appended in the order given."""
        ends, gap = self.ends, self.gap
        if ends and self.starts[-1] <= low < ends[-1]:  # in order, within the last session: the common case
            self.rows[-1].extend(rows)
            if high + gap > ends[-1]:
                ends[-1] = high + gap
            return
        lo = bisect.bisect_right(ends, low)
        hi = bisect.bisect_left(self.starts, high + gap)
        if lo == hi:
            self.starts.insert(lo, low)
            self.ends.insert(lo, high + gap)
            self.rows.insert(lo, list(rows))
            return
        held = self.rows[lo]
        for more in self.rows[lo + 1:hi]:
            held.extend(more)
        held.extend(rows)
        start, end = min(low, self.starts[lo]), max(high + gap, ends[hi - 1])
        self.starts[lo:hi], self.ends[lo:hi], self.rows[lo:hi] = [start], [end], [held]

    def close(self, frontier: float) -> list[tuple[float, float, list[tuple]]]:
        """Remove and return the sessions ending at or before ``frontier``: no row can join them any more."""
        n = bisect.bisect_right(self.ends, frontier)
        out = list(zip(self.starts[:n], self.ends[:n], self.rows[:n]))
        del self.starts[:n], self.ends[:n], self.rows[:n]
        return out

    def bounds(self) -> list[tuple[float, float]]:
        return list(zip(self.starts, self.ends))


@dataclass
class SessionPort:
    """One in port read through ``SESSION``: where its event time and partition columns are, its keys' sessions."""

    session: Session
    time: int
    partition: tuple[int, ...]
    keys: dict[tuple, SessionSet] = field(default_factory=dict)
    #: (tie, key) by a time no open session of the key ends before (each key with open sessions has one): a
    #: close looks at the keys whose entries it passed, not at every key; a stale entry costs one look
    due: list[tuple[float, int, tuple]] = field(default_factory=list)
    ties: itertools.count = field(default_factory=itertools.count)
    pins: Pins = field(default_factory=Pins)  # the batches its sessions' held runs keep alive

    def expect(self, end: float, key: tuple) -> None:
        heapq.heappush(self.due, (end, next(self.ties), key))

    def take(self, rows: Iterable[tuple], closed: float) -> tuple[list[tuple], int, float]:
        """Add a batch's on-time rows to their keys' open sessions (the rule one node and a partition's member
        share): the rows kept, the number of late ones (a null event time, or one before ``closed`` outside every
        open session of its key: left out) and the newest event time seen."""
        kept: list[tuple] = []
        late, newest = 0, -float("inf")
        keys, gap, due = self.keys, self.session.gap, {}
        for row in rows:
            t = row[self.time]
            if t is None:
                late += 1
                continue
            if t > newest:
                newest = t
            key = tuple([row[i] for i in self.partition])
            sessions = keys.get(key)
            if t < closed and (sessions is None or not sessions.holds(t)):
                late += 1
                continue
            if sessions is None:
                sessions = keys[key] = SessionSet(gap)
            sessions.add(t, row)
            kept.append(row)
            if due.get(key, math.inf) > t + gap:
                due[key] = t + gap
        for key, end in due.items():  # no session a row of the batch is in ends before its key's least t + gap
            self.expect(end, key)
        return kept, late, newest

    def take_runs(self, ordered: pa.RecordBatch, cut: Runs) -> None:
        """Add a batch's rows (none late: :func:`~.m3session_batch.runs` said so), given in ``cut.order`` (run
        after run: each run a slice), to their keys' open sessions a run at a time, each run held as a slice of
        ``ordered`` (:class:`~.m3session_held.HeldRun`), not as rows."""
        keys, gap, due = self.keys, self.session.gap, {}
        bounds = cut.bounds.tolist()
        firsts = pa.array(cut.bounds[:-1])
        runs_keys = (list(zip(*[python_values(ordered.column(c).take(firsts)) for c in self.partition]))
                     if self.partition else [()] * len(cut.low))
        for i, (low, high, key) in enumerate(zip(cut.low.tolist(), cut.high.tolist(), runs_keys)):
            sessions = keys.get(key)
            if sessions is None:
                sessions = keys[key] = SessionSet(gap)
            sessions.add_run(low, high, [HeldRun(ordered, bounds[i], bounds[i + 1])])
            if due.get(key, math.inf) > low + gap:
                due[key] = low + gap
        self.pins.hold(ordered, ordered.num_rows)
        for key, end in due.items():
            self.expect(end, key)

    def repack(self) -> None:
        """Copy every held run's rows into one batch of them alone per schema (a port's batches may differ in
        nullability or string width), so that no batch stays pinned for a few rows
        (:class:`~.m3session_held.Pins`); the sessions and their rows' order unchanged.  Runs that cannot be
        gathered stay as they are, still pinned (nothing released before their copy exists)."""
        groups: dict[object, list[tuple[list, int]]] = {}
        for s in self.keys.values():
            for items in s.rows:
                for j, item in enumerate(items):
                    if isinstance(item, HeldRun):
                        groups.setdefault(item.block.schema, []).append((items, j))
        for where in groups.values():
            try:
                block = gathered([(items[j], None) for items, j in where]).batch
            except ValueError:
                continue
            at = 0
            for items, j in where:
                run = items[j]
                self.pins.release(run)
                items[j] = HeldRun(block, at, at + len(run))
                at += len(run)
            self.pins.hold(block, at)

    def passed(self, frontier: float) -> list[tuple]:
        """The keys (once each) some session of which may end at or before ``frontier``."""
        keys: dict[tuple, None] = {}
        while self.due and self.due[0][0] <= frontier:
            keys[heapq.heappop(self.due)[2]] = None
        return list(keys)


@dataclass
class SessionBuffer:
    """Owns the open sessions of a box's ``SESSION`` ports, and the rows each holds until it closes."""

    ports: dict[int, SessionPort]

    def admit(self, port: int, rows: list[tuple], closed: float) -> tuple[int, float]:
        """Hold a batch's on-time rows in their keys' sessions; the number of late rows (a null event time, or
        one before ``closed`` outside every open session of its key) and the newest event time seen."""
        _, late, newest = self.ports[port].take(rows, closed)
        return late, newest

    def admit_columns(self, port: int, columns: Columns, closed: float) -> tuple[int, float] | None:
        """As :meth:`admit` for a plain batch of columns, its rows held a run per key at a time
        (node/operators/m3session_batch.py); None when it must go row by row (:meth:`admit`)."""
        sp = self.ports[port]
        cut = runs(columns.batch, sp.time, sp.partition, sp.session.gap, closed)
        if cut is None:
            return None
        # the batch put in run order (one Arrow take), so that each run is a slice of it (.m3session_held)
        sp.take_runs(columns.batch.take(pa.array(cut.order)), cut)
        return 0, cut.newest

    def close_parts(self, frontier: float) -> dict[int, list[list[tuple] | Columns]]:
        """Per port, the rows of every session ending at or before ``frontier``, each with its session's
        ``window_start`` and ``window_end`` appended: those held as rows as a list of rows, those held as runs of
        a batch as one batch of columns (.m3session_held); those sessions (and keys left with none) dropped."""
        out: dict[int, list[list[tuple] | Columns]] = {}
        for port, sp in self.ports.items():
            rows: list[tuple] = []
            spans: list[tuple[HeldRun, tuple[int, int]]] = []
            for key in sp.passed(frontier):
                sessions = sp.keys.get(key)
                if sessions is None:
                    continue
                for start, end, held in sessions.close(frontier):
                    bounds = (math.floor(start), math.ceil(end))  # INT columns (a FLOAT time's, outward)
                    for item in held:
                        if isinstance(item, HeldRun):
                            spans.append((item, bounds))
                        else:
                            rows.append(item + bounds)
                if sessions.starts:
                    sp.expect(sessions.ends[0], key)  # its next session to end
                else:
                    del sp.keys[key]
            parts: list[list[tuple] | Columns] = [rows] if rows else []
            if spans:
                for run, _ in spans:
                    sp.pins.release(run)
                try:
                    parts.append(gathered(spans))
                except ValueError:  # (a bound past int64, schemas apart) as rows
                    parts.append([row + bounds for run, bounds in spans for row in run.rows()])
                if sp.pins.wasteful():
                    sp.repack()
            if parts:
                out[port] = parts
        return out

    def close(self, frontier: float) -> dict[int, list[tuple]]:
        """:meth:`close_parts` with every part as rows."""
        return {port: [row for part in parts for row in (part.rows() if isinstance(part, Columns) else part)]
                for port, parts in self.close_parts(frontier).items()}

    def held(self) -> int:
        """The rows held in open sessions."""
        return sum(held_count(r) for sp in self.ports.values() for s in sp.keys.values() for r in s.rows)

    def state(self) -> dict:
        return {str(port): [[list(key), s.starts, s.ends, [[list(r) for r in held_rows(rows)] for rows in s.rows]]
                            for key, s in sp.keys.items()] for port, sp in self.ports.items()}

    def restore(self, state: dict) -> None:
        for port, sp in self.ports.items():
            sp.keys = {tuple(key): SessionSet(sp.session.gap, list(starts), list(ends),
                                              [[tuple(r) for r in rows] for rows in held])
                       for key, starts, ends, held in state.get(str(port), [])}
            sp.due = []
            sp.pins.clear()
            for key, sessions in sp.keys.items():
                for end in sessions.ends:
                    sp.expect(end, key)
