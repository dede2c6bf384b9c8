"""Bulk loads into a member of a partitioned box: initial map values (a Spark job, docs/cumulus.md §7).

:class:`BulkLoads` owns which ``(job, part)`` loads a member applied (its
part of the member's ``state()``).  A load goes into an empty box, before
its input streams, one job per box; its parts come in any order, each at
most once (a retried Spark task adds nothing).

>>> loads = BulkLoads("v", 1)
>>> loads.loadable("j", took_input=False, holds_entries=False), loads.taken("j", 0)
(None, False)
>>> loads.loaded.add(("j", 0)); loads.loadable("j", False, True) is None, loads.loadable("k", False, False)
(True, "m3 box 'v' member 1 was loaded by job 'j'; one bulk load per box")
>>> loads.loadable("j", True, True)  # doctest: +ELLIPSIS
"m3 box 'v' member 1 already holds data; ..."
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from boreas.m3.cumulus.member import MemberRuntime

log = logging.getLogger(__name__)


class BulkLoads:
    """The bulk loads member ``member`` of box ``box`` applied."""

    def __init__(self, box: str, member: int):
        self.box, self.member = box, member
        self.loaded: set[tuple[str, int]] = set()  # (job, part) of bulk loads applied: a retried task adds nothing

    def taken(self, job: str, part: int) -> bool:
        """Whether part ``part`` of job ``job`` went in already (a retry adds nothing)."""
        return (job, part) in self.loaded

    def loadable(self, job: str, took_input: bool, holds_entries: bool) -> str | None:
        """Why part of bulk load ``job`` cannot go in now (None: it can): loads go into an empty box, before
        any input (``took_input``), one job at a time (its parts in any order; ``holds_entries``: its earlier
        parts', or another's)."""
        started = {j for j, _ in self.loaded}
        if took_input or (holds_entries and job not in started):
            return (f"m3 box {self.box!r} member {self.member} already holds data; a bulk load starts an "
                    "empty partitioned box, before its input streams")
        if started - {job}:
            return f"m3 box {self.box!r} member {self.member} was loaded by job {min(started - {job})!r}; one bulk load per box"
        return None

    def load(self, m: list, runtime: MemberRuntime, decode: Callable[[str, list], tuple], epoch: int) -> None:
        """A ``Load`` message: install its entries as of ``epoch`` (once per part)."""
        job, part, entries = m[1], int(m[2]), m[3]
        if (job, part) in self.loaded:
            return
        self.loaded.add((job, part))
        foreign = len(entries) - runtime.install(((name, decode(name, key), value) for name, key, value in entries),
                                                 epoch)
        if foreign:
            log.error("m3 box %r member %d: bulk load %s part %d had %d entries of other members; skipped",
                      self.box, self.member, job, part, foreign)

    def state(self) -> dict:
        return {"loaded": [list(x) for x in self.loaded]}

    def restore(self, state: dict) -> None:
        self.loaded = {(j, int(p)) for j, p in state.get("loaded", [])}
