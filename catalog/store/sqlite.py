"""The embedded global catalog store: one SQLite file (or memory).

SQLite gives atomic commits and safe sharing between processes (WAL mode,
``BEGIN IMMEDIATE`` takes the write lock before the version check, so two
writers serialise and the second sees a :class:`ConflictError`).  Watches
poll the log table, which is the only way to hear about commits made by
another process; commits made through this object wake them at once.

Usage::

    store = SqliteStore("sqlite:///var/lib/boreas/catalog.db")
    store = SqliteStore("memory://")          # private to this process
"""

from __future__ import annotations

import json
import logging
import sqlite3
import threading
import weakref
from collections.abc import Sequence
from pathlib import Path

from .base import (
    CatalogStore,
    Change,
    Commit,
    ConflictError,
    PollingWatch,
    Snapshot,
    StoreError,
    Watch,
    WatchCallback,
    check_batch,
)

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
"""


def _encode_changes(changes: Sequence[Change]) -> str:
    return json.dumps([[c.kind, c.key, c.text] for c in changes], separators=(",", ":"))


def _decode_changes(data: str) -> tuple[Change, ...]:
    return tuple(Change(kind, key, text) for kind, key, text in json.loads(data))


class SqliteStore(CatalogStore):
    """Global catalog in SQLite; ``sqlite:///path`` or ``memory://``."""

    def __init__(self, url: str, poll_interval: float = 0.05):
        self.url = url
        self._poll_interval = poll_interval
        if url.startswith("memory://"):
            target, uri = ":memory:", False
        elif url.startswith("sqlite://"):
            path = url[len("sqlite://"):]
            if not path:
                raise StoreError(f"sqlite store URL needs a path: {url!r}")
            Path(path).expanduser().parent.mkdir(parents=True, exist_ok=True)
            target, uri = str(Path(path).expanduser()), False
        else:
            raise StoreError(f"not a sqlite store URL: {url!r}")
        self._lock = threading.RLock()
        try:
            self._db = sqlite3.connect(
                target, uri=uri, check_same_thread=False, isolation_level=None, timeout=30
            )
            if target != ":memory:":
                self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")
            self._db.executescript(_SCHEMA)
        except sqlite3.Error as exc:
            raise StoreError(f"cannot open catalog store {url}: {exc}") from exc
        self._watches: weakref.WeakSet[PollingWatch] = weakref.WeakSet()
        self._closed = False

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

    def watch(self, since: int, callback: WatchCallback) -> Watch:
        watch = PollingWatch(self, since, callback, self._poll_interval)
        self._watches.add(watch)
        return watch

    def close(self) -> None:
        for watch in list(self._watches):
            watch.close()
        with self._lock:
            if not self._closed:
                self._closed = True
                self._db.close()
