"""A member of a partitioned ``m3`` box whose view is ranked by ``ROW_NUMBER() OVER (PARTITION BY p ...) <= N``
(docs/cumulus.md §3.14, docs/m3.md "Top-N").

The partition is planned only when the ranking's PARTITION BY columns hold the view's partition column
(``m3/boxtype.py`` ``plan_m3_partition``): every row of a ranking partition then lives in one segment, so the
member owning that segment holds all of them and ranks them alone, as the one-node box does
(node/operators/m3topn.py's :class:`RankedRows`).  A member's share of each version changes its view; those
changes go through its :class:`RankedRows`, and what they change in its partitions' first N is what it emits.

The ranked rows are a function of the member's maps.  A layout change that moves segments in or out ranks
them again from the maps, emitting nothing: the rows of a partition that came in were emitted by the member
that ranked it before (a downstream reader holds them), those of one that left are the new owner's to change.
A restored member ranks its restored maps likewise, so the snapshot is the maps alone.
"""

from __future__ import annotations

from boreas.catalog.model import Box, Partition, Schema
from boreas.m3.cumulus import Layout
from boreas.wire.columns import weighted

from ..operators.m3memo import present_rows
from ..operators.m3topn import ranked_for, view_deltas
from .applying import Groups, Version
from .hosting import Host
from .part import PartOperator


class RankedPartOperator(PartOperator):
    """A member of a partitioned top-N box: its view's changes ranked per partition (module docstring)."""

    def __init__(self, box: Box, inputs: list[Schema], outputs: list[Schema], partition: Partition, endpoint: str,
                 member: int | None = None, host: Host | None = None):
        super().__init__(box, inputs, outputs, partition, endpoint, member, host)
        self.spec = self.plan.topn
        assert self.spec is not None
        try:
            self.ranked = ranked_for(self.spec, self.plan.outputs[0], self.outputs[0])
        except ValueError as exc:
            raise self.error(str(exc)) from None
        self.ranked_under: Layout | None = None  # the layout the ranked rows were read under

    def rerank(self) -> None:
        """Rank the view the maps hold now (nothing is emitted): after a layout change, a restore."""
        self.ranked.clear()
        view = self.plan.views[0]
        pairs = present_rows(self.runtime.view(view.name), view.name in self.marked)
        rows = self._emit[0](pairs)
        deltas: dict[tuple, int] = {}
        view_deltas(self.spec, rows, [1] * len(rows), deltas)
        self.ranked.apply(deltas)
        self.ranked_under = self.place.layout

    def write(self, version: Version, mine: Groups, pushed: dict) -> None:
        """Apply this member's share of a version; emit what it changed in its partitions' first N."""
        if self.ranked_under is not self.place.layout:
            self.rerank()
            self._memo.forget()
        name = self.plan.views[0].name
        self._memo.load([name])  # (before applying: the old rows)
        if not self.apply_share(version, mine, pushed):
            return
        changed = self.runtime.changes().get(name)
        if not changed:
            return
        pairs, weights = self._memo.revise(name, changed)
        deltas: dict[tuple, int] = {}
        view_deltas(self.spec, self._emit[0](pairs), weights, deltas)
        out, signs = self.ranked.apply(deltas)
        if out:
            self.parts.mailbox.emit(0, weighted(out, signs, self.outputs[0]))

    def top_rows(self) -> list[tuple]:
        """This member's partitions' first N rows now."""
        return self.ranked.rows()

    def restore_member(self, state: dict, now: float | None = None) -> None:
        super().restore_member(state, now)
        self.ranked_under = None  # ranked again from the restored maps at the next write
