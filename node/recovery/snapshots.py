"""A node's snapshots in one directory: written atomically, verified when read back.

Why: recovery restarts from the newest snapshot and replays the input log after
it, so a snapshot must be either complete or absent -- never half-written -- and
one the disk has damaged must be noticed and skipped (falling back to an older
snapshot and a longer replay) rather than loaded as state.  Each file is
``snap-<id, 12 digits>.bin``: an 8-byte magic ``BOREASS1``, the payload length
(8 bytes, big-endian), the payload's CRC32 (4 bytes) and the payload.  A write
goes to a temp file first (:func:`write_atomic`), so a crash mid-write leaves
only a temp file, which listings ignore and the next store construction removes.

>>> import tempfile
>>> with tempfile.TemporaryDirectory() as d:
...     store = SnapshotStore.from_url(Path(d).as_uri())
...     _ = store.write(7, b"state up to log position 42")
...     store.ids(), store.latest_valid()
([7], (7, b'state up to log position 42'))
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import struct
import tempfile
import zlib
from collections.abc import Iterable
from pathlib import Path
from urllib.parse import unquote, urlsplit

logger = logging.getLogger(__name__)

MAGIC = b"BOREASS1"
_HEADER = struct.Struct(">8sQI")  # magic, payload length, CRC32 of the payload
_NAME = re.compile(r"^snap-(\d{12})\.bin$")
_MAX_ID = 10**12 - 1
_URL_FORMS = "file:///absolute/directory or a plain directory path"


def fsync_directory(directory: Path) -> None:
    """Make a directory's entries (a rename, a new or deleted file) durable, not just the files' bytes."""
    fd = os.open(directory, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_atomic(path: Path, data: bytes) -> None:
    """Replace ``path`` with ``data`` so that after a crash it holds either the old or the new bytes.

    The data goes to a temp file in the same directory (so the rename cannot
    cross file systems), is fsynced, renamed over ``path``, and the directory
    is fsynced so the rename itself survives a power loss.
    """
    _write_atomic_parts(Path(path), (data,))


def _write_atomic_parts(path: Path, parts: Iterable[bytes]) -> None:
    # Parts, so a large snapshot is not copied just to put a header in front of it.
    fd, temp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            for part in parts:
                f.write(part)
            f.flush()
            os.fsync(f.fileno())
        os.replace(temp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp)
        raise
    fsync_directory(path.parent)


class CorruptSnapshot(ValueError):
    """A snapshot file that does not read back as it was written (the message names the file and why)."""

    def __init__(self, path: Path, reason: str) -> None:
        super().__init__(f"{path}: {reason}")
        self.path = path
        self.reason = reason


class SnapshotStore:
    """The snapshots of one node, in one directory it owns.

    ``url`` is the directory as a ``file:`` URL (what :meth:`from_url` accepts),
    whichever form the store was created from.  Not safe for two processes
    writing the same directory at once: construction removes temp files it
    takes for leftovers of a crashed write.
    """

    def __init__(self, directory: Path) -> None:
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.url = self.directory.absolute().as_uri()
        for stale in self.directory.glob(".snap-*.tmp"):
            logger.info("removing %s, left by a snapshot write that did not finish", stale)
            stale.unlink(missing_ok=True)

    @classmethod
    def from_url(cls, url: str) -> SnapshotStore:
        """A store for ``file:///absolute/dir`` (``file:/absolute/dir`` too) or a plain path.

        Anything else -- another scheme, a host in a ``file:`` URL, a relative
        ``file:`` path, a query or fragment -- is a ValueError naming the URL,
        so a typo in configuration fails at start-up rather than writing
        snapshots somewhere unexpected.
        """
        parts = urlsplit(url)
        if url and not parts.scheme:
            return cls(Path(url))
        if (parts.scheme == "file" and parts.netloc in ("", "localhost") and parts.path.startswith("/")
                and not parts.query and not parts.fragment):
            return cls(Path(unquote(parts.path)))
        raise ValueError(f"unsupported snapshot store URL {url!r}: use {_URL_FORMS}")

    def __repr__(self) -> str:
        return f"SnapshotStore({self.url!r})"

    def path(self, snapshot_id: int) -> Path:
        """The file snapshot ``snapshot_id`` lives in."""
        if not 0 <= snapshot_id <= _MAX_ID:
            raise ValueError(f"snapshot id {snapshot_id} is outside 0..{_MAX_ID}")
        return self.directory / f"snap-{snapshot_id:012d}.bin"

    def write(self, snapshot_id: int, data: bytes) -> Path:
        """Store ``data`` as snapshot ``snapshot_id`` (replacing any with that id), atomically and durably."""
        path = self.path(snapshot_id)
        _write_atomic_parts(path, (_HEADER.pack(MAGIC, len(data), zlib.crc32(data)), data))
        logger.debug("wrote snapshot %d (%d bytes) to %s", snapshot_id, len(data), path)
        return path

    def read(self, snapshot_id: int) -> bytes:
        """The payload of snapshot ``snapshot_id``; CorruptSnapshot if the file is not intact."""
        path = self.path(snapshot_id)
        with path.open("rb") as f:
            header = f.read(_HEADER.size)
            if len(header) < _HEADER.size:
                raise CorruptSnapshot(path, f"truncated header ({len(header)} of {_HEADER.size} bytes)")
            magic, length, crc = _HEADER.unpack(header)
            if magic != MAGIC:
                raise CorruptSnapshot(path, f"bad magic {magic!r} (expected {MAGIC!r})")
            held = os.fstat(f.fileno()).st_size - _HEADER.size
            if length != held:
                raise CorruptSnapshot(path, f"header gives {length} payload bytes but the file holds {held}")
            data = f.read(length)
        if zlib.crc32(data) != crc:
            raise CorruptSnapshot(path, f"CRC32 mismatch (stored {crc:#010x}, computed {zlib.crc32(data):#010x})")
        return data

    def ids(self) -> list[int]:
        """Ids of the complete snapshot files, oldest first (temp and ``.corrupt`` files are not snapshots)."""
        return sorted(int(m[1]) for p in self.directory.iterdir() if (m := _NAME.match(p.name)))

    def latest_valid(self, at_most: int | None = None) -> tuple[int, bytes] | None:
        """``(id, payload)`` of the newest intact snapshot (with id <= ``at_most`` if given), or None.

        A corrupt snapshot is logged, renamed to ``*.corrupt`` (kept for
        inspection, never considered again) and skipped in favour of older ones.
        """
        for snapshot_id in reversed(self.ids()):
            if at_most is not None and snapshot_id > at_most:
                continue
            try:
                return snapshot_id, self.read(snapshot_id)
            except FileNotFoundError:
                continue  # deleted since we listed the directory
            except CorruptSnapshot as exc:
                quarantine = exc.path.with_name(exc.path.name + ".corrupt")
                logger.warning("skipping corrupt snapshot %d: %s; moved to %s", snapshot_id, exc, quarantine)
                os.replace(exc.path, quarantine)
        return None

    def delete_before(self, snapshot_id: int) -> int:
        """Delete the snapshots with an id below ``snapshot_id``; return how many were deleted."""
        doomed = [i for i in self.ids() if i < snapshot_id]
        for old in doomed:
            self.path(old).unlink(missing_ok=True)
        if doomed:
            fsync_directory(self.directory)
            logger.info("deleted %d snapshots older than %d in %s", len(doomed), snapshot_id, self.directory)
        return len(doomed)
