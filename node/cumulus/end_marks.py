"""The end of a partitioned box's input, carried through its members (docs/cumulus.md §3.13, "The end of input").

A node's producers may end while coordinators on other nodes still stamp rows that change the members there:
a box's out stream on a node must not end (its ``final`` mark, node/stream_ends.py) before every member hosted
on it has applied the last of them.  Every partitioned box, windowed or not, so carries its producers' ends
as a windowed one carries their watermarks, through the coordinators' ``Close``\\s:

* each coordinator keeps which producers it heard and which of them ended (:class:`ProducerEnds`); its
  ``Close(e)``, sent to every member on the ordered per-member links after its Work of ``e``, carries
  :meth:`ProducerEnds.mark`: None while it heard of no producer, True once every producer it heard ended,
  else False.  A producer handed to another coordinator (§6.5) takes its entry along, and the old coordinator
  keeps it until the new one's ``Close`` carries it (as the watermarks: node/cumulus/event_marks.py);
* a member, passing a ``Close`` in the version order, takes its mark (:meth:`PassedEnd.heard`); at the last
  coordinator's ``Close`` of an epoch (every version of that epoch applied) the end has *passed* once some
  coordinator's last mark is True and none is False.  Every member passes every ``Close`` at the same point
  of the one order, so the end passes in the same epoch (``at``) on every member: after it, no Work comes and
  the member owes no row, and a member that has not passed it may still emit;
* the end has *settled* once the epoch it passed in is stable (:meth:`PassedEnd.settled`): every member of the
  partition, wherever it runs, passed it and emitted its last rows.  The leader goes on ending epochs until it
  announced a stable epoch at or past the last one with work (node/cumulus/leader.py), and the end's epoch
  is made one (a producer's end and a forgotten handed producer wake the coordinator, so the epoch ends; a
  member at which the end passes in ``e`` sends the leader ``Wake(e)``: node/cumulus/applying.py), so every
  member learns it.

The node's router holds the box's final mark while a member hosted there has not seen the end settle
(``Operator.holds_end``).  Settled rather than passed: a member that moves onto the node later (a guest
taken over in a failover, node/cumulus/hosting.py) has passed the end too, on its old node, so it emits
nothing after the node's final mark, and no member hosted here is ever asked alone.  A coordinator that has
heard of no producer yet does not hold the end back (as a watermark: a producer counts from its first row or
its end).

>>> ends = ProducerEnds()
>>> ends.mark(), ends.heard(0, "a"), ends.heard(0, "b"), ends.mark()
(None, None, None, False)
>>> ends.end(0, "a"), ends.end(None, "b"), ends.mark()  # (port None: on every port)
(None, None, True)
>>> ends.hand_away("b"), ends.hand_away("z")
([[0], [None]], None)
>>> passed = PassedEnd()
>>> passed.heard(0, False, 2, epoch=3), passed.heard(1, True, 2, epoch=3), passed.heard(0, True, 2, epoch=4)
(False, False, False)
>>> passed.heard(1, None, 2, epoch=4), passed.at  # (the last coordinator's Close of the epoch decides)
(True, 4)
>>> passed.settled(stable=3), passed.settled(stable=4)
(False, True)
"""

from __future__ import annotations

from dataclasses import dataclass, field

Key = tuple[int | None, str]  # (in port, producer); port None: ended on every port


@dataclass
class ProducerEnds:
    """A coordinator's producers: those it heard of, per in port, and those that ended."""

    seen: set[Key] = field(default_factory=set)
    ended: set[Key] = field(default_factory=set)

    def heard(self, port: int, producer: str) -> None:
        """A batch of ``producer`` on ``port`` was stamped here."""
        self.seen.add((port, producer))

    def end(self, port: int | None, producer: str) -> None:
        """``producer`` ended its input on ``port`` (None: on every port)."""
        self.ended.add((port, producer))

    def _over(self, key: Key) -> bool:
        return key in self.ended or (None, key[1]) in self.ended

    def mark(self) -> bool | None:
        """What this coordinator's ``Close`` carries: None (it heard of no producer), True (every producer it
        heard of ended), False."""
        if not self.seen and not self.ended:
            return None
        return all(self._over(key) for key in self.seen)

    def hand_away(self, producer: str) -> list | None:
        """``producer``'s entry, handed to another coordinator with it: ``[ports heard, ports ended]`` (None:
        never heard of here).  It holds here too until :meth:`forget`."""
        heard = sorted(port for port, p in self.seen if p == producer)
        ended = [port for port, p in self.ended if p == producer]
        if not heard and not ended:
            return None
        return [heard, sorted(ended, key=lambda port: -1 if port is None else port)]

    def take_over(self, producer: str, entry: list | None) -> None:
        """``producer`` handed here with :meth:`hand_away`'s entry."""
        if not entry:
            return
        heard, ended = entry
        self.seen.update((int(port), producer) for port in heard)
        self.ended.update((None if port is None else int(port), producer) for port in ended)

    def forget(self, producer: str) -> None:
        """The coordinator ``producer`` was handed to took it: it counts there alone."""
        self.seen = {k for k in self.seen if k[1] != producer}
        self.ended = {k for k in self.ended if k[1] != producer}

    def state(self) -> dict:
        return {"seen": sorted([port, p] for port, p in self.seen),
                "ended": [[port, p] for port, p in self.ended]}

    def restore(self, state: dict | None) -> None:
        state = state or {}
        self.seen = {(int(port), p) for port, p in state.get("seen", [])}
        self.ended = {(None if port is None else int(port), p) for port, p in state.get("ended", [])}


@dataclass
class PassedEnd:
    """A member's view of the end: each coordinator's last ``Close`` mark, and whether the end has passed."""

    marks: dict[int, bool | None] = field(default_factory=dict)  # coordinator -> its last Close's mark
    at: int | None = None  # the epoch the end passed in (None: not yet)

    @property
    def passed(self) -> bool:
        return self.at is not None

    def settled(self, stable: int) -> bool:
        """Whether the end passed in an epoch at or before ``stable``, the last stable epoch this member knows:
        then every member of the partition passed it."""
        return self.at is not None and self.at <= stable

    def heard(self, coordinator: int, mark: bool | None, members: int, epoch: int) -> bool:
        """A ``Close`` of ``epoch`` of ``coordinator`` with ``mark`` passed in the order; ``members``: the partition's members
        now (a retired member's coordinator closes no more epochs: its last mark stops counting; its producers
        went to others with their entries).  Whether the end has passed: decided at the epoch's last
        coordinator's ``Close`` only (the versions of the others after it are not applied before), and never
        undone (a producer that starts after the end is not waited for)."""
        for gone in [c for c in self.marks if c >= members]:
            del self.marks[gone]
        self.marks[coordinator] = mark
        if self.at is None and coordinator >= members - 1:
            marks = self.marks.values()
            if any(m is True for m in marks) and not any(m is False for m in marks):
                self.at = epoch
        return self.passed

    def state(self) -> dict:
        return {"marks": [[c, m] for c, m in self.marks.items()], "at": self.at}

    def restore(self, state: dict | None) -> None:
        state = state or {}
        self.marks = {int(c): m for c, m in state.get("marks", [])}
        at = state.get("at")
        self.at = None if at is None else int(at)
