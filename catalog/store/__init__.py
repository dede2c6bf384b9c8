"""Global catalog stores: one interface, an embedded and a ZooKeeper implementation.

``open_store(url)`` picks the implementation from the URL scheme:

* ``sqlite:///relative/catalog.db`` (from the working directory) or
  ``sqlite:////absolute/catalog.db`` (four slashes) -- embedded, shared by
  processes on one machine (SQLAlchemy's convention);
* ``memory://`` -- embedded, private to this process (tests);
* ``zk://host:port[,host:port...]/chroot`` -- ZooKeeper.

Commands that only read pass ``create=False``: a catalog that does not exist
is then a :class:`StoreError` saying so, and nothing is created.
"""

from __future__ import annotations

from pathlib import Path

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
)

#: The embedded store used when no URL is given: a file in the working directory.
DEFAULT_STORE_FILE = "boreas-catalog.db"


def default_store_url(cwd: Path | None = None) -> str:
    """``sqlite:////abs/path/boreas-catalog.db`` for the file in ``cwd`` (default: the working directory)."""
    return "sqlite:///" + str(((cwd or Path.cwd()) / DEFAULT_STORE_FILE).resolve())


def absolute_store_url(url: str) -> str:
    """``url`` with a relative sqlite path made absolute (for another process, maybe in another directory).

    >>> absolute_store_url("sqlite:////tmp/c.db"), absolute_store_url("memory://")
    ('sqlite:////tmp/c.db', 'memory://')
    """
    if url.startswith("sqlite:"):
        from .sqlite import sqlite_path

        return "sqlite:///" + str(sqlite_path(url))
    return url


def is_private(url: str) -> bool:
    """Whether ``url`` names a catalog private to the one store object that opens it (``memory://``).

    >>> is_private("memory://"), is_private("sqlite:///c.db")
    (True, False)
    """
    return url.startswith("memory://")


def erase_embedded(url: str) -> tuple[Path, list[Path]] | None:
    """Remove an embedded catalog's file and its journals: (the file, those that existed).

    None, and nothing removed, when ``url`` names no embedded file (a shared
    ZooKeeper catalog is emptied by its operator, not by a command line flag).
    """
    if not url.startswith("sqlite:"):
        return None
    from .sqlite import catalog_files, sqlite_path

    path = sqlite_path(url)
    removed = [p for p in catalog_files(path) if p.exists()]
    for p in removed:
        p.unlink()
    return path, removed


def open_store(url: str | None = None, create: bool = True) -> CatalogStore:
    """Open the store named by ``url`` (default: the embedded file in the cwd).

    With ``create=False`` (for commands that only read) a catalog that does
    not exist yet is a :class:`StoreError` and nothing is created.
    """
    url = url or default_store_url()
    if url.startswith(("sqlite:", "memory://")):
        from .sqlite import SqliteStore

        return SqliteStore(url, create=create)
    if url.startswith("zk://"):
        from .zookeeper import ZooKeeperStore

        return ZooKeeperStore(url, create=create)
    raise StoreError(
        f"unknown catalog URL {url!r}: expected sqlite:///RELATIVE/PATH, sqlite:////ABSOLUTE/PATH, "
        "memory:// or zk://HOST:PORT/CHROOT"
    )


__all__ = [
    "MissingCatalog",
    "KINDS",
    "CatalogStore",
    "Change",
    "Commit",
    "ConflictError",
    "Snapshot",
    "StoreError",
    "Watch",
    "absolute_store_url",
    "default_store_url",
    "erase_embedded",
    "is_private",
    "open_store",
]
