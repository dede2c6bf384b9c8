"""Failover of a partition member: what the adopter hands the guest and its own members first (docs/cumulus.md §6.3).

:mod:`boreas.node.adopt` replays a failed node's log off to the side; for
a partitioned box the replayed operator's state becomes a **guest** of the
adopter's own operator of that box (:mod:`~boreas.node.cumulus.hosting`).
Members apply messages in the order each sender sent them, so at the
takeover, before anything new is sent between the two, come:

* for each guest: what the adopter's members had sent the failed node on
  the guest's internal stream (``{box}@{member}``) and the failed node
  never took (its replay's positions say which), taken back from the link
  and the outbox;
* for each of the adopter's own members: what the replay sent it (the
  failed node's messages after its last snapshot) that this node's
  receiver has not taken yet.

Both come as plain messages in their senders' order; the adopter's
receiver then expects the next numbers of everything the failed node had
taken (its other peers' redirected resends are dropped as duplicates).

>>> streams_of("v", [1, 2])
['v@1', 'v@2']
"""

from __future__ import annotations

import logging
from typing import Any

from .messages import MessageRows

log = logging.getLogger(__name__)


def streams_of(box: str, members: list[int]) -> list[str]:
    """The internal streams carrying messages to ``members`` of ``box``."""
    return [f"{box}@{m}" for m in members]


def members_of(state: dict) -> list[int]:
    """The members a replayed operator's ``state()`` holds (its own, and guests it hosted itself)."""
    return [int(state["member"]), *(int(m) for m in (state.get("guests") or {}))]


def taken_back(batches: list[tuple[str, bytes | list, str, int]], processed: dict[tuple[str, str], int]) -> list[list]:
    """Messages of ``(stream, rows, producer, seq)`` batches the failed node did not take, in their senders' order.

    ``rows`` are a batch's encoded rows (from a link) or already decoded
    (from the outbox); ``processed`` is the replay's last sequence taken per
    (stream, producer).

    >>> import msgspec
    >>> raw = msgspec.Raw(msgspec.msgpack.encode([["c", 0, 1, None]]))
    >>> taken_back([("v@2", raw, "v~b", 4), ("v@2", [["c", 0, 0, None]], "v~b", 3)], {("v@2", "v~b"): 3})
    [['c', 0, 1, None]]
    """
    decoder = MessageRows()
    kept = []
    for stream, rows, producer, seq in sorted(batches, key=lambda b: (b[0], b[2], b[3])):
        if seq <= processed.get((stream, producer), -1):
            continue  # the failed node took it: its replay holds it
        kept += list(rows) if isinstance(rows, list) else decoder.decode(bytes(rows))[0]  # (bytes, msgspec.Raw)
    return kept


def replayed_for(outputs: list[tuple], endpoint: str, streams: set[str], sequencer: Any) -> dict[str, list[list]]:
    """Per stream of ``streams``, the replay's messages for ``endpoint`` its receiver has not taken (in order).

    ``outputs`` are the replay's ``(endpoint, stream, rows, producer, seq,
    restart)``; each message is marked taken in ``sequencer``.
    """
    found: dict[str, list[list]] = {}
    for target, stream, rows, producer, seq, _ in sorted((o for o in outputs if o[0] == endpoint and o[1] in streams),
                                                         key=lambda o: (o[1], o[3], o[4])):
        expected = sequencer.positions(stream).get((stream, producer))
        if expected is None or seq >= expected:
            found.setdefault(stream, []).extend(list(m) for m in rows)
            sequencer.expect(stream, producer, seq + 1)
    return found


def pending_for(box: str, guests: list[int], own: list[int], link: Any, withdrawn: list[tuple],
                processed: dict[tuple[str, str], int], outputs: list[tuple], endpoint: str,
                sequencer: Any) -> dict[int, list[list]]:
    """What each hosted member of ``box`` takes before anything new (see the module docstring).

    ``link`` is this node's link to the failed node (None if it has none),
    ``withdrawn`` what its outbox held for it on the guests' streams.
    """
    pending: dict[int, list[list]] = {}
    for member, stream in zip(guests, streams_of(box, guests)):
        batches = [(b.stream, b.rows, b.producer, b.seq) for b in (link.take(stream) if link is not None else ())]
        batches += [w for w in withdrawn if w[0] == stream]
        pending[member] = taken_back(batches, processed)
    replayed = replayed_for(outputs, endpoint, set(streams_of(box, own)), sequencer)
    for member, stream in zip(own, streams_of(box, own)):
        if replayed.get(stream):
            pending[member] = replayed[stream]
    return pending
