"""When the Head builds the current catalog version's copy ahead of its first reader.

:class:`~.catalog_copy.CatalogCopies` serializes a version on its first
read (``GET /catalog``, a global component's full copy): at 100,000 boxes
about 0.85 s of CPU that the first reader waited for, on top of the
transfer and its own decoding (issue 37: a full copy under 3 s).
:class:`CopyAhead` builds it before anyone asks: once the catalog has been
quiet for :attr:`quiet` seconds after a commit, in a worker thread (the
event loop keeps serving; :class:`~.catalog_copy.CatalogCopies` holds a
lock around its building, so a reader arriving meanwhile waits for the
same build instead of starting another), no sooner than :attr:`ratio`
times the last build's CPU time after it (at most about 1/ratio of a core
spent on copies, whatever the commit rate).  A version the Head only
passes through is not serialized: the next one is.

Usage (the Head does this)::

    ahead = CopyAhead(head.copies)
    tasks.spawn("copy ahead", ahead.run)   # supervised: a failed build is logged, the task restarted
    ahead.changed()                        # after each catalog version is installed
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from .catalog_copy import CatalogCopies

log = logging.getLogger(__name__)


class CopyAhead:
    """Owns when the copy is built ahead: whether a version is waiting, and when the next build may run."""

    def __init__(self, copies: CatalogCopies, quiet: float = 0.5, ratio: float = 10.0, least: float = 1.0):
        self.copies = copies
        self.quiet = quiet  # seconds without a commit before a build
        self.ratio = ratio  # the next build waits this many times the last one's CPU time ...
        self.least = least  # ... and at least this many seconds
        self.built: int | None = None  # the catalog version built ahead last (status, tests)
        self._changed = asyncio.Event()
        self._next = 0.0  # loop time before which no build starts

    def changed(self) -> None:
        """A new catalog version is held."""
        self._changed.set()

    async def run(self) -> None:
        """Build after each quiet spell (the supervised task's body)."""
        loop = asyncio.get_running_loop()
        while True:
            await self._changed.wait()
            self._changed.clear()
            while True:  # until quiet for self.quiet seconds
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(self._changed.wait(), self.quiet)
                    self._changed.clear()
                    continue
                break
            await asyncio.sleep(max(0.0, self._next - loop.time()))
            self.built, took = await asyncio.to_thread(self.copies.prepare)
            log.info("catalog version %d serialized ahead in %.2f s of CPU", self.built, took)
            self._next = loop.time() + max(self.least, self.ratio * took)
