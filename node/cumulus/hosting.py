"""Several members of one partitioned box on one node: its own, and guests taken over in a failover.

docs/cumulus.md §6.3.  When a node that hosts a member of a partitioned box
stays down, the Head has a live node adopt its state (:mod:`boreas.node.adopt`);
for a partitioned box the adopter is usually a member of the same box.  The
dataflow runs one operator per box name (its numbering, positions and
snapshots are per box), so the adopter does not run a second operator: the
:class:`~boreas.node.cumulus.part.PartOperator` of its own member *hosts* the
failed member as a **guest**, a second ``PartOperator`` with the failed
member's number, state and leader role, if it had it.

* Messages between members hosted here never leave the process: ``_send``
  puts them on the hosted member's inbox (:mod:`~.mailbox`), and :meth:`Host.run`
  runs every hosted member until none has anything queued (so the order of
  each member's messages to another is the order they were sent in, as on
  a link).
* The internal streams ``{box}@{m}`` of every hosted member enter here
  (one in port each); the out ports go to the members on other nodes.
* A batch of a relation is coordinated by the member its producer's
  publisher picked (:mod:`boreas.m3.cumulus.coordinators`, :mod:`boreas.client.publisher`)
  when that member is hosted here, else by this node's own member: a
  producer's batches keep one coordinator, so stable reads stay per-producer
  prefixes.
* :meth:`Host.state` is the node's own member's state with the guests'
  under ``"guests"``; :meth:`Host.restore` gives each hosted member its
  own, whichever member the operator was built as first.

A guest keeps its member number, its segments, its place in the version
order and its outgoing messages' content; its later messages are numbered
as the node's own member's (the dataflow numbers per box), which receivers
treat as one more producer on the same ordered link.
"""

from __future__ import annotations

import logging
import zlib
from collections.abc import Callable
from typing import Protocol

from boreas.catalog.model import Partition
from boreas.m3.cumulus.coordinators import pick

from ..operators.base import Emitted
from .mailbox import Mailbox
from .member import Member

log = logging.getLogger(__name__)


class Hosted(Protocol):
    """What the host needs of a member it hosts (:class:`~boreas.node.cumulus.part.PartOperator`)."""

    member: int
    parts: Member  # its composed parts: mailbox, coordinator, steps

    def member_state(self) -> dict: ...

    def restore_member(self, state: dict, now: float | None = None) -> None: ...

    def follow(self, partition: Partition, members: list[int]) -> None: ...


class Host:
    """The members of one partitioned box hosted on this node, by member number (the first: the node's own).

    >>> host = Host(lambda why: ValueError(why))
    >>> host.coordinator_of("a", 3) is None  # (no member hosted yet)
    True
    """

    def __init__(self, error: Callable[[str], Exception]):
        self.members: dict[int, Hosted] = {}
        self._error = error  # the box's error (it names the box)

    def add(self, member: Hosted) -> None:
        self.members[member.member] = member

    def mailbox_of(self, member: int) -> Mailbox | None:
        """Member ``member``'s mailbox if it is hosted here (its messages never leave the process)."""
        op = self.members.get(member)
        return None if op is None else op.parts.mailbox

    def coordinator_of(self, producer: str, picks: int | tuple[int, ...]) -> Hosted | None:
        """The hosted member that takes ``producer``'s batches: the one its publisher picks (``picks``: the
        catalog's count, ``crc32 % picks``, or the layout's coordinator list, by rendezvous: m3/cumulus/coordinators.py),
        if hosted here, else the node's own member (whose :class:`~.handing.Handing` may hand them on).

        >>> host = Host(ValueError); host.members = {1: "own", 2: "guest"}
        >>> [(x, zlib.crc32(x.encode()) % 3, host.coordinator_of(x, 3)) for x in ("a", "b", "c")]
        [('a', 0, 'own'), ('b', 2, 'guest'), ('c', 0, 'own')]
        """
        if len(self.members) <= 1:
            return next(iter(self.members.values()), None)
        return self.members.get(pick(producer, picks), next(iter(self.members.values())))

    # -- producers: their coordinators here, their ends ---------------------------------

    def take(self, picks: int | tuple[int, ...], stream: str, producer: str, seq: int, port: int, rows) -> None:
        """A publisher's batch: to the hosted member that coordinates ``producer`` (:meth:`coordinator_of`),
        which stamps it or hands it on (node/cumulus/handing.py)."""
        self.coordinator_of(producer, picks).parts.handing.take(stream, producer, seq, port, rows)

    def moved_to(self, stream: str, producer: str, nodes: tuple[str, ...]) -> str | None:
        """The node a publisher of ``producer`` should send ``stream`` to now, if a coordinator here handed it."""
        for op in self.members.values():
            member = op.parts.handing.moved_to(stream, producer)
            if member is not None and member < len(nodes):
                return nodes[member]
        return None

    def coordinating(self) -> dict[str, int]:
        """Producers the members hosted here stamped, and batches they forwarded to a new coordinator."""
        handings = [op.parts.handing for op in self.members.values()]
        return {"producers": sum(len(h.seen) - len(h.handed.keys() & h.seen.keys()) for h in handings),
                "handed": sum(len(h.handed) for h in handings), "forwarded": sum(h.forwarded for h in handings)}

    def producer_ended(self, picks: int | tuple[int, ...], port: int, producer: str) -> None:
        """A producer's ``final``: ended by its coordinator here after its batches (or forwarded with them)."""
        member = self.coordinator_of(producer, picks)
        if member is not None:
            member.parts.handing.ended(port, producer)

    def input_ended(self, port: int | None = None, stream: str | None = None) -> None:
        """Every producer this node took ``stream``, the box's input on ``port``, from ended (None: every input):
        each hosted coordinator ends those it took directly, after their batches (node/cumulus/handing.py
        ``input_ended``)."""
        for op in self.members.values():
            op.parts.handing.input_ended(port, stream)

    def end_settled(self) -> bool:
        """Whether the end of the box's input settled at every member hosted here: no member of the partition
        owes a row, here or on a node it may move here from (node/cumulus/end_marks.py)."""
        return all(op.parts.applier.end_settled() for op in self.members.values())

    # -- running -------------------------------------------------------------------------

    def run(self, now: float) -> Emitted:
        """Run every hosted member until none has a message from another hosted member left to take."""
        if len(self.members) == 1:
            return next(iter(self.members.values())).parts.run(now)
        emitted: Emitted = []
        while True:
            for op in list(self.members.values()):
                emitted += op.parts.run(now)
            if not any(op.parts.mailbox.inbox for op in self.members.values()):
                return emitted

    def poll(self, now: float) -> Emitted:
        for op in list(self.members.values()):
            op.parts.tick(now)
        return self.run(now)

    def next_deadline(self) -> float | None:
        found = [d for op in self.members.values() if (d := op.parts.deadline()) is not None]
        return min(found) if found else None

    def backlog(self) -> int:
        """Versions and messages waiting at the members hosted here (the coordinators' admission)."""
        return sum(op.parts.applier.backlog() for op in self.members.values())

    # -- state ---------------------------------------------------------------------------

    def state(self, own: int) -> dict:
        """Member ``own``'s state with every guest's under ``"guests"``."""
        state = self.members[own].member_state()
        guests = {str(m): op.member_state() for m, op in self.members.items() if m != own}
        if guests:
            state["guests"] = guests
        return state

    def _check(self, members: list[int], what: str) -> None:
        missing = [m for m in members if m not in self.members]
        if missing:
            raise self._error(f"cannot take {what} {missing[0]}: this node hosts members "
                              f"{', '.join(map(str, sorted(self.members)))}")

    def restore(self, state: dict, own: int, now: float | None = None) -> None:
        states = {int(state.get("member", own)): state}
        states.update({int(m): s for m, s in (state.get("guests") or {}).items()})
        self._check(list(states), "the state of member")
        for m, s in states.items():
            self.members[m].restore_member(s, now)

    def follow(self, partition: Partition, members: list[int], build: Callable[[int], Hosted]) -> bool:
        """Follow a partition whose members' endpoints changed (a failover); False if a member hosted here left.

        Members newly placed here are built as guests (``build``; their state
        comes with :meth:`take_guests`); every hosted member's ports and
        layouts follow the new endpoints.
        """
        if not set(self.members) <= set(members):
            return False
        for m in members:
            if m not in self.members:
                self.add(build(m))
        for op in self.members.values():
            op.follow(partition, members)
        return True

    # -- failover -----------------------------------------------------------------------

    def take_guests(self, box: str, state: dict, pending: dict[int, list[list]], now: float) -> Emitted:
        """Continue the member(s) of a failed node here, from its replayed operator's ``state()``.

        ``state`` is one member's, with any guests the failed node hosted
        itself under ``"guests"``.  ``pending`` holds, per hosted member,
        messages that precede anything new: for a guest, what this node's
        members had sent the failed node and it never took; for this node's
        members, what the failed node's replay sent them and they never got.
        They are taken first, in order, then every hosted member runs.  The
        guests' timers start again on this node's clock (the failed node's
        flow clock differs).
        """
        states = [{k: v for k, v in state.items() if k != "guests"}, *(state.get("guests") or {}).values()]
        missing = [int(s["member"]) for s in states if int(s["member"]) not in self.members]
        if missing:
            raise self._error(f"cannot take member {missing[0]} over: this node hosts members "
                              f"{', '.join(map(str, sorted(self.members)))} (the partition names it elsewhere)")
        for one in states:
            guest = self.members[int(one["member"])]
            guest.restore_member(one, now)
            guest.parts.restart_clocks(now)
        for m, messages in pending.items():
            if m in self.members:
                self.members[m].parts.mailbox.inbox.extend(messages)
            elif messages:
                log.warning("m3 box %r: %d messages for member %d, not hosted here, dropped", box, len(messages), m)
        log.info("m3 box %r: members %s now run here with member %d%s", box,
                 ", ".join(str(s["member"]) for s in states), next(iter(self.members)),
                 "".join(f"; {len(v)} messages first for member {m}" for m, v in pending.items() if v))
        return self.run(now)
