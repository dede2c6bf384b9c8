"""Which nodes a producer sends its batches to, from the Head's answer for its stream.

Kept apart from the publisher because the pick is the routing contract
between clients and a partitioned box's members (docs/cumulus.md §6.5):
a publisher, a keyed publisher's sub-producers and the tests of a layout
change all ask it the same question.
"""

from __future__ import annotations

import zlib


def pick_entries(route: dict, producer: str, member: int | None = None) -> list[str]:
    """The nodes a producer sends to: every entry node, or one member of a partitioned box.

    A stream feeding a partitioned ``m3`` box enters at every member
    (``"pick": "member"``, entries by member number); one producer always
    feeds the same member, which coordinates its batches in their order,
    and many producers spread over all members.  ``member`` pins the pick
    to that member when it is one of the entries (a keyed publisher's
    sub-producer, :mod:`~boreas.client.keyed`); any member may coordinate
    any producer, the pick only keeps one producer on one member.  Once a
    layout change listed the coordinators (``"coordinators"``: member
    numbers), a producer picks among them as the members do, by rendezvous
    hashing (:mod:`boreas.m3.cumulus.coordinators`), so a publisher that
    starts after the change goes straight to its coordinator; before, by
    ``crc32 % len(entries)``.

    >>> pick_entries({"entries": ["a", "b"]}, "p")
    ['a', 'b']
    >>> pick_entries({"entries": ["a", "b", "c"], "pick": "member"}, "p")
    ['b']
    >>> pick_entries({"entries": ["a", "b", "c"], "pick": "member"}, "p", member=2)
    ['c']
    >>> pick_entries({"entries": ["a", "b", "c"], "pick": "member", "coordinators": [0, 1, 2]}, "p-1")
    ['c']
    """
    entries = list(route.get("entries") or [])
    if route.get("pick") == "member" and entries:
        if member is not None and 0 <= member < len(entries):
            return [entries[member]]
        listed = route.get("coordinators")
        if listed:  # the layout's list (docs/cumulus.md §6.5): the members' own rendezvous pick
            from boreas.m3.cumulus.coordinators import pick  # (imported here: m3.cumulus costs a publisher's start)
            return [entries[pick(producer, listed)]]
        return [entries[zlib.crc32(producer.encode()) % len(entries)]]
    return entries
