"""Cluster metadata beside a ZooKeeper catalog: one znode per key under ``<chroot>/meta`` (not versioned).

What the Heads keep there must outlive any one of them: the last complete
snapshot, where each shared node keeps its data and which node a failover
chose (``failover/...``, :mod:`boreas.head.failover`), so the next leader
reads what the last one decided.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kazoo.exceptions import NodeExistsError, NoNodeError

from .znodes import escape_key, wait_reply


class MetaZnodes:
    """Get and put metadata values; kazoo's exceptions pass through (the store names them)."""

    def __init__(self, client: Any, path: str):
        self.client = client
        self.path = path

    def get(self, key: str) -> str | None:
        try:
            data, _ = wait_reply(self.client.get_async(self._znode(key)))
        except NoNodeError:
            return None
        return data.decode()

    def put(self, key: str, value: str) -> None:
        path = self._znode(key)
        if wait_reply(self.client.exists_async(path)) is None:
            self.client.ensure_path(self.path)
            try:
                wait_reply(self.client.create_async(path, value.encode()))
                return
            except NodeExistsError:
                pass
        wait_reply(self.client.set_async(path, value.encode()))

    def add_to(self, txn: Any, entries: Mapping[str, str]) -> None:
        """Put ``entries`` in the transaction ``txn`` (a commit's multi-op: written with it or not at all)."""
        if entries:
            self.client.ensure_path(self.path)
        for key, value in entries.items():
            path = self._znode(key)
            present = wait_reply(self.client.exists_async(path)) is not None
            (txn.set_data if present else txn.create)(path, value.encode())

    def _znode(self, key: str) -> str:
        return f"{self.path}/{escape_key(key)}"
