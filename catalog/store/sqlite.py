"""The embedded global catalog store: one SQLite file (or memory).

SQLite gives atomic commits and safe sharing between processes (WAL mode,
``BEGIN IMMEDIATE`` takes the write lock before the version check, so two
writers serialise and the second sees a :class:`ConflictError`).  Watches
poll the log table, which is the only way to hear about commits made by
another process; commits made through this object wake them at once.

URLs follow SQLAlchemy's convention: after ``sqlite://`` comes ``/`` and
the path, so ``sqlite:///catalog.db`` is ``catalog.db`` in the working
directory and ``sqlite:////var/lib/boreas/catalog.db`` (four slashes) is an
absolute path; ``~`` is expanded.

Opening creates the file and its directories unless ``create=False``: then a
missing file is a :class:`StoreError` saying so (reading commands use that,
so a typo never leaves an empty catalog behind).

Usage::

    store = SqliteStore("sqlite:////var/lib/boreas/catalog.db")   # absolute
    store = SqliteStore("sqlite:///catalog.db", create=False)     # ./catalog.db, must exist
    store = SqliteStore("memory://")          # private to this process
"""

from __future__ import annotations

import json
import logging
import os
import sqlite3
import threading
import time
import weakref
from collections.abc import Callable, Sequence
from pathlib import Path

from .base import (
    CatalogStore,
    Change,
    Commit,
    ConflictError,
    MissingCatalog,
    PollingWatch,
    Snapshot,
    StoreError,
    Watch,
    WatchCallback,
    check_batch,
)
from .file_lease import FileLease
from .lease import HeadLease

log = logging.getLogger(__name__)

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (
    id      INTEGER PRIMARY KEY CHECK (id = 1),
    version INTEGER NOT NULL
);
INSERT OR IGNORE INTO meta (id, version) VALUES (1, 0);
CREATE TABLE IF NOT EXISTS element (
    kind TEXT NOT NULL,
    key  TEXT NOT NULL,
    text TEXT NOT NULL,
    PRIMARY KEY (kind, key)
);
CREATE TABLE IF NOT EXISTS log (
    version INTEGER PRIMARY KEY,
    changes TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS kv (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS blob (
    key  TEXT PRIMARY KEY,
    data BLOB NOT NULL
);
"""


def sqlite_path(url: str) -> Path:
    """The file a ``sqlite:///`` URL names, made absolute against the working directory.

    >>> import os; sqlite_path("sqlite:///b.db") == Path(os.getcwd()) / "b.db"
    True
    >>> str(sqlite_path("sqlite:////var/lib/b.db"))
    '/var/lib/b.db'
    """
    if not url.startswith("sqlite:///"):
        raise StoreError(f"bad sqlite store URL {url!r}: expected sqlite:///RELATIVE/PATH (from the "
                         "working directory) or sqlite:////ABSOLUTE/PATH")
    path = url[len("sqlite:///"):]
    if not path or path == "/":
        raise StoreError(f"sqlite store URL needs a path: {url!r}")
    return Path(os.path.abspath(Path(path).expanduser()))


def catalog_files(path: Path) -> list[Path]:
    """The catalog file and the journals SQLite may keep beside it (WAL mode, or a rollback journal)."""
    return [path, *(Path(f"{path}{suffix}") for suffix in ("-wal", "-shm", "-journal"))]


def _encode_changes(changes: Sequence[Change]) -> str:
    return json.dumps([[c.kind, c.key, c.text] for c in changes], separators=(",", ":"))


def _decode_changes(data: str) -> tuple[Change, ...]:
    return tuple(Change(kind, key, text) for kind, key, text in json.loads(data))


def _uri_path(path: Path) -> str:
    from urllib.parse import quote

    return quote(str(path), safe="/")


def _meant_absolute(url: str, path: Path) -> Path | None:
    """For ``sqlite:///var/x.db`` with no ``./var/x.db``: ``/var/x.db``, if that exists."""
    rest = url[len("sqlite:///"):]
    if rest.startswith(("/", "~")):
        return None
    absolute = Path("/" + rest)
    return absolute if absolute != path and absolute.exists() else None


def _missing(url: str, path: Path) -> str:
    message = f"catalog store {url} does not exist: there is no file {path}"
    absolute = _meant_absolute(url, path)
    if absolute is not None:
        message += (f" (sqlite:/// with three slashes is relative to the working directory; for "
                    f"{absolute} write sqlite:///{absolute})")
    return message


def _warn_if_meant_absolute(url: str, path: Path) -> None:
    absolute = _meant_absolute(url, path)
    if absolute is not None:
        log.warning("creating a new catalog %s for %s; an existing %s is not used: sqlite:/// with three "
                    "slashes is relative to the working directory, so for that file write sqlite:///%s",
                    path, url, absolute, absolute)


class SqliteStore(CatalogStore):
    """Global catalog in SQLite; ``sqlite:///path`` or ``memory://`` (see the module docstring)."""

    def __init__(self, url: str, poll_interval: float = 0.05, create: bool = True):
        self.url = url
        self._poll_interval = poll_interval
        if url.startswith("memory://"):
            target, uri = ":memory:", False
        elif url.startswith("sqlite:"):
            path = sqlite_path(url)
            if create:
                if not path.exists():
                    _warn_if_meant_absolute(url, path)
                try:
                    path.parent.mkdir(parents=True, exist_ok=True)
                except OSError as exc:
                    raise StoreError(f"cannot create catalog store {url}: {exc}") from exc
                target, uri = str(path), False
            else:
                if not path.is_file():
                    raise MissingCatalog(_missing(url, path))
                # mode=rw: never create the file, even if it vanished since the check
                target, uri = "file:" + _uri_path(path) + "?mode=rw", True
        else:
            raise StoreError(f"not a sqlite store URL: {url!r}")
        self._lock = threading.RLock()
        try:
            self._db = sqlite3.connect(
                target, uri=uri, check_same_thread=False, isolation_level=None, timeout=30
            )
            if not create and not self._db.execute(
                    "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'meta'").fetchone():
                self._db.close()
                raise StoreError(f"catalog store {url}: {sqlite_path(url)} is not a Boreas catalog "
                                 "(it has no catalog tables)")
            _when_unlocked(lambda: self._set_up(target != ":memory:", create))
        except sqlite3.Error as exc:
            raise StoreError(f"cannot open catalog store {url}: {exc}") from exc
        self._watches: weakref.WeakSet[PollingWatch] = weakref.WeakSet()
        self._closed = False

    def _set_up(self, wal: bool, create: bool) -> None:
        # Switching to WAL takes the database for a moment; most opens find it in WAL already.
        if wal and self._db.execute("PRAGMA journal_mode").fetchone()[0].lower() != "wal":
            self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")
        if create:
            self._db.executescript(_SCHEMA)

    def _query(self, sql: str, params: tuple = ()) -> list[tuple]:
        with self._lock:
            if self._closed:
                raise StoreError(f"catalog store {self.url} is closed")
            try:
                return self._db.execute(sql, params).fetchall()
            except sqlite3.Error as exc:
                raise StoreError(f"catalog store {self.url}: {exc}") from exc

    def version(self) -> int:
        return self._query("SELECT version FROM meta WHERE id = 1")[0][0]

    def snapshot(self) -> Snapshot:
        with self._lock:
            self._query("BEGIN")
            try:
                version = self._query("SELECT version FROM meta WHERE id = 1")[0][0]
                rows = self._query("SELECT kind, key, text FROM element")
            finally:
                self._query("COMMIT")
        return Snapshot(version, {(kind, key): text for kind, key, text in rows})

    def commit(self, base_version: int, changes: Sequence[Change]) -> Commit:
        changes = tuple(check_batch(changes))
        with self._lock:
            if self._closed:
                raise StoreError(f"catalog store {self.url} is closed")
            db = self._db
            try:
                db.execute("BEGIN IMMEDIATE")
                try:
                    current = db.execute("SELECT version FROM meta WHERE id = 1").fetchone()[0]
                    if current != base_version:
                        raise ConflictError(base_version, current)
                    version = current + 1
                    puts = [(c.kind, c.key, c.text) for c in changes if c.text is not None]
                    dels = [(c.kind, c.key) for c in changes if c.text is None]
                    db.executemany(
                        "INSERT INTO element (kind, key, text) VALUES (?, ?, ?) "
                        "ON CONFLICT (kind, key) DO UPDATE SET text = excluded.text",
                        puts,
                    )
                    db.executemany("DELETE FROM element WHERE kind = ? AND key = ?", dels)
                    db.execute(
                        "INSERT INTO log (version, changes) VALUES (?, ?)",
                        (version, _encode_changes(changes)),
                    )
                    db.execute("UPDATE meta SET version = ? WHERE id = 1", (version,))
                    db.execute("COMMIT")
                except BaseException:
                    db.execute("ROLLBACK")
                    raise
            except sqlite3.Error as exc:
                raise StoreError(f"catalog store {self.url}: commit failed: {exc}") from exc
        for watch in list(self._watches):
            watch.wakeup()
        return Commit(version, changes)

    def log(self, since: int) -> list[Commit]:
        rows = self._query(
            "SELECT version, changes FROM log WHERE version > ? ORDER BY version", (since,)
        )
        return [Commit(version, _decode_changes(data)) for version, data in rows]

    def get_meta(self, key: str) -> str | None:
        rows = self._query("SELECT value FROM kv WHERE key = ?", (key,))
        return rows[0][0] if rows else None

    def put_meta(self, key: str, value: str) -> None:
        self._query("INSERT OR REPLACE INTO kv (key, value) VALUES (?, ?)", (key, value))

    def get_blob(self, key: str) -> bytes | None:
        try:
            rows = self._query("SELECT data FROM blob WHERE key = ?", (key,))
        except StoreError as exc:  # a catalog made before blobs were kept: none was ever set
            if "no such table" in str(exc):
                return None
            raise
        return bytes(rows[0][0]) if rows else None

    def put_blob(self, key: str, data: bytes) -> None:
        self._query("CREATE TABLE IF NOT EXISTS blob (key TEXT PRIMARY KEY, data BLOB NOT NULL)")
        self._query("INSERT OR REPLACE INTO blob (key, data) VALUES (?, ?)", (key, sqlite3.Binary(data)))

    def watch(self, since: int, callback: WatchCallback) -> Watch:
        watch = PollingWatch(self, since, callback, self._poll_interval)
        self._watches.add(watch)
        return watch

    def head_lease(self, identifier: str, session_timeout: float = 10.0) -> HeadLease:
        """One Head per catalog file (:class:`~.file_lease.FileLease`); ``memory://`` is its one Head's."""
        if self.url.startswith("memory://"):
            return super().head_lease(identifier, session_timeout)
        return FileLease(identifier, sqlite_path(self.url))

    def close(self) -> None:
        for watch in list(self._watches):
            watch.close()
        with self._lock:
            if not self._closed:
                self._closed = True
                self._db.close()


def _when_unlocked(step: Callable[[], None], patience: float = 10.0) -> None:
    """Run ``step``, again while the database is locked by another opener (up to ``patience`` s).

    Some steps of opening (the journal-mode switch) do not wait on SQLite's
    busy handler, so several processes opening one catalog at once can see
    "database is locked" although nothing is wrong.
    """
    deadline = time.monotonic() + patience
    delay = 0.005
    while True:
        try:
            step()
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() > deadline:
                raise
            time.sleep(delay)
            delay = min(delay * 2, 0.2)
