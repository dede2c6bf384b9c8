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

After a commit that says what it wrote (``touched``), it builds no whole
copy: it only encodes the elements written (:meth:`~.catalog_copy.CatalogCopies.warm`),
what the commit touched and not the catalog's size (issue 37: with a
whole build per quiet spell, and the index save, the Head spent 2.13 s of
CPU over 15 one-box CLI calls at 50,000 boxes, against 0.37 at 1,000;
without the whole builds 0.36 s, as at 1,000; docs/benchmarks.md).  The
first reader of that version then walks the kept texts and joins them (no
encoding: at 20,000 boxes 0.04-0.06 s of CPU).  A change of unknown extent
(a start, a gap read whole) builds the whole copy as before.

Usage (the Head does this)::

    ahead = CopyAhead(head.copies)
    tasks.spawn("copy ahead", ahead.run)   # supervised: a failed build is logged, the task restarted
    ahead.changed(touched)                 # after each catalog version is installed (touched: None if unknown)
"""

from __future__ import annotations

import logging
import asyncio
import time
from collections.abc import Callable, Iterable, Mapping

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
        self.warmed = 0  # elements encoded by warming (tests)
        # What the commits since the last run wrote (Catalog dict -> keys), and whether one did not say (or
        # nothing was built yet): then the next run builds the whole copy.
        self._touched: dict[str, set[str]] = {}
        self._whole = False

    def changed(self, touched: Mapping[str, Iterable[str]] | None = None) -> None:
        """A new catalog version is held; ``touched`` is what its commit wrote, None if not known."""
        if touched is None or self.built is None:
            self._whole = True
        else:
            for name, keys in touched.items():
                self._touched.setdefault(name, set()).update(keys)
        self.pacer.changed()

    async def run(self) -> None:
        """Build after each quiet spell (the supervised task's body)."""
        await self.pacer.run(self._build)

    async def _build(self) -> float:
        touched, whole, self._touched, self._whole = self._touched, self._whole, {}, False
        if not whole:  # (what the commits wrote: encoded, not the whole copy)
            def warm() -> tuple[int, float]:
                start = time.thread_time()
                return self.copies.warm(touched), time.thread_time() - start

            encoded, cpu = await asyncio.to_thread(warm)
            self.warmed += encoded
            return cpu
        built = await self.copies.read(wanted=False)  # in a worker thread; readers arriving meanwhile await it too
        self.built = built.version
        log.info("catalog version %d serialized ahead in %.2f s of CPU", built.version, built.cpu)
        return built.cpu
