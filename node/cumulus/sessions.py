"""The open sessions of a member of a partitioned ``SESSION`` box (docs/cumulus.md §3.13, "SESSION views").

The rows a member holds for its keys' open sessions are entries of its held map (``m3/sessionheld.py``: each
row counted under its own key), so a relayout copies them with their segment and every snapshot has them.
:class:`HeldSessions` is the index over them a close needs (per key its open sessions as disjoint
intervals: node/operators/m3sessions.py's :class:`SessionPort`, the one-node box's), and it is derived state:
built again from the held map after a layout change or a restore, never stored.

It owns the rule of the one-node box: a row is late when its event time is behind what the member closed and it
falls inside no open session of its key; a session closes when the frontier reaches its end, and its rows are
then folded into the view's relation with its bounds and taken out of the held map in one apply
(:meth:`HeldSessions.close`).  The frontier is the same on every member at the same point of the order, so a
row's lateness and its session's close are the same wherever its key lives.

>>> from boreas.m3.compiler.sessionfn import Session
>>> held = HeldSessions({0: HeldPort("Bid", "Bid__held", SessionPort(Session("Bid", "t", 10, ("a",)), 1, (0,)))})
>>> held.admit(0, [("x", 0), ("x", 5), ("y", 40)], closed=-math.inf)
([('x', 0), ('x', 5), ('y', 40)], 0)
>>> held.admit(0, [("x", 3), ("x", 20)], closed=30)      # (x, 3) is in x's open session; (x, 20) is late
([('x', 3)], 1)
>>> held.close(30)
[('Bid', 1, [('x', 0, 0, 15), ('x', 5, 0, 15), ('x', 3, 0, 15)]), ('Bid__held', -1, [('x', 0), ('x', 5), ('x', 3)])]
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterable
from dataclasses import dataclass

from boreas.m3.boxtype import BoxPlan
from boreas.m3.compiler.sessionfn import Session
from boreas.m3.sessionheld import HELD, held_map

from ..operators.m3sessions import SessionBuffer, SessionPort, SessionSet

log = logging.getLogger(__name__)

Groups = list[tuple[str, int, list]]


@dataclass
class HeldPort:
    """One in port read through ``SESSION``: the relation its closed sessions fold into, the held relation its
    rows wait in, and its keys' open sessions."""

    relation: str
    held: str
    sessions: SessionPort


class HeldSessions:
    """Owns a member's index of its open sessions over the rows its held maps keep (module docstring)."""

    def __init__(self, ports: dict[int, HeldPort]):
        self.ports = ports
        self._buffer = SessionBuffer({port: hp.sessions for port, hp in ports.items()})  # (its close, per port)
        self.indexed_under: object = None  # the layout the index was built under (None: build it again)

    @classmethod
    def of(cls, plan: BoxPlan) -> HeldSessions:
        """The session ports of a plan whose ports feed their held relations (``m3/sessionheld.py``)."""
        ports = {}
        for port, pp in enumerate(plan.ports):
            session = next((w for w in plan.windows if isinstance(w, Session)
                            and w.relation.lower() == pp.relation.lower()), None)
            if session is None:
                continue
            names = [c.lower() for c, _ in pp.columns]
            where = SessionPort(session, names.index(session.time.lower()),
                                tuple(names.index(c.lower()) for c in session.partition))
            ports[port] = HeldPort(pp.relation[:-len(HELD)], pp.relation, where)
        return cls(ports)

    def held_relations(self) -> dict[str, int]:
        """Each held relation's port."""
        return {hp.held: port for port, hp in self.ports.items()}

    def admit(self, port: int, rows: Iterable[tuple], closed: float) -> tuple[list[tuple], int]:
        """The rows of a version on ``port`` this member holds, added to their keys' open sessions; and the number
        of late ones (behind ``closed`` and in no open session of their key: left out)."""
        kept, late, _ = self.ports[port].sessions.take(map(tuple, rows), closed)  # (Work carries lists)
        return kept, late

    def close(self, frontier: float) -> Groups:
        """The apply that closes every session ending at or before ``frontier``: its rows into the view's relation
        with the session's ``window_start`` and ``window_end``, and out of the held relation."""
        groups: Groups = []
        for port, rows in self._buffer.close(frontier).items():
            hp = self.ports[port]
            groups += [(hp.relation, 1, rows), (hp.held, -1, [row[:-2] for row in rows])]
        return groups

    def rebuild(self, entries: dict[int, list[tuple[tuple, int]]], closed: float) -> Groups:
        """Index the held rows ``entries`` (per port the held map's ``(row, count)``) again; the apply that takes
        out those of sessions already closed (a segment's rows copied before its old owner closed them): they
        were emitted there, and are dropped here without being emitted again."""
        stale: Groups = []
        for port, hp in self.ports.items():
            sp = hp.sessions
            sp.keys, sp.due = {}, []
            for row, count in sorted(entries.get(port, ()), key=lambda e: e[0][sp.time]):
                key = tuple([row[i] for i in sp.partition])
                sessions = sp.keys.get(key)
                if sessions is None:
                    sessions = sp.keys[key] = SessionSet(sp.session.gap)
                for _ in range(count):
                    sessions.add(row[sp.time], row)
            gone = []
            for key, sessions in list(sp.keys.items()):
                for _, _, rows in sessions.close(closed):
                    gone.extend(rows)
                if sessions.starts:
                    for end in sessions.ends:
                        sp.expect(end, key)
                else:
                    del sp.keys[key]
            if gone:
                log.info("sessions of %s: %d held rows of sessions closed elsewhere dropped", hp.relation, len(gone))
                stale.append((hp.held, -1, gone))
        return stale

    def held_maps(self) -> dict[int, str]:
        """Each session port's held map."""
        return {port: held_map(hp.relation) for port, hp in self.ports.items()}

    def held(self) -> int:
        """The rows the index holds in open sessions."""
        return self._buffer.held()
