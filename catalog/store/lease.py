"""Which Head may write the catalog: a lease per store, asked of the store (``store.head_lease(url)``).

Every Head holds a :class:`HeadLease` on the catalog it serves.  The lease
says whether this Head leads (commits, drives the nodes, fails them over)
and, when it does not, which Head does (its advertised URL, for redirects).
Each store kind decides what a lease is, so no caller asks for the backend
by its URL:

* ZooKeeper (:mod:`.zk_leader`): several Heads contend with kazoo's election
  recipe; one leads, the others follow and take over when it dies, and every
  commit of the leader is fenced by its election znode;
* SQLite (:class:`~.file_lease.FileLease`): one Head per catalog file, held with an
  exclusive ``flock`` on ``<file>.head``: a second Head on the same file is
  refused with a message saying to use ZooKeeper for several;
* memory (:class:`SoleHead`): private to one process, so its one Head leads.

Usage::

    lease = store.head_lease("http://head-1:14000")
    lease.start(on_elected=lambda: ..., on_lost=lambda: ...)  # callbacks on any thread
    lease.leading, lease.leader()                           # True/False, the leader's URL or None
    lease.close()
"""

from __future__ import annotations

import abc
from collections.abc import Callable


class HeadLease(abc.ABC):
    """A Head's claim on leading one catalog; ``leading`` is True only while it may commit."""

    def __init__(self, identifier: str):
        self.identifier = identifier  # this Head's advertised URL, what followers redirect to
        self.leading = False
        self.epoch = 0  # grows with every new leader (the election znode's sequence number)

    @abc.abstractmethod
    def start(self, on_elected: Callable[[], None], on_lost: Callable[[], None]) -> None:
        """Contend: ``on_elected`` once this Head leads; ``on_lost`` if it then loses the lead."""

    @abc.abstractmethod
    def leader(self) -> str | None:
        """The leading Head's identifier (URL), or None while none leads (an election is under way)."""

    def close(self) -> None:
        """Give the lead up (another Head takes it at once) and stop contending."""
        self.leading = False


class SoleHead(HeadLease):
    """The one Head of a catalog private to its process: it leads from the start."""

    def start(self, on_elected: Callable[[], None], on_lost: Callable[[], None]) -> None:
        self.leading, self.epoch = True, 1
        on_elected()

    def leader(self) -> str | None:
        return self.identifier
