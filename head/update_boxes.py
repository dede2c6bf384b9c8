"""Which box an update item the Head sends a node is about: the key of its pending requests.

A node refuses an item about a box that is not there (it moved: paper
section 3.1.2); head/node_sync.py holds such items back per box
(head/pending.py), and a refused removal about the box a learnt change
touched is one the node made itself.  A subscription is about the box
producing its stream, found in what the node holds or should hold.

>>> from boreas.catalog.model import Box, InPort
>>> c = Catalog(boxes={"f": Box("f", "filter", (InPort("S"),), ("O",))})
>>> box_of(Subscription("O", "c:1"), c, Catalog()), removal_box(Delete(output="O"), Catalog(), c)
('f', 'f')
"""

from __future__ import annotations

from typing import Any

from boreas.catalog.documents import Delete, Modify, Unsubscribe
from boreas.catalog.model import Box, Catalog, Subscription


def producer(stream: str, *catalogs: Catalog) -> str | None:
    for catalog in catalogs:
        for box in catalog.boxes.values():
            if stream in box.outputs:
                return box.name
    return None


def box_of(item: Any, held: Catalog, desired: Catalog) -> str | None:
    """The box an update item is about, if it is about one."""
    match item:
        case Box():
            return item.name
        case Modify() | Delete() if item.box:
            return item.box
        case Subscription() | Unsubscribe():
            return producer(item.stream, held, desired)
    return None


def removal_box(item: Any, held: Catalog, desired: Catalog) -> str | None:
    """The box a removal is about: :func:`box_of`, and an output's producer for ``Delete(output=s)``."""
    if isinstance(item, Delete) and item.output:
        return producer(item.output, held, desired)
    return box_of(item, held, desired)
