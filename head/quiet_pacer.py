"""Work that follows catalog changes, run once the catalog is quiet and paced by its own CPU cost.

Building the catalog copy ahead (:mod:`.copy_ahead`) and saving the index
(:mod:`.index_saver`) each cost the size of the catalog, so neither runs
with a commit: a :class:`QuietPacer` runs the work once no change came for
``quiet`` seconds, and no sooner than ``ratio`` times the last run's CPU
time after it (at least ``least`` seconds): at most about 1/ratio of a core
spent on it, whatever the commit rate.  A version only passed through is
not worked on: the next one is.

Usage::

    pacer = QuietPacer(quiet=0.5, ratio=10.0, least=1.0)
    tasks.spawn("copy ahead", lambda: pacer.run(build))   # build(): awaitable CPU seconds it took
    pacer.changed()                                        # after each catalog version is installed
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable


#: Quiet spells a run waits at most for the Head to stop being busy (a node down stays out of sync).
BUSY_WAIT = 20
#: Quiet spells a run waits at most, besides, while the next change is on its way in (``held``: a submission
#: being read and checked, which takes seconds a part on a loaded machine), so that a Head taking submissions
#: back to back still runs it now and then.
HELD_WAIT = 200


class QuietPacer:
    """Owns when the work runs next: whether a change is waiting, and the loop time before which it may not."""

    def __init__(self, quiet: float, ratio: float, least: float, busy: Callable[[], bool] | None = None,
                 held: Callable[[], bool] | None = None):
        self.quiet = quiet  # seconds without a change before a run
        self.ratio = ratio  # the next run waits this many times the last one's CPU time ...
        self.least = least  # ... and at least this many seconds
        # The Head still busy with the last change (a node not yet in sync with it): a run waits for that,
        # up to BUSY_WAIT quiet spells, so its CPU does not slow the change's own end (issue 37: a 2.5 s
        # index save during a move at 100,000 boxes).
        self.busy = busy or (lambda: False)
        # The next change already on its way in (a deployment's next part being read and checked): a run waits
        # for it too, up to HELD_WAIT spells counted apart (a deployment in ten parts would otherwise spend
        # BUSY_WAIT within a part on a loaded machine, and run the work, stale at the next commit, per part).
        self.held = held or (lambda: False)
        self._held = 0  # quiet spells waited for held() since the last run
        self._changed = asyncio.Event()
        self._next = 0.0  # loop time before which no run starts
        self._waited = 0  # quiet spells waited for busy() since the last run

    def changed(self) -> None:
        """A new catalog version is held."""
        self._changed.set()  # (_waited is not reset: changes every few seconds would hold a run back for good)

    def _settled(self) -> bool:
        """After a quiet spell: whether the Head is done with the change (or waited long enough for it)."""
        if self._held < HELD_WAIT and self.held():
            self._held += 1
            return False
        if not self.busy() or self._waited >= BUSY_WAIT:
            self._waited = self._held = 0
            return True
        self._waited += 1
        return False

    async def run(self, work: Callable[[], Awaitable[float]]) -> None:
        """Run ``work`` (it returns the CPU seconds it took) after each quiet spell: a supervised task's body."""
        loop = asyncio.get_running_loop()
        while True:
            await self._changed.wait()
            self._changed.clear()
            # The rate limit first, so the quiet spell and _settled() are the last things before the run (a
            # submission that began during this wait holds the run as one before it does).
            await asyncio.sleep(max(0.0, self._next - loop.time()))
            while True:  # until quiet for self.quiet seconds
                with contextlib.suppress(TimeoutError):  # (asyncio.timeout: wait_for of 3.11 can swallow a cancel)
                    async with asyncio.timeout(self.quiet):
                        await self._changed.wait()
                    self._changed.clear()
                    continue
                if self._settled():
                    break
            took = await work()
            self._next = loop.time() + max(self.least, self.ratio * took)
