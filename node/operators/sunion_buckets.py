"""The serializing union's buckets: the one owner of what an ``sunion`` holds, released and must undo.

Rows go into buckets by time (``floor(t / interval)``).  Two frontiers
split the buckets:

* below ``stable``, every in port has reached a later bucket (or its
  stream ended: an ended port is past every bucket, :meth:`Buckets.end`):
  those buckets went out *stable*, serialised (by time, then in port,
  then arrival), and are gone from here: a stable row is never taken back;
* from ``stable`` up to ``released``, buckets went out *tentative*: an in
  port had not reached past them when their deadline came.  Their rows
  are held, with the list of what went out (``tail``), so they can be
  undone: when ``stable`` moves up, every tentative row goes out again at
  the opposite weight (the UNDO), then the buckets now stable, then what
  is still tentative, serialised afresh.

A bucket's deadline is the instant its first row (or a later bucket's)
arrived plus the longest ``max-delay`` of the in ports not past it yet (an
ended port is past it); with ``stagger`` off, once something is tentative,
no later bucket waits.

Each call takes one row (or one instant) and returns what goes out, in
order, as :class:`Out` items, so a batch cut anywhere gives the same rows
as the rows one by one.  ``control`` items say the box turned tentative
(+1) or stable again (-1): Borealis's UP_FAILURE and REC_DONE.

>>> b = Buckets(interval=10, delays=(1.0, 1.0), stagger=True, blocking=False)
>>> [(o.port, o.row, o.weight, o.tentative) for o in b.add(0, 3, ("a",), 1, now=0.0)]
[]
>>> [(o.port, o.row, o.weight, o.tentative) for o in b.release(now=1.5)]  # port 1 is away
[(-1, (), 1, True), (0, ('a',), 1, True)]
>>> [(o.port, o.row, o.weight, o.tentative) for o in b.add(1, 15, ("b",), 1, now=2.0)]
[]
>>> [(o.port, o.row, o.weight, o.tentative) for o in b.add(0, 12, ("c",), 1, now=2.0)]  # both past bucket 0
[(0, ('a',), -1, True), (0, ('a',), 1, False), (-1, (), -1, True)]
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

#: The out port of a control item (the sunion's control stream).
CONTROL = -1


@dataclass(frozen=True)
class Out:
    """One row going out: ``port`` is the in port it came from (:data:`CONTROL`: the control stream)."""

    port: int
    row: tuple
    weight: int
    tentative: bool


@dataclass
class Entry:
    t: float
    port: int
    row: tuple
    weight: int


@dataclass
class Buckets:
    """An sunion's buckets (see the module docstring).  Times ``t`` are in the unit of ``interval``;
    instants (``now``) are the node's clock, in seconds; ``delays`` are seconds."""

    interval: float
    delays: tuple[float, ...]
    stagger: bool
    blocking: bool  # never tentative (Borealis's "block" benchmark)
    stable: int | None = None
    released: int | None = None
    held: dict[int, list[Entry]] = field(default_factory=dict)
    first_at: dict[int, float] = field(default_factory=dict)  # bucket -> when its first row arrived
    progress: list[int | None] = field(default_factory=list)
    tail: list[Out] = field(default_factory=list)  # what went out tentative, in order
    late: int = 0
    ended: set[int] = field(default_factory=set)  # in ports whose stream ended: past every bucket, never away

    def __post_init__(self) -> None:
        if not self.progress:
            self.progress = [None] * len(self.delays)

    @property
    def tentative(self) -> bool:
        """Whether buckets went out tentative and are not stable yet."""
        return self.released is not None and (self.stable is None or self.released > self.stable)

    def bucket(self, t: float) -> int:
        return math.floor(t / self.interval)

    # -- rows and instants --------------------------------------------------------------------

    def add(self, port: int, t: float, row: tuple, weight: int, now: float) -> list[Out]:
        """One row of in port ``port`` at time ``t``; a row of a bucket already stable is late (dropped, counted)."""
        b = self.bucket(t)
        if self.stable is not None and b < self.stable:
            self.late += 1
            return []
        out: list[Out] = []
        entry = Entry(t, port, row, weight)
        self.held.setdefault(b, []).append(entry)
        new_bucket = b not in self.first_at
        if new_bucket:
            self.first_at[b] = now
        if self.released is not None and b < self.released:  # its bucket went out tentative: so does it
            out.append(Out(port, row, weight, True))
            self.tail.append(out[-1])
        before = self.progress[port]
        if before is None or b > before:
            self.progress[port] = b
        elif not new_bucket:
            return out  # nothing that decides a release changed
        return out + self.release(now)

    def release(self, now: float) -> list[Out]:
        """What goes out at ``now``: buckets every port is past (stable), then buckets past their deadline."""
        stable: list[Out] = []
        was = self.tentative
        live = [p for port, p in enumerate(self.progress) if port not in self.ended]
        if live and None not in live:  # (an ended port is past every bucket)
            frontier = min(p for p in live if p is not None)
            if self.stable is None or frontier > self.stable:
                stable = self._stabilise(frontier)
        tentative: list[Out] = []
        while True:
            due = self._due()
            if due is None or now < due[1]:
                break
            tentative += self._release_tentative(due[0])
        if self.tentative == was:
            return stable + tentative
        if self.tentative:  # the control row goes just before the first tentative row
            return [*stable, Out(CONTROL, (), 1, True), *tentative]
        return [*stable, *tentative, Out(CONTROL, (), -1, True)]

    def end(self, port: int | None, now: float) -> list[Out]:
        """The stream on in port ``port`` ended (None: every one): from now on it is past every bucket and never
        away, so the buckets the other ports passed go out stable (and a deadline no longer waits for its
        ``max-delay``); once every in port's stream ended, whatever is held goes out stable (:meth:`finish`)."""
        self.ended.update(range(len(self.delays)) if port is None else (port,))
        if len(self.ended) >= len(self.delays):
            return self.finish()
        return self.release(now)

    def finish(self) -> list[Out]:
        """Every in stream ended: whatever is held goes out stable."""
        marks = [*self.held, *(m - 1 for m in (self.stable, self.released) if m is not None)]
        if not marks:
            return []
        was = self.tentative
        out = self._stabilise(max(marks) + 1)
        return out + ([Out(CONTROL, (), -1, True)] if was else [])

    def deadline(self) -> float | None:
        """When :meth:`release` next has a tentative bucket to let go (None: none waiting, or blocking)."""
        due = self._due()
        return None if due is None else due[1]

    # -- inside --------------------------------------------------------------------------------

    def _stabilise(self, frontier: int) -> list[Out]:
        """Buckets below ``frontier`` go out stable: first the UNDO of every tentative row, then they, then the
        tentative buckets left, again (nothing, when no row waited below ``frontier``)."""
        if not any(k < frontier for k in self.held):
            self.stable = frontier
            self.released = frontier if self.released is None else max(self.released, frontier)
            return []
        out = [Out(o.port, o.row, -o.weight, True) for o in self.tail]
        self.tail = []
        for b in sorted(k for k in self.held if k < frontier):
            out += [Out(e.port, e.row, e.weight, False) for e in _serialised(self.held.pop(b))]
            self.first_at.pop(b, None)
        self.stable = frontier
        if self.released is None or self.released < frontier:
            self.released = frontier
        for b in sorted(k for k in self.held if k < self.released):
            self.tail += [Out(e.port, e.row, e.weight, True) for e in _serialised(self.held[b])]
        return out + self.tail

    def _release_tentative(self, upto: int) -> list[Out]:
        out = []
        for b in sorted(k for k in self.held if (self.released is None or k >= self.released) and k <= upto):
            out += [Out(e.port, e.row, e.weight, True) for e in _serialised(self.held[b])]
        self.tail += out
        self.released = upto + 1
        return out

    def _due(self) -> tuple[int, float] | None:
        """The first bucket not released that holds rows, and its deadline."""
        waiting = [k for k in self.held if self.released is None or k >= self.released]
        if not waiting or self.blocking:
            return None
        first = min(waiting)
        opened = min(self.first_at[k] for k in waiting)
        if not self.stagger and self.tentative:
            return first, opened
        away = [d for port, (d, p) in enumerate(zip(self.delays, self.progress))
                if port not in self.ended and (p is None or p <= first)]
        return first, opened + max(away, default=0.0)

    # -- state ---------------------------------------------------------------------------------

    def state(self) -> dict[str, Any]:
        return {"stable": self.stable, "released": self.released, "late": self.late,
                "held": [[b, [[e.t, e.port, list(e.row), e.weight] for e in entries]]
                         for b, entries in self.held.items()],
                "first_at": [[b, at] for b, at in self.first_at.items()],
                "progress": list(self.progress),
                "tail": [[o.port, list(o.row), o.weight] for o in self.tail], "ended": sorted(self.ended)}

    def restore(self, state: dict[str, Any]) -> None:
        self.stable, self.released, self.late = state["stable"], state["released"], state["late"]
        self.held = {b: [Entry(t, p, tuple(r), w) for t, p, r, w in entries] for b, entries in state["held"]}
        self.first_at = {b: at for b, at in state["first_at"]}
        self.progress = list(state["progress"])
        self.tail = [Out(p, tuple(r), w, True) for p, r, w in state["tail"]]
        self.ended = set(state.get("ended", ()))  # (a state from before ports ended one by one: none ended)

    def shift_times(self, delta: float) -> None:
        self.first_at = {b: at + delta for b, at in self.first_at.items()}

    def entries(self) -> int:
        return sum(len(v) for v in self.held.values())


def _serialised(entries: list[Entry]) -> list[Entry]:
    """A bucket's rows in Borealis's order: by time, then in port; arrival order among equals."""
    return sorted(entries, key=lambda e: (e.t, e.port))
