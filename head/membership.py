"""Which nodes are alive: heartbeats, and ephemeral znodes with the ZooKeeper store.

Nodes register with the Head and repeat it every second (``POST /members``);
a node not heard from for ``timeout`` seconds is down.  Each node process
has a fresh *incarnation*; a new incarnation, or a node heard from again
after it was down, is a node that must be re-synchronised (it may have
restarted empty).  With the ZooKeeper store the Head also watches the
nodes' ephemeral znodes, so a node whose ZooKeeper session ended is down at
once.

>>> members = Membership(timeout=3.0)
>>> members.heartbeat("localhost:15000", "a1", now=0.0)   # first contact: sync it
True
>>> members.heartbeat("localhost:15000", "a1", now=1.0)
False
>>> members.alive("localhost:15000", now=2.0), members.alive("localhost:15000", now=9.0)
(True, False)
>>> members.heartbeat("localhost:15000", "b2", now=9.5)  # restarted
True
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field


@dataclass
class Member:
    endpoint: str
    incarnation: str
    first_seen: float
    last_seen: float
    version: int = 0
    recovery: dict = field(default_factory=dict)  # what a durable node reports: state, snapshots


class Membership:
    def __init__(self, timeout: float = 3.0):
        self.timeout = timeout
        self._members: dict[str, Member] = {}
        self._zk_live: set[str] | None = None  # None: not using ZooKeeper membership
        self._zk_seen: set[str] = set()

    def heartbeat(self, endpoint: str, incarnation: str, version: int = 0,
                  now: float | None = None, recovery: dict | None = None) -> bool:
        """Record a heartbeat; True when the node is new, restarted, or back after being down."""
        now = time.monotonic() if now is None else now
        member = self._members.get(endpoint)
        fresh = member is None or member.incarnation != incarnation or not self.alive(endpoint, now)
        if member is None or member.incarnation != incarnation:
            member = Member(endpoint, incarnation, now, now)
            self._members[endpoint] = member
        member.last_seen = now
        member.version = version
        if recovery is not None:
            member.recovery = recovery
        return fresh

    def recovery(self, endpoint: str) -> dict:
        """A live node's recovery report ({} when unknown or down)."""
        member = self._members.get(endpoint)
        return member.recovery if member is not None and self.alive(endpoint) else {}

    def zookeeper_members(self, live: set[str]) -> set[str]:
        """The live znodes changed; returns the nodes that just lost theirs."""
        previous = self._zk_live or set()
        self._zk_live = set(live)
        self._zk_seen |= live
        return previous - live

    def alive(self, endpoint: str, now: float | None = None) -> bool:
        now = time.monotonic() if now is None else now
        member = self._members.get(endpoint)
        if member is None or now - member.last_seen > self.timeout:
            return False
        if self._zk_live is not None and endpoint in self._zk_seen and endpoint not in self._zk_live:
            return False
        return True

    def known(self) -> list[str]:
        return sorted(self._members)

    def describe(self, endpoint: str, now: float | None = None) -> dict[str, object]:
        now = time.monotonic() if now is None else now
        member = self._members.get(endpoint)
        if member is None:
            return {"registered": False, "alive": False}
        return {"registered": True, "alive": self.alive(endpoint, now), "incarnation": member.incarnation,
                "seconds_since_heartbeat": round(now - member.last_seen, 3),
                "zookeeper": None if self._zk_live is None else endpoint in self._zk_live,
                "recovery": member.recovery}
