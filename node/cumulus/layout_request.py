"""The layout a ``POST /segments/{box}/relayout`` request asks for, and the catalog partition that records it.

The leader's HTTP handler (:mod:`.api`) turns a request body (``move``,
``split``, ``move_all``, ``rebalance``, ``retire``) into a new
:class:`~boreas.m3.cumulus.Layout` here, with the coordinator list grown or
shrunk as docs/cumulus.md §6.5 says, and reports the result to the Head as a
catalog ``<partition>`` (:func:`partition_of_layout`).  These are pure
functions of the layout, kept apart from the handlers so that the decision
can be read, and tried in doctests, without a node.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from boreas.catalog.partition_model import Partition, SegmentPlacement
from boreas.m3.cumulus import Layout, LayoutError, relayout


def _member(layout: Layout, who: Any) -> int:
    """A member by number or by its node's endpoint."""
    if isinstance(who, int) and not isinstance(who, bool):
        return who
    text = str(who)
    if text.isdigit():
        return int(text)
    for i, node in enumerate(layout.members):
        if node == text or node.endswith(text) and text.startswith(":"):
            return i
    raise ValueError(f"node {text!r} is not a member of box {layout.box!r} (members: {', '.join(layout.members)}); "
                     "add it to the box's <partition> first")


def decide_layout(layout: Layout, body: dict, coordinators: int = 1, members: int | None = None) -> Layout:
    """The layout a change asks for (LayoutError/ValueError say why it does not fit), with its coordinator list.

    ``layout`` is the newest layout with any joining nodes as members,
    ``members`` how many of them are members already (default: all);
    ``coordinators`` the catalog's count of members publishers pick from
    while the layout lists none.  A change that makes joining nodes members
    lists them as coordinators too (the count becoming the list ``0 .. k-1``
    first), so growth spreads the coordinating; a retirement takes the member
    off the list (docs/cumulus.md §6.5: producers are handed over at the
    change's first epoch).

    >>> from boreas.m3.cumulus import even_layout
    >>> lay = even_layout("v", ["a", "b", "c"], 2)
    >>> grown = decide_layout(lay, {"move": [1, "c"]}, 2, members=2)
    >>> grown.coordinators, decide_layout(lay, {"move": [1, "a"]}, 3).coordinators
    ((0, 1, 2), None)
    >>> decide_layout(relayout.move(grown, 1, 0), {"retire": "c"}, 2).coordinators
    (0, 1)
    """
    new = _change(layout, body, coordinators)
    grown = tuple(range(len(layout.members) if members is None else members, len(new.members)))
    if new is layout or not grown:
        return new
    listed = layout.coordinators if layout.coordinators is not None else tuple(range(coordinators))
    return replace(new, coordinators=listed + tuple(g for g in grown if g not in listed))


def _change(layout: Layout, body: dict, coordinators: int) -> Layout:
    try:
        if "retire" in body:
            return relayout.retire(layout, _member(layout, body["retire"]), coordinators)
        if "move" in body:
            segment, who = body["move"]
            return relayout.move(layout, int(segment), _member(layout, who))
        if "split" in body:
            return relayout.split(layout, int(body["split"]))
        if "move_all" in body:
            return relayout.move_all(layout, _member(layout, body["move_all"]))
        if "rebalance" in body:
            return relayout.rebalance(layout, {int(k): int(v) for k, v in dict(body["rebalance"]).items()},
                                      [int(m) for m in body.get("guests", ())])
    except LayoutError as exc:
        raise ValueError(str(exc)) from None
    raise KeyError("no move, split, move_all, rebalance or retire")


def partition_of_layout(partition: Partition | None, layout: Layout) -> Partition:
    """The catalog's ``<partition>`` with ``layout``'s segments, version, members and coordinator list (what the
    Head commits, and what publishers that start later pick by: docs/cumulus.md §6.5)."""
    segments = tuple(SegmentPlacement(s.id, s.lo, s.hi, s.member) for s in layout.segments)
    if partition is None:
        return Partition(layout.box, layout.members, segments, layout=layout.version,
                         coordinator_list=layout.coordinators)
    n = len(layout.members)
    return replace(partition, segments=segments, layout=layout.version,
                   members=None if n >= len(partition.nodes) else n, coordinator_list=layout.coordinators)
