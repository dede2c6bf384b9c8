"""When the leading Head saves its checked catalog index to the store, so the next start decodes it.

Saving the index (:func:`~boreas.catalog.index_checkpoint.save_index`) costs
the size of the catalog (about a tenth of checking it whole), so it is never
part of a commit: :class:`IndexSaver` saves the current index once the
catalog has been quiet for ``quiet`` seconds after a change, no sooner
than ``ratio`` times the last save's CPU time after it (at most about
1/ratio of a core spent saving, whatever the commit rate), and once more
when the Head closes, if what it holds was not saved yet.  Only the leader
saves (followers hold the same catalog).  A start whose catalog moved on
since the last save checks the catalog whole, as before.

Usage (the Head does this)::

    saver = IndexSaver(lambda: head.index, lambda: head.store)
    tasks.spawn("index saver", saver.run)      # when leading
    saver.started(version, decoded)            # the index read at start: saved already, or built whole
    saver.changed()                            # after each catalog version is installed
    await saver.flush()                        # on close
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable

from boreas.catalog.index import CatalogIndex
from boreas.catalog.index_checkpoint import save_index
from boreas.catalog.store import CatalogStore, StoreError

from .quiet_pacer import QuietPacer
from .yielding import Yielder

log = logging.getLogger(__name__)


class IndexSaver:
    """Saves the index when its :class:`~.quiet_pacer.QuietPacer` says (and on close); owns the version saved last."""

    def __init__(self, current: Callable[[], CatalogIndex], store: Callable[[], CatalogStore | None],
                 quiet: float = 2.0, ratio: float = 20.0, least: float = 10.0, busy: Callable[[], bool] | None = None,
                 held: Callable[[], bool] | None = None, yielder: Yielder | None = None):
        self.current = current
        self.store = store
        self.pacer = QuietPacer(quiet, ratio, least, busy, held)  # quiet spells, saves paced by their CPU time
        self.saved: int | None = None  # the catalog version saved last by this Head
        # The save's checkpoint, per index entry: the GIL back to the event loop every few milliseconds,
        # and the save waiting while a request is served (head/yielding.py).
        self.yielder = yielder or Yielder()

    def started(self, version: int, decoded: bool) -> None:
        """The Head started at ``version`` with the saved index (nothing to save) or checked it whole (save it)."""
        if decoded:
            self.saved = version
        else:
            self.pacer.changed()

    def changed(self) -> None:
        """A new catalog version is held."""
        self.pacer.changed()

    async def run(self) -> None:
        """Save after each quiet spell (the supervised task's body)."""
        await self.pacer.run(self.flush)

    async def flush(self) -> float:
        """Save the current index unless it is saved already; the CPU seconds it took."""
        index, store = self.current(), self.store()
        if store is None or index.catalog.version == self.saved or not index.catalog.version:
            return 0.0

        def save() -> tuple[int, float]:
            start = time.thread_time()
            size = save_index(store, index, self.yielder)
            return size, time.thread_time() - start

        self.yielder.start()
        try:
            size, took = await asyncio.to_thread(save)
        except StoreError as exc:  # a cache: the next start checks whole, as without it
            log.warning("could not save the catalog index of version %d: %s", index.catalog.version, exc)
            return 0.0
        except Exception:  # (a bug in encoding: never a reason for the Head to stop, or not to close)
            log.exception("could not save the catalog index of version %d", index.catalog.version)
            return 0.0
        self.saved = index.catalog.version
        log.info("catalog index of version %d saved (%d bytes, %.2f s CPU)", index.catalog.version, size, took)
        return took
