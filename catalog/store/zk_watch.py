"""Pushing catalog commits to a watcher when ZooKeeper says the version changed.

:class:`ZooKeeperWatch` is the ZooKeeper store's :class:`~.base.PollingWatch`:
a kazoo watch on the version znode wakes a delivery thread that reads the log.
How notifications reach watchers (kazoo's single event thread, reconnects) is
a concern of its own, apart from how :mod:`.zookeeper` reads and commits.
"""

from __future__ import annotations

import logging

from kazoo.client import KazooClient
from kazoo.recipe.watchers import DataWatch

from .base import CatalogStore, PollingWatch, WatchCallback

log = logging.getLogger(__name__)


class ZooKeeperWatch(PollingWatch):
    """Pushes commits to a callback on its own thread.

    A kazoo DataWatch on the version znode only *wakes* the delivery thread:
    kazoo runs watch callbacks on its single event thread, and a slow user
    callback there would stall every other reply of the client.  Polling
    every ``RECHECK`` seconds is only a backstop for notifications missed
    across a reconnect.
    """

    RECHECK = 5.0

    def __init__(self, store: CatalogStore, client: KazooClient, version_path: str, since: int,
                 callback: WatchCallback):
        self._client, self._version_path = client, version_path  # the store's client and version znode
        super().__init__(store, since, callback, interval=self.RECHECK)

    def _on_version(self, data: bytes | None, stat: object, event: object = None) -> bool:
        if self._stop.is_set():
            return False  # tells kazoo to drop this watch
        self.wakeup()
        return True

    def _prepare(self) -> None:
        # Registered here, not in __init__: DataWatch retries its first read
        # until the connection is back, and watch() must not block on that.
        try:
            DataWatch(self._client, self._version_path, self._on_version)
        except Exception:  # closed meanwhile, or similar: fall back to re-checking
            log.warning("catalog watch could not set a ZooKeeper watch", exc_info=True)
