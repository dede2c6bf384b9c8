"""The coordinator role of a member of a partitioned box: stamping input batches as versions (docs/cumulus.md §3.5).

A mixin of :class:`~boreas.node.cumulus.part.PartOperator`; this module
holds the steps and the state they keep (``epoch``, ``seq``, ``woke``,
``stamped``, ``holding``; the ``_involved`` dispatchers per in port are the
operator's).  Input batches of a publisher that picked this member become
*versions* ``(epoch, member, seq)`` and go, as ``Work``, to the members that
write or serve their rows, each getting only its rows.  On ``Advance(e +
1)`` the coordinator closes ``e`` (``Close`` to every member, with the input
positions it stamped to the leader) and stamps with ``e + 1``, under the
layout of a change whose first epoch it is (relayouts.py).

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

from operator import itemgetter

from boreas.m3.cumulus import Layout
from boreas.m3.cumulus.member import group
from boreas.m3.cumulus.roles import Roles

from ..operators.m3box import date_of
from . import messages as msg

#: rows of one in port a coordinator holds at most before stamping them as one version (docs/cumulus.md §3.5)
HOLD = 4096


class Coordinating:

    def _init_coordinator(self) -> None:
        self.epoch = 0  # the epoch it stamps Work with (the last Advance)
        self.seq = 0
        self.woke = -1  # the last epoch it asked the leader to end
        self.stamped: dict[tuple[str, str], int] = {}  # (stream, producer) -> last seq taken in this epoch
        self.holding: dict[int, list] = {}  # in port -> rows taken in this epoch, not stamped yet (in arrival order)
        self._closing = len(self.layout.members)  # members of the epoch it stamps with (its Close goes to each)
        # counters (not state): Work rows stamped for members on this node, and for members on other nodes
        self.rows_kept = self.rows_sent = 0

    def _involvement(self, plan, port: int, layout: Layout):
        """``rows -> [members]`` for rows of in port ``port`` in the in stream's form (sign field and all).

        A batch at a time (:meth:`Roles.involved`); a row with a sign that is
        neither 1 nor -1 stays here, where the splitter counts it refused."""
        pp = self.plan.ports[port]
        s = pp.sign_index
        picks = [i for i in range(len(pp.columns) + (s is not None)) if i != s]

        def getter(i: int):
            at = picks[i]
            if pp.columns[i][1] == "DATE":
                return lambda row: date_of(row[at])
            return itemgetter(at)

        roles = Roles(plan, layout, getter, pp.relation)
        inserts, deletes = roles.involved(pp.relation, 1), roles.involved(pp.relation, -1)
        if s is None:
            return inserts
        alike, me, sign_of = roles.placed_alike(pp.relation), self.member, itemgetter(s)

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

    def coordinate(self, port: int, rows: list) -> None:
        """Take an input batch of in port ``port``: stamp it now, or hold it (see the module docstring).

        Public: the host hands a batch to the hosted member its producer's publisher picked (hosting.py).
        """
        joining = self.joined is None or self.epoch < self.joined
        if joining or self._closing > 1 and not (self.ordered and self.plan.ports[port].relation in
                                                 self.roles.sequential):
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
            self._send(0, msg.wake(self.epoch))

    def _stamp(self, port: int, rows: list) -> None:
        """Rows of in port ``port`` as versions: one, or one per event for a sequential relation."""
        involved = self._involved[port]
        sequential = self.ordered and self.plan.ports[port].relation in self.roles.sequential
        for version in ([r] for r in rows) if sequential else (rows,):
            shares = group(involved(version), version)
            if not shares:
                continue
            seq, self.seq = self.seq, self.seq + 1
            for m, share in shares.items():
                if m in self.hosted:
                    self.rows_kept += len(share)
                else:
                    self.rows_sent += len(share)
                self._send(m, msg.work(self.epoch, self.member, seq, port, share))

    def _release_holding(self) -> None:
        """Stamp every port's held rows (the epoch ends), ports in the order they were first held."""
        holding, self.holding = self.holding, {}
        for port, rows in holding.items():
            self._stamp(port, rows)

    def _next_epoch(self, epoch: int) -> None:
        """``Advance(epoch)``: close the epoch stamped with so far, stamp with ``epoch`` from now on.

        A joining member closes nothing before its first epoch, and a retired
        one nothing from the first epoch it is not a member of: no member
        expects a Close of it for an epoch it takes no part in."""
        if self.joined is not None and self.epoch >= self.joined and self.member < self._closing:
            self._release_holding()
            positions = [[s, p, q] for (s, p), q in self.stamped.items()]
            self.stamped = {}
            for member in range(self._closing):  # the members of the epoch closed
                self._send(member, msg.close(self.epoch, self.member, positions if member == 0 else None))
        self.epoch = epoch
        self._stamp_layout()

    # -- state -------------------------------------------------------------------------

    def _coordinator_state(self) -> dict:
        return {"epoch": self.epoch, "seq": self.seq, "woke": self.woke,
                "stamped": [[s, p, q] for (s, p), q in self.stamped.items()],
                "holding": [[port, list(rows)] for port, rows in self.holding.items()]}

    def _restore_coordinator(self, state: dict) -> None:
        self.epoch, self.seq, self.woke = int(state.get("epoch", 0)), int(state.get("seq", 0)), int(state.get("woke", -1))
        self.stamped = {(s, p): int(q) for s, p, q in state.get("stamped", [])}
        self.holding = {int(port): list(rows) for port, rows in state.get("holding", [])}
