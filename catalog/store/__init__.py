"""Global catalog stores: one interface, an embedded and a ZooKeeper implementation.

``open_store(url)`` picks the implementation from the URL scheme:

* ``sqlite:///path/to/catalog.db`` -- embedded, shared by processes on one machine;
* ``memory://`` -- embedded, private to this process (tests);
* ``zk://host:port[,host:port...]/chroot`` -- ZooKeeper.
"""

from __future__ import annotations

from pathlib import Path

from .base import (
    KINDS,
    CatalogStore,
    Change,
    Commit,
    ConflictError,
    Snapshot,
    StoreError,
    Watch,
)

#: The embedded store used when no URL is given: a file in the working directory.
DEFAULT_STORE_FILE = "boreas-catalog.db"


def default_store_url(cwd: Path | None = None) -> str:
    return "sqlite:///" + str(((cwd or Path.cwd()) / DEFAULT_STORE_FILE).resolve()).lstrip("/")


def open_store(url: str | None = None) -> CatalogStore:
    """Open the store named by ``url`` (default: the embedded file in the cwd)."""
    url = url or default_store_url()
    if url.startswith(("sqlite://", "memory://")):
        from .sqlite import SqliteStore

        return SqliteStore(url)
    if url.startswith("zk://"):
        from .zookeeper import ZooKeeperStore

        return ZooKeeperStore(url)
    raise StoreError(
        f"unknown catalog URL {url!r}: expected sqlite:///PATH, memory:// or zk://HOST:PORT/CHROOT"
    )


__all__ = [
    "KINDS",
    "CatalogStore",
    "Change",
    "Commit",
    "ConflictError",
    "Snapshot",
    "StoreError",
    "Watch",
    "default_store_url",
    "open_store",
]
