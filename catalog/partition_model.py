"""The partition model: an ``m3`` box's maps spread over several nodes in segments of hash slots.

A :class:`Partition` places a box (instead of ``Box.node``) and says which
member owns which :class:`SegmentPlacement`; planning fills it in on commit
and Cumulus (docs/cumulus.md) runs it.  It has its own life cycle (layouts,
joining nodes, coordinators) that the rest of the model does not share, hence
its own module; :mod:`.model` re-exports it.
"""

from __future__ import annotations

from dataclasses import dataclass

from .diagnostics import Origin, origin_field


@dataclass(frozen=True, slots=True)
class SegmentPlacement:
    """Segment ``id`` of a partitioned box: hash slots ``lo <= s < hi`` of every partitioned map, on ``member``."""

    id: int
    lo: int
    hi: int
    member: int


#: Hash slots a partitioned box's keys are spread over (``boreas.m3.cumulus.hashing.SLOTS``).
PARTITION_SLOTS = 4096


@dataclass(frozen=True, slots=True)
class Partition:
    """An ``m3`` box's maps spread over several nodes in segments (docs/cumulus.md §2).

    ``nodes[i]`` is member *i*'s endpoint.  ``count``, ``key``, ``pins``
    (``<map name key>`` without a position: map -> key column) and
    ``replicate`` (maps every member holds whole) are what the user wrote; planning on commit fills in ``segments`` (equal slot ranges
    dealt over the members), every map's partition key column (``maps``:
    ``(map, key column name, key position)``, both None for a map kept whole
    on the box's home segment), a fresh incarnation ``id`` and ``layout`` 1.
    A partitioned box's own ``Box.node`` stays None: the partition places it.

    A partition grows by a resubmission that appends ``<node>`` elements: those are
    *joining* until a layout change (``boreas rebalance``, ``move``) makes
    them members.  ``members`` counts the nodes that are members of layout
    ``layout`` (None: all), ``coordinators`` those that coordinate published
    input (None: all; fixed when the partition first grows, so a producer's
    publisher keeps picking the same member, docs/cumulus.md §6.4).
    ``coordinator_list`` is the committed layout's list of coordinating member
    numbers once a layout change set one (docs/cumulus.md §6.5): publishers
    then pick by rendezvous over it, and members rebuilt from the catalog
    start with it; None (old catalogs, partitions never grown): the count.

    >>> p = Partition("v", ("a", "b", "c"), members=2, coordinators=2)
    >>> p.layout_nodes, p.entry_nodes, p.joining
    (('a', 'b'), ('a', 'b'), ('c',))
    >>> Partition("v", ("a", "b", "c", "d"), coordinators=2, coordinator_list=(0, 2)).entry_nodes
    ('a', 'b', 'c')
    """

    box: str
    nodes: tuple[str, ...]
    segments: tuple[SegmentPlacement, ...] = ()
    count: int | None = None
    key: str | None = None
    pins: tuple[tuple[str, str], ...] = ()
    maps: tuple[tuple[str, str | None, int | None], ...] = ()
    layout: int = 0
    epoch_ms: int = 100
    id: str = ""
    origin: Origin = origin_field()
    members: int | None = None
    coordinators: int | None = None
    replicate: tuple[str, ...] = ()
    coordinator_list: tuple[int, ...] | None = None

    @property
    def layout_nodes(self) -> tuple[str, ...]:
        """The endpoints of the members of layout ``layout``, by member number."""
        return self.nodes if self.members is None else self.nodes[:self.members]

    @property
    def entry_nodes(self) -> tuple[str, ...]:
        """The members a publisher picks from, by member number: ``crc32(producer) % len`` of them, or, with a
        ``coordinator_list``, the members up to its highest (the list's rendezvous pick indexes them)."""
        if self.coordinator_list:
            return self.nodes[:max(self.coordinator_list) + 1]
        return self.modulo_nodes

    @property
    def modulo_nodes(self) -> tuple[str, ...]:
        """The members the catalog's ``coordinators`` count names: what a layout without a coordinator list picks
        among by ``crc32(producer) % len`` (a member replaying its log from before the list must still)."""
        return self.nodes if self.coordinators is None else self.nodes[:self.coordinators]

    @property
    def joining(self) -> tuple[str, ...]:
        """Nodes declared in the partition that no layout has made members yet."""
        return self.nodes[len(self.layout_nodes):]

    @property
    def planned(self) -> bool:
        """Whether planning filled in segments and map columns (a committed partition always is)."""
        return bool(self.segments) and self.layout > 0

    def member_of(self, endpoint: str) -> list[int]:
        """The member numbers ``endpoint`` hosts (two only after a failover)."""
        return [i for i, node in enumerate(self.nodes) if node == endpoint]
