"""Who one member of a partitioned box is, and the layouts it runs under (docs/cumulus.md §3.5, §6.4).

:class:`MemberState` is the one owner of a member's place in its
partition: its number, the layout it runs now (and the :class:`Roles` that
layout gives its statements), the layouts of the recent epochs stable reads
may still ask about, and the epoch it joined at (None while it is joining).  The layout change switches the
layout (:meth:`MemberState.switch`, at a flip), a failover renames the nodes
(:meth:`MemberState.rehome`); every other part of the member reads them.

>>> from boreas.m3 import compile_sql
>>> from boreas.m3.cumulus import classify, even_layout, relayout
>>> from boreas.m3.cumulus.member import MemberRuntime
>>> p = compile_sql("CREATE STREAM R(a INT, b INT); SELECT a, SUM(b) AS s FROM R GROUP BY a")
>>> lay = even_layout("g", ["n0", "n1"], 2, maps=[("Q1_s", 0)])
>>> plan = classify(p, dict(lay.maps), "g")
>>> place = MemberState(1, lay, plan, MemberRuntime(p, lay, 1, plan))
>>> place.joined, [s.id for s in place.layout.segments_of(1)]
(0, [1])
>>> place.switch(4, relayout.move(lay, 1, 0))
>>> place.layout_at(3).version, place.layout_at(4).version, place.layout.segments_of(1)
(1, 2, ())
>>> place.forget_layouts(3); [first for first, _ in place.history]
[4]
>>> again = MemberState(1, lay, plan, MemberRuntime(p, lay, 1, plan)); again.restore(place.state())
>>> again.layout == place.layout, again.history == place.history
(True, True)

The layout a committed ``<partition>`` describes:

>>> from boreas.catalog.model import Partition, SegmentPlacement
>>> part = Partition("v", ("n1", "n2"), (SegmentPlacement(0, 0, 2048, 0), SegmentPlacement(1, 2048, 4096, 1)),
...                  maps=(("Q1_total", "A", 0),), layout=1, id="c0ffee")
>>> lay = layout_of(part)
>>> lay.members, lay.column("Q1_total"), [s.member for s in lay.segments]
(('n1', 'n2'), 0, [0, 1])
"""

from __future__ import annotations

from dataclasses import replace

from boreas.catalog.model import Partition
from boreas.m3.cumulus import EVERYWHERE, Layout, Segment
from boreas.m3.cumulus.member import MemberRuntime
from boreas.m3.cumulus.plan import Plan
from boreas.m3.cumulus.roles import Roles


def layout_of(partition: Partition) -> Layout:
    """The :class:`~boreas.m3.cumulus.Layout` a committed ``<partition>`` describes (its joining nodes are not
    members of it yet; its ``replicate=`` maps are placed :data:`~boreas.m3.cumulus.EVERYWHERE`; its coordinator
    list, so a member rebuilt from the catalog without its state picks as the others do, docs/cumulus.md §6.5)."""
    return Layout(partition.box, partition.layout_nodes,
                  tuple(Segment(s.id, s.lo, s.hi, s.member) for s in partition.segments),
                  (*((name, position) for name, _, position in partition.maps),
                   *((name, EVERYWHERE) for name in partition.replicate)),
                  version=partition.layout, coordinators=partition.coordinator_list)


def rehomed(layout: Layout, nodes: tuple[str, ...]) -> Layout:
    """``layout`` with its members' endpoints as ``nodes`` names them now (a member failed over since).

    A layout from before a partition grew has fewer members: those keep theirs.

    >>> from boreas.m3.cumulus import even_layout
    >>> rehomed(even_layout("g", ["a", "b"]), ("a", "c", "d")).members
    ('a', 'c')
    """
    now = nodes[:len(layout.members)]
    return layout if layout.members == now or len(now) < len(layout.members) else replace(layout, members=now)


class MemberState:
    """Member ``member``'s number, layout, roles, layout history and first epoch; the only code that changes them."""

    def __init__(self, member: int, layout: Layout, plan: Plan, runtime: MemberRuntime):
        self.member = member
        self.plan = plan  # the program's statements classified under the partition's map columns
        self.runtime = runtime
        self.layout = layout
        self.roles = Roles(plan, layout)
        self.history: list[tuple[int, Layout]] = [(0, layout)]  # (first epoch, layout), ascending
        # the first epoch this member takes part in; None while it is joining (docs/cumulus.md §6.4)
        self.joined: int | None = 0 if member < len(layout.members) else None

    @property
    def members(self) -> int:
        """Members of the layout it runs now."""
        return len(self.layout.members)

    def switch(self, first: int, layout: Layout) -> None:
        """Run under ``layout`` from epoch ``first`` on (a layout change flips here)."""
        self._set(layout)
        self.history.append((first, layout))

    def _set(self, layout: Layout) -> None:
        self.layout = layout
        self.runtime.set_layout(layout, self.plan)
        self.roles = Roles(self.plan, layout)

    def join(self, first: int) -> bool:
        """Take part from epoch ``first`` on, if this member is joining and ``first`` is its change's; whether it
        joined now."""
        if self.joined is not None:
            return False
        self.joined = first
        return True

    def layout_at(self, epoch: int) -> Layout:
        """The layout versions of ``epoch`` ran under."""
        for first, lay in reversed(self.history):
            if first <= epoch:
                return lay
        return self.history[0][1]

    def forget_layouts(self, horizon: int) -> None:
        """No stable read of an epoch up to ``horizon`` any more: drop the layouts only those ran under."""
        while len(self.history) > 1 and self.history[1][0] <= horizon + 1:
            self.history.pop(0)

    def rehome(self, nodes: tuple[str, ...]) -> None:
        """Layouts restored from a state name the nodes members were on then; a failover since moved one."""
        self.layout = rehomed(self.layout, nodes)
        self.history = [(first, rehomed(lay, nodes)) for first, lay in self.history]

    # -- plain data ------------------------------------------------------------------
    def state(self) -> dict:
        return {"member": self.member, "layout": self.layout.version, "joined": self.joined,
                "layout_now": self.layout.to_dict(),
                "history": [[first, lay.to_dict()] for first, lay in self.history]}

    def restore(self, state: dict) -> None:
        self.joined = state["joined"] if "joined" in state else 0
        if not state.get("layout_now"):
            return
        self._set(Layout.from_dict(state["layout_now"]))
        self.history = [(int(f), Layout.from_dict(d)) for f, d in state.get("history", [])] or [(0, self.layout)]
