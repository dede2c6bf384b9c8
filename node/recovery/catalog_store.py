"""A durable node's local catalog on disk: a compacted ``catalog.xml`` and a log of the changes since.

A node with 20,000 boxes used to write its whole catalog (serialise, fsync, rename) on every update, so a
one-box change cost what the node's whole slice costs (issue 37).  Now a change appends one record to
``catalog.log``: the update items that turn the previous catalog into the new one
(:func:`boreas.catalog.replicate.update_items` over the keys the update wrote), as an update document,
framed and fsync'd like the input log's records (:mod:`.log_format`: length, CRC32, payload).  Once the log
holds more than :data:`COMPACT_RECORDS` records or more bytes than ``catalog.xml`` (or
:data:`COMPACT_MIN_BYTES`), the whole catalog is written to ``catalog.xml`` again and the log restarted, so
each change costs what it touched plus its share of a compaction.

Crash safety.  The log's first record names the ``catalog.xml`` it follows (a BLAKE2 digest of its bytes).
Compaction writes ``catalog.xml`` atomically (temp file, fsync, rename, directory fsync), then replaces the
log with one holding only the new digest (atomically too).  A ``kill -9`` between the two leaves the old log
behind a new ``catalog.xml``: its digest no longer matches, so it is ignored (everything in it is in the new
``catalog.xml``).  A torn or corrupt last record (killed in an append) is ignored, and cut off before the next
append; a change is applied to the live catalog before its record is written, but the caller acknowledges it
only after :meth:`CatalogStore.append` returns.  A catalog is never half-applied: each record applies whole
or the records end there.

>>> import tempfile
>>> from boreas.catalog.model import Catalog, Node
>>> d = Path(tempfile.mkdtemp())
>>> store = CatalogStore(d)
>>> one = Catalog(version=1, nodes={"n:1": Node("n:1")})
>>> store.append([([Node("n:1")], 1)], one)
>>> CatalogStore(d).load().nodes
{'n:1': Node(endpoint='n:1')}
"""

from __future__ import annotations

import hashlib
import logging
import os
import uuid
import zlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from boreas.catalog.document_model import Update
from boreas.catalog.documents import read_document
from boreas.catalog.model import Catalog
from boreas.catalog.replicate import apply_update, catalog_items
from boreas.catalog.updates import update_document

from .log_format import RECORD, BadRecord, read_records
from .snapshots import write_atomic

log = logging.getLogger(__name__)

CATALOG = "catalog.xml"
LOG = "catalog.log"
#: Compact after this many logged changes (bounds a restart's replay) ...
COMPACT_RECORDS = 1000
#: ... or once the log is larger than ``catalog.xml`` and at least this large (a compaction's cost, spread
#: over at least as many bytes of changes as it writes).
COMPACT_MIN_BYTES = 256 * 1024
_BASE = b"base "


def _digest(data: bytes) -> bytes:
    return hashlib.blake2b(data, digest_size=16).hexdigest().encode()


def _frame(payload: bytes) -> bytes:
    return RECORD.pack(len(payload), zlib.crc32(payload)) + payload


class CatalogStore:
    """The one owner of ``DIR/catalog.xml`` and ``DIR/catalog.log`` (module docstring: format and crashes).

    ``writable=False`` reads a directory another node owns (adoption of a failed node's boxes,
    docs/cumulus.md §6.3): nothing there is repaired or written."""

    def __init__(self, directory: Path, *, fsync: bool = True, writable: bool = True,
                 compact_records: int = COMPACT_RECORDS, compact_min_bytes: int = COMPACT_MIN_BYTES):
        self.dir = Path(directory)
        self.fsync = fsync
        self.writable = writable
        self.compact_records = compact_records
        self.compact_min_bytes = compact_min_bytes
        self.records = 0  # changes in the log now
        self.log_bytes = 0  # the log's good bytes (its digest record included)
        self.catalog_bytes = 0  # catalog.xml's size
        self.compactions = 0
        self.owed = False  # a write failed: the next save writes the catalog whole (:meth:`append`)
        self._digest: bytes | None = None  # of catalog.xml as the log follows it (None: not yet known)

    @property
    def catalog_path(self) -> Path:
        return self.dir / CATALOG

    @property
    def log_path(self) -> Path:
        return self.dir / LOG

    # -- reading -------------------------------------------------------------------------------

    def load(self) -> Catalog | None:
        """The catalog as last appended: ``catalog.xml`` with the log's changes applied (None: nothing saved).

        A writable store also cuts a torn tail off the log, and starts a new log if the one there does not
        follow ``catalog.xml`` (a compaction killed before it replaced the log)."""
        data = self.catalog_path.read_bytes() if self.catalog_path.exists() else None
        catalog = None
        if data is not None:
            update = read_document(data, str(self.catalog_path))
            assert isinstance(update, Update)
            catalog = apply_update(Catalog(), update.items, update.version or 0)
        self.catalog_bytes = len(data or b"")
        digest = _digest(data or b"")
        changes, good = self._read_log(digest)
        for update in changes:
            catalog = apply_update(catalog or Catalog(), update.items,
                                   update.version if update.version is not None else (catalog or Catalog()).version)
        self.records = len(changes)
        if self.writable:
            self.dir.mkdir(parents=True, exist_ok=True)
            if data is None:  # a new directory: catalog.xml is always there, the log after it
                self.compact(catalog or Catalog())
            elif good is None:  # no log, or one that follows an older catalog.xml
                self._restart_log(digest)
            else:
                self._cut(good)
                self._digest = digest
        return catalog

    def _read_log(self, digest: bytes) -> tuple[list[Update], int | None]:
        """The changes logged over the ``catalog.xml`` of ``digest``, and the log's good length (None: the
        log is missing or follows another ``catalog.xml``: none of it applies)."""
        if not self.log_path.exists():
            return [], None
        size = self.log_path.stat().st_size
        changes: list[Update] = []
        good = 0
        with self.log_path.open("rb") as f:
            try:
                for offset, payload in read_records(f, size):
                    if good == 0:
                        if payload != _BASE + digest:
                            log.info("%s follows another %s (a compaction was cut short): ignored", self.log_path,
                                     CATALOG)
                            return [], None
                    else:
                        update = read_document(payload, f"{self.log_path} at byte {good}", check_schema=False)
                        assert isinstance(update, Update)
                        changes.append(update)
                    good = offset
            except BadRecord as bad:
                log.warning("%s: record at byte %d is unreadable (%s): the changes end before it",
                            self.log_path, bad.offset, bad.reason)
        if good == 0:
            return [], None
        self.log_bytes = good
        return changes, good

    # -- writing -------------------------------------------------------------------------------

    def append(self, changes: Sequence[tuple[Sequence[Any], int]], catalog: Catalog) -> None:
        """Log changes (each: the items that turn the catalog before it into the one after, and that one's
        version), ``catalog`` being the catalog after the last; durable when this returns, in one write and
        one fsync.  Compacts instead (``catalog`` whole) when the log has grown past its bounds."""
        if not changes and not self.owed:
            return
        if self._digest is None:  # never loaded: the log must follow catalog.xml before it grows
            self.load()
        if self.owed or self.records + len(changes) > self.compact_records or \
                self.log_bytes > max(self.compact_min_bytes, self.catalog_bytes):
            self.compact(catalog)
            return
        records = b"".join(_frame(update_document(items, version=version).encode()) for items, version in changes)
        try:
            with self.log_path.open("ab") as f:
                f.write(records)
                f.flush()
                if self.fsync:
                    os.fsync(f.fileno())
        except BaseException:
            # (a disk full, an I/O error: these changes are in no record, and part of one may be in the file:
            # the next save, with changes or without, writes the catalog whole and a fresh log)
            self.owed = True
            raise
        self.records += len(changes)
        self.log_bytes += len(records)

    def compact(self, catalog: Catalog) -> None:
        """Write the whole of ``catalog`` to ``catalog.xml``, then restart the log after it (both atomic)."""
        # (an id of its own: a compaction that writes the same catalog as the last one is still another file,
        # so a log of the last one, left by a kill between the two renames, never follows it)
        data = update_document(catalog_items(catalog), version=catalog.version, id=uuid.uuid4().hex).encode()
        try:
            write_atomic(self.catalog_path, data)
        except BaseException:
            self.owed = True
            raise
        self.catalog_bytes = len(data)
        self._restart_log(_digest(data))
        self.compactions += 1

    def _restart_log(self, digest: bytes) -> None:
        record = _frame(_BASE + digest)
        try:
            write_atomic(self.log_path, record)
        except BaseException:
            self.owed = True
            raise
        self._digest = digest
        self.records = 0
        self.log_bytes = len(record)
        self.owed = False

    def _cut(self, good: int) -> None:
        """Drop a torn tail, so that the next record is not appended after garbage."""
        if self.log_path.stat().st_size > good:
            with self.log_path.open("r+b") as f:
                f.truncate(good)
                f.flush()
                if self.fsync:
                    os.fsync(f.fileno())
