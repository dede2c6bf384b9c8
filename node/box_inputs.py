"""What feeds a box's in ports besides its stream's own batches.

* :class:`BoxInputs`: a box that arrived by a move orders its own inputs
  (its batches come both forwarded by the node it left and straight from
  upstream), by (stream, producer) position, holding early batches;
* :class:`Bridge`: a filter inserted or removed across two nodes switches a
  port from one stream to another; batches of the old stream still on their
  way go to the port until the first batch of the new one arrives.

>>> inputs = BoxInputs([("S", "p", 3)])
>>> inputs.admit("S", "p", 4, ["b"]), inputs.admit("S", "p", 3, ["a"]), inputs.admit("S", "p", 2, ["x"])
([], [['a'], ['b']], [])
"""

from __future__ import annotations

from dataclasses import dataclass

from boreas.wire.tuples import RowType


@dataclass(frozen=True)
class Bridge:
    box: str
    port: int
    successor: str
    row_type: RowType


class BoxInputs:
    """One moved box's input positions: the next sequence per (stream, producer), and early batches."""

    def __init__(self, positions: list[tuple[str, str, int]]):
        self.next = {(s, p): seq for s, p, seq in positions}
        self.held: dict[tuple[str, str], dict[int, list[tuple]]] = {}

    def admit(self, stream: str, producer: str, seq: int, rows: list[tuple]) -> list[list[tuple]]:
        key = (stream, producer)
        expected = self.next.setdefault(key, seq)
        if seq < expected:
            return []  # processed before the move
        if seq > expected:
            self.held.setdefault(key, {})[seq] = rows
            return []
        ready = [rows]
        expected += 1
        held = self.held.get(key, {})
        while expected in held:
            ready.append(held.pop(expected))
            expected += 1
        self.next[key] = expected
        return ready

    def positions(self) -> list[tuple[str, str, int]]:
        return [(s, p, seq) for (s, p), seq in self.next.items()]
