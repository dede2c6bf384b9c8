"""The global catalog store interface.

A store keeps the global catalog as a set of *elements*, each addressed by a
``(kind, key)`` pair (``("box", "filter1")``, ``("node", "localhost:15000")``)
and holding the element's update-XML text.  The store does not interpret the
text: the catalog model (``boreas.catalog.model``) decides what an element is
and how it serialises, so every store holds exactly the same thing and one
contract suite checks them all.

Every commit is a batch of element changes applied atomically on top of a
*base version*; it produces the next catalog version.  A commit whose base is
not the current version fails with :class:`ConflictError` and changes
nothing (optimistic concurrency).  Committed changes are kept in a log, so a
watcher can be fed every change, in commit order, from any version on.

Usage::

    store = open_store("memory://")
    snap = store.snapshot()
    commit = store.commit(snap.version, [Change("schema", "T", "<schema .../>")])
    for c in store.log(since=0):
        ...
"""

from __future__ import annotations

import abc
import logging
import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

from .commit_meta import CommitMeta
from .lease import HeadLease, SoleHead

log = logging.getLogger(__name__)

#: Kinds of catalog element a store may hold.  Keys are element names, or
#: normalised endpoints for nodes and globals, or composite keys joined with
#: ``|`` (for example a subscription is ``stream|endpoint``).
KINDS = (
    "schema",
    "type",
    "input",
    "output",
    "box",
    "table",
    "query",
    "view",
    "node",
    "region",
    "replica_set",
    "publish",
    "subscribe",
    "client",
    "global",
    "partition",
)


class StoreError(Exception):
    """A store could not do what was asked (bad URL, lost connection, ...)."""


class MissingCatalog(StoreError):
    """Opened with ``create=False`` and there is no catalog at that URL (nothing was created)."""


class ConflictError(StoreError):
    """The commit's base version is no longer current; nothing was changed.

    The caller re-reads the catalog, re-validates and tries again.
    """

    def __init__(self, expected: int, actual: int):
        super().__init__(
            f"catalog changed concurrently: commit was based on version {expected}, "
            f"the catalog is now at version {actual}"
        )
        self.expected = expected
        self.actual = actual


@dataclass(frozen=True, slots=True)
class Change:
    """Put an element (``text`` is its XML) or remove it (``text is None``)."""

    kind: str
    key: str
    text: str | None

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"unknown element kind {self.kind!r}")
        if not self.key:
            raise ValueError("element key must not be empty")


@dataclass(frozen=True, slots=True)
class Commit:
    """One committed batch: the changes that turned ``version - 1`` into ``version``."""

    version: int
    changes: tuple[Change, ...]


@dataclass(frozen=True, slots=True)
class Snapshot:
    """A consistent copy of the whole catalog at one version."""

    version: int
    elements: dict[tuple[str, str], str] = field(default_factory=dict)

    def of_kind(self, kind: str) -> dict[str, str]:
        return {k: v for (kd, k), v in self.elements.items() if kd == kind}


WatchCallback = Callable[[Commit], None]


class Watch(abc.ABC):
    """A running subscription to committed changes; ``close()`` ends it."""

    @abc.abstractmethod
    def close(self) -> None: ...

    def __enter__(self) -> Watch:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class CatalogStore(abc.ABC):
    """Versioned, atomic, watchable storage for the global catalog."""

    url: str
    #: Metadata written in a commit's own transaction (:mod:`.commit_meta`); None: write it after the commit.
    alongside: CommitMeta | None = None

    @abc.abstractmethod
    def version(self) -> int:
        """The current catalog version (0 for an empty, never-committed catalog)."""

    @abc.abstractmethod
    def snapshot(self) -> Snapshot:
        """Every element at one consistent version."""

    @abc.abstractmethod
    def commit(self, base_version: int, changes: Sequence[Change]) -> Commit:
        """Apply ``changes`` atomically if the catalog is still at ``base_version``.

        Raises :class:`ConflictError` (and changes nothing) otherwise.  A change
        that removes an absent element is a no-op; an empty batch still
        produces a new version, so callers can tell their commit happened.
        """

    @abc.abstractmethod
    def log(self, since: int) -> list[Commit]:
        """Every commit with a version greater than ``since``, oldest first."""

    @abc.abstractmethod
    def watch(self, since: int, callback: WatchCallback) -> Watch:
        """Call ``callback`` with each commit after ``since``, in commit order.

        Commits already in the log are delivered first, then new ones as they
        are committed (by this process or any other).  The callback runs on a
        store-owned thread; it must not block for long.
        """

    @abc.abstractmethod
    def close(self) -> None:
        """Release connections and stop every watch."""

    @property
    def membership_url(self) -> str | None:
        """Where live nodes register beside this catalog, or None when the backend has no such place.

        With ZooKeeper, each node holds an ephemeral znode for as long as its
        session lives (:mod:`.membership`), so the Head learns of a dead node
        from ZooKeeper, not only from missed heartbeats; the Head hands this
        URL to the nodes in its heartbeat replies.  An embedded store (SQLite,
        memory) has none: the Head then judges nodes by heartbeats alone.
        Callers ask this instead of testing the URL's scheme.
        """
        return None

    def head_lease(self, identifier: str, session_timeout: float = 10.0) -> HeadLease:
        """The lease a Head serving this catalog at URL ``identifier`` holds (:mod:`.lease`).

        By default the Head is the catalog's only one (a private ``memory://``
        catalog); SQLite refuses a second Head, ZooKeeper elects one of several.
        """
        return SoleHead(identifier)

    @abc.abstractmethod
    def get_meta(self, key: str) -> str | None:
        """Cluster metadata beside the catalog (not versioned, not in the log): e.g. the last
        complete snapshot.  None when never set."""

    @abc.abstractmethod
    def put_meta(self, key: str, value: str) -> None:
        """Set (durably, atomically) the metadata value ``key``."""

    @abc.abstractmethod
    def get_blob(self, key: str) -> bytes | None:
        """A large value kept beside the catalog (not versioned, not in the log), e.g. a Head's checked index
        of one catalog version (:mod:`boreas.catalog.index_checkpoint`): tens of MB at 100,000 boxes, more
        than metadata holds.  None when never set, or when it cannot be read whole."""

    @abc.abstractmethod
    def put_blob(self, key: str, data: bytes) -> None:
        """Set the blob ``key``, replacing the old one whole: a reader sees the old bytes or the new, never
        a mix."""

    def __enter__(self) -> CatalogStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def check_batch(changes: Iterable[Change]) -> list[Change]:
    """Reject a batch that names one element twice: its meaning would be ambiguous."""
    seen: set[tuple[str, str]] = set()
    out = []
    for change in changes:
        ident = (change.kind, change.key)
        if ident in seen:
            raise ValueError(f"batch changes {change.kind} {change.key!r} twice")
        seen.add(ident)
        out.append(change)
    return out


class PollingWatch(Watch):
    """Delivers commits by reading the log on its own thread.

    The thread reads the log from the last delivered version on, so several
    commits that arrive together are still delivered one by one, in order,
    and a slow callback never stalls the store.  It reads every
    ``interval`` seconds, or at once on ``wakeup()`` (the owning store calls
    it for its own commits; push-capable stores call it on notification and
    poll only as a backstop).
    """

    def __init__(
        self,
        store: CatalogStore,
        since: int,
        callback: WatchCallback,
        interval: float = 0.05,
    ):
        self._store = store
        self._since = since
        self._callback = callback
        self._interval = interval
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._thread = threading.Thread(
            target=self._run, name=f"catalog-watch-{store.url}", daemon=True
        )
        self._thread.start()

    def wakeup(self) -> None:
        self._wake.set()

    def _prepare(self) -> None:
        """Runs on the delivery thread before the first read (subclass hook)."""

    def _run(self) -> None:
        self._prepare()
        while not self._stop.is_set():
            try:
                commits = self._store.log(self._since)
            except StoreError:
                if self._stop.is_set():
                    return
                log.warning("catalog watch could not read the log; retrying", exc_info=True)
                commits = []
            for commit in commits:
                if self._stop.is_set():
                    return
                self._since = commit.version
                try:
                    self._callback(commit)
                except Exception:  # a broken callback must not kill the watch
                    log.exception("catalog watch callback failed at version %d", commit.version)
            self._wake.wait(self._interval)
            self._wake.clear()

    def close(self) -> None:
        self._stop.set()
        self._wake.set()
        if threading.current_thread() is not self._thread:
            self._thread.join(timeout=5)
