"""Which member of a partitioned box coordinates a producer's batches (docs/cumulus.md §3.5, §6.5).

A publisher sends all of one producer's batches to one member, which stamps
them in their order; the node hosting that member must pick the same one.
Two rules, chosen by what the layout carries:

* a **count** *k* (no list yet: a partition never grown with the list, as
  old catalogs are): ``crc32(producer) % k``;
* a **list** of member numbers (:attr:`~boreas.m3.cumulus.layout.Layout.coordinators`):
  *rendezvous hashing*, the member ``c`` of the list with the highest
  ``blake2b(f"{producer}/{c}")`` (crc32 would not do: it is affine in its
  input, so names that differ in one character rank the members alike).  Adding a member to the list moves only the
  producers it wins (about ``1 / (k + 1)`` of them, each from its old
  coordinator to the new one); taking one out spreads only its producers
  over the rest.  With the modulo, growing from 3 to 4 would move 3 of 4.

>>> pick("p-1", 3), pick("p-1", (0, 1, 2))
(0, 2)
>>> grown = [pick(f"p-{i}", (0, 1, 2, 3)) for i in range(1000)]
>>> moved = sum(pick(f"p-{i}", (0, 1, 2)) != g for i, g in enumerate(grown))
>>> moved == grown.count(3), 200 < moved < 300   # only the new member's winners move
(True, True)
"""

from __future__ import annotations

import hashlib
import zlib
from collections.abc import Sequence


def pick(producer: str, coordinators: int | Sequence[int]) -> int:
    """The member number coordinating ``producer``: ``coordinators`` is a count (modulo) or a list (rendezvous)."""
    if isinstance(coordinators, int):
        return zlib.crc32(producer.encode()) % max(1, coordinators)
    if not coordinators:
        raise ValueError("an empty coordinator list picks no member")
    return max(coordinators, key=lambda c: hashlib.blake2b(f"{producer}/{c}".encode(), digest_size=8).digest())
