"""Metadata a commit writes in its own transaction: set for the commits one thread makes within a block.

The Head keeps each submission's record in the store's metadata so that the
next leader can answer for it (:mod:`boreas.head.submissions`).  Written
after the commit, a leader dying between the two would leave a committed
version with no record; written in the commit's multi-op (ZooKeeper), the
two exist together or not at all.  The commit's version is known only once
the store builds its transaction (an optimistic retry may move it on), so
what is set here is a function of that version.  A store that can write
metadata in its commit has one of these as ``alongside``
(:class:`~boreas.catalog.store.zookeeper.ZooKeeperStore`); the others have
None, and their callers write the metadata after the commit.

>>> along = CommitMeta()
>>> along.for_version(3)
{}
>>> with along.writing(lambda version: {f"submission/{version}": "..."}):
...     along.for_version(3)
{'submission/3': '...'}
>>> along.for_version(4)
{}
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator, Mapping

MetaForVersion = Callable[[int], Mapping[str, str]]


class CommitMeta:
    """Per thread, what the commits made in a :meth:`writing` block add to the metadata, in the commit."""

    def __init__(self) -> None:
        self._local = threading.local()

    @contextlib.contextmanager
    def writing(self, make: MetaForVersion) -> Iterator[None]:
        """Commits this thread makes within the block also write ``make(version)`` (key -> value)."""
        previous = getattr(self._local, "make", None)
        self._local.make = make
        try:
            yield
        finally:
            self._local.make = previous

    def for_version(self, version: int) -> Mapping[str, str]:
        """What a commit of ``version`` on this thread writes beside the catalog (nothing outside a block)."""
        make = getattr(self._local, "make", None)
        return make(version) if make is not None else {}
