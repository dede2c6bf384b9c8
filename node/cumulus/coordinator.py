"""The coordinator of a member of a partitioned box: stamping input batches as versions (docs/cumulus.md §3.5).

:class:`Coordinator` owns what the coordinator keeps (``epoch``, ``seq``,
``woke``, ``stamped``, ``holding``, the layout version it stamps with and
the dispatchers of that layout) and its part of the member's ``state()``.
Input batches of a publisher that picked this member become *versions*
``(epoch, member, seq)`` and go, as ``Work``, to the members that write or
serve their rows, each getting only its rows.  On ``Advance(e + 1)`` the
coordinator closes ``e`` (``Close`` to every member, with the input
positions it stamped to the leader) and stamps with ``e + 1``, under the
layout of a change whose first epoch it is (:meth:`Coordinator.route`).

**Holding.**  Every message between members costs each end a frame, a
system call, an acknowledgement and a pass of the dataflow, whatever its
size (at 4 members on loopback about 100 us a frame, more than the rows in
it), and a batch of a publisher is split over every member.  So, when the
box has more than one member, the coordinator *holds* a port's batches and
stamps them as one version when ``HOLD`` rows of that port are held or the
epoch ends (``Advance``), whichever comes first: an epoch's Work to a member
then mostly leaves in the frame of its ``Close``, and a version's pushes
serve more rows.  What is held and when it goes is decided by the input
alone (rows taken, ``Advance`` messages; both are in the node's input log),
never by time, so a node replaying its log numbers every message it sends
as it did.  The order within a port is kept (a producer's batches stay in
order: stable reads stay per-producer prefixes); versions of different
ports may leave in another order than their batches came, as batches of
different producers may anyway.  A held version is stamped in the epoch
its rows arrived in (held rows go before the epoch's ``Close``), so the
positions a ``Close`` names are exactly what its epoch holds.  Sequential
relations (one event per version) are not held, and a lone member holds
nothing (its Work never leaves the process).
"""

from __future__ import annotations

from collections.abc import Callable
from operator import itemgetter

from boreas.m3.boxtype import BoxPlan
from boreas.m3.cumulus import Layout
from boreas.m3.cumulus.member import group
from boreas.m3.cumulus.roles import Roles

from ..operators.m3box import date_of
from . import messages as msg
from .mailbox import Mailbox
from .membership import MemberState

#: rows of one in port a coordinator holds at most before stamping them as one version (docs/cumulus.md §3.5)
HOLD = 4096


class Coordinator:
    """The coordinator of member ``place.member``: its input batches as versions, sent as ``Work``.

    ``box`` is the box's plan (its in ports' columns and sign fields);
    ``ordered``: the plan reads maps, so versions apply in one order
    (sequential relations then go one event per version).
    """

    def __init__(self, place: MemberState, box: BoxPlan, ordered: bool, mailbox: Mailbox):
        self.place = place
        self.box = box
        self.ordered = ordered
        self.mailbox = mailbox
        self.epoch = 0  # the epoch it stamps Work with (the last Advance)
        self.seq = 0
        self.woke = -1  # the last epoch it asked the leader to end
        self.stamped: dict[tuple[str, str], int] = {}  # (stream, producer) -> last seq taken in this epoch
        self.holding: dict[int, list] = {}  # in port -> rows taken in this epoch, not stamped yet (in arrival order)
        # counters (not state): Work rows stamped for members on this node, and for members on other nodes
        self.rows_kept = self.rows_sent = 0
        self.routing = place.layout.version  # the layout version it stamps Work with
        self._closing = 0  # members of the epoch it stamps with (its Close goes to each)
        self._involved: list[Callable[[list], list]] = []  # per in port: rows -> the members each goes to
        self.route(place.layout)

    def route(self, layout: Layout) -> None:
        """Stamp with ``layout`` from now on (the first epoch of a layout change, or a restored state)."""
        self.routing = layout.version
        self._closing = len(layout.members)
        self._involved = [self._involvement(port, layout) for port in range(len(self.box.ports))]

    def _involvement(self, port: int, layout: Layout) -> Callable[[list], list]:
        """``rows -> [members]`` for rows of in port ``port`` in the in stream's form (sign field and all).

        A batch at a time (:meth:`Roles.involved`); a row with a sign that is
        neither 1 nor -1 stays here, where the splitter counts it refused."""
        pp = self.box.ports[port]
        s = pp.sign_index
        picks = [i for i in range(len(pp.columns) + (s is not None)) if i != s]

        def getter(i: int):
            at = picks[i]
            if pp.columns[i][1] == "DATE":
                return lambda row: date_of(row[at])
            return itemgetter(at)

        roles = Roles(self.place.plan, layout, getter, pp.relation)
        inserts, deletes = roles.involved(pp.relation, 1), roles.involved(pp.relation, -1)
        if s is None:
            return inserts
        alike, me, sign_of = roles.placed_alike(pp.relation), self.place.member, itemgetter(s)

        def involved(rows: list) -> list:
            signs = list(map(sign_of, rows))
            ins = signs.count(1)
            if ins == len(signs):
                return inserts(rows)
            dels = signs.count(-1)
            if alike or ins + dels == 0:
                out = inserts(rows)
            elif dels == len(signs):
                return deletes(rows)
            else:
                out = [a if g == 1 else b for a, b, g in zip(inserts(rows), deletes(rows), signs)]
            if ins + dels != len(signs):
                out = [m if g == 1 or g == -1 else me for m, g in zip(out, signs)]
            return out
        return involved

    def _sequential(self, port: int) -> bool:
        return self.ordered and self.box.ports[port].relation in self.place.roles.sequential

    def coordinate(self, port: int, rows: list) -> None:
        """Take an input batch of in port ``port``: stamp it now, or hold it (see the module docstring)."""
        joined = self.place.joined
        joining = joined is None or self.epoch < joined
        if joining or self._closing > 1 and not self._sequential(port):
            held = self.holding.get(port)
            if held is None:
                held = self.holding[port] = []
            held += rows
            if len(held) >= HOLD and not joining:  # (a joining member stamps from its first epoch on)
                self._stamp(port, self.holding.pop(port))
        else:
            self._stamp(port, rows)
        if self.woke != self.epoch:
            self.woke = self.epoch
            self.mailbox.send(0, msg.wake(self.epoch))

    def took(self, stream: str, producer: str, seq: int) -> None:
        """Batch ``seq`` of ``producer`` on ``stream`` is the last one taken (its Close names it: stable reads)."""
        self.stamped[(stream, producer)] = seq

    def _stamp(self, port: int, rows: list) -> None:
        """Rows of in port ``port`` as versions: one, or one per event for a sequential relation."""
        involved, me, mailbox = self._involved[port], self.place.member, self.mailbox
        for version in ([r] for r in rows) if self._sequential(port) else (rows,):
            shares = group(involved(version), version)
            if not shares:
                continue
            seq, self.seq = self.seq, self.seq + 1
            for m, share in shares.items():
                if mailbox.is_local(m):
                    self.rows_kept += len(share)
                else:
                    self.rows_sent += len(share)
                mailbox.send(m, msg.work(self.epoch, me, seq, port, share))

    def _release_holding(self) -> None:
        """Stamp every port's held rows (the epoch ends), ports in the order they were first held."""
        holding, self.holding = self.holding, {}
        for port, rows in holding.items():
            self._stamp(port, rows)

    def advance(self, epoch: int) -> None:
        """``Advance(epoch)``: close the epoch stamped with so far, stamp with ``epoch`` from now on.

        A joining member closes nothing before its first epoch, and a retired
        one nothing from the first epoch it is not a member of: no member
        expects a Close of it for an epoch it takes no part in."""
        me, joined = self.place.member, self.place.joined
        if joined is not None and self.epoch >= joined and me < self._closing:
            self._release_holding()
            positions = [[s, p, q] for (s, p), q in self.stamped.items()]
            self.stamped = {}
            for member in range(self._closing):  # the members of the epoch closed
                self.mailbox.send(member, msg.close(self.epoch, me, positions if member == 0 else None))
        self.epoch = epoch

    @property
    def idle(self) -> bool:
        """Whether it never stamped nor holds anything (a bulk load goes only into such a member)."""
        return not self.seq and not self.holding

    # -- state -------------------------------------------------------------------------

    def state(self) -> dict:
        return {"epoch": self.epoch, "seq": self.seq, "woke": self.woke, "routing": self.routing,
                "stamped": [[s, p, q] for (s, p), q in self.stamped.items()],
                "holding": [[port, list(rows)] for port, rows in self.holding.items()]}

    def restore(self, state: dict, layouts: list[Layout]) -> None:
        """Continue from :meth:`state`; ``layouts``: those it may stamp with (the member's, the changes')."""
        self.epoch, self.seq, self.woke = int(state.get("epoch", 0)), int(state.get("seq", 0)), int(state.get("woke", -1))
        self.stamped = {(s, p): int(q) for s, p, q in state.get("stamped", [])}
        self.holding = {int(port): list(rows) for port, rows in state.get("holding", [])}
        version = int(state.get("routing", self.place.layout.version))
        self.route(next((lay for lay in layouts if lay.version == version), self.place.layout))
