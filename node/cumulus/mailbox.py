"""What one member of a partitioned box has to take and to send (docs/cumulus.md §3.6, §6.3).

A member does no I/O.  Its :class:`Mailbox` holds the messages queued for
it (``inbox``) and what it sent during one run: messages to each member on
another node (one batch per destination, so a run's messages to a member
leave in one frame), messages that go in a frame of their own (a segment's
chunks, :mod:`~boreas.node.cumulus.copying`), and view changes.  A message
to a member hosted on the same node (itself, or a guest after a failover)
never leaves the process: it goes straight onto that member's inbox, in the
order it was sent, as on a link.  :meth:`Mailbox.collect` hands the run's
output to the dataflow as the operator's ``(out port, rows)`` pairs.

>>> boxes: dict[int, Mailbox] = {}
>>> a, b = Mailbox(boxes.get), Mailbox(boxes.get)
>>> boxes.update({0: a, 1: b}); a.link({2: 5}, nodes=3)
>>> a.send(1, ["u", 0]); a.send(2, ["c", 0, 0, []]); a.send_alone(2, ["k", "x", 0, True, []]); a.emit(0, [(1,)])
>>> a.collect(), list(b.inbox)
([(0, [(1,)]), (5, [['c', 0, 0, []]]), (5, [['k', 'x', 0, True, []]])], [['u', 0]])
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable

from ..operators.base import Emitted


class Mailbox:
    """One member's inbox and the output of its current run; ``neighbour(m)`` is member ``m``'s mailbox if
    ``m`` is hosted on this node (None otherwise)."""

    def __init__(self, neighbour: Callable[[int], Mailbox | None]):
        self.inbox: deque[list] = deque()  # messages for this member, in the order they were sent
        self.ports: dict[int, int] = {}  # member on another node -> the out port its internal stream leaves on
        self.nodes = 0  # nodes of the partition there are links to (members beyond have none)
        self._neighbour = neighbour
        self._out: dict[int, list] = {}
        self._alone: list[tuple[int, list]] = []
        self._emitted: Emitted = []

    def link(self, ports: dict[int, int], nodes: int) -> None:
        """Send to members on other nodes on ``ports``; the partition has ``nodes`` nodes (the box is rewired)."""
        self.ports, self.nodes = ports, nodes

    def is_local(self, member: int) -> bool:
        """Whether ``member`` is hosted on this node (its messages never leave the process)."""
        return self._neighbour(member) is not None

    def send(self, member: int, message: list) -> None:
        box = self._neighbour(member)
        if box is not None:
            box.inbox.append(message)
        else:
            self._out.setdefault(member, []).append(message)

    def send_alone(self, member: int, message: list) -> None:
        """Send ``message`` in a frame of its own, after the run's other messages (a chunk of a segment)."""
        self._alone.append((member, message))

    def emit(self, port: int, rows: list) -> None:
        """View changes of the box, on its declared out port ``port``."""
        self._emitted.append((port, rows))

    def collect(self) -> Emitted:
        """The run's output, in order: view changes, a batch per member on another node, then lone frames."""
        emitted, self._emitted = self._emitted, []
        for m, out in self._out.items():
            if out:
                emitted.append((self.ports[m], out))
        self._out = {}
        for m, message in self._alone:
            box = self._neighbour(m)
            if box is not None:  # a member hosted here too (a guest after a failover)
                box.inbox.append(message)
            else:
                emitted.append((self.ports[m], [message]))
        self._alone = []
        return emitted
