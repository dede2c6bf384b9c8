"""Handing producers from one coordinator to another when the coordinator list changes (docs/cumulus.md §6.5).

A layout lists the members that coordinate published input
(:attr:`~boreas.m3.cumulus.layout.Layout.coordinators`); a producer's
coordinator is the list's rendezvous pick (:mod:`boreas.m3.cumulus.coordinators`).
A layout change that adds a member to the list (a rebalance onto a joining
node) or takes one out (a retirement) moves the producers whose pick
changed, at the change's first epoch ``E``.  :class:`Handing` owns, for one
member, where each producer's batches go, and its part of ``state()``:

* **the old coordinator** ``m``, when it starts stamping with ``E`` (the
  ``Advance`` that starts it), sends every coordinator of the new list a
  ``Handover(E, m, [[stream, producer, last]])``, maybe empty: the producers
  it stamped whose pick is now that member, with the last sequence number it
  stamped.  A batch of such a producer that still reaches ``m`` is not
  stamped: it goes on as ``Forward`` on the same ordered link.  Once the
  new coordinator answered ``Taken(E, at)`` (it stamps with ``at >= E`` and knows
  where each handed producer is), the node acknowledges such batches with
  a hint naming it (:meth:`Handing.moved_to`, ``Ack.moved``), so the
  publisher redirects its link there (``client/publisher.py``): no direct
  batch reaches a coordinator that does not know it was handed the producer;
* **the new coordinator** ``m2`` takes a handed producer's batches, forwarded
  or direct, only once it stamps with ``E`` or later, and in sequence order
  from ``last + 1``: a direct batch that overtook a forwarded one waits for
  it, a batch both forwarded and sent again direct is taken once.  A direct
  batch of a producer it never saw waits until every member of the old
  layout's ``Handover`` is in (it may be one handed to it);
* a producer's **final mark** (an empty batch numbered after its batches,
  ``Publisher.close(final=True)``) travels as they do: ``m`` forwards it on
  the ordered link after the batches it forwarded, and ``m2`` takes it in
  sequence order, so one sent to ``m2`` direct waits for the forwarded
  batches before it (the producer's last position is never taken before its
  last batch).  A later run's end (``Publisher.end``, numbered
  :data:`LATER_RUN`) waits for nothing at ``m2``: it comes after every batch.

So every batch of a producer stamped by ``m`` is in an epoch before ``E``
and every one stamped by ``m2`` in ``E`` or later: the version order keeps
each producer's order, stable reads stay per-producer prefixes.  Every
decision follows from the member's input (batches, ``Advance``,
``Handover``, ``Forward``, all in the node's input log), so a replay
forwards and stamps the same batches.

A producer ``m`` first sees after ``E`` whose pick under the list before
was ``m`` is forwarded too, but its publisher is not redirected (``m2`` could
not tell its direct batches from a fresh producer's): it keeps the extra
hop.  A producer whose pick never was ``m`` (a keyed publisher's pinned
sub-producer, client/keyed.py) stays where it is: any member may coordinate
any producer, the pick only keeps one producer on one member.

>>> from boreas.m3.cumulus.coordinators import pick
>>> producers = [f"p-{i}" for i in range(8)]   # growing the list moves only the new member's winners
>>> [pick(p, (0, 1)) for p in producers], [pick(p, (0, 1, 2)) for p in producers]
([0, 1, 0, 0, 0, 1, 0, 1], [0, 2, 0, 0, 0, 1, 2, 1])
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from boreas.m3.cumulus import Layout
from boreas.m3.cumulus.coordinators import pick
from boreas.wire.columns import Columns, read_columns

from . import messages as msg
from .coordinator import Coordinator
from .mailbox import Mailbox
from .membership import MemberState

log = logging.getLogger(__name__)

#: A final mark numbered at or past this ends a producer in a later run than its batches' (``Publisher.end``,
#: client/publisher.py's ``END_SEQ``): no batch of it comes after, so it waits for none.
LATER_RUN = 1 << 62

Key = tuple[str, str]  # (stream, producer)
Listed = tuple[int, ...] | None  # a layout's coordinator list (None: the catalog's count, by modulo)


class Handing:
    """Where member ``place.member`` sends each producer's batches: stamped here, forwarded, or held.

    ``upcoming()`` is the newest layout decided (a change not started yet
    may name this member for producers it has not seen: their first batches
    wait for it); ``count`` is the catalog's coordinator count, the pick
    while no layout lists them.
    """

    def __init__(self, place: MemberState, coordinator: Coordinator, mailbox: Mailbox,
                 upcoming: Callable[[], Layout], count: int):
        self.place, self.coordinator, self.mailbox, self.upcoming = place, coordinator, mailbox, upcoming
        self.count = count
        self.listed: Listed = place.layout.coordinators  # the list in effect
        self.before: Listed = self.listed  # the list before the last switch
        self.since = 0  # the first epoch of the list in effect
        self.seen: dict[Key, int] = {}  # producers stamped here -> last seq stamped
        self.handed: dict[Key, list] = {}  # producers handed away -> [member, hinted (in a Handover), epoch]
        self.gained: dict[Key, int] = {}  # producers handed here -> the next seq to stamp
        self.held: dict[Key, dict[int, list]] = {}  # gained producers' batches ahead of the next: seq -> [port, rows]
        self.awaiting: list[int] = []  # members whose Handover of ``since`` is not in yet
        self.waiting: list[list] = []  # direct batches [stream, producer, seq, port, rows] waiting for Handovers
        self.early: list[list] = []  # Handover/Forward messages of an epoch this member does not stamp with yet
        self.taken: dict[int, int] = {}  # member -> the last epoch whose Handover it took (``Taken``)
        # producers' ends waiting for their batches here: [producer, port]; the input's on a port: [None, port,
        # stream] ([None, None]: on every port)
        self.ending: list[list] = []
        self.forwarded = 0  # batches forwarded (a counter, not state)

    def _pick(self, producer: str, listed: Listed) -> int:
        return pick(producer, self.count if listed is None else listed)

    # -- batches --------------------------------------------------------------------------

    def take(self, stream: str, producer: str, seq: int, port: int, rows: list | Columns) -> None:
        """A publisher's batch that reached this member: stamp it, forward it, or hold it (module docstring)."""
        key = (stream, producer)
        handed = self.handed.get(key)
        if handed is not None:  # (a final mark too: on the ordered link after the batches forwarded before it)
            self._forward(key, seq, port, rows, handed)
            return
        if key in self.gained and (len(rows) or seq < LATER_RUN):
            self._ordered(key, seq, port, rows)  # (a final mark numbered after its batches waits for them)
            return
        if not len(rows):  # a final mark alone (a later run's end, numbered past any batch: it orders nothing)
            self.coordinator.took(stream, producer, seq)
            return
        if key not in self.seen:
            if self._moving_here(producer):
                self.waiting.append([stream, producer, seq, port, rows])
                return
            me = self.place.member
            off = self.listed is not None and me not in self.listed  # (retiring: it stamps nothing more)
            if off or self.listed != self.before and self._pick(producer, self.before) == me:
                target = self._pick(producer, self.listed)
                if target != me:  # first seen since it was handed away: forwarded, its publisher not redirected
                    handed = self.handed[key] = [target, False, self.since]
                    self._forward(key, seq, port, rows, handed)
                    return
        self._stamp(key, seq, port, rows)

    def ended(self, port: int, producer: str) -> None:
        """A producer's end (its ``final``, node/router.py): in the order of the final mark it stands
        for, after every batch of it taken before.  Forwarded where its batches go, if it was handed away; kept
        while a batch of it is held for its turn or waits for a Handover; else its coordinator ends it now."""
        key = next((k for k in self.handed if k[1] == producer), None)
        if key is not None:
            target, _, epoch = self.handed[key]
            self.forwarded += 1
            self.mailbox.send(target, msg.forward(epoch, self.place.member, key[0], producer, -1, port, None))
            return
        self.ending.append([producer, port])
        self._end_ready()

    def input_ended(self, port: int | None = None, stream: str | None = None) -> None:
        """The box's input ``stream`` on ``port`` ended on this member's node (node/router.py's ``end_of_input``:
        every producer the node took it from ended; None: every input).  Not every producer this coordinator
        keeps: one handed here may still publish to another node, which forwards its batches; nor another in
        stream's.  So it ends on ``port``, once no batch is held nor waiting here, the producers it took ``stream``
        from directly, not handed here nor away (each ended on this node; their own ends, through :meth:`ended`,
        usually came first: node/router.py sends an upstream box's too)."""
        self.ending.append([None, port, stream])
        self._end_ready()

    def _end_ready(self) -> None:
        """The ends waiting for batches of their producers that are not held nor waiting any more."""
        if not self.ending:
            return
        busy = {k[1] for k in self.held} | {w[1] for w in self.waiting}
        ready = [e for e in self.ending if e[0] not in busy and (e[0] is not None or not busy)]
        if ready:
            self.ending = [e for e in self.ending if e[0] in busy or e[0] is None and busy]
            for producer, port, *stream in ready:
                if producer is not None:
                    self.coordinator.ended(port, producer)
                    continue
                of = stream[0] if stream else None
                for key in self.seen:
                    if key not in self.gained and key not in self.handed and (of is None or key[0] == of):
                        self.coordinator.ended(port, key[1])
                self.coordinator.ended(port, "")  # (rows taken without a producer id: node/router.py ``_feed``)

    def seed_ends(self, streams: list[str]) -> None:
        """A state from before the end marks kept no producers' ends: its coordinator heard of every producer it
        still stamps for (``streams``: the box's in streams, by port), none ended (their ends, if they come, come
        after it).  Without this it would hear of none and let the end pass while they still publish."""
        for stream, producer in self.seen:
            if (stream, producer) not in self.handed:
                for port, of in enumerate(streams):
                    if of == stream:
                        self.coordinator.ends.heard(port, producer)

    def _moving_here(self, producer: str) -> bool:
        """Whether a producer this member never saw may be one handed to it whose Handover is not in yet."""
        me = self.place.member
        upcoming = self.upcoming()
        if upcoming.version > self.coordinator.routing and upcoming.coordinators != self.listed:
            if self._pick(producer, upcoming.coordinators) == me and self._pick(producer, self.listed) != me:
                return True
        return bool(self.awaiting) and self._pick(producer, self.listed) == me != self._pick(producer, self.before)

    def _stamp(self, key: Key, seq: int, port: int, rows: list | Columns) -> None:
        self.seen[key] = seq
        self.coordinator.took(key[0], key[1], seq)
        if len(rows):  # (a final mark carries none)
            self.coordinator.coordinate(port, rows, key[1])

    def _ordered(self, key: Key, seq: int, port: int, rows: list | Columns) -> None:
        """A handed-over producer's batch: stamped in sequence order from the Handover's ``last + 1``."""
        nxt = self.gained[key]
        if seq < nxt:  # forwarded and sent again direct: taken once
            return
        if seq > nxt:
            self.held.setdefault(key, {})[seq] = [port, rows]
            return
        self._stamp(key, seq, port, rows)
        nxt += 1
        held = self.held.get(key)
        while held and nxt in held:
            port, rows = held.pop(nxt)
            self._stamp(key, nxt, port, rows)
            nxt += 1
        if held is not None and not held:
            del self.held[key]
        self.gained[key] = nxt
        self._end_ready()

    def _forward(self, key: Key, seq: int, port: int, rows: list | Columns, handed: list) -> None:
        target, _, epoch = handed
        if isinstance(rows, Columns) and not self.mailbox.is_local(target):
            rows = rows.ipc()  # (as it came: the new coordinator routes it as if it had come directly)
        self.forwarded += 1
        self.mailbox.send(target, msg.forward(epoch, self.place.member, key[0], key[1], seq, port, rows))

    def moved_to(self, stream: str, producer: str) -> int | None:
        """The member a publisher of ``producer`` should send to now, if it was handed there (the Ack's hint)."""
        handed = self.handed.get((stream, producer))
        if handed is None or not handed[1] or self.taken.get(handed[0], -1) < handed[2]:
            return None
        return handed[0]

    # -- messages ---------------------------------------------------------------------------

    def receive(self, m: list) -> None:
        """A ``Handover`` or ``Forward``; one of an epoch this member does not stamp with yet waits for it."""
        if m[0] == msg.TAKEN:
            self.taken[m[2]] = max(m[1], self.taken.get(m[2], -1))
            at = m[3] if len(m) > 3 else m[1]  # (a Taken of a version before ``at``: the Handover's epoch)
            for (_, producer), (target, _, epoch) in self.handed.items():
                if target == m[2] and epoch <= m[1]:  # (its watermarks went with the Handover: they count there
                    self.coordinator.forget(producer, at)  # from the taker's Close(at) on, here until then)
            return
        if m[1] > self.coordinator.epoch:
            self.early.append(m)
            return
        if m[0] == msg.HANDOVER:
            self.mailbox.send(m[2], msg.taken(m[1], self.place.member, self.coordinator.epoch))
            for stream, producer, last, *marks in m[3]:  # (a Handover of a version before marks: 3 fields)
                key = (stream, producer)
                if marks:  # the producer's watermarks and end: they count here from the Close of the epoch stamped
                    # with now, which ``Taken`` names (the old coordinator keeps them for its Closes before it)
                    self.coordinator.take_over(producer, marks[0], marks[1] if len(marks) > 1 else None)
                self.handed.pop(key, None)  # (handed back here)
                self.gained[key] = max(int(last) + 1, self.gained.get(key, 0))
            if m[2] in self.awaiting:
                self.awaiting.remove(m[2])
            if not self.awaiting:
                self._release_waiting()
            return
        _, _, _, stream, producer, seq, port, rows = m
        if rows is None:  # a handed producer's end, forwarded after its batches (:meth:`ended`)
            self.ended(port, producer)
            return
        key = (stream, producer)
        rows = read_columns(rows) if isinstance(rows, bytes) else rows
        if key not in self.handed and key not in self.gained:  # the first of one never handed over by name
            if self.listed is not None and self.place.member not in self.listed:
                # (forwarded by a member that had not switched yet to a member retiring now: it stamps nothing
                # more, its epochs end, so the batch goes on to the producer's pick under the list in effect)
                self.handed[key] = [self._pick(producer, self.listed), False, self.since]
            else:
                self.gained[key] = seq
        self.take(stream, producer, seq, port, rows)

    def _release_waiting(self) -> None:
        waiting, self.waiting = self.waiting, []
        for stream, producer, seq, port, rows in waiting:
            self.take(stream, producer, seq, port, rows)
        self._end_ready()

    def switch(self, before: Layout, layout: Layout, epoch: int) -> None:
        """The coordinator stamps with ``layout`` from ``epoch`` on: hand over the producers whose pick changed."""
        if layout.coordinators != self.listed:
            me = self.place.member
            self.before, self.listed, self.since = self.listed, layout.coordinators, epoch
            targets = [c for c in (range(len(layout.members)) if layout.coordinators is None else layout.coordinators)
                       if c != me]
            lists: dict[int, list] = {c: [] for c in targets}
            for key in [*self.seen, *(k for k in self.gained if k not in self.seen)]:
                if key in self.handed or self._pick(key[1], self.before) != me:
                    continue
                target = self._pick(key[1], self.listed)
                if target == me:
                    continue
                handed = self.handed[key] = [target, True, epoch]
                nxt = self.gained.pop(key, None)
                lists.setdefault(target, []).append([key[0], key[1], self.seen[key] if nxt is None else nxt - 1,
                                                     *self.coordinator.hand_away(key[1])])
                held = self.held.pop(key, {})
                for seq in sorted(held):  # (ahead of what was stamped here: the new coordinator orders them)
                    self._forward(key, seq, *held[seq], handed)
            for c, producers in lists.items():
                self.mailbox.send(c, msg.handover(epoch, me, producers))
            mine = layout.coordinators is None or me in layout.coordinators  # (a retiring member gains nothing)
            self.awaiting = [m for m in range(len(before.members)) if m != me] if mine else []
            if lists:
                log.info("m3 box member %d hands %d producers over at epoch %d: %s", me,
                         sum(map(len, lists.values())), epoch,
                         ", ".join(f"{len(v)} to member {c}" for c, v in lists.items() if v))
        early, self.early = self.early, []
        for m in early:
            self.receive(m)
        if not self.awaiting:
            self._release_waiting()

    def advanced(self) -> None:
        """The coordinator stamps with a later epoch: Handover/Forward messages that waited for it go on."""
        if self.early and any(m[1] <= self.coordinator.epoch for m in self.early):
            early, self.early = self.early, []
            for m in early:
                self.receive(m)

    # -- state ------------------------------------------------------------------------------

    @staticmethod
    def _plain(rows: list | Columns) -> list | bytes:
        return rows.ipc() if isinstance(rows, Columns) else rows

    @staticmethod
    def _rows(rows: list | bytes) -> list | Columns:
        return read_columns(rows) if isinstance(rows, bytes) else rows

    def state(self) -> dict:
        plain = self._plain
        return {"handing": {
            "listed": None if self.listed is None else list(self.listed),
            "before": None if self.before is None else list(self.before), "since": self.since,
            "seen": [[s, p, q] for (s, p), q in self.seen.items()],
            "handed": [[s, p, *h] for (s, p), h in self.handed.items()],
            "gained": [[s, p, q] for (s, p), q in self.gained.items()],
            "held": [[s, p, q, port, plain(rows)] for (s, p), h in self.held.items() for q, (port, rows) in h.items()],
            "ending": [list(e) for e in self.ending], "awaiting": list(self.awaiting), "taken": [[m, e] for m, e in self.taken.items()],
            "waiting": [[s, p, q, port, plain(rows)] for s, p, q, port, rows in self.waiting],
            "early": [m[:-1] + [plain(m[-1])] if m[0] == msg.FORWARD else m for m in self.early]}}

    def restore(self, state: dict) -> None:
        h = state.get("handing")
        if not h:
            return
        self.listed = None if h["listed"] is None else tuple(h["listed"])
        self.before = None if h["before"] is None else tuple(h["before"])
        self.since = int(h["since"])
        self.seen = {(s, p): int(q) for s, p, q in h["seen"]}
        self.handed = {(s, p): [int(t), bool(hinted), int(e)] for s, p, t, hinted, e in h["handed"]}
        self.gained = {(s, p): int(q) for s, p, q in h["gained"]}
        self.held = {}
        for s, p, q, port, rows in h["held"]:
            self.held.setdefault((s, p), {})[int(q)] = [int(port), self._rows(rows)]
        self.awaiting = [int(m) for m in h["awaiting"]]
        self.ending = [[p, None if port is None else int(port), *rest] for p, port, *rest in h.get("ending", [])]
        self.taken = {int(m): int(e) for m, e in h.get("taken", [])}
        self.waiting = [[s, p, int(q), int(port), self._rows(rows)] for s, p, q, port, rows in h["waiting"]]
        self.early = [list(m) for m in h["early"]]
