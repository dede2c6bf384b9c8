"""Which layout and which members a member of a partitioned box works with (docs/cumulus.md §6.4).

A mixin of :class:`~boreas.node.cumulus.part.PartOperator`, beside
:mod:`~boreas.node.cumulus.relayouts`, which owns the state these read
(``layout``, ``requested``, ``relayouts``, ``history``, the catalog's
``partition``): the newest layout decided, the one a growing change starts
from, how far the leader's messages reach while members join or retire,
the layout of a past epoch, and whether a catalog's partition is still the
one running here.  Kept apart because growth and retirement reason about
these, while the relayout protocol only changes them.
"""

from __future__ import annotations

from dataclasses import replace

from boreas.catalog.partition_model import Partition
from boreas.m3.cumulus import Layout


class Membership:
    @property
    def latest_layout(self) -> Layout:
        """The newest layout decided: the one the next change starts from."""
        r = self.requested
        return r if r is not None and r.version > self.layout.version else self.layout

    def joinable_layout(self) -> Layout:
        """:attr:`latest_layout` with the partition's joining nodes as members (docs/cumulus.md §6.4): a change
        decided from it makes them members at its first epoch (a move or rebalance onto them)."""
        lay, nodes = self.latest_layout, tuple(self.partition.nodes)
        if len(nodes) <= len(lay.members):
            return lay
        return replace(lay, members=lay.members + nodes[len(lay.members):])

    def _reach(self) -> int:
        """Leader: how many members its messages go to: the current layout's, and those of every change
        announced (the nodes a change makes members hear of it, its flip, and each Advance from then on)."""
        reach = max(len(self.layout.members), len(self.latest_layout.members),
                    *(len(r["layout"].members) for r in self.relayouts))
        return min(reach, self.n)  # (a member retired, and gone from the catalog, has no link any more)

    def follows(self, partition: Partition) -> bool:
        """Whether ``partition`` is this box's as it runs here: the same incarnation, its members (and any
        nodes joining, or fewer once a member retired), a layout it already switched to (the catalog learns
        a relayout after the members made it).

        A member that failed over to another node is still the same member:
        the operator follows its new endpoint in place (``_rehost``,
        hosting.py), taking a guest if it is now here, so its state and
        everything waiting on it (a publisher held by admission) carry on.
        """
        mine = self.partition
        if not (partition.id == mine.id and len(partition.nodes) >= len(self.layout.members)
                and partition.epoch_ms == mine.epoch_ms and partition.maps == mine.maps
                and partition.layout <= self.layout.version):
            return False
        return partition.nodes == mine.nodes or self._rehost(partition)

    def layout_at(self, epoch: int) -> Layout:
        """The layout versions of ``epoch`` ran under."""
        for first, lay in reversed(self.history):
            if first <= epoch:
                return lay
        return self.history[0][1]
