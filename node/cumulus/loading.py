"""Bulk loads into a member of a partitioned box: initial map values (a Spark job, docs/cumulus.md §7).

A mixin of :class:`~boreas.node.cumulus.part.PartOperator` (which owns the
state: ``loaded``, the runtime).  A load goes into an empty box, before its
input streams, one job per box; its parts come in any order, each at most
once (a retried Spark task adds nothing).
"""

from __future__ import annotations

import logging

log = logging.getLogger(__name__)


class BulkLoad:

    def loadable(self, job: str) -> str | None:
        """Why part of bulk load ``job`` cannot go in now (None: it can): loads go into an empty box, before
        any input, one job at a time (its parts in any order)."""
        started = {j for j, _ in self.loaded}
        if self.seq or self.holding or self.runtime.version or (self.runtime.entries() and job not in started):
            return (f"m3 box {self.box.name!r} member {self.member} already holds data; a bulk load starts an "
                    "empty partitioned box, before its input streams")
        if started - {job}:
            return (f"m3 box {self.box.name!r} member {self.member} was loaded by job {min(started - {job})!r}; "
                    "one bulk load per box")
        return None

    def _load(self, m: list) -> None:
        job, part, entries = m[1], int(m[2]), m[3]
        if (job, part) in self.loaded:
            return
        self.loaded.add((job, part))
        dec = self._decode_key
        foreign = len(entries) - self.runtime.install(((name, dec(name, key), value) for name, key, value in entries),
                                                      self.at[0])
        if foreign:
            log.error("m3 box %r member %d: bulk load %s part %d had %d entries of other members; skipped",
                      self.box.name, self.member, job, part, foreign)
