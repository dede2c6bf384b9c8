"""A committed partition submitted again: what of it may change (docs/cumulus.md §2.4, §6.4).

Resubmitting a deployment with a ``<partition>`` that is already committed
keeps its layout and lets its member list grow by nodes appended after the
running ones; anything else is refused with the way to do it instead
(``boreas split/move/rebalance``, or delete and submit again).  Used by
:class:`~.placement.Placement` for each ``<partition>`` of a submission.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from .diagnostics import Origin
from .model import Partition, SegmentPlacement
from .words import counted


def resubmitted(before: Partition, part: Partition, fail: Callable[[Origin, str], None]) -> Partition | None:
    """A committed partition submitted again: the same layout, nodes appended (None: refused)."""
    box = part.box
    if sorted(part.replicate) != sorted(before.replicate):
        fail(part.origin, f"box {box!r} replicates {' '.join(before.replicate) or 'no map'}; a "
                          f"resubmission cannot change replicate= (it asks for "
                          f"{' '.join(part.replicate) or 'none'}): delete the box and submit it again to "
                          f"change what it replicates")
        return None
    changed = (part.key != before.key or dict(part.pins) != dict(before.pins)
               or part.count not in (None, before.count, len(before.segments)))
    if part.planned:  # catalog form: its layout must be the committed one
        changed = changed or (part.maps, part.layout, part.id) != (before.maps, before.layout, before.id)
    if changed:
        fail(part.origin, f"box {box!r} is partitioned into {counted(len(before.segments), 'segment')}; "
                          f"change the layout with boreas split/move/rebalance")
        return None
    # Members keep their segments wherever they now are in the list: old member i -> new index.
    free = list(enumerate(part.nodes))
    moved: dict[int, int] = {}
    for i, endpoint in enumerate(before.nodes):
        j = next((k for k, (_, e) in enumerate(free) if e == endpoint), None)
        if j is not None:
            moved[i] = free.pop(j)[0]
    ok = True
    for i, endpoint in enumerate(before.nodes):
        held = [str(s.id) for s in before.segments if s.member == i]
        if i not in moved and held:
            ok = False
            fail(part.origin, f"node {endpoint!r} still holds segment{'s' if len(held) > 1 else ''} "
                              f"{', '.join(held)} of box {box!r}; move them first")
    if not ok:
        return None
    grown = part.nodes[:len(before.nodes)] == before.nodes and len(part.nodes) > len(before.nodes)
    if part.nodes != before.nodes and not grown:
        # Running members number themselves by their place in this list: appending is all a running
        # partition follows (the new nodes join at its next layout change, docs/cumulus.md §6.4).
        fail(part.origin, f"box {box!r} runs on {counted(len(before.nodes), 'member')} "
                          f"({', '.join(before.nodes)}); a running partition grows by <node>s added "
                          f"after these, in this order; removing or reordering its members is not "
                          f"supported")
        return None
    segments = tuple(SegmentPlacement(s.id, s.lo, s.hi, moved[s.member]) for s in before.segments)
    if part.planned and part.segments != segments:
        fail(part.origin, f"box {box!r} is partitioned into {counted(len(before.segments), 'segment')}; "
                          f"change the layout with boreas split/move/rebalance")
        return None
    if grown:
        return replace(before, nodes=part.nodes, epoch_ms=part.epoch_ms, origin=part.origin,
                       members=len(before.layout_nodes), coordinators=len(before.modulo_nodes))
    return replace(before, nodes=part.nodes, segments=segments, epoch_ms=part.epoch_ms, origin=part.origin)
