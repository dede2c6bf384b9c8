"""A copy of the whole catalog kept in a few znodes, so that a Head starts in seconds on a large catalog.

The ZooKeeper store keeps one znode per element (:mod:`.zookeeper`); reading
100,000 of them back, even pipelined, costs a round of kazoo's per-request
work each (about 3.5 ms an element on the loaded shared machine: minutes).
So the store also writes, now and then, the whole catalog as one
zlib-compressed JSON list ``[[kind, key, text], ...]`` cut into chunks under
ZooKeeper's request limit, and a Head that starts reads those chunks, then
replays the log entries committed since (the log keeps the last
``keep_log`` commits)::

    /catalog/snapshot                  {"version": V, "chunks": N, "copy": "<V>-<seq>"}: the copy to read
                                       (set last, compare-and-set on its stat version)
    /catalog/snapshots/<V>-<seq>/<i:06d>  chunk i of one writer's copy at catalog version V

A copy is written after a commit once the log since the last copy holds
:data:`EVERY_CHANGES` element changes, or :data:`EVERY_COMMITS` commits:
replaying the tail costs little next to the copy; and right after a
reader had to read a catalog of :data:`EVERY_CHANGES` elements or more one
by one, so that only one start pays for that.  Each writer writes into a
folder of its own (a sequential znode ``<V>-``): two writers of the same
version do not share chunks (their element order differs: another process,
another hash seed), and a writer killed half way leaves a folder no pointer
names.  Its chunks are created first and ``/catalog/snapshot`` is pointed
at them last, by compare-and-set on the pointer's stat version, so a reader
never sees half a copy and a copy older than (or as old as) the one pointed
at is never pointed at: that writer deletes its own.  The writer that
points then deletes every other folder of its version or older.  A reader
that finds a chunk gone (deleted under it), a copy that does not decode,
or the log tail pruned reads the elements one by one, as without a copy.  The copy is written from
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
from concurrent.futures import wait as wait_futures
from dataclasses import dataclass

from kazoo.client import KazooClient
from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError, NotEmptyError

from . import znodes
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
#: Compare-and-set attempts at the pointer: each failed one means another writer pointed meanwhile.
POINT_ATTEMPTS = 5


@dataclass(frozen=True)
class Pointer:
    """What ``/catalog/snapshot`` says: the copy's catalog version, its chunk count, its folder's name."""

    version: int
    chunks: int
    name: str

    def encode(self) -> bytes:
        return json.dumps({"version": self.version, "chunks": self.chunks, "copy": self.name}).encode()

    @staticmethod
    def decode(data: bytes) -> Pointer | None:
        """None when the data is not a pointer (then no copy is read, and the next copy replaces it).

        >>> Pointer.decode(Pointer(7, 2, "7-0000000003").encode()), Pointer.decode(b'{"version": 4, "chunks": 1}')
        (Pointer(version=7, chunks=2, name='7-0000000003'), Pointer(version=4, chunks=1, name='4'))
        >>> Pointer.decode(b"garbage") is None
        True
        """
        try:
            pointer = json.loads(data)
            version = int(pointer["version"])
            return Pointer(version, int(pointer["chunks"]), str(pointer.get("copy", version)))  # (before: <V>)
        except (ValueError, TypeError, KeyError, AttributeError):
            return None


def copy_version(name: str) -> int | None:
    """The catalog version of a copy's folder ``<V>-<seq>`` (or ``<V>``, as written before); None: not a copy.

    >>> copy_version("12-0000000004"), copy_version("12"), copy_version("x")
    (12, 12, None)
    """
    try:
        return int(name.split("-", 1)[0])
    except ValueError:
        return None


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
        self._closed = False  # close() called: no copy is started any more
        self._unreadable: str | None = None  # the folder of a copy read() could not decode: to be replaced

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
        if self._closed or (self._writing is not None and not self._writing.done()):
            return
        version, elements = self._version, dict(self._elements)
        try:
            self._writing = self._writer.submit(self._write_quietly, version, elements)
        except RuntimeError:  # closed meanwhile (a commit finishing while the store closes): it succeeded all the same
            return
        self._due.written(version)
        self._failed = False

    def _write_quietly(self, version: int, elements: dict[tuple[str, str], str]) -> None:
        try:
            self.write(version, elements)
        except Exception as exc:  # the commit (or the read) succeeded; readers fall back to the elements
            self._failed = True
            log.warning("could not write a whole copy of the catalog at version %d: %r", version, exc)

    def close(self) -> None:
        """Wait for the copy being written, if any, but at most REQUEST_TIMEOUT: the store stops its client after
        this, which ends a copy still waiting on an unreachable ZooKeeper (every request in it is bounded too)."""
        self._closed = True
        self._writer.shutdown(wait=False)
        writing = self._writing
        if writing is not None and wait_futures([writing], timeout=znodes.REQUEST_TIMEOUT).not_done:
            log.warning("closing with a catalog copy still being written (ZooKeeper unreachable?): abandoned")

    def write(self, version: int, elements: dict[tuple[str, str], str]) -> None:
        """Write the copy of ``elements`` at ``version`` into a folder of its own, point readers at it, drop the
        older ones (none when a copy as new is pointed at already: another writer's, which readers keep reading)."""
        before = self._pointed()
        if before is not None and before.version >= version and before.name != self._unreadable:
            return
        chunks = encode_copy(elements)
        wait_reply(self._client.ensure_path_async(self._dir))
        path = wait_reply(self._client.create_async(f"{self._dir}/{version}-", b"", sequence=True))
        name = path.rsplit("/", 1)[1]
        try:
            for result in [self._client.create_async(f"{path}/{i:06d}", c) for i, c in enumerate(chunks)]:
                wait_reply(result)
        except BaseException:
            self._delete(name)
            raise
        # (A failure while pointing leaves the folder: the pointer may name it.  A later writer drops it.)
        if not self._point(Pointer(version, len(chunks), name)):  # a copy as new or newer is pointed at: this one is of no use
            self._delete(name)
            return
        self._drop_older(version, name)
        log.info("catalog copy at version %d written: %d elements in %d chunks (%d bytes)", version,
                 len(elements), len(chunks), sum(map(len, chunks)))

    def _point(self, pointer: Pointer) -> bool:
        """Point readers at ``pointer``'s copy unless one as new is pointed at: compare-and-set on the pointer's
        stat version, so that no writer replaces a copy it did not see (False: not pointed)."""
        for _ in range(POINT_ATTEMPTS):
            try:
                data, stat = wait_reply(self._client.get_async(self._pointer))
            except NoNodeError:
                try:
                    wait_reply(self._client.create_async(self._pointer, pointer.encode()))
                    return True
                except NodeExistsError:
                    continue
            current = Pointer.decode(data)
            if current is not None and current.version >= pointer.version and current.name != self._unreadable:
                return False
            try:
                wait_reply(self._client.set_async(self._pointer, pointer.encode(), version=stat.version))
                return True
            except BadVersionError:
                continue
        return False

    def _drop_older(self, version: int, keep: str) -> None:
        """Delete every copy folder of ``version`` or older but ``keep`` (the one pointed at): the previous copy,
        and any a writer left behind (killed half way, or pointing lost to a newer copy)."""
        try:
            names = wait_reply(self._client.get_children_async(self._dir))
        except Exception as exc:  # best effort, as _delete
            log.warning("could not list the catalog copies: %r", exc)
            return
        for name in names:
            old = copy_version(name)
            if name != keep and old is not None and old <= version:
                self._delete(name)

    def read(self) -> tuple[int, dict[tuple[str, str], str]] | None:
        """The last copy: its version and elements; None when there is none, it was deleted meanwhile, or it
        does not decode (then the next copy written replaces it, even at the same version)."""
        pointed = self._pointed()
        if pointed is None:
            return None
        pending = [self._client.get_async(f"{self._dir}/{pointed.name}/{i:06d}") for i in range(pointed.chunks)]
        chunks = []
        for result in pending:
            try:
                chunks.append(wait_reply(result)[0])
            except NoNodeError:  # deleted under us; or (the pointer unchanged) never there: replace it then
                if self._pointed() == pointed:
                    self._unreadable = pointed.name
                return None
        try:
            return pointed.version, decode_copy(chunks)
        except (zlib.error, ValueError, TypeError) as exc:  # (json's and msgspec's decode errors are ValueErrors)
            self._unreadable = pointed.name
            log.warning("the catalog copy %s (version %d) does not decode (%r): reading the elements one by one",
                        pointed.name, pointed.version, exc)
            return None

    def _pointed(self) -> Pointer | None:
        try:
            data, _ = wait_reply(self._client.get_async(self._pointer))
        except NoNodeError:
            return None
        return Pointer.decode(data)

    def _delete(self, name: str) -> None:
        """Best effort: a copy left behind is only space (and the next writer's _drop_older deletes it).  Every
        request bounded in time (wait_reply), so that an unreachable ZooKeeper cannot hold the writer forever."""
        path = f"{self._dir}/{name}"
        try:
            try:
                children = wait_reply(self._client.get_children_async(path))
            except NoNodeError:
                return
            for result in [self._client.delete_async(f"{path}/{c}") for c in children]:
                try:
                    wait_reply(result)
                except NoNodeError:
                    pass
            wait_reply(self._client.delete_async(path))
        except (NoNodeError, NotEmptyError):
            pass  # another writer deleted it, or wrote in it meanwhile
        except Exception as exc:  # never fail the commit that succeeded for this
            log.warning("could not delete the catalog copy %s: %r", name, exc)
