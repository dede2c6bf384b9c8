"""The catalog store's commits, applied to the catalog the Head holds, one version after another.

Every commit reaches the Head through the store's watch (its own commits it
also hands over at once, :meth:`CommitFollower.committed`, so as not to wait
for the watch thread); each is applied in version order, and what the Head
makes of the new catalog (slices, node syncs, global feeds, the UI) is the
``advance`` callback's business.  A commit that arrives ahead of its
predecessors (ours overtook someone else's on the watch) has the gap filled
from the store's log; only if the log cannot fill it is the whole catalog
read again, which is counted (``full_reads``: it should be rare).

One :class:`CommitFollower` per Head owns the queue of commits, the store's
watch and that count; the Head's supervisor runs :meth:`~CommitFollower.run`.

Usage::

    follower = CommitFollower(lambda: head.catalog, head.advance)
    catalog = await follower.start(store)            # read whole once, then watched from its version
    tasks.spawn("commits", follower.run)
    follower.committed(commit)                       # a commit this Head just made
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Iterator
from typing import Any

from boreas.catalog.elements import adopt_commit, apply_commit, commit_touched
from boreas.catalog.model import Catalog
from boreas.catalog.store import CatalogStore, Commit
from boreas.catalog.saved_boxes import read_catalog_at_start
from boreas.catalog.submission import commits_after, read_catalog

from .bulk import bulk_step

log = logging.getLogger(__name__)

#: The longest the follower waits for this Head's own write of a commit to end before it applies a commit that
#: came by the watch first (:meth:`CommitFollower.writing`): past it, the commit is decoded, which is as exact.
WRITE_WAIT = 1.0

#: What the Head does with a new catalog: ``advance(before, after, touched)`` (touched: None when read whole).
Advance = Callable[[Catalog, Catalog, "dict[str, set[str]] | None"], None]


class CommitFollower:
    """Applies the store's commits to the catalog ``current()`` returns, in order, handing each to ``advance``."""

    def __init__(self, current: Callable[[], Catalog], advance: Advance):
        self._current = current
        self._advance = advance
        self.store: CatalogStore | None = None
        self.full_reads = 0  # whole-catalog reads from the store: one at start, then only for a gap
        self.saved_boxes = 0  # boxes the start took from the saved blob (catalog/saved_boxes.py), not their XML
        self._queue: asyncio.Queue[Commit] = asyncio.Queue()
        self._watch: Any = None
        self._planned: dict[int, tuple[Catalog, Catalog]] = {}  # version -> (diffed from, diffed to)
        self._writes = 0  # this Head's commits being written now (:meth:`writing`)
        self._written = asyncio.Event()  # set while none is
        self._written.set()

    def read_full(self) -> Catalog:
        """Read the whole catalog from the store (on a worker thread); counted, since it should be rare."""
        assert self.store is not None
        self.full_reads += 1
        return read_catalog(self.store)

    async def start(self, store: CatalogStore) -> Catalog:
        """Read the catalog from ``store`` and watch it from that version on; the catalog read."""
        self.store = store
        self.full_reads += 1
        # (its boxes from the blob saved with the index for this version, when there is one: decoded in bulk)
        catalog, self.saved_boxes = await asyncio.to_thread(read_catalog_at_start, store)
        loop = asyncio.get_running_loop()
        self._watch = await asyncio.to_thread(
            store.watch, catalog.version, lambda commit: loop.call_soon_threadsafe(self._queue.put_nowait, commit))
        return catalog

    def committed(self, commit: Commit, planned: tuple[Catalog, Catalog] | None = None) -> None:
        """A commit this Head made: applied without waiting for the watch (it comes again, and is skipped).

        ``planned``: the catalog the commit was diffed from and the one it was diffed to (a submission's
        plan); when the first is still the catalog held as the commit comes to be applied, the commit's
        boxes are taken from the second rather than decoded again (catalog/elements.py ``adopt_commit``)."""
        if planned is not None:
            self._planned[commit.version] = planned
        self._queue.put_nowait(commit)

    @contextlib.contextmanager
    def writing(self) -> Iterator[None]:
        """Around this Head's own write of a planned commit.  The store's watch may bring the commit before the
        writer, back from its thread, says it planned it (:meth:`committed`); a commit that comes meanwhile waits
        (up to :data:`WRITE_WAIT`), so the plan is adopted rather than the commit decoded again."""
        self._writes += 1
        self._written.clear()
        try:
            yield
        finally:
            self._writes -= 1
            if not self._writes:
                self._written.set()

    async def run(self) -> None:
        """Apply each commit, in version order (the supervised task's body)."""
        assert self.store is not None
        while True:
            commit = await self._queue.get()
            with contextlib.suppress(TimeoutError):  # (ours may be the one being written: its plan comes next)
                async with asyncio.timeout(WRITE_WAIT):  # (not wait_for: in Python 3.11 it can lose a cancel)
                    await self._written.wait()
            version = self._current().version
            if commit.version <= version:
                self._forget(version)
                continue  # already processed (our own commits arrive twice)
            commits: list[Commit] | None = [commit]
            if commit.version > version + 1:
                commits = await asyncio.to_thread(commits_after, self.store, version, commit.version)
            if commits is None:
                log.warning("catalog versions %d..%d missing from the log; reading the whole catalog",
                            version + 1, commit.version - 1)
                after = await asyncio.to_thread(self.read_full)
                if after.version > self._current().version:
                    self._advance(self._current(), after, None)
                self._forget(self._current().version)
                continue
            for c in commits:
                before = self._current()
                if c.version == before.version + 1:
                    self._advance(before, self._applied(before, c), commit_touched(c))
            self._forget(self._current().version)

    def _applied(self, before: Catalog, commit: Commit) -> Catalog:
        """``before`` after ``commit``: adopted from this Head's plan of it when it was planned on ``before``,
        else decoded; a bulk commit with the collector paused (head/bulk.py: its objects are all live)."""
        base, planned = self._planned.pop(commit.version, (None, None))
        with bulk_step(len(commit.changes)):
            if base is before and planned is not None:
                return adopt_commit(before, commit, planned)
            return apply_commit(before, commit)

    def _forget(self, version: int) -> None:
        """Drop the plans of commits at or before ``version`` (applied, or overtaken by a whole read)."""
        for stale in [v for v in self._planned if v <= version]:
            del self._planned[stale]

    async def close(self) -> None:
        if self._watch is not None:
            watch, self._watch = self._watch, None
            await asyncio.to_thread(watch.close)
