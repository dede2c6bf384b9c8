"""The leader of a partitioned box (member 0): it ends epochs and knows the stable one (docs/cumulus.md §3.5, §4.2).

While coordinators stamp work (they say so with ``Wake``), the leader ends
the current epoch every ``epoch-ms`` with ``Advance(e + 1, stable,
stable_at)``; coordinators answer with ``Close(e)`` (to the leader with the
input positions they stamped in ``e``), members with ``Done(e)`` once they
applied all of it.  When every member is done with ``e`` and every epoch
before it, ``e`` is **stable**: all maps on all members at the end of ``e``
form a consistent cut, readable with READ_STABLE, and its age is how long
ago ``e`` ended.  After the input stops the leader goes on advancing until
it has announced two stable epochs at or past the last one with work: a
member drops the deltas of epochs up to the stable epoch it knew before the
latest, so every member then holds none.

A partition that grows (docs/cumulus.md §6.4) has more members from the
first epoch of the layout change that makes its joining nodes members:
:meth:`resize` records it, and an epoch is stable once every member *of that
epoch* is done with it.

No I/O: :meth:`tick` and :meth:`receive` return the messages to send.

>>> lead = Leader(members=2, epoch_s=0.1)
>>> lead.woken(0); lead.deadline(5.0)
5.1
>>> lead.tick(5.1, wall=1000.0)
['a', 1, -1, 0.0]
>>> lead.closed(0, 0, [["R", "p", 3]]); lead.closed(0, 1, [])
>>> lead.done(0, 0); lead.done(0, 1); lead.stable, lead.positions
(0, {('R', 'p'): 3})
>>> lead.resize(2, 3); lead.members_at(1), lead.members_at(2)
(2, 3)
"""

from __future__ import annotations

from . import messages as msg


class Leader:
    def __init__(self, members: int, epoch_s: float):
        self.sizes: list[tuple[int, int]] = [(0, members)]  # (first epoch, members from then on), ascending
        self.epoch_s = epoch_s
        self.epoch = 0  # the epoch coordinators stamp with now
        self.last_work = -1  # the last epoch some coordinator stamped work in
        self.stable = -1
        self.stable_at = 0.0  # wall-clock time the stable epoch ended
        self.ended_at: dict[int, float] = {}  # epoch -> wall time it ended (its Advance was sent)
        self.dones: dict[int, set[int]] = {}
        self.closes: dict[int, list] = {}  # epoch -> positions coordinators stamped in it
        self.positions: dict[tuple[str, str], int] = {}  # (stream, producer) -> last seq in a stable epoch
        self.announced = [-1, -1]  # the last two distinct stable epochs sent in Advances (older, newer)
        self._deadline: float | None = None

    @property
    def wanted(self) -> bool:
        """Whether to end the current epoch: work was stamped in it, or members may still keep deltas of work."""
        return self.epoch <= self.last_work or self.announced[0] < self.last_work

    def woken(self, epoch: int) -> None:
        """A coordinator stamped work in ``epoch``."""
        self.last_work = max(self.last_work, epoch)

    def deadline(self, now: float) -> float | None:
        """When to send the next Advance (flow clock); None while nothing asks for one."""
        if self._deadline is None and self.wanted:
            self._deadline = now + self.epoch_s
        return self._deadline

    def next_deadline(self) -> float | None:
        return self._deadline

    def restart_clock(self) -> None:
        """Forget when the current epoch ends: the next :meth:`deadline` sets it again from this clock.

        A guest leader taken over in a failover (hosting.py) restored a deadline
        on the failed node's flow clock, which this node's clock does not share.
        """
        self._deadline = None

    def tick(self, now: float, wall: float) -> list | None:
        """The Advance to send every member at ``now``, if it is time."""
        if self._deadline is None or now < self._deadline:
            return None
        self._deadline = None
        self.ended_at[self.epoch] = wall
        self.epoch += 1
        if self.stable > self.announced[1]:
            self.announced = [self.announced[1], self.stable]
        return msg.advance(self.epoch, self.stable, self.stable_at)

    def closed(self, epoch: int, coord: int, positions: list) -> None:
        self.closes.setdefault(epoch, []).extend(positions)

    def resize(self, first: int, members: int) -> None:
        """From epoch ``first`` on the partition has ``members`` members (a layout change made them so)."""
        self.sizes = [(f, n) for f, n in self.sizes if f < first] + [(first, members)]

    def members_at(self, epoch: int) -> int:
        """How many members take part in ``epoch`` (each sends a Done for it)."""
        return next(n for f, n in reversed(self.sizes) if f <= epoch or f == self.sizes[0][0])

    def done(self, epoch: int, member: int) -> None:
        self.dones.setdefault(epoch, set()).add(member)
        while len(self.dones.get(self.stable + 1, ())) == self.members_at(self.stable + 1):
            self.stable += 1
            del self.dones[self.stable]
            for stream, producer, seq in self.closes.pop(self.stable, []):
                key = (stream, producer)
                self.positions[key] = max(seq, self.positions.get(key, -1))
            self.stable_at = self.ended_at.pop(self.stable, self.stable_at)
        while len(self.sizes) > 1 and self.sizes[1][0] <= self.stable:  # older sizes are no longer asked for
            self.sizes.pop(0)

    def info(self, wall: float) -> dict:
        """The stable epoch, its age in seconds, and the input positions it covers (``GET .../stable``)."""
        return {"epoch": self.stable, "age": max(0.0, wall - self.stable_at) if self.stable >= 0 else None,
                "current": self.epoch,
                "positions": [[s, p, q] for (s, p), q in sorted(self.positions.items())]}

    # -- plain data ------------------------------------------------------------------
    def state(self) -> dict:
        return {"epoch": self.epoch, "last_work": self.last_work, "stable": self.stable, "stable_at": self.stable_at,
                "ended_at": [[e, t] for e, t in self.ended_at.items()],
                "dones": [[e, sorted(ms)] for e, ms in self.dones.items()],
                "closes": [[e, p] for e, p in self.closes.items()],
                "positions": [[s, p, q] for (s, p), q in self.positions.items()], "deadline": self._deadline,
                "announced": list(self.announced), "sizes": [list(x) for x in self.sizes]}

    def restore(self, state: dict) -> None:
        self.epoch, self.last_work = int(state["epoch"]), int(state["last_work"])
        self.stable, self.stable_at = int(state["stable"]), float(state["stable_at"])
        self.ended_at = {int(e): float(t) for e, t in state["ended_at"]}
        self.dones = {int(e): set(ms) for e, ms in state["dones"]}
        self.closes = {int(e): [list(x) for x in p] for e, p in state["closes"]}
        self.positions = {(s, p): int(q) for s, p, q in state["positions"]}
        self.announced = [int(x) for x in state.get("announced", [-1, -1])]
        if state.get("sizes"):
            self.sizes = [(int(f), int(n)) for f, n in state["sizes"]]
        # the timer keeps its flow-clock time: replaying the log after a restart fires it where it fired
        self._deadline = state.get("deadline")
