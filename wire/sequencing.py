"""Putting each producer's batches back in order, and dropping the ones already taken.

Every batch carries (stream, producer, seq), with seq counting 0, 1, 2, ...
per (stream, producer).  A producer is a publisher, a Spark task, or a box:
a box keeps its counter when it moves, so its batches may reach a receiver
over two connections (the old node's last ones, the new node's first ones).
The sequencer gives the receiver each producer's batches in sequence order:

* the next expected batch is taken, and so are any held batches it unblocks;
* a batch behind the expected one is a duplicate (a re-send, a retried
  task) and is dropped;
* a batch ahead of it is held until the gap fills.  A gap that does not fill
  within ``gap_timeout`` seconds (its batches were lost with a failed
  node) is skipped, so one loss cannot stall a stream forever.

The first batch seen from an unknown producer sets the expectation, unless
:meth:`Sequencer.expect` set it first (a moved box hands its positions over).

>>> s = Sequencer()
>>> [s.admit("S", "p", n, n).kind for n in (0, 2, 1, 1)]
['take', 'hold', 'take', 'duplicate']
>>> [item for item in s.release("S", "p", now=0.0)]
[2]
"""

from __future__ import annotations

import time
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True, slots=True)
class Admission:
    kind: str  # take | hold | duplicate


TAKE, HOLD, DUPLICATE = Admission("take"), Admission("hold"), Admission("duplicate")


@dataclass
class _Held:
    since: float
    items: dict[int, Any] = field(default_factory=dict)


class Sequencer:
    def __init__(self, max_producers: int = 100_000, max_held: int = 4096, gap_timeout: float = 5.0):
        self.max_producers = max_producers
        self.max_held = max_held
        self.gap_timeout = gap_timeout
        self._expected: OrderedDict[tuple[str, str], int] = OrderedDict()
        self._held: dict[tuple[str, str], _Held] = {}
        self.skipped = 0  # sequence numbers given up on

    def admit(self, stream: str, producer: str, seq: int, item: Any, now: float | None = None) -> Admission:
        """Whether to take ``item`` now, hold it, or drop it as a duplicate."""
        key = (stream, producer)
        expected = self._expected.get(key)
        if expected is None:
            expected = seq
        if seq < expected:
            return DUPLICATE
        if seq > expected:
            held = self._held.setdefault(key, _Held(time.monotonic() if now is None else now))
            if seq in held.items:
                return DUPLICATE
            held.items[seq] = item
            if len(held.items) > self.max_held:
                self._skip(key)
            return HOLD
        self._set(key, seq + 1)
        return TAKE

    def release(self, stream: str, producer: str, now: float | None = None) -> list[Any]:
        """Held items that are next in sequence now (after a take), in order."""
        key = (stream, producer)
        held = self._held.get(key)
        if held is None:
            return []
        now = time.monotonic() if now is None else now
        if now - held.since > self.gap_timeout:
            self._skip(key)
        out = []
        expected = self._expected.get(key, 0)
        while expected in held.items:
            out.append(held.items.pop(expected))
            expected += 1
        self._set(key, expected)
        if not held.items:
            del self._held[key]
        else:
            held.since = now
        return out

    def overdue(self, now: float | None = None) -> list[tuple[str, str]]:
        """Producers whose gap has waited longer than ``gap_timeout`` (call :meth:`release` on them)."""
        now = time.monotonic() if now is None else now
        return [key for key, held in self._held.items() if now - held.since > self.gap_timeout]

    def _skip(self, key: tuple[str, str]) -> None:
        held = self._held[key]
        first = min(held.items)
        self.skipped += first - self._expected.get(key, first)
        self._expected[key] = first

    def _set(self, key: tuple[str, str], expected: int) -> None:
        self._expected[key] = expected
        self._expected.move_to_end(key)
        if len(self._expected) > self.max_producers:
            old, _ = self._expected.popitem(last=False)
            self._held.pop(old, None)

    def forget(self, stream: str, producer: str, seq: int) -> None:
        """Un-take a batch the owner could not accept, so its re-send is taken."""
        key = (stream, producer)
        if self._expected.get(key) == seq + 1:
            self._expected[key] = seq

    def restart(self, stream: str, producer: str, seq: int) -> list[Any]:
        """The producer says nothing before ``seq`` is still to come: held items before it, in order.

        >>> s = Sequencer()
        >>> [s.admit("S", "p", n, n).kind for n in (0, 2)]
        ['take', 'hold']
        >>> s.restart("S", "p", 7), s.admit("S", "p", 7, 7).kind
        ([2], 'take')
        """
        key = (stream, producer)
        held = self._held.pop(key, None)
        early = sorted((n, item) for n, item in held.items.items() if n < seq) if held else []
        if held:
            later = {n: item for n, item in held.items.items() if n >= seq}
            if later:
                self._held[key] = _Held(held.since, later)
        self._set(key, max(seq, self._expected.get(key, seq)))
        return [item for _, item in early]

    def expect(self, stream: str, producer: str, seq: int) -> None:
        """The next batch of (stream, producer) to take is ``seq`` (a handover)."""
        self._set((stream, producer), max(seq, self._expected.get((stream, producer), seq)))

    def positions(self, stream: str | None = None) -> dict[tuple[str, str], int]:
        return {k: v for k, v in self._expected.items() if stream is None or k[0] == stream}

    # -- one box's inputs ----------------------------------------------------------------

    @classmethod
    def for_box(cls, positions: list[tuple[str, str, int]]) -> "Sequencer":
        """The inputs of a box that arrived by a move (or failover): nothing is ever skipped.

        Its batches come both forwarded by the node it left and straight from
        upstream, so the box orders them itself, from the positions it was
        handed: a gap always fills, so it never times out.

        >>> inputs = Sequencer.for_box([("S", "p", 3)])
        >>> inputs.ordered("S", "p", 4, "b"), inputs.ordered("S", "p", 3, "a"), inputs.ordered("S", "p", 2, "x")
        ([], ['a', 'b'], [])
        >>> inputs.box_positions()
        [('S', 'p', 5)]
        """
        sequencer = cls(max_producers=1 << 62, max_held=1 << 62, gap_timeout=float("inf"))
        for stream, producer, seq in positions:
            sequencer.expect(stream, producer, seq)
        return sequencer

    def ordered(self, stream: str, producer: str, seq: int, item: Any) -> list[Any]:
        """Admit ``item``: the items now next in sequence, in order (none when held or a duplicate)."""
        if self.admit(stream, producer, seq, item) is not TAKE:
            return []
        return [item, *self.release(stream, producer)]

    def hold(self, stream: str, producer: str, seq: int, item: Any) -> None:
        """Put back an item held for a gap (state restored from a snapshot)."""
        self._held.setdefault((stream, producer), _Held(time.monotonic())).items[seq] = item

    def held_items(self) -> list[tuple[str, str, int, Any]]:
        """Every item held for a gap: (stream, producer, seq, item), in sequence order."""
        return [(s, p, n, held.items[n]) for (s, p), held in self._held.items() for n in sorted(held.items)]

    def box_positions(self) -> list[tuple[str, str, int]]:
        """(stream, producer, next sequence) for every producer seen or expected."""
        return [(s, p, seq) for (s, p), seq in self._expected.items()]
