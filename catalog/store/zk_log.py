"""The catalog's commit log in ZooKeeper: one znode per commit, read pipelined, pruned to the last few.

Each commit's changes are written (by the store's commit multi-op) to
``/catalog/log/<version:012d>`` as zlib-compressed JSON
(:func:`.znodes.encode_log`).  Watchers and Heads that fell behind read the
entries after the version they hold; a reader too far behind finds them
pruned and reads the catalog whole.  :class:`ZooKeeperLog` owns the log
folder: where an entry lives, reading a run of entries, and pruning.

Usage (the store does this)::

    log = ZooKeeperLog(client, "/chroot/catalog", url)
    txn.create(log.path(version), encode_log(changes))   # in the commit's multi-op
    commits = log.read(since, current_version)
    log.prune(version, keep=10_000, every=1_000)
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError

from .base import Commit, StoreError
from .znodes import decode_log, wait_reply

log = logging.getLogger(__name__)

_PIPELINE = 2000  # outstanding async requests per batch: bounds memory, keeps the pipe full


def get_many(client: KazooClient, paths: Sequence[str], children: bool = False) -> list:
    """Pipelined gets (or get_children): one round trip per batch, not per znode.

    A missing znode yields None (a concurrent commit deleted it).
    """
    out: list = []
    call = client.get_children_async if children else client.get_async
    for start in range(0, len(paths), _PIPELINE):
        pending = [call(p) for p in paths[start:start + _PIPELINE]]
        for res in pending:
            try:
                value = wait_reply(res)
            except NoNodeError:
                value = None
            out.append(value if children or value is None else value[0])
    return out


class ZooKeeperLog:
    """The log folder ``<root>/log`` of one catalog store; ``url`` names the store in errors."""

    def __init__(self, client: KazooClient, root: str, url: str):
        self.client = client
        self.folder = root + "/log"
        self.url = url

    def path(self, version: int) -> str:
        return f"{self.folder}/{version:012d}"

    def versions(self) -> list[int]:
        """The versions whose commits the log still holds (older ones are pruned)."""
        return sorted(int(name) for name in wait_reply(self.client.get_children_async(self.folder)))

    def read(self, since: int, current: int, keep: int) -> list[Commit]:
        """Commits ``since``+1 .. ``current``; a ``StoreError`` when one was pruned (``keep``: how many
        the log keeps, for the message)."""
        versions = list(range(since + 1, current + 1))
        commits = []
        for v, data in zip(versions, get_many(self.client, [self.path(v) for v in versions])):
            if data is None:
                raise StoreError(f"catalog store {self.url}: log entry {v} is missing (the log keeps the "
                                 f"last {keep} commits; read the catalog whole)")
            commits.append(Commit(v, decode_log(data)))
        return commits

    def prune(self, version: int, keep: int, every: int) -> None:
        """Every ``every`` commits, delete the entries older than the last ``keep``.

        The log is the catalog's history: kept whole, ZooKeeper's snapshots
        would grow with every commit however often its own files are purged.
        Readers that need older entries (a Head far behind) find them gone
        and read the catalog whole instead.  Best effort: an entry left by a
        pruning that failed is harmless.
        """
        if version % every:
            return
        cutoff = version - keep  # entries at or below it go
        pending = [self.client.delete_async(self.path(v)) for v in range(max(1, cutoff - every + 1), cutoff + 1)]
        for result in pending:
            try:
                wait_reply(result)
            except NoNodeError:
                pass
            except Exception as exc:  # never fail the commit that succeeded for this
                log.warning("catalog %s: pruning the log before %d: %r", self.url, cutoff, exc)
                return
