"""Live-node membership in ZooKeeper: one ephemeral znode per running node.

With the ZooKeeper store, each node holds ``<chroot>/nodes/<endpoint>`` for
as long as its ZooKeeper session lives, so the Head learns that a node died
from ZooKeeper itself (the session expires and the znode goes), not only
from missed heartbeats.  A node whose session was lost joins again on the
new session.

Usage (node side, and Head side)::

    members = ZooKeeperMembers("zk://127.0.0.1:2181/boreas")
    members.join("localhost:15000", b'{"incarnation": "..."}')
    members.watch(lambda live: print(sorted(live)))
    members.close()
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import KazooException, NodeExistsError, NoNodeError
from kazoo.recipe.watchers import ChildrenWatch

from .zk_session import start_session
from .znodes import CONNECT_TIMEOUT, escape_key, kazoo_options, parse_url, unescape_key

log = logging.getLogger(__name__)


class ZooKeeperMembers:
    """Join (as a node) or watch (as the Head) the set of live nodes."""

    def __init__(self, url: str, session_timeout: float = 6.0, connect_timeout: float = CONNECT_TIMEOUT):
        hosts, chroot = parse_url(url)
        self.path = chroot + "/nodes"
        self._joined: dict[str, bytes] = {}
        self._lock = threading.Lock()
        self._client = KazooClient(hosts=hosts, timeout=session_timeout, **kazoo_options(url))
        start_session(self._client, url, "membership", connect_timeout)
        self._client.ensure_path(self.path)
        self._client.add_listener(self._on_state)

    def _znode(self, endpoint: str) -> str:
        return f"{self.path}/{escape_key(endpoint)}"

    def join(self, endpoint: str, data: bytes = b"") -> None:
        """Hold the ephemeral znode for ``endpoint`` (replacing a stale one from a dead session)."""
        with self._lock:
            self._joined[endpoint] = data
        self._create(endpoint, data)

    def _create(self, endpoint: str, data: bytes) -> None:
        path = self._znode(endpoint)
        try:
            self._client.create(path, data, ephemeral=True)
        except NodeExistsError:
            _, stat = self._client.get(path)
            if stat.ephemeralOwner != self._client.client_id[0]:
                self._client.delete(path)  # left by our previous (dead) process
                self._client.create(path, data, ephemeral=True)

    def _on_state(self, state: str) -> None:
        if state == KazooState.CONNECTED and self._joined:
            # Maybe a new session: the old ephemerals are gone. Never block the listener.
            threading.Thread(target=self._rejoin, name="zk-members-rejoin", daemon=True).start()

    def _rejoin(self) -> None:
        with self._lock:
            joined = dict(self._joined)
        for endpoint, data in joined.items():
            try:
                self._create(endpoint, data)
            except KazooException:
                log.warning("could not re-join membership as %s", endpoint, exc_info=True)

    def members(self) -> set[str]:
        try:
            return {unescape_key(name) for name in self._client.get_children(self.path)}
        except NoNodeError:
            return set()

    def watch(self, callback: Callable[[set[str]], None]) -> None:
        """Call ``callback`` with the live set now and on every change (on a kazoo thread)."""

        def changed(children: list[str]) -> None:
            callback({unescape_key(name) for name in children})

        ChildrenWatch(self._client, self.path, changed)

    def close(self) -> None:
        with self._lock:
            self._joined.clear()
        try:
            self._client.stop()
            self._client.close()
        except KazooException:
            log.debug("error closing membership client", exc_info=True)
