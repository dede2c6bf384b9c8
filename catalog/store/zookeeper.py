"""The global catalog in ZooKeeper, for a catalog shared by many machines.

URL: ``zk://host:port[,host:port...]/chroot``.  Everything lives under the
chroot (created if missing)::

    /catalog/version                 decimal catalog version; its znode stat
                                     version is the compare-and-set token
    /catalog/elements/<kind>/<key>   one znode per element, data = element text
                                     (UTF-8); <key> is percent-encoded
    /catalog/log/<version:012d>      the commit's changes: zlib-compressed JSON (the last
                                     ``keep_log`` commits; older ones are pruned)
                                     [[kind, key, text-or-null], ...]
    /heads/<uuid>__lock__<seq>       one ephemeral znode per Head, data = its URL; the
                                     lowest leads and fences its commits (:mod:`.zk_leader`)
    /catalog/snapshot, /catalog/snapshots/<version>-<seq>/<chunk>
                                     the whole catalog now and then, in a few
                                     znodes, a folder per writer (:mod:`.zk_snapshot`):
                                     a reader takes it plus the log since

A commit is ONE ZooKeeper multi-op: set the version znode conditionally on
its stat version, create/set/delete the element znodes, create the log
znode.  Either all of it happens or none of it, so the version, the elements
and the log can never disagree, and two writers racing on one base version
cannot both win.  A snapshot reads the last whole copy and replays the log
since (:mod:`.zk_snapshot`: seconds at 100,000 boxes); without a usable
copy it reads the version, the elements, and the version again; if it
moved, the log entries in between name every element that may have been
read mid-change, and replaying them makes the copy exact.

A multi-op is one request, and ZooKeeper refuses requests larger than its
``jute.maxbuffer`` (about 1 MB by default) by dropping the connection; a
big catalog commit needs the limit raised on every server and Java client.

URLs, znode names and the log entry encoding are in :mod:`.znodes` (node
membership shares them); the log's entries are read and pruned by :mod:`.zk_log`;
delivering commits to watchers is :mod:`.zk_watch`.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

from kazoo.client import KazooClient
from kazoo.exceptions import (
    ConnectionLoss,
    KazooException,
    NodeExistsError,
    NoNodeError,
)
from kazoo.handlers.threading import KazooTimeoutError
from kazoo.retry import KazooRetry

from .base import (
    KINDS,
    CatalogStore,
    Change,
    Commit,
    ConflictError,
    MissingCatalog,
    Snapshot,
    StoreError,
    Watch,
    WatchCallback,
    check_batch,
)
from .lease import HeadLease
from .zk_leader import Fence, ZooKeeperLease
from .commit_meta import CommitMeta
from .zk_log import ZooKeeperLog, get_many
from .zk_blobs import BlobZnodes
from .zk_meta import MetaZnodes
from .zk_snapshot import WholeCopies, replay
from .zk_session import start_session
from .zk_watch import ZooKeeperWatch
from .znodes import (  # CONNECT_TIMEOUT, REQUEST_TIMEOUT, escape_key, unescape_key: re-exported
    CONNECT_TIMEOUT,
    REQUEST_TIMEOUT,
    ElementNames,
    encode_log,
    escape_key,
    kazoo_options,
    parse_url,
    unescape_key,
    wait_reply,
)

log = logging.getLogger(__name__)

DEFAULT_MAXBUFFER = 0xFFFFF  # ZooKeeper's default jute.maxbuffer (bytes)
_ATTEMPTS = 5

__all__ = ["CONNECT_TIMEOUT", "DEFAULT_MAXBUFFER", "REQUEST_TIMEOUT", "ZooKeeperStore", "ZooKeeperWatch",
           "escape_key", "unescape_key"]


class ZooKeeperStore(CatalogStore):
    """Global catalog in ZooKeeper; see the module docstring for the layout."""

    #: The log keeps the last ``keep_log`` commits, pruned every ``prune_every`` (:meth:`.ZooKeeperLog.prune`).
    keep_log = 10_000
    prune_every = 1_000

    def __init__(self, url: str, connect_timeout: float = CONNECT_TIMEOUT, create: bool = True):
        self.url = url
        hosts, chroot = parse_url(url)
        self._root = chroot + "/catalog"
        self._version_path = self._root + "/version"
        self._closed = False
        self._lock = threading.Lock()
        self._watches: list[ZooKeeperWatch] = []
        self._names = ElementNames()  # which element znodes exist, as of one catalog version
        self.fence = Fence()  # once a Head contends: its election znode, checked by every commit
        # Reconnect forever in the background once connected; the first
        # connect is bounded by start(timeout) instead.
        self._client = KazooClient(
            hosts=hosts,
            timeout=10.0,
            connection_retry=KazooRetry(max_tries=-1, max_delay=2.0),
            **kazoo_options(url),  # TLS and SASL from the URL's query
        )
        start_session(self._client, url, f"catalog store {url.split('?', 1)[0]}", connect_timeout)
        self._log = ZooKeeperLog(self._client, self._root, url)
        self._copies = WholeCopies(self._client, self._root)  # the catalog in a few znodes, for readers
        self._meta = MetaZnodes(self._client, chroot + "/meta")
        # (inside the catalog's subtree: a catalog laid out again there, its versions counted from 0, must not
        # find the saved index and boxes of the one before at the same version numbers)
        self._blobs = BlobZnodes(self._client, self._root)
        self.alongside = CommitMeta()  # metadata a commit writes in its multi-op (a submission's record)
        try:
            if create:
                self._ensure_layout()
            elif wait_reply(self._client.exists_async(self._version_path)) is None:
                raise MissingCatalog(f"catalog store {url} does not exist: nothing was ever committed there")
        except BaseException:
            self._shutdown_client()
            raise

    # -- plumbing ---------------------------------------------------------

    def _shutdown_client(self) -> None:
        try:
            self._client.stop()
            self._client.close()
        except Exception:  # already dead: nothing to release
            log.debug("error stopping ZooKeeper client for %s", self.url, exc_info=True)

    @contextmanager
    def _ops(self, what: str) -> Iterator[None]:
        """Turn kazoo's exceptions into StoreError naming the store and the operation."""
        if self._closed:
            raise StoreError(f"catalog store {self.url} is closed")
        try:
            yield
        except KazooTimeoutError as exc:
            raise StoreError(
                f"catalog store {self.url}: {what} failed: no reply from ZooKeeper within "
                f"{REQUEST_TIMEOUT:g}s (connection {self._client.state})"
                + ("; the commit may or may not have been applied" if what == "commit" else "")
            ) from exc
        except KazooException as exc:
            if self._closed:
                raise StoreError(f"catalog store {self.url} is closed") from exc
            raise StoreError(
                f"catalog store {self.url}: {what} failed: {type(exc).__name__} {exc}"
            ) from exc

    @property
    def membership_url(self) -> str:
        """Nodes join membership under this same chroot (``<chroot>/nodes``, see :mod:`.membership`)."""
        return self.url

    def head_lease(self, identifier: str, session_timeout: float = 10.0) -> HeadLease:
        """Contend with the other Heads (:mod:`.zk_leader`); from now on every commit here is fenced."""
        self.fence.required = True
        return ZooKeeperLease(self.url, self._root.rsplit("/", 1)[0] + "/heads", identifier, self.fence,
                              session_timeout)

    def element_znode(self, kind: str, name: str = "") -> str:
        """The absolute znode path of element ``name`` of ``kind`` (its escaped key), or of the kind's folder.

        For reading the catalog with ZooKeeper's own tools (``zkCli.sh get ...``).
        """
        return f"{self._root}/elements/{kind}" + (f"/{name}" if name else "")

    def kept_log_versions(self) -> list[int]:
        """The versions whose commits the log still holds (older ones are pruned, :meth:`.ZooKeeperLog.prune`)."""
        with self._ops("listing the log"):
            return self._log.versions()

    def _ensure_layout(self) -> None:
        with self._ops("creating the catalog layout"):
            kinds = [self.element_znode(kind) for kind in KINDS]
            if wait_reply(self._client.exists_async(self._version_path)):
                # Complete, but maybe made before a kind existed (partition): that kind gets its folder.
                missing = [p for p, res in [(p, self._client.exists_async(p)) for p in kinds] if not wait_reply(res)]
                for path in missing:
                    wait_reply(self._client.ensure_path_async(path))
                return
            for path in kinds + [self._root + "/log"]:
                wait_reply(self._client.ensure_path_async(path))
            try:  # last, so an existing version znode means the layout is complete
                wait_reply(self._client.create_async(self._version_path, b"0"))
            except NodeExistsError:
                pass  # another client initialised it concurrently

    def _read_version(self) -> tuple[int, int]:
        """(catalog version, stat version of the version znode)."""
        data, stat = wait_reply(self._client.get_async(self._version_path))
        return int(data), stat.version

    def _read_children(self) -> dict[str, set[str]]:
        lists = get_many(self._client, [self.element_znode(k) for k in KINDS], children=True)
        return {k: set(names or ()) for k, names in zip(KINDS, lists)}

    # -- the CatalogStore interface ---------------------------------------

    def version(self) -> int:
        with self._ops("reading the version"):
            return self._read_version()[0]

    def snapshot(self) -> Snapshot:
        with self._ops("reading a snapshot"):
            copied = self._from_copy()
            if copied is not None:
                return copied
            version = self._read_version()[0]
            children = self._read_children()
            idents = [(k, n) for k in KINDS for n in children[k]]
            values = get_many(self._client, [self.element_znode(k, n) for k, n in idents])
            elements = {
                (k, unescape_key(n)): v.decode("utf-8")
                for (k, n), v in zip(idents, values)
                if v is not None
            }
            if self._read_version()[0] != version:
                # Commits landed while we read, so the copy may mix versions.
                # Every element they touched is in their log entries: replaying
                # those makes it exact at the last one's version.  (Retrying
                # instead can starve while writers keep committing.)
                version = replay(elements, self._read_log(version), version)
            self._names.set(_names_of(elements), version)
            self._copies.kept(version, elements, None)
            return Snapshot(version, elements)

    def _from_copy(self) -> Snapshot | None:
        """The last whole copy and the log since; None when there is no copy or the log since is pruned."""
        read = self._copies.read()
        if read is None:
            return None
        version, elements = read
        try:
            commits = self._read_log(version)
        except StoreError:
            return None
        copy, version = version, replay(elements, commits, version)
        self._names.set(_names_of(elements), version)
        self._copies.kept(version, elements, copy, sum(len(c.changes) for c in commits), len(commits))
        return Snapshot(version, elements)

    def commit(self, base_version: int, changes: Sequence[Change]) -> Commit:
        changes = tuple(check_batch(changes))
        payload = encode_log(changes)
        with self._ops("commit"):
            for _ in range(_ATTEMPTS):
                current, stat_version = self._read_version()
                if current != base_version:
                    raise ConflictError(base_version, current)
                existing = self._names.at(current)
                if existing is None:
                    existing = self._read_children()
                txn = self._client.transaction()
                fenced = self.fence.add(txn)
                txn.set_data(self._version_path, str(current + 1).encode(), version=stat_version)
                size = 0
                for c in changes:
                    name = escape_key(c.key)
                    path = self.element_znode(c.kind, name)
                    present = name in existing[c.kind]
                    if c.text is None:
                        if present:
                            txn.delete(path)
                    else:
                        data = c.text.encode("utf-8")
                        size += len(path) + len(data) + 48
                        (txn.set_data if present else txn.create)(path, data)
                txn.create(self._log.path(current + 1), payload)
                self._meta.add_to(txn, self.alongside.for_version(current + 1))
                size += len(payload) + 64
                try:
                    results = wait_reply(txn.commit_async())
                except ConnectionLoss:
                    # The request may or may not have been applied.
                    self._names.forget()
                    self._copies.forget()
                    outcome = self._after_lost_commit(base_version, payload, size)
                    if outcome is None:
                        continue
                    return Commit(outcome, changes)
                if not any(isinstance(r, Exception) for r in results):
                    self._names.note_commit(current, existing, changes)
                    self._log.prune(current + 1, self.keep_log, self.prune_every)
                    self._copies.committed(current, changes)
                    return Commit(current + 1, changes)
                self._names.forget()
                self.fence.refused(fenced, results)
                actual = self._read_version()[0]
                if actual != base_version:
                    raise ConflictError(base_version, actual)
                failed = [r for r in results if isinstance(r, Exception)]
                log.warning("catalog %s: commit on stale element list (%r); retrying", self.url, failed[:2])
        raise StoreError(f"catalog store {self.url}: commit kept failing; giving up")

    def _after_lost_commit(self, base_version: int, payload: bytes, size: int) -> int | None:
        """Decide what a commit whose reply was lost did: its version, or None to retry."""
        retry = KazooRetry(max_tries=-1, max_delay=1.0, deadline=REQUEST_TIMEOUT)
        actual = retry(self._read_version)[0]
        if actual != base_version:
            try:
                mine = wait_reply(self._client.get_async(self._log.path(base_version + 1)))[0] == payload
            except NoNodeError:
                mine = False
            if mine:
                return base_version + 1
            raise ConflictError(base_version, actual)
        if size > DEFAULT_MAXBUFFER:
            raise StoreError(
                f"catalog store {self.url}: ZooKeeper dropped the connection on a commit of about "
                f"{size} bytes, which is what it does with a request larger than its jute.maxbuffer "
                f"(default {DEFAULT_MAXBUFFER} bytes, about 1 MB); nothing was committed.  Raise the "
                f"limit on every ZooKeeper server (e.g. SERVER_JVMFLAGS=-Djute.maxbuffer=16777216) "
                f"and on Java clients (JVMFLAGS / CLIENT_JVMFLAGS=-Djute.maxbuffer=16777216), or "
                f"commit fewer or smaller elements at a time"
            )
        log.warning("catalog %s: connection lost during commit; retrying", self.url)
        return None

    def _read_log(self, since: int) -> list[Commit]:
        """Commits after ``since`` (the log's entries up to the current version), noted by the element names."""
        commits = self._log.read(since, self._read_version()[0], self.keep_log)
        self._names.note_log(commits)
        return commits

    def log(self, since: int) -> list[Commit]:
        with self._ops("reading the log"):
            return self._read_log(since)

    def watch(self, since: int, callback: WatchCallback) -> Watch:
        with self._ops("starting a watch"):
            watch = ZooKeeperWatch(self, self._client, self._version_path, since, callback)
        with self._lock:
            self._watches.append(watch)
        return watch

    def get_meta(self, key: str) -> str | None:
        with self._ops("read metadata"):
            return self._meta.get(key)

    def put_meta(self, key: str, value: str) -> None:
        with self._ops("write metadata"):
            self._meta.put(key, value)

    def get_blob(self, key: str) -> bytes | None:
        with self._ops("read a blob"):
            return self._blobs.get(key)

    def put_blob(self, key: str, data: bytes) -> None:
        with self._ops("write a blob"):
            self._blobs.put(key, data)

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
            watches, self._watches = self._watches, []
        for watch in watches:
            watch.close()
        self._copies.close()  # (a copy under way is waited for, at most REQUEST_TIMEOUT)
        self._shutdown_client()


def _names_of(elements: dict[tuple[str, str], str]) -> dict[str, set[str]]:
    """The element znodes' names, per kind, of a copy of the catalog."""
    names: dict[str, set[str]] = {k: set() for k in KINDS}
    for kind, key in elements:
        names[kind].add(escape_key(key))
    return names
