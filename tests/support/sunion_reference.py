"""A row-at-a-time reference of the sunion's documented semantics (docs/operators.md, "Fault-tolerance boxes").

Written from the documentation over one flat list of the rows held, not
from the operator's buckets: each row is taken alone at its instant (what
is due at that instant goes out first), and :meth:`SUnionReference.instant`
lets out what is due at an instant with no row.  What goes out is
``(out port, row, weight)`` with port 0 the control stream; a data row ends
with its tentative flag (1 or 0).
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass
class Held:
    bucket: int
    t: float
    port: int
    seq: int  # arrival order
    row: tuple
    weight: int
    arrived: float


class SUnionReference:
    def __init__(self, interval: float, delays: list[float], stagger: bool, merged: bool):
        self.interval, self.delays, self.stagger, self.merged = interval, delays, stagger, merged
        self.held: list[Held] = []
        self.progress: list[int | None] = [None] * len(delays)
        self.stable: int | None = None
        self.released: int | None = None
        self.tail: list[tuple[int, tuple, int]] = []
        self.seq = 0
        self.late = 0
        self.ended: set[int] = set()  # in ports whose stream ended: past every bucket, never away

    def tentative(self) -> bool:
        return self.released is not None and (self.stable is None or self.released > self.stable)

    def _port(self, h: Held) -> int:
        return 1 if self.merged else 1 + h.port

    def _out(self, held: list[Held], flag: int, sign: int = 1) -> list[tuple[int, tuple, int]]:
        order = sorted(held, key=lambda h: (h.bucket, h.t, h.port, h.seq))
        return [(self._port(h), h.row + (flag,), sign * h.weight) for h in order]

    def row(self, port: int, t: float, row: tuple, weight: int, now: float) -> list:
        out = self.instant(now)
        b = math.floor(t / self.interval)
        if self.stable is not None and b < self.stable:
            self.late += 1
            return out
        was = self.tentative()
        h = Held(b, t, port, self.seq, row, weight, now)
        self.seq += 1
        self.held.append(h)
        if self.released is not None and b < self.released:
            self.tail += self._out([h], 1)
            out += self._out([h], 1)
        if self.progress[port] is None or b > self.progress[port]:
            self.progress[port] = b
        return out + self._settle(now, was)

    def instant(self, now: float) -> list:
        return self._settle(now, self.tentative())

    def end_port(self, port: int, now: float) -> list:
        """The stream on ``port`` ended: it holds nothing back any more; the last one's end is :meth:`end`."""
        was = self.tentative()
        self.ended.add(port)
        if len(self.ended) == len(self.delays):
            return self.end()
        return self._settle(now, was)

    def end(self) -> list:
        was = self.tentative()
        marks = [h.bucket for h in self.held] + [m - 1 for m in (self.stable, self.released) if m is not None]
        if not marks:
            return []
        out = self._stabilise(max(marks) + 1)
        return out + ([(0, (), -1)] if was else [])

    def _stabilise(self, frontier: int) -> list:
        below = [h for h in self.held if h.bucket < frontier]
        if not below:
            self.stable = frontier
            self.released = frontier if self.released is None else max(self.released, frontier)
            return []
        out = [(p, r, -w) for p, r, w in self.tail]
        out += self._out(below, 0)
        self.held = [h for h in self.held if h.bucket >= frontier]
        self.stable = frontier
        self.released = frontier if self.released is None else max(self.released, frontier)
        self.tail = self._out([h for h in self.held if h.bucket < self.released], 1)
        return out + self.tail

    def _settle(self, now: float, was: bool) -> list:
        out = []
        live = [p for port, p in enumerate(self.progress) if port not in self.ended]
        if live and None not in live:
            frontier = min(live)
            if self.stable is None or frontier > self.stable:
                out += self._stabilise(frontier)
        if not was and self.tentative():  # turned tentative by the stable frontier alone: cannot happen
            raise AssertionError("a stable frontier never makes the box tentative")
        stable_part = len(out)
        while True:
            due = self.deadline()
            if due is None or now < due[1]:
                break
            first = due[0]
            newly = [h for h in self.held if (self.released is None or h.bucket >= self.released)
                     and h.bucket <= first]
            self.tail += self._out(newly, 1)
            out += self._out(newly, 1)
            self.released = first + 1
        if self.tentative() != was:
            if self.tentative():  # just before the first tentative row
                out = [*out[:stable_part], (0, (), 1), *out[stable_part:]]
            else:
                out = [*out, (0, (), -1)]
        return out

    def deadline(self) -> tuple[int, float] | None:
        waiting = [h for h in self.held if self.released is None or h.bucket >= self.released]
        if not waiting:
            return None
        first = min(h.bucket for h in waiting)
        opened = min(h.arrived for h in waiting)
        if not self.stagger and self.tentative():
            return first, opened
        away = [d for port, (d, p) in enumerate(zip(self.delays, self.progress))
                if port not in self.ended and (p is None or p <= first)]
        return first, opened + max(away, default=0.0)
