"""Layout changes of a partitioned box: move, split, rebalance (docs/cumulus.md §6.1).

Pure functions from a :class:`~.layout.Layout` to the next one (version +1);
what data moves follows from comparing the two (:func:`moves`).  The leader
applies them at an epoch boundary; these functions only decide.

>>> from .layout import even_layout
>>> lay = even_layout("v", ["a", "b", "c"], 6)
>>> moved = move(lay, 2, 0)
>>> moved.version, [s.member for s in moved.segments], moves(lay, moved)
(2, [0, 1, 0, 0, 1, 2], [(2, 2, 0)])
>>> halves = split(lay, 1)
>>> [(s.id, s.lo, s.hi, s.member) for s in halves.segments][1:3], moves(lay, halves)
([(1, 683, 1024, 1), (6, 1024, 1366, 1)], [])
>>> even = rebalance(lay, {0: 900, 1: 10, 2: 10, 3: 900, 4: 10, 5: 10})  # 0 and 3 split, halves spread
>>> len(even.segments), moves(lay, even)
(8, [(0, 0, 1), (6, 0, 2)])
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import replace

from .layout import Layout, LayoutError, Segment


def _segment(layout: Layout, segment: int) -> Segment:
    for s in layout.segments:
        if s.id == segment:
            return s
    ids = ", ".join(str(s.id) for s in sorted(layout.segments, key=lambda s: s.id))
    raise LayoutError(f"box {layout.box!r} has no segment {segment} (segments: {ids})")


def move(layout: Layout, segment: int, member: int) -> Layout:
    """Segment ``segment`` on ``member``."""
    seg = _segment(layout, segment)
    if not 0 <= member < len(layout.members):
        raise LayoutError(f"box {layout.box!r} has no member {member} (members 0-{len(layout.members) - 1})")
    if seg.member == member:
        raise LayoutError(f"segment {layout.box}/{segment} is already on member {member} ({layout.members[member]})")
    segments = tuple(replace(s, member=member) if s.id == segment else s for s in layout.segments)
    return replace(layout, segments=segments, version=layout.version + 1)


def move_all(layout: Layout, member: int) -> Layout:
    """Every segment on ``member`` (the whole box on one node)."""
    if not 0 <= member < len(layout.members):
        raise LayoutError(f"box {layout.box!r} has no member {member} (members 0-{len(layout.members) - 1})")
    if all(s.member == member for s in layout.segments):
        raise LayoutError(f"every segment of box {layout.box!r} is already on member {member}")
    return replace(layout, segments=tuple(replace(s, member=member) for s in layout.segments),
                   version=layout.version + 1)


def split(layout: Layout, segment: int) -> Layout:
    """Segment ``segment`` in two halves on the same member; the upper half gets a new id (no data moves)."""
    seg = _segment(layout, segment)
    if seg.hi - seg.lo < 2:
        raise LayoutError(f"segment {layout.box}/{segment} is one slot ({seg.lo}); it cannot be split")
    mid = (seg.lo + seg.hi) // 2
    new_id = max(s.id for s in layout.segments) + 1
    segments = [s for s in layout.segments if s.id != segment]
    segments += [Segment(seg.id, seg.lo, mid, seg.member), Segment(new_id, mid, seg.hi, seg.member)]
    return replace(layout, segments=tuple(segments), version=layout.version + 1)


def rebalance(layout: Layout, entries: Mapping[int, int], guests: Collection[int] = ()) -> Layout:
    """Even out entries over the box's nodes: split segments holding over 1.5x the mean segment, then move
    segments from the fullest node to the emptiest while that lowers the fullest node's entries.

    ``entries`` maps segment id to its entries (``GET /segments``); a split
    halves its count.  Members that share a node count as that node: after
    a failover the node that took a member over hosts it as a *guest*
    (docs/cumulus.md §6.3; the layout names the host's endpoint for both;
    ``guests`` names them, from each node's ``GET /segments``: its hosted
    members but its own), and rebalancing hands the guests' segments to
    their node's own member (a copy inside the process) or to another node,
    so a guest ends empty and reads need it no more, and evens out the
    nodes.  Returns ``layout`` itself when nothing would improve.

    >>> from .layout import even_layout
    >>> lay = replace(even_layout("v", ["a", "b", "c"], 6), members=("a", "b", "a"))  # c failed over to a
    >>> even = rebalance(lay, {0: 10, 1: 10, 2: 10, 3: 10, 4: 10, 5: 10}, guests=[2])
    >>> [s.member for s in even.segments], moves(lay, even)
    ([0, 1, 1, 0, 1, 0], [(2, 2, 1), (5, 2, 0)])
    >>> lay = replace(lay, members=("b", "b", "c"))  # the leader's node failed over to member 1's
    >>> [s.member for s in rebalance(lay, {0: 10, 1: 10, 2: 10, 3: 10, 4: 10, 5: 10}, guests=[0]).segments]
    [2, 1, 2, 1, 1, 2]
    """
    lay = layout
    counts = {s.id: int(entries.get(s.id, 0)) for s in lay.segments}
    mean = sum(counts.values()) / max(1, len(counts))
    for sid in sorted(counts, key=lambda i: -counts[i]):
        seg = _segment(lay, sid)
        if mean and counts[sid] > 1.5 * mean and seg.hi - seg.lo >= 2:
            lay = split(lay, sid)
            new_id = max(s.id for s in lay.segments)
            counts[sid], counts[new_id] = counts[sid] - counts[sid] // 2, counts[sid] // 2
    first: dict[str, int] = {}  # a node's endpoint -> its own member (the others there are guests)
    for m, node in sorted(enumerate(lay.members), key=lambda item: item[0] in guests):
        first.setdefault(node, m)
    now = {s.id: s.member for s in lay.segments}
    owner = {sid: first[lay.members[m]] for sid, m in now.items()}
    members = sorted(first.values())
    for _ in range(4 * len(owner)):
        load = {m: sum(n for s, n in counts.items() if owner[s] == m) for m in members}
        full, empty = max(members, key=lambda m: load[m]), min(members, key=lambda m: load[m])
        best = None
        for sid in (s for s in owner if owner[s] == full):
            # fullest node's entries after; a tie goes to a guest's segment, which moves anyway
            key = (max(load[full] - counts[sid], load[empty] + counts[sid]), now[sid] == full)
            if key[0] < load[full] and (best is None or key < best[0]):
                best = (key, sid)
        if best is None:
            break
        owner[best[1]] = empty
    segments = tuple(replace(s, member=owner[s.id]) for s in lay.segments)
    if segments == lay.segments and lay is layout:
        return layout
    return replace(lay, segments=segments, version=layout.version + 1)


def retire(layout: Layout, member: int, keep: int = 1) -> Layout:
    """The layout without ``member``: the last member, holding no segment, and not one of the first ``keep``
    (the members publishers pick from, which coordinate their producers' batches; docs/cumulus.md §6.4).

    >>> from .layout import even_layout
    >>> lay = move(even_layout("v", ["a", "b", "c"], 3), 2, 0)
    >>> retire(lay, 2, keep=2).members, retire(lay, 2, keep=2).version
    (('a', 'b'), 3)
    >>> retire(lay, 1, keep=1)
    Traceback (most recent call last):
    ...
    boreas.m3.cumulus.layout.LayoutError: member 1 (b) of box 'v' is not the last member; members retire from the end (the last is 2, c)
    """
    n, box = len(layout.members), layout.box
    if not 0 <= member < n:
        raise LayoutError(f"box {box!r} has no member {member} (members 0-{n - 1})")
    who = f"member {member} ({layout.members[member]}) of box {box!r}"
    if member != n - 1:
        raise LayoutError(f"{who} is not the last member; members retire from the end (the last is {n - 1}, "
                          f"{layout.members[-1]})")
    listed = layout.coordinators
    if listed is not None:  # a listed coordinator hands its producers over at the retirement's first epoch (§6.5)
        if set(listed) <= {member}:
            raise LayoutError(f"{who} is the only coordinator of published input; add another member first")
    elif member < keep:
        raise LayoutError(f"{who} coordinates published input (publishers pick among the first {keep} members); "
                          "only a member added to the partition later retires")
    held = sorted(s.id for s in layout.segments_of(member))
    if held:
        raise LayoutError(f"{who} still holds segment{'s' if len(held) > 1 else ''} "
                          f"{', '.join(f'{box}/{i}' for i in held)}; move them to other members first")
    return replace(layout, members=layout.members[:-1], version=layout.version + 1,
                   coordinators=None if listed is None else tuple(c for c in listed if c != member))


REPLICAS = -1
"""The segment of a move that copies the replicated maps to a member joining (docs/cumulus.md §3.11)."""


def moves(old: Layout, new: Layout) -> list[tuple[int, int, int]]:
    """``(segment, from member, to member)`` for each segment of ``new`` whose slots another member held in ``old``.

    A split keeps its halves where they were, so only real moves appear;
    segments are compared by slot range start (ids of split halves are new).
    A member that ``new`` adds (one joining) is sent the replicated maps by
    member 0: a move of segment :data:`REPLICAS`.

    >>> from .layout import even_layout
    >>> lay = even_layout("v", ["a", "b"], 2, maps=[("t", 0), ("d", "*")])
    >>> grown = move(replace(lay, members=("a", "b", "c")), 1, 2)
    >>> moves(lay, grown)
    [(1, 1, 2), (-1, 0, 2)]
    """
    out = []
    for s in new.segments:
        before = old.owner_of_slot(s.lo)
        if before != s.member:
            out.append((s.id, before, s.member))
    if new.replicated:
        out += [(REPLICAS, 0, joining) for joining in range(len(old.members), len(new.members))]
    return out
