"""Assembling a full copy of the global catalog from its parts, as the Head sends them.

A full copy of 100,000 boxes is about 26 MB of update XML in parts of
:data:`~boreas.head.catalog_copy.COPY_CHUNK` elements.  It used to cost a
global component about ten times what the Head spends writing it, for two
reasons this module removes:

* every part was checked against the update XSD again, though the Head
  validated every element when it came in and wrote the copy itself.  A
  component trusts the Head's text, as nodes trust their slices
  (``head/node_sync.py``): decoding still reports anything it cannot read,
  and a document that does not decode is refused whole;
* Python's cyclic garbage collector ran over every object the component
  holds (the copy is 100,000 boxes of small tuples and dataclasses) again
  and again while the parts were decoded: about half of the time at 30,000
  boxes.  Decoding makes no reference cycles (lxml's trees are freed by
  reference counting), so the collector is paused while one document is
  decoded or a copy applied (:func:`~boreas.catalog.collector.collector_paused`);
* every part was applied to a fresh copy of the catalog built so far
  (:func:`~boreas.catalog.replicate.apply_update` copies its input), which
  costs time in the square of the number of parts.  Parts are kept as items
  and applied once, in order, when the last arrives.

The result is the catalog :func:`apply_update` makes of all the parts' items
in order, which is what it was before (a test compares it with the Head's).

>>> from boreas.catalog.model import Catalog, Node
>>> from boreas.catalog.updates import update_document
>>> assembly = CopyAssembly()
>>> part = lambda i, n, e: update_document([Node(e)], version=3, copy="v3", part=i, parts=n)
>>> assembly.take(read_head_update(part(1, 2, "a:1"))) is None
True
>>> copy = assembly.take(read_head_update(part(2, 2, "b:2")))
>>> sorted(copy.nodes), copy.version
(['a:1', 'b:2'], 3)
"""

from __future__ import annotations

from typing import Any

from boreas.catalog.collector import collector_paused
from boreas.catalog.documents import Update, read_document
from boreas.catalog.model import Catalog
from boreas.catalog.replicate import apply_update

#: Where the Head's update XML comes from, in diagnostics.
SOURCE = "update XML from the Head"


def read_head_update(data: bytes | str) -> Any:
    """Decode update XML the Head wrote, without the XSD gate (the Head validated what it holds).

    Raises :class:`~boreas.catalog.diagnostics.ValidationFailed` on XML that is malformed, too large,
    or does not decode, naming line and element, as :func:`~boreas.catalog.documents.read_document` does.
    """
    with collector_paused():
        return read_document(data, SOURCE, check_schema=False)


class CopyAssembly:
    """Owns the parts of the full copy in progress; :meth:`take` returns the catalog once all are in."""

    def __init__(self) -> None:
        self._copy_id: str | None = None
        self._next_part = 1
        self._items: list[Any] = []

    def take(self, doc: Update) -> Catalog | None:
        """Keep one part; the whole copy when ``doc`` is its last part, else None.

        Part 1 starts a new copy (abandoning any other in progress); a part of an abandoned copy or one
        out of order is ignored (the Head sends a copy's parts in order, one copy at a time).  Raises
        :class:`~boreas.catalog.replicate.UpdateRejected` if the assembled items do not apply, and
        then holds nothing.
        """
        if doc.part == 1:
            self._copy_id, self._next_part, self._items = doc.copy, 1, []
        if self._copy_id is None or doc.copy != self._copy_id or doc.part != self._next_part:
            return None
        self._items.extend(doc.items)
        self._next_part += 1
        if doc.part != doc.parts:
            return None
        items, self._items, self._copy_id = self._items, [], None
        with collector_paused():
            return apply_update(Catalog(), items, doc.version)
