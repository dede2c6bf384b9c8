"""The input log: a segmented, append-only, checksummed record of a node's inputs, group-committed.

Why: after a crash a node rebuilds its state from its latest snapshot plus
the inputs that came after it, so an input must be on disk before anything
derived from it is acknowledged.  An fsync per input would cap throughput at
the disk's fsync rate; group commit spreads one write + fsync over every
record appended meanwhile, and runs it in a worker thread so the event loop
keeps serving.  Each record carries its length and CRC32, so a write torn by
a crash is found and cut on :meth:`InputLog.open` instead of being replayed.

Positions are record indexes, from 0 over the log's whole life: they survive
restarts and truncation (a ``start`` file keeps the first retained position,
so they never go backwards even when every segment has been deleted).
Segment files are ``<position of their first record, 20 digits>.log``; a
record is its payload length (4 bytes, big-endian), CRC32 (4 bytes), payload
(the format is :mod:`.log_format`).

>>> import asyncio, tempfile
>>> async def demo(directory):
...     log = InputLog(directory)
...     log.open()
...     await log.start()
...     position = log.append(b"hello")
...     await log.durable(position)      # on disk: now it may be acknowledged
...     await log.close()
...     return list(log.read())
>>> with tempfile.TemporaryDirectory() as d:
...     asyncio.run(demo(Path(d)))
[(0, b'hello')]
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import itertools
import logging
import os
import time
import zlib
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

from .log_format import (  # MAX_PAYLOAD: re-exported
    MAX_PAYLOAD,
    RECORD,
    SEGMENT_NAME,
    START_FILE,
    BadRecord,
    Segment,
    read_records,
)
from .snapshots import fsync_directory, write_atomic

logger = logging.getLogger(__name__)


class LogFailed(RuntimeError):
    """A write to the log failed: what was not durable by then never will be; the node must stop and recover."""


class CorruptLog(ValueError):
    """Records that were durable no longer read back intact, or the ``start`` file is unreadable."""


class InputLog:
    """An input log in ``directory`` (one owner process); see the module docstring.

    Lifecycle: :meth:`open` (validates, repairs a torn tail), :meth:`read` to
    replay, :meth:`start`, then :meth:`append` / :meth:`durable` /
    :meth:`flush` from the event loop thread, and :meth:`close`.  New records
    always go to a new segment after open, so a repaired file is never written again.
    """

    def __init__(self, directory: Path, *, flush_every: int = 256, flush_ms: float = 2.0,
                 segment_bytes: int = 64 * 1024 * 1024, fsync: bool = True) -> None:
        if flush_every < 1 or flush_ms < 0 or segment_bytes < 1:
            raise ValueError("flush_every and segment_bytes must be positive and flush_ms not negative")
        self.directory = Path(directory)
        self.counters: Counter[str] = Counter()
        self._flush_every, self._flush_s = flush_every, flush_ms / 1000
        self._segment_bytes, self._fsync = segment_bytes, fsync
        self._segments: list[Segment] = []
        self._current: Segment | None = None  # where the next group goes; None: a new segment
        self._roll_requested = False  # close the segment after the next group (a snapshot marker)
        self._file: BinaryIO | None = None  # the current segment, opened by the first write to it
        self._first = self._durable = self._next = 0
        self._pending, self._pending_count, self._pending_since = bytearray(), 0, 0.0
        self._opened = self._force = self._closing = self._closed = False
        self._wake = asyncio.Event()
        self._waiters: list[tuple[int, int, asyncio.Future[None]]] = []  # heap by position
        self._tiebreak = itertools.count()
        self._task: asyncio.Task[None] | None = None
        self._failure: BaseException | None = None

    @property
    def first_position(self) -> int:
        """The first position still in the log (everything before it was truncated)."""
        return self._first

    @property
    def next_position(self) -> int:
        """The position the next :meth:`append` returns."""
        return self._next

    @property
    def durable_position(self) -> int:
        """Every position below this one is written and fsynced."""
        return self._durable

    def size_bytes(self) -> int:
        """Bytes of durable records in the retained segments."""
        return sum(segment.size for segment in self._segments)

    # -- open and repair ------------------------------------------------------------

    def open(self) -> None:
        """Validate every segment, cut a torn or corrupt tail, and set the next position."""
        if self._opened:
            raise RuntimeError(f"input log {self.directory} is already open")
        self.directory.mkdir(parents=True, exist_ok=True)
        for stale in self.directory.glob(f".{START_FILE}.*.tmp"):
            stale.unlink(missing_ok=True)
        start = self._read_start()
        named = sorted((int(m[1]), p) for p in self.directory.iterdir() if (m := SEGMENT_NAME.match(p.name)))
        kept: list[Segment] = []
        ended = False  # past a bad record or a gap in positions: everything from there on goes
        for first, path in named:
            if not ended and kept and first != kept[-1].end:
                logger.warning("%s: the log ends at %d, before this segment", path, kept[-1].end)
                ended = True
            size = path.stat().st_size
            segment = Segment(first, path) if ended else self._repair(first, path)
            if segment.size < size:
                self._cut(path, segment.size, size)
                ended = True
            kept.append(segment)
        # Segments wholly before `start` are left by a truncation a crash interrupted; empty ones hold
        # nothing (and would clash with the name of the next new segment).
        for segment in [s for s in kept if s.end <= start or s.count == 0]:
            segment.path.unlink(missing_ok=True)
            kept.remove(segment)
        if named and self._fsync:
            fsync_directory(self.directory)
        self._segments = kept
        self._first = kept[0].first if kept else start
        self._durable = self._next = kept[-1].end if kept else start
        if self._first != start or not (self.directory / START_FILE).exists():
            write_atomic(self.directory / START_FILE, b"%d\n" % self._first)
        self._opened = True
        logger.info("opened input log %s: positions %d..%d in %d segments",
                    self.directory, self._first, self._next, len(kept))

    def _read_start(self) -> int:
        path = self.directory / START_FILE
        try:
            text = path.read_text()
        except FileNotFoundError:
            return 0
        if not text.strip().isdigit():
            raise CorruptLog(f"{path}: expected a position, found {text[:40]!r}")
        return int(text)

    @staticmethod
    def _repair(first: int, path: Path) -> Segment:
        """The segment's valid prefix (the file is left as it is)."""
        segment = Segment(first, path)
        with path.open("rb") as f:
            try:
                for segment.size, _ in read_records(f, path.stat().st_size):
                    segment.count += 1
            except BadRecord as bad:
                logger.warning("%s: %s at byte %d (position %d)", path, bad.reason, bad.offset, segment.end)
        return segment

    def _cut(self, path: Path, keep: int, size: int) -> None:
        """Cut a torn or corrupt tail: truncate the file to its first ``keep`` bytes (of ``size``)."""
        logger.warning("%s: cutting %d bytes of torn or corrupt tail (keeping %d)", path, size - keep, keep)
        self.counters["torn_tail_cut"] += size - keep
        if not keep:
            path.unlink()
            return
        with path.open("r+b") as f:
            f.truncate(keep)
            if self._fsync:
                os.fsync(f.fileno())

    # -- appending ------------------------------------------------------------------

    def append(self, payload: bytes) -> int:
        """Buffer a record and return its position; it is durable once :meth:`durable` says so."""
        self._check_writable()
        if len(payload) > MAX_PAYLOAD:
            raise ValueError(f"a log record holds at most {MAX_PAYLOAD} bytes, not {len(payload)}")
        if not self._pending_count:
            self._pending_since = time.monotonic()
        self._pending += RECORD.pack(len(payload), zlib.crc32(payload))
        self._pending += payload
        self._pending_count += 1
        self.counters["appends"] += 1
        if self._pending_count == 1 or self._pending_count >= self._flush_every:
            self._wake.set()  # start the timer, or a full group: write now
        position, self._next = self._next, self._next + 1
        return position

    async def durable(self, position: int) -> None:
        """Return once ``position`` (and everything before it) is on disk; LogFailed if it never will be."""
        if position < self._durable:
            return
        self._check_failed()
        if position >= self._next:
            raise ValueError(f"position {position} has not been appended (next is {self._next})")
        if self._task is None or self._task.done():
            raise RuntimeError(f"input log {self.directory}: the writer is not running (call start())")
        future = asyncio.get_running_loop().create_future()
        heapq.heappush(self._waiters, (position, next(self._tiebreak), future))
        await future

    def roll(self) -> None:
        """End the current segment with the group being gathered now.

        Called after a snapshot marker is appended, so that once the snapshot
        is complete the log before it goes as whole segments (a segment is the
        unit of truncation).
        """
        self._roll_requested = True

    async def flush(self) -> None:
        """Write and fsync everything appended so far, without waiting for the group to fill."""
        if self._durable < self._next:
            self._force = self._pending_count > 0
            self._wake.set()
            await self.durable(self._next - 1)

    async def start(self) -> None:
        """Start the writer task (opening the log first if needed)."""
        if not self._opened:
            self.open()
        if self._task is not None:
            raise RuntimeError(f"input log {self.directory} is already started")
        self._task = asyncio.get_running_loop().create_task(self._run(), name=f"input log {self.directory}")

    async def close(self) -> None:
        """Flush everything appended, stop the writer; LogFailed if the log failed."""
        if self._closed:
            return
        self._closing = True
        if self._task is None and self._pending_count and self._failure is None:
            await self.start()
        if self._task is not None:
            self._wake.set()
            await asyncio.wait([self._task])  # never raises: the task reports failures itself
        self._closed = True
        if self._file is not None:
            self._file.close()
            self._file = None
        self._check_failed()

    def _check_failed(self) -> None:
        if self._failure is not None:
            raise LogFailed(f"input log {self.directory} failed: {self._failure!r}") from self._failure

    def _check_writable(self) -> None:
        self._check_failed()
        if not self._opened or self._closing:
            raise RuntimeError(f"input log {self.directory} is {'closed' if self._closing else 'not open'}")

    # -- the writer -------------------------------------------------------------------

    async def _run(self) -> None:
        try:
            while True:
                if not self._pending_count:
                    if self._closing:
                        return
                    self._wake.clear()
                    await self._wake.wait()
                    continue
                if not (self._force or self._closing or self._pending_count >= self._flush_every):
                    delay = self._pending_since + self._flush_s - time.monotonic()
                    if delay > 0:
                        self._wake.clear()
                        with contextlib.suppress(TimeoutError):  # (not wait_for: it can lose a cancel)
                            async with asyncio.timeout(delay):
                                await self._wake.wait()
                        continue
                await self._write_pending()
        except asyncio.CancelledError as exc:  # not via close(): whatever is pending is lost
            self._fail(exc)
            raise
        except Exception as exc:  # OSError from the disk, or a bug: either way the log cannot go on
            self._fail(exc)

    async def _write_pending(self) -> None:
        data, count = self._pending, self._pending_count
        self._pending, self._pending_count, self._force = bytearray(), 0, False  # later appends: next group
        segment = self._current
        if segment is None:
            segment = self._current = Segment(self._durable, self.directory / f"{self._durable:020d}.log")
            self._segments.append(segment)
        await asyncio.to_thread(self._write_group, segment.path, data)
        segment.count += count
        segment.size += len(data)
        self._durable += count
        self.counters["flushes"] += 1
        self.counters["bytes"] += len(data)
        if segment.size >= self._segment_bytes or self._roll_requested:  # roll: the next group starts anew
            self._roll_requested = False
            if self._file is not None:
                self._file.close()
            self._file, self._current = None, None
        while self._waiters and self._waiters[0][0] < self._durable:
            future = heapq.heappop(self._waiters)[2]
            if not future.done():
                future.set_result(None)

    def _write_group(self, path: Path, data: bytes | bytearray) -> None:
        """Write and fsync one group (in a worker thread; the loop touches the file only between writes)."""
        if self._file is None:
            self._file = open(path, "xb")  # noqa: SIM115 -- kept open across groups, closed on roll/close
            if self._fsync:
                fsync_directory(self.directory)
        self._file.write(data)
        self._file.flush()
        if self._fsync:
            os.fsync(self._file.fileno())

    def _fail(self, exc: BaseException) -> None:
        self._failure = exc
        at_stake = self._durable < self._next or not isinstance(exc, asyncio.CancelledError)
        logger.log(logging.ERROR if at_stake else logging.DEBUG, "input log %s failed; positions from %d on "
                   "are not durable: %r", self.directory, self._durable, exc, exc_info=at_stake)
        if self._file is not None:
            with contextlib.suppress(OSError):
                self._file.close()
            self._file = None
        for _, _, future in self._waiters:
            if not future.done():
                failed = LogFailed(f"input log {self.directory} failed: {exc!r}")
                failed.__cause__ = exc
                future.set_exception(failed)
        self._waiters.clear()

    # -- reading and truncation ----------------------------------------------------------

    def read(self, start: int = 0) -> Iterator[tuple[int, bytes]]:
        """Yield ``(position, payload)`` for the durable records at ``start`` or later, in order."""
        for segment in list(self._segments):
            count, size = segment.count, segment.size  # what is durable now
            if segment.first + count <= start:
                continue
            with segment.path.open("rb") as f:
                records = read_records(f, size)
                try:
                    for position, (_, payload) in zip(range(segment.first, segment.first + count), records):
                        if position >= start:
                            self.counters["records_replayed"] += 1
                            yield position, payload
                except BadRecord as bad:
                    raise CorruptLog(f"{segment.path}: {bad.reason} at durable byte {bad.offset}") from None

    def truncate_before(self, position: int) -> int:
        """Delete the segments whose records are all below ``position``; return how many.

        Never deletes the segment being written.  The new first position is
        persisted first, so a crash midway leaves segments that :meth:`open`
        recognises as already truncated.  Blocking I/O: call it now and then.
        """
        doomed: list[Segment] = []
        for segment in self._segments:
            if segment is self._current or segment.end > position:
                break
            doomed.append(segment)
        if not doomed:
            return 0
        rest = self._segments[len(doomed):]
        first = rest[0].first if rest else self._durable
        write_atomic(self.directory / START_FILE, b"%d\n" % first)
        for segment in doomed:
            segment.path.unlink(missing_ok=True)
        if self._fsync:
            fsync_directory(self.directory)
        self._segments, self._first = rest, first
        self.counters["segments_deleted"] += len(doomed)
        logger.info("input log %s: deleted %d segments before position %d", self.directory, len(doomed), first)
        return len(doomed)
