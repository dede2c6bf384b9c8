"""When the Head builds the current catalog version's copy ahead of its first reader.

:class:`~.catalog_copy.CatalogCopies` serializes a version on its first
read (``GET /catalog``, a global component's full copy): at 100,000 boxes
about 0.85 s of CPU that the first reader waited for, on top of the
transfer and its own decoding (issue 37: a full copy under 3 s).
:class:`CopyAhead` builds it before anyone asks: once the catalog has been
quiet for ``quiet`` seconds after a commit (a :class:`~.quiet_pacer.QuietPacer`), in a worker thread
(:meth:`~.catalog_copy.CatalogCopies.read`: the event loop keeps serving,
and a reader arriving meanwhile awaits the same build, an asyncio future,
instead of starting another or blocking the loop), no sooner than ``ratio``
times the last build's CPU time after it (at most about 1/ratio of a core
spent on copies, whatever the commit rate).  A version the Head only
passes through is not serialized: the next one is.

Usage (the Head does this)::

    ahead = CopyAhead(head.copies)
    tasks.spawn("copy ahead", ahead.run)   # supervised: a failed build is logged, the task restarted
    ahead.changed()                        # after each catalog version is installed
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from .catalog_copy import CatalogCopies
from .quiet_pacer import QuietPacer

log = logging.getLogger(__name__)


class CopyAhead:
    """Builds the copy ahead when its :class:`~.quiet_pacer.QuietPacer` says; the version built last."""

    def __init__(self, copies: CatalogCopies, quiet: float = 0.5, ratio: float = 10.0, least: float = 1.0,
                 busy: Callable[[], bool] | None = None, held: Callable[[], bool] | None = None):
        self.copies = copies
        self.pacer = QuietPacer(quiet, ratio, least, busy, held)  # quiet spells, builds paced by their CPU time
        self.built: int | None = None  # the catalog version built ahead last (status, tests)

    def changed(self) -> None:
        """A new catalog version is held."""
        self.pacer.changed()

    async def run(self) -> None:
        """Build after each quiet spell (the supervised task's body)."""
        await self.pacer.run(self._build)

    async def _build(self) -> float:
        built = await self.copies.read()  # in a worker thread; readers arriving meanwhile await it too
        self.built = built.version
        log.info("catalog version %d serialized ahead in %.2f s of CPU", built.version, built.cpu)
        return built.cpu
