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
  puts them on the hosted member's queue (``deliver_local``), and :meth:`Hosting._run_hosted`
  runs every hosted member until none has anything queued (so the order of
  each member's messages to another is the order they were sent in, as on
  a link).
* The internal streams ``{box}@{m}`` of every hosted member enter here
  (one in port each); the out ports go to the members on other nodes.
* A batch of a relation is coordinated by the member its producer's
  publisher picked (``crc32(producer) % n``, :mod:`boreas.client.publisher`)
  when that member is hosted here, else by this node's own member: a
  producer's batches keep one coordinator, so stable reads stay per-producer
  prefixes.
* :meth:`Hosting.state` is the node's own member's state with the guests'
  under ``"guests"``; :meth:`Hosting.restore` gives each hosted member its
  own, whichever member the operator was built as first.

A guest keeps its member number, its segments, its place in the version
order and its outgoing messages' content; its later messages are numbered
as the node's own member's (the dataflow numbers per box), which receivers
treat as one more producer on the same ordered link.
"""

from __future__ import annotations

import logging
import time
import zlib
from dataclasses import replace
from typing import Any

from ..operators.base import Emitted

log = logging.getLogger(__name__)


class Hosting:
    """A mixin of :class:`~boreas.node.cumulus.part.PartOperator`: ``hosted`` maps member -> its operator.

    The operator the dataflow holds is the first member hosted here; the
    others (guests) share its ``hosted`` dict and are reached through it.
    """

    hosted: dict[int, Any]

    def _init_hosting(self, members: list[int], host: Any, inputs: list, outputs: list, endpoint: str) -> None:
        if host is not None:  # a guest built by its host
            self.hosted = host.hosted
            self.hosted[self.member] = self
            return
        self.hosted = {self.member: self}
        for m in members:
            if m != self.member:
                type(self)(self.box, inputs, outputs, self.partition, endpoint, member=m, host=self)

    # -- the data plane ------------------------------------------------------------------

    def process(self, port: int, rows: list[tuple], now: float) -> Emitted:
        if port < len(self.box.inputs):
            self.coordinate(port, rows)
        else:
            self.hosted[self._inport[port]].deliver_local(rows)
        return self._run_hosted(now)

    def process_from(self, port: int, rows: list[tuple], now: float, origin: tuple[str, str, int]) -> Emitted:
        if port >= len(self.box.inputs):
            return self.process(port, rows, now)
        coordinator = self.coordinator_of(origin[1])
        coordinator.stamped[(origin[0], origin[1])] = origin[2]  # where its input got to (stable reads)
        coordinator.coordinate(port, rows)
        return self._run_hosted(now)

    def coordinator_of(self, producer: str) -> Any:
        """The hosted member that stamps ``producer``'s batches: the one its publisher picks, if hosted here.

        >>> from boreas.catalog.model import Partition
        >>> class P(Hosting):
        ...     partition = Partition("v", ("n1", "n2", "n3"))
        >>> p = P(); p.hosted = {1: "own", 2: "guest"}
        >>> [(x, zlib.crc32(x.encode()) % 3, p.coordinator_of(x)) for x in ("a", "b", "c")]
        [('a', 0, 'own'), ('b', 2, 'guest'), ('c', 0, 'own')]
        """
        if len(self.hosted) == 1:
            return self
        picks = len(self.partition.entry_nodes)  # (what publishers pick from: catalog/slices.py)
        return self.hosted.get(zlib.crc32(producer.encode()) % picks, next(iter(self.hosted.values())))

    def poll(self, now: float) -> Emitted:
        for op in list(self.hosted.values()):
            op.member_tick(now)
        return self._run_hosted(now)

    def next_deadline(self) -> float | None:
        found = [d for op in self.hosted.values() if (d := op.member_deadline()) is not None]
        return min(found) if found else None

    def _run_hosted(self, now: float) -> Emitted:
        """Run every hosted member until none has a message from another hosted member left to take."""
        if len(self.hosted) == 1:
            return self.member_run(now)
        emitted: Emitted = []
        while True:
            for op in list(self.hosted.values()):
                emitted += op.member_run(now)
            if not any(op.has_local for op in self.hosted.values()):
                return emitted

    #: seconds the entry count /status and the metrics show may be old
    ENTRIES_TTL = 1.0

    def state_entries(self) -> int:
        """Entries of the member's maps, counted at most once a second.

        Counting walks every group of an indexed map (Q3's ``m1`` by
        customer): about 3 ms for 350k entries, which a bench polling
        ``/status`` 50 times a second paid as 15% of a node's CPU.  A gauge
        a second old says as much; the maps themselves are never stale.
        """
        now = time.monotonic()
        counted = getattr(self, "_entries_counted", None)
        if counted is None or now - counted[0] >= self.ENTRIES_TTL:
            counted = self._entries_counted = (now, self.runtime.entries())
        return counted[1]

    def backlog(self) -> int:
        """Versions and messages waiting at the members hosted here (the coordinators' admission)."""
        return sum(op.member_backlog() for op in self.hosted.values())

    # -- state ---------------------------------------------------------------------------

    def state(self) -> dict:
        state = self.member_state()
        guests = {str(m): op.member_state() for m, op in self.hosted.items() if op is not self}
        if guests:
            state["guests"] = guests
        return state

    def restore(self, state: dict, now: float | None = None) -> None:
        states = {int(state.get("member", self.member)): state}
        states.update({int(m): s for m, s in (state.get("guests") or {}).items()})
        for m in states:
            if m not in self.hosted:
                raise self.error(f"cannot take the state of member {m}: this node hosts members "
                                 f"{', '.join(map(str, sorted(self.hosted)))}")
        for m, s in states.items():
            self.hosted[m].restore_member(s, now)

    def _rehost(self, partition: Any) -> bool:
        """Follow a partition whose members' endpoints changed (a failover); False if a member hosted here left.

        Members newly placed here are built as guests (their state comes
        with :meth:`take_guests`); every hosted member's ports and layouts
        follow the new endpoints.
        """
        members = partition.member_of(self.endpoint)
        if not set(self.hosted) <= set(members):
            return False
        for op in self.hosted.values():
            op.partition = partition
        for m in members:
            if m not in self.hosted:
                type(self)(self.box, self.inputs, self.outputs, partition, self.endpoint, member=m, host=self)
        for op in self.hosted.values():
            op.rewire(partition, members)
            op._rehome()
        return True

    def _rehome(self) -> None:
        """Layouts restored from a state name the nodes members were on then; a failover since moved one.

        The members (and so the slot owners) are the same; only the endpoint
        of a member that failed over differs: the partition's is current.
        """
        nodes = tuple(self.partition.nodes)

        def fix(lay: Any) -> Any:  # (a layout before a partition grew has fewer members)
            now = nodes[:len(lay.members)]
            return lay if lay.members == now or len(now) < len(lay.members) else replace(lay, members=now)

        self.layout = fix(self.layout)
        self.history = [(first, fix(lay)) for first, lay in self.history]
        if self.requested is not None:
            self.requested = fix(self.requested)
        for r in self.relayouts:
            r["layout"] = fix(r["layout"])
        if self.settling is not None:
            self.settling["layout"] = fix(self.settling["layout"])

    # -- failover -----------------------------------------------------------------------

    def take_guests(self, state: dict, pending: dict[int, list[list]], now: float) -> Emitted:
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
        missing = [int(s["member"]) for s in states if int(s["member"]) not in self.hosted]
        if missing:
            raise self.error(f"cannot take member {missing[0]} over: this node hosts members "
                             f"{', '.join(map(str, sorted(self.hosted)))} (the partition names it elsewhere)")
        for one in states:
            guest = self.hosted[int(one["member"])]
            guest.restore_member(one, now)
            if guest.leader is not None:
                guest.leader.restart_clock()  # the failed node's flow clock set its deadline
            if guest.copy_at:
                guest.copy_at = now
        for m, messages in pending.items():
            if m in self.hosted:
                self.hosted[m].deliver_local(messages)
            elif messages:
                log.warning("m3 box %r: %d messages for member %d, not hosted here, dropped", self.box.name,
                            len(messages), m)
        log.info("m3 box %r: members %s now run here with member %d%s", self.box.name,
                 ", ".join(str(s["member"]) for s in states), self.member,
                 "".join(f"; {len(v)} messages first for member {m}" for m, v in pending.items() if v))
        return self._run_hosted(now)
