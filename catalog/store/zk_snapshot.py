"""A copy of the whole catalog kept in a few znodes, so that a Head starts in seconds on a large catalog.

The ZooKeeper store keeps one znode per element (:mod:`.zookeeper`); reading
100,000 of them back, even pipelined, costs a round of kazoo's per-request
work each (about 3.5 ms an element on the loaded shared machine: minutes).
So the store also writes, now and then, the whole catalog as one
zlib-compressed JSON list ``[[kind, key, text], ...]`` cut into chunks under
ZooKeeper's request limit, and a Head that starts reads those chunks, then
replays the log entries committed since (the log keeps the last
``keep_log`` commits)::

    /catalog/snapshot                  {"version": V, "chunks": N}: the copy to read (set last)
    /catalog/snapshots/<V>/<i:06d>     chunk i of the copy at catalog version V

A copy is written after a commit once the log since the last copy holds
:data:`EVERY_CHANGES` element changes, or :data:`EVERY_COMMITS` commits:
replaying the tail costs little next to the copy; and right after a
reader had to read a catalog of :data:`EVERY_CHANGES` elements or more one
by one, so that only one start pays for that.  A copy older than the one
pointed at is never pointed at.  Its chunks are created
first and ``/catalog/snapshot`` is pointed at them last, so a reader never
sees half a copy; the previous copy's chunks are deleted afterwards.  A
reader that finds a chunk gone (deleted under it) or the log tail pruned
reads the elements one by one, as without a copy.  The copy is written from
the elements the store instance already holds (read at start, kept up to
date by its own commits), so writing it reads nothing back, and on a thread
of its own: the commit that made it due does not wait for it (at 100,000
boxes, 0.3 s of CPU encoding 25 MB of element text into 2.3 MB).

:class:`WholeCopies` is the one owner of that state (the kept elements, how
far the log has run since the last copy); the store tells it what it read
and what it committed.

Usage (the store does this; shown for the shape)::

    copies = WholeCopies(client, "/chroot/catalog")
    read = copies.read()                        # (copy version, elements) or None
    copies.kept(version, elements, copy)        # after a snapshot: copy is the version of the copy read
    copies.committed(base_version, changes)     # after each commit: writes a copy when one is due
"""

from __future__ import annotations

import json
import logging
import zlib
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass

from kazoo.client import KazooClient
from kazoo.exceptions import NodeExistsError, NoNodeError

from .base import Change, Commit
from .znodes import wait_reply

log = logging.getLogger(__name__)

#: A copy is due when the log since the last one holds this many element changes, or this many commits.
EVERY_CHANGES, EVERY_COMMITS = 5_000, 1_000
#: Elements JSON-encoded at a time when a copy is written: ``json.dumps`` holds the interpreter until it returns,
#: and the whole 100,000 at once held it for about 0.2 s, stalling the Head's event loop; a piece takes milliseconds.
PIECE = 2_000
#: Bytes of compressed copy per chunk: under ZooKeeper's default request limit (jute.maxbuffer, 1 MiB).
CHUNK_BYTES = 900_000


@dataclass
class CopyDue:
    """How far the log has run since the last copy (this store's own commits and what it read)."""

    version: int = 0  # the copy's catalog version (0: none known)
    changes: int = 0
    commits: int = 0

    def note(self, changes: int) -> None:
        self.changes += changes
        self.commits += 1

    def due(self) -> bool:
        return self.changes >= EVERY_CHANGES or self.commits >= EVERY_COMMITS

    def written(self, version: int) -> None:
        self.version, self.changes, self.commits = version, 0, 0


def replay(elements: dict[tuple[str, str], str], commits: Sequence[Commit], version: int) -> int:
    """Apply ``commits`` (log entries, in order) to ``elements`` in place; the version reached.

    >>> elements = {("box", "a"): "<a/>"}
    >>> replay(elements, [Commit(8, (Change("box", "a", None), Change("box", "b", "<b/>")))], 7), elements
    (8, {('box', 'b'): '<b/>'})
    """
    for commit in commits:
        for c in commit.changes:
            if c.text is None:
                elements.pop((c.kind, c.key), None)
            else:
                elements[(c.kind, c.key)] = c.text
        version = commit.version
    return version


def encode_copy(elements: dict[tuple[str, str], str]) -> list[bytes]:
    """The elements as compressed JSON, cut into chunks of at most :data:`CHUNK_BYTES`.

    >>> chunks = encode_copy({("box", "b1"): "<box/>"})
    >>> decode_copy(chunks)
    {('box', 'b1'): '<box/>'}
    >>> many = {("box", f"b{n}"): f'<box name="b{n}"/>' for n in range(2 * PIECE + 1)}
    >>> decode_copy(encode_copy(many)) == many, decode_copy(encode_copy({}))
    (True, {})
    """
    compressor = zlib.compressobj(1)
    items = [[k, key, text] for (k, key), text in elements.items()]
    parts = [compressor.compress(b"[")]
    for start in range(0, len(items), PIECE):  # (one list, encoded in pieces: see PIECE)
        piece = json.dumps(items[start:start + PIECE], separators=(",", ":"))[1:-1]
        parts.append(compressor.compress(("," if start else "").encode() + piece.encode("utf-8")))
    parts += [compressor.compress(b"]"), compressor.flush()]
    data = b"".join(parts)
    return [data[i:i + CHUNK_BYTES] for i in range(0, len(data), CHUNK_BYTES)] or [b""]


def decode_copy(chunks: list[bytes]) -> dict[tuple[str, str], str]:
    return {(k, key): text for k, key, text in json.loads(zlib.decompress(b"".join(chunks)))}


class WholeCopies:
    """Writes and reads the catalog's whole copies under ``root`` (``<chroot>/catalog``), from the elements
    it keeps as of one version (None: unknown, e.g. another writer committed in between)."""

    def __init__(self, client: KazooClient, root: str):
        self._client = client
        self._pointer = root + "/snapshot"
        self._dir = root + "/snapshots"
        self._elements: dict[tuple[str, str], str] | None = None
        self._version = -1
        self._due = CopyDue()
        # Copies are written on this one thread, off the commit that made one due (encoding 100,000
        # elements is about 0.3 s of CPU); close() waits for the one under way.
        self._writer = ThreadPoolExecutor(1, thread_name_prefix="zk-catalog-copy")
        self._writing: Future[None] | None = None
        self._failed = False  # the last copy could not be written: try again after the next commit

    def kept(self, version: int, elements: dict[tuple[str, str], str], copy: int | None,
             changes: int = 0, commits: int = 0) -> None:
        """A snapshot read ``elements`` at ``version``: from the copy at version ``copy`` and ``commits``
        log entries of ``changes`` element changes, or element by element (``copy`` None: a copy is due
        after the next commit if the catalog is big)."""
        self._elements, self._version = dict(elements), version
        self._due = CopyDue(copy or 0, len(elements) if copy is None else changes, commits)
        if copy is None and self._due.due():
            # Read one by one (no copy, or the log since it pruned): at 100,000 elements that is most of a
            # Head's start.  Written now, the next reader (the next Head's start) reads a few znodes instead,
            # even if nothing is ever committed through this store (a catalog built by another tool).
            self._write_due()

    def forget(self) -> None:
        self._elements = None

    def committed(self, base_version: int, changes: Sequence[Change]) -> None:
        """This store committed ``changes`` on ``base_version``: keep up, and write a copy when one is due.

        Best effort, and off the commit (:meth:`_write_due`): a copy that cannot be written is tried again
        after the next commit.
        """
        if self._elements is None or self._version != base_version:
            self._elements = None
            return
        self._version = replay(self._elements, [Commit(base_version + 1, tuple(changes))], base_version)
        self._due.note(len(changes))
        if self._due.due() or self._failed:
            self._write_due()

    def _write_due(self) -> None:
        """Write the copy of the elements kept, on the writer thread (the commit or the read returns at once;
        the elements as of now are copied for it: a dict copy, milliseconds).  One copy at a time: while one
        is written, the next commit tries again."""
        assert self._elements is not None
        if self._writing is not None and not self._writing.done():
            return
        version, elements = self._version, dict(self._elements)
        self._due.written(version)
        self._failed = False
        self._writing = self._writer.submit(self._write_quietly, version, elements)

    def _write_quietly(self, version: int, elements: dict[tuple[str, str], str]) -> None:
        try:
            self.write(version, elements)
        except Exception as exc:  # the commit (or the read) succeeded; readers fall back to the elements
            self._failed = True
            log.warning("could not write a whole copy of the catalog at version %d: %r", version, exc)

    def close(self) -> None:
        """Wait for the copy being written, if any (the store closes its client after this)."""
        self._writer.shutdown(wait=True)

    def write(self, version: int, elements: dict[tuple[str, str], str]) -> None:
        """Write the copy of ``elements`` at ``version``, point readers at it, drop the one before (none when a
        newer copy is there already: another writer's, which readers should keep reading)."""
        before = self._pointed()
        if before is not None and before[0] >= version:
            return
        chunks = encode_copy(elements)
        base = f"{self._dir}/{version}"
        self._client.ensure_path(base)
        pending = [self._client.create_async(f"{base}/{i:06d}", chunk) for i, chunk in enumerate(chunks)]
        for result in pending:
            try:
                wait_reply(result)
            except NodeExistsError:  # a copy of this version written before (the same elements)
                pass
        before = self._pointed()  # (again: another writer may have pointed at a newer copy meanwhile)
        if before is not None and before[0] > version:
            self._delete(version)
            return
        pointer = json.dumps({"version": version, "chunks": len(chunks)}).encode()
        try:
            wait_reply(self._client.create_async(self._pointer, pointer))
        except NodeExistsError:
            wait_reply(self._client.set_async(self._pointer, pointer))
        if before is not None and before[0] != version:
            self._delete(before[0])
        log.info("catalog copy at version %d written: %d elements in %d chunks (%d bytes)", version,
                 len(elements), len(chunks), sum(map(len, chunks)))

    def read(self) -> tuple[int, dict[tuple[str, str], str]] | None:
        """The last copy: its version and elements; None when there is none or it was deleted meanwhile."""
        pointed = self._pointed()
        if pointed is None:
            return None
        version, count = pointed
        pending = [self._client.get_async(f"{self._dir}/{version}/{i:06d}") for i in range(count)]
        chunks = []
        for result in pending:
            try:
                chunks.append(wait_reply(result)[0])
            except NoNodeError:
                return None
        return version, decode_copy(chunks)

    def _pointed(self) -> tuple[int, int] | None:
        try:
            data, _ = wait_reply(self._client.get_async(self._pointer))
        except NoNodeError:
            return None
        pointer = json.loads(data)
        return int(pointer["version"]), int(pointer["chunks"])

    def _delete(self, version: int) -> None:
        """Best effort: a copy left behind is only space."""
        try:
            self._client.delete(f"{self._dir}/{version}", recursive=True)
        except Exception as exc:  # never fail the commit that succeeded for this
            log.warning("could not delete the catalog copy at version %d: %r", version, exc)
