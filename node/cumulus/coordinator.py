"""The coordinator role of a member of a partitioned box: stamping input batches as versions (docs/cumulus.md §3.5).

A mixin of :class:`~boreas.node.cumulus.part.PartOperator`, which owns the
state (``epoch``, ``seq``, ``woke``, ``stamped``, the ``_involved``
dispatchers per in port); this module holds the steps.  A batch of a
publisher that picked this member becomes one *version* ``(epoch, member,
seq)`` (one per event for a sequential relation) and goes, as ``Work``, to
the members that write or serve its rows, each getting only its rows.  On
``Advance(e + 1)`` the coordinator closes ``e`` (``Close`` to every member,
with the input positions it stamped to the leader) and stamps with ``e +
1``, under the layout of a change whose first epoch it is (relayouts.py).
"""

from __future__ import annotations

from boreas.m3.cumulus import Layout
from boreas.m3.cumulus.member import group
from boreas.m3.cumulus.roles import Roles

from ..operators.m3box import date_of
from . import messages as msg


class Coordinating:

    def _involvement(self, plan, port: int, layout: Layout):
        """``row -> members`` for rows of in port ``port`` in the in stream's form (sign field and all)."""
        pp = self.plan.ports[port]
        s = pp.sign_index
        picks = [i for i in range(len(pp.columns) + (s is not None)) if i != s]

        def getter(i: int):
            at = picks[i]
            if pp.columns[i][1] == "DATE":
                return lambda row: date_of(row[at])
            return lambda row: row[at]

        roles = Roles(plan, layout, getter, pp.relation)
        by_sign = {sign: roles.involved(pp.relation, sign) for sign in (1, -1)}
        me = self.member
        if s is None:
            return by_sign[1]
        get, bad = by_sign.get, (lambda row: me)  # a bad sign: counted here
        return lambda row: get(row[s], bad)(row)

    def _coordinate(self, port: int, rows: list[tuple]) -> None:
        involved = self._involved[port]
        sequential = self.ordered and self.plan.ports[port].relation in self.roles.sequential
        for version in ([r] for r in rows) if sequential else (rows,):
            shares = group(involved, version)
            if not shares:
                continue
            seq, self.seq = self.seq, self.seq + 1
            for m, share in shares.items():
                self._send(m, msg.work(self.epoch, self.member, seq, port, share))
        if self.woke != self.epoch:
            self.woke = self.epoch
            self._send(0, msg.wake(self.epoch))

    def _next_epoch(self, epoch: int) -> None:
        """``Advance(epoch)``: close the epoch stamped with so far, stamp with ``epoch`` from now on."""
        positions = [[s, p, q] for (s, p), q in self.stamped.items()]
        self.stamped = {}
        for member in range(self.n):
            self._send(member, msg.close(self.epoch, self.member, positions if member == 0 else None))
        self.epoch = epoch
        self._stamp_layout()
