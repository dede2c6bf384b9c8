"""Head election on ZooKeeper, and the fence that keeps an old leader from committing.

Every Head serving a ``zk://`` catalog contends under ``<chroot>/heads`` with
kazoo's :class:`~kazoo.recipe.election.Election` recipe: each holds an
ephemeral sequential znode whose data is its advertised URL, and the lowest
sequence number leads.  The others follow; each watches the contenders, so it
knows the leader's URL (for its redirects) and, when the leader's znode goes
(its process died and its session expired), the next in line leads.  The
leader's sequence number is its *epoch*: it only ever grows.

Fencing.  Once a Head contends, every commit its store makes carries, in the
same multi-op, a check that its election znode still exists
(:class:`Fence`).  The znode is ephemeral: ZooKeeper deletes it when the
leader's session expires, and that deletion is what wakes the next
contender, so no second leader exists before the first is fenced.  A commit
an old leader sends afterwards (it was paused, or cut off, and does not know
yet) fails as a whole, with :class:`NotLeader`, whatever its process
believes.  A leader that loses its connection to ZooKeeper gives up the
lead itself a sixth of its session timeout after kazoo reports the
connection suspended (:data:`GIVE_UP_AFTER`; kazoo reports it at most 2/3
of the timeout after the last answer, and the others need the whole timeout
to elect a new one), and it is told at once, so it also stops telling the
nodes what to do before anyone else starts.

Usage::

    lease = store.head_lease("http://head-1:14000", session_timeout=4.0)   # a ZooKeeperLease
    lease.start(on_elected, on_lost)
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import KazooException, RolledBackError
from kazoo.handlers.threading import KazooTimeoutError
from kazoo.recipe.watchers import ChildrenWatch
from kazoo.retry import KazooRetry

from .base import StoreError
from .lease import HeadLease
from .zk_session import start_session
from .znodes import CONNECT_TIMEOUT, kazoo_options, parse_url

log = logging.getLogger(__name__)

#: How long (a share of the session timeout) a leader stays suspended from ZooKeeper before it gives up the
#: lead.  kazoo notices a silent connection up to 2/3 of the timeout after the last answer (its read
#: timeout) and the server expires the session at the timeout, so 2/3 + 1/6 leaves 1/6 of the timeout
#: between this Head stopping and another being elected; half (2/3 + 1/2 > 1) left no margin at all.
GIVE_UP_AFTER = 1 / 6


class NotLeader(StoreError):
    """A Head that does not (or no longer) lead tried to commit; nothing was committed."""


class Fence:
    """What a store's commits must carry once its Head contends: a check of the leader's election znode.

    One owner writes ``path`` (the :class:`ZooKeeperLease`, on election and
    on losing the lead); the store only reads it, in :meth:`add` and :meth:`refused`.
    """

    def __init__(self) -> None:
        self.required = False  # True once a Head on this store contends: from then on commits are fenced
        self.path: str | None = None  # the leader's election znode while this Head leads

    def add(self, txn: Any) -> bool:
        """Put the check first in ``txn``; False when this store is not fenced (no Head contends)."""
        if not self.required:
            return False
        path = self.path
        if path is None:
            raise NotLeader("this Head does not lead the catalog (another Head does, or an election is "
                            "under way); nothing was committed")
        txn.check(path, -1)  # version -1: the znode exists, whatever its version
        return True

    def refused(self, fenced: bool, results: list) -> None:
        """Raise :class:`NotLeader` when the fence check (the first op) is what failed."""
        # When any op fails every other one answers RolledBackError: only another error is the fence's.
        if fenced and results and isinstance(results[0], Exception) and not isinstance(results[0], RolledBackError):
            raise NotLeader("this Head lost the lead (its election znode is gone: its ZooKeeper session "
                            "expired and another Head may lead); nothing was committed")


class ZooKeeperLease(HeadLease):
    """One Head's part in the election under ``path`` (module doc); its own ZooKeeper session."""

    def __init__(self, url: str, path: str, identifier: str, fence: Fence, session_timeout: float = 10.0):
        super().__init__(identifier)
        hosts, _ = parse_url(url)
        self.path = path
        self.fence = fence
        self.session_timeout = session_timeout
        self._client = KazooClient(hosts=hosts, timeout=session_timeout,
                                   connection_retry=KazooRetry(max_tries=-1, max_delay=1.0), **kazoo_options(url))
        start_session(self._client, url, "the Head election", CONNECT_TIMEOUT)
        try:
            self._client.ensure_path(path)
        except (KazooTimeoutError, KazooException, OSError) as exc:
            self._client.close()
            raise StoreError(f"cannot reach ZooKeeper at {hosts} for the Head election: {exc}") from exc
        self._election = self._client.Election(path, identifier)
        self._leader: str | None = None
        self._done = threading.Event()  # set: stop leading (lost, or closing)
        self._closed = False
        self._suspended: threading.Timer | None = None
        self._thread: threading.Thread | None = None
        self._told_lost = False  # on_lost ran (from _lead): _contend must not run it again

    def start(self, on_elected: Callable[[], None], on_lost: Callable[[], None]) -> None:
        self._client.add_listener(self._state)
        ChildrenWatch(self._client, self.path, self._contenders_changed)
        self._thread = threading.Thread(target=self._contend, args=(on_elected, on_lost),
                                        name="head-election", daemon=True)
        self._thread.start()

    def leader(self) -> str | None:
        return self._leader

    def _contend(self, on_elected: Callable[[], None], on_lost: Callable[[], None]) -> None:
        try:
            self._election.run(self._lead, on_elected, on_lost)
        except Exception:  # the session went while contending: nothing was led, nothing to undo
            log.exception("Head election at %s failed", self.path)
        if not self._closed and not self._told_lost:
            on_lost()

    def _lead(self, on_elected: Callable[[], None], on_lost: Callable[[], None]) -> None:
        node = self._election.lock.node
        self.fence.path = f"{self.path}/{node}"
        self.epoch = int(node[-10:]) + 1
        self.leading = True
        log.info("this Head (%s) leads the catalog: epoch %d", self.identifier, self.epoch)
        try:
            on_elected()
            self._done.wait()
        finally:
            self.leading = False
            self.fence.path = None
            # Told here, not once election.run returns: returning releases the lock, which waits for
            # ZooKeeper, and a Head cut off from it must stop driving the nodes now, not when it is back.
            if not self._closed:
                self._told_lost = True
                on_lost()

    def _state(self, state: str) -> None:
        """kazoo's session listener (its thread: never block).  LOST ends the lead; SUSPENDED, if long."""
        if state == KazooState.LOST and self.leading:
            log.error("this Head's ZooKeeper session expired: it no longer leads")
            self._done.set()
        elif state == KazooState.SUSPENDED and self.leading and self._suspended is None:
            self._suspended = threading.Timer(self.session_timeout * GIVE_UP_AFTER, self._give_up)
            self._suspended.daemon = True
            self._suspended.start()
        elif state == KazooState.CONNECTED and self._suspended is not None:
            self._suspended.cancel()
            self._suspended = None

    def _give_up(self) -> None:
        log.error("this Head lost ZooKeeper for %.1f s: it gives up the lead before its session can expire",
                  self.session_timeout * GIVE_UP_AFTER)
        self._done.set()

    def _contenders_changed(self, children: list[str]) -> bool | None:
        if self._closed:
            return False  # stops the watch
        try:
            contenders = self._election.contenders()
        except KazooException as exc:  # the session went: the watch fires again on the next one
            log.warning("cannot read the Head election's contenders at %s: %r", self.path, exc)
            return None
        leader = contenders[0] if contenders else None
        if leader != self._leader:
            log.info("the leading Head is now %s", leader or "none (an election is under way)")
        self._leader = leader

    def close(self) -> None:
        self._closed = True
        self._done.set()
        self._election.cancel()
        if self._thread is not None:
            self._thread.join(timeout=5.0)
        super().close()
        try:
            self._client.stop()
            self._client.close()
        except KazooException:
            log.debug("error closing the election's ZooKeeper client", exc_info=True)
