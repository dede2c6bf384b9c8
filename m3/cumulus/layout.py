"""The layout of a partitioned box: who owns which slots, and how each map is placed (docs/cumulus.md §1, §3.1).

A layout names the box's *members* (member *i* runs on endpoint
``members[i]``), its *segments* (contiguous slot ranges ``[lo, hi)``, each
owned by one member; together they cover every slot exactly once), each
map's *partition column* (the key position whose slot places an entry,
``None`` for a map kept whole on the box's home slot, or :data:`EVERYWHERE`
for a *replicated* map: every member holds all of it), the layout version
(+1 per relayout) and the first epoch it applies to.  A segment covers the
same slots of every partitioned map, so co-partitioned entries stay together.

A layout is validated when built (a wrong one would lose or double count
entries), and builds its slot → member table once: ownership is then one hash
and one tuple index.

>>> lay = even_layout("g", ["n1:15001", "n2:15002"], 4, maps=[("Q1_total", 0), ("Q1_n", 0)])
>>> [(s.id, s.lo, s.hi, s.member) for s in lay.segments]
[(0, 0, 1024, 0), (1, 1024, 2048, 1), (2, 2048, 3072, 0), (3, 3072, 4096, 1)]
>>> lay.owner("Q1_total", (7,)), [s.id for s in lay.segments_of(1)]
(1, [1, 3])
>>> Layout.from_dict(lay.to_dict()) == lay
True
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from boreas.catalog.words import counted

from ..ast import Program
from .hashing import SLOTS, home_slot, slot


EVERYWHERE = "*"
"""The partition column of a replicated map: every member of the layout holds every entry (docs/cumulus.md §3.11)."""


class LayoutError(ValueError):
    """A layout that does not place every entry exactly once (or names what does not exist)."""


@dataclass(frozen=True, slots=True)
class Segment:
    """Slots ``lo <= s < hi`` of every partitioned map of the box, owned by ``member``; ids are stable."""

    id: int
    lo: int
    hi: int
    member: int

    def name(self, box: str) -> str:
        """The segment's user-facing name, ``q3/2``."""
        return f"{box}/{self.id}"


@dataclass(frozen=True)
class Layout:
    """Members, segments and map placement of one partitioned box, at one layout version."""

    box: str
    members: tuple[str, ...]
    segments: tuple[Segment, ...]
    maps: tuple[tuple[str, int | str | None], ...] = ()
    version: int = 1
    first_epoch: int = 0
    # The members publishers' producers are coordinated by (rendezvous pick, m3/cumulus/coordinators.py); None:
    # not a list yet, the catalog's count picks by modulo (docs/cumulus.md §6.5)
    coordinators: tuple[int, ...] | None = None
    _owners: tuple[int, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "members", tuple(self.members))
        object.__setattr__(self, "segments", tuple(sorted(self.segments, key=lambda s: (s.lo, s.id))))
        object.__setattr__(self, "maps", tuple((str(m), c) for m, c in self.maps))
        if self.coordinators is not None:
            object.__setattr__(self, "coordinators", tuple(int(c) for c in self.coordinators))
        object.__setattr__(self, "_owners", _validate(self))

    # -- ownership -------------------------------------------------------
    @property
    def owners(self) -> tuple[int, ...]:
        """The slot → member table (4,096 entries): what routing code binds as a fast local."""
        return self._owners

    def owner_of_slot(self, s: int) -> int:
        """The member owning slot ``s``."""
        return self._owners[s]

    @property
    def home(self) -> int:
        """The member holding the box's home maps (those without a partition column)."""
        return self._owners[home_slot(self.box)]

    @property
    def replicated(self) -> frozenset[str]:
        """The maps every member holds whole (their column is :data:`EVERYWHERE`)."""
        return frozenset(m for m, c in self.maps if c == EVERYWHERE)

    def column(self, map_name: str) -> int | str | None:
        """The map's partition column (key position), None for a home map, :data:`EVERYWHERE` for a replicated one."""
        for name, col in self.maps:
            if name == map_name:
                return col
        raise LayoutError(f"layout of box {self.box!r} does not place map {map_name!r} (maps: {', '.join(m for m, _ in self.maps) or 'none'})")

    def owner(self, map_name: str, key: Sequence) -> int:
        """The member that holds ``map_name``'s entry at ``key`` (a key tuple, in key-column order).

        A replicated map has no one owner (:meth:`holders`): asking is a
        :class:`LayoutError`.
        """
        col = self.column(map_name)
        if col == EVERYWHERE:
            raise LayoutError(f"map {map_name!r} of box {self.box!r} is replicated: every member holds it")
        return self.home if col is None else self._owners[slot(key[col])]

    def holders(self, map_name: str, key: Sequence) -> tuple[int, ...]:
        """The members holding ``map_name``'s entry at ``key``: its owner, or every member for a replicated map."""
        if self.column(map_name) == EVERYWHERE:
            return tuple(range(len(self.members)))
        return (self.owner(map_name, key),)

    def segments_of(self, member: int) -> tuple[Segment, ...]:
        """The member's segments, in slot order (empty for a member that holds none)."""
        return tuple(s for s in self.segments if s.member == member)

    def segment_of_slot(self, s: int) -> Segment:
        """The segment covering slot ``s``."""
        for seg in self.segments:
            if seg.lo <= s < seg.hi:
                return seg
        raise LayoutError(f"slot {s} is outside 0-{SLOTS - 1}")

    def with_maps(self, maps: Iterable[tuple[str, int | str | None]]) -> Layout:
        """The same slots and members with the maps placed as given (the planner's last step)."""
        return replace(self, maps=tuple(maps))

    def check_program(self, program: Program) -> Layout:
        """Raise :class:`LayoutError` unless every map of ``program`` is placed, on one of its key positions."""
        placed = dict(self.maps)
        for m in program.maps:
            if m.name not in placed:
                raise LayoutError(f"layout of box {self.box!r} does not place map {m.name!r}")
            col = placed.pop(m.name)
            if col is not None and col != EVERYWHERE and col >= len(m.keys):
                raise LayoutError(f"map {m.name!r} of box {self.box!r} has {len(m.keys)} key columns; partition column {col} does not exist")
        if placed:
            raise LayoutError(f"layout of box {self.box!r} places unknown maps: {', '.join(sorted(placed))}")
        return self

    # -- plain data (msgpack, JSON) -------------------------------------
    def to_dict(self) -> dict:
        """Plain data (str, int, None, lists, dicts) for msgpack or JSON; :meth:`from_dict` reads it back."""
        return {
            "box": self.box,
            "members": list(self.members),
            "segments": [[s.id, s.lo, s.hi, s.member] for s in self.segments],
            "maps": {m: c for m, c in self.maps},
            "layout": self.version,
            "first_epoch": self.first_epoch,
            **({} if self.coordinators is None else {"coordinators": list(self.coordinators)}),
        }

    @classmethod
    def from_dict(cls, data: Mapping) -> Layout:
        try:
            return cls(
                box=data["box"],
                members=tuple(data["members"]),
                segments=tuple(Segment(*map(int, s)) for s in data["segments"]),
                maps=tuple(data.get("maps", {}).items()),
                version=int(data.get("layout", 1)),
                first_epoch=int(data.get("first_epoch", 0)),
                coordinators=None if data.get("coordinators") is None else tuple(data["coordinators"]),
            )
        except (KeyError, TypeError) as exc:
            raise LayoutError(f"not a layout: {exc!r}") from None

    # -- boreas segments ---------------------------------------------------
    def describe(self, counts: Mapping[tuple[int, str], int] | None = None) -> list[str]:
        """``boreas segments`` lines: one per segment (its slots, node, and each map's entries), then a total.

        ``counts`` maps ``(segment id, map)`` to the entries a member reported;
        without it the lines name the maps only.  Home maps are listed on the
        segment holding the home slot.

        >>> lay = even_layout("q3", ["localhost:15001", "localhost:15002"], 2, maps=[("m3", 0), ("m2", None)])
        >>> print("\\n".join(lay.describe({(0, "m3"): 41230, (1, "m3"): 1904, (1, "m2"): 12})))
        q3/0  slots 0-2047     localhost:15001  m3 41,230
        q3/1  slots 2048-4095  localhost:15002  m3 1,904  m2 12
        layout 1, 2 members, 2 segments, 43,146 entries
        """
        home = self.segment_of_slot(home_slot(self.box)).id
        names = [s.name(self.box) for s in self.segments]
        ranges = [f"slots {s.lo}-{s.hi - 1}" for s in self.segments]
        nodes = [self.members[s.member] for s in self.segments]
        widths = [max(map(len, col), default=0) for col in (names, ranges, nodes)]
        lines, total = [], 0
        for seg, name, rng, node in zip(self.segments, names, ranges, nodes):
            cells = []
            for m, col in self.maps:
                if col is None and seg.id != home or col == EVERYWHERE:
                    continue
                if counts is None:
                    cells.append(m)
                else:
                    n = counts.get((seg.id, m), 0)
                    total += n
                    cells.append(f"{m} {n:,}")
            line = f"{name:<{widths[0]}}  {rng:<{widths[1]}}  {node:<{widths[2]}}  {'  '.join(cells)}"
            lines.append(line.rstrip())
        replicated = [m for m, col in self.maps if col == EVERYWHERE]
        if replicated:
            cells = [m if counts is None else f"{m} {counts.get((-1, m), 0):,}" for m in replicated]
            lines.append(f"replicated on every member: {'  '.join(cells)}")
        tail = (f"layout {self.version}, {counted(len(self.members), 'member')}, "
                f"{counted(len(self.segments), 'segment')}")
        lines.append(tail + (f", {counted(total, 'entry', sep=',')}" if counts is not None else ""))
        return lines


def even_layout(box: str, members: Sequence[str], segments: int | None = None,
                maps: Iterable[tuple[str, int | str | None]] = (), *, version: int = 1, first_epoch: int = 0) -> Layout:
    """``segments`` equal slot ranges (default: one per member), segment *i* on member ``i % len(members)``.

    The first ``SLOTS % segments`` segments are one slot wider, so sizes
    differ by at most one slot and the ranges still tile ``0..4096``.

    >>> [(s.lo, s.hi, s.member) for s in even_layout("b", ["a", "b", "c"], 5).segments]
    [(0, 820, 0), (820, 1639, 1), (1639, 2458, 2), (2458, 3277, 0), (3277, 4096, 1)]
    """
    n = len(members) if segments is None else segments
    if not 1 <= n <= SLOTS:
        raise LayoutError(f"partition of box {box!r}: segments={n}, between 1 and {SLOTS} (one per hash slot)")
    if not members:
        raise LayoutError(f"partition of box {box!r} lists no members")
    base, extra = divmod(SLOTS, n)
    segs, lo = [], 0
    for i in range(n):
        hi = lo + base + (1 if i < extra else 0)
        segs.append(Segment(i, lo, hi, i % len(members)))
        lo = hi
    return Layout(box, tuple(members), tuple(segs), tuple(maps), version, first_epoch)


def _validate(lay: Layout) -> tuple[int, ...]:
    """Check the layout; return its slot → member table."""
    box = lay.box
    if not lay.members:
        raise LayoutError(f"partition of box {box!r} lists no members")
    if not isinstance(lay.version, int) or lay.version < 0:
        raise LayoutError(f"layout of box {box!r}: version {lay.version!r}, a whole number >= 0")
    if not isinstance(lay.first_epoch, int) or lay.first_epoch < 0:
        raise LayoutError(f"layout of box {box!r}: first epoch {lay.first_epoch!r}, a whole number >= 0")
    ids: set[int] = set()
    for s in lay.segments:
        if s.id in ids:
            raise LayoutError(f"segments of box {box!r} have id {s.id} twice")
        ids.add(s.id)
        if not 0 <= s.lo < s.hi <= SLOTS:
            raise LayoutError(f"segment {s.id} of box {box!r} has slots {s.lo}-{s.hi - 1}; a segment is a non-empty range within 0-{SLOTS - 1}")
        if not 0 <= s.member < len(lay.members):
            raise LayoutError(f"segment {s.id} of box {box!r} is on member {s.member}; the partition has {len(lay.members)}")
    owners = [-1] * SLOTS
    for s in lay.segments:  # sorted by lo: a gap or an overlap shows at the first slot concerned
        for i in range(s.lo, s.hi):
            if owners[i] != -1:
                raise LayoutError(f"segments of box {box!r} overlap at slot {i}")
            owners[i] = s.member
    if -1 in owners:
        lo = owners.index(-1)
        hi = lo
        while hi < SLOTS and owners[hi] == -1:
            hi += 1
        raise LayoutError(f"segments of box {box!r} leave slots {lo}-{hi - 1} unowned")
    if lay.coordinators is not None:
        wrong = [c for c in lay.coordinators if not 0 <= c < len(lay.members)]
        if not lay.coordinators or wrong or len(set(lay.coordinators)) != len(lay.coordinators):
            raise LayoutError(f"layout of box {box!r}: coordinators {list(lay.coordinators)}; distinct member "
                              f"numbers 0-{len(lay.members) - 1}, at least one")
    seen: set[str] = set()
    for m, col in lay.maps:
        if m in seen:
            raise LayoutError(f"layout of box {box!r} places map {m!r} twice")
        seen.add(m)
        if col is not None and col != EVERYWHERE and (isinstance(col, bool) or not isinstance(col, int) or col < 0):
            raise LayoutError(f"map {m!r} of box {box!r} has partition column {col!r}; a key position (0, 1, ...), "
                              f"None (home) or {EVERYWHERE!r} (replicated)")
    return tuple(owners)
