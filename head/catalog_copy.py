"""The Head's catalog as text, made once per catalog version: ``GET /catalog`` and full copies.

A whole-catalog read used to serialize every element again on every request
(at 10,000 boxes, 2.5 MB of XML and about 2 s per read), and a global
component's full copy did the same.  :class:`CatalogCopies` owns what is
kept instead:

* each element's XML text, kept for as long as the catalog holds that very
  element object (elements are replaced, never changed in place, on a
  commit), so a new version encodes only the elements its commits added or
  changed;
* for the current version, ``GET /catalog``'s body (bytes) and the full
  copy's documents, built on the first read of that version and shared by
  every later read of it.

The documents are byte for byte what :func:`~boreas.catalog.updates.update_document`
makes of :func:`~boreas.catalog.replicate.catalog_items` (a test compares them).
Watches are untouched: global components still get one delta per commit
(:mod:`.global_feed`).

Usage::

    copies = CatalogCopies(lambda: head.catalog, origin="head")
    body = copies.document()            # GET /catalog at the current version
    copy = copies.full_copy()           # copy.version, copy.documents (parts 1..n)
    copies.prepare()                    # both built now, from a worker thread (head/copy_ahead.py)
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from boreas.catalog.elements import element_key
from boreas.catalog.model import Box, Catalog
from boreas.catalog.replicate import catalog_items
from boreas.catalog.updates import encode_item, update_document
from boreas.catalog.xmlcodec import element_text
from lxml import etree

#: Items per document of a full copy: big enough to load fast, small enough to stream.
COPY_CHUNK = 2000


@dataclass(frozen=True)
class FullCopy:
    """A full copy of one catalog version: update documents marked ``copy="vN" part="i" parts="n"``."""

    version: int
    documents: tuple[str, ...]


def _document(texts: list[str], **attrs: Any) -> str:
    """``update_document`` of items already encoded: the same envelope around their texts."""
    empty = update_document([], **attrs)  # <update .../>: lxml writes an empty element this way
    if not texts:
        return empty
    return f"{empty[:-2]}>{''.join(texts)}</update>"


def _text(item: Any) -> str:
    """One element's update XML; a box written as a string (catalog/box_text.py: byte for byte lxml's, a
    third of the CPU of building and serializing its tree, and a copy is mostly boxes: issue 37)."""
    if isinstance(item, Box):
        return element_text(item)
    return etree.tostring(encode_item(item), encoding="unicode")


class CatalogCopies:
    """Owns the serialized catalog: per-element texts and the current version's documents."""

    def __init__(self, current: Callable[[], Catalog], origin: str):
        self.current = current
        self.origin = origin
        self._texts: dict[tuple[str, str], tuple[Any, str]] = {}  # (kind, key) -> (element, its XML)
        self._built_from: tuple[Catalog, int] | None = None  # the catalog (and version) of the two below
        self._document: bytes | None = None
        self._copy: FullCopy | None = None
        self.encoded = 0  # element encodings so far (a cheap read encodes nothing new)
        # Held while building: readers on the event loop and :meth:`prepare` in a worker (head/copy_ahead.py).
        self._lock = threading.Lock()

    def _element_texts(self, catalog: Catalog) -> list[str]:
        """Every element's text in full-copy order; elements not seen before are encoded now."""
        texts, kept = [], {}
        for item in catalog_items(catalog):
            key = element_key(item)
            cached = self._texts.get(key)
            if cached is None or cached[0] is not item:
                cached = (item, _text(item))
                self.encoded += 1
            kept[key] = cached
            texts.append(cached[1])
        self._texts = kept  # elements gone from the catalog are forgotten
        return texts

    def _at(self, catalog: Catalog) -> None:
        if self._built_from is None or self._built_from[0] is not catalog \
                or self._built_from[1] != catalog.version:
            self._built_from, self._document, self._copy = (catalog, catalog.version), None, None

    def prepare(self) -> tuple[int, float]:
        """Build the current version's copy and document now, before anyone reads them (thread-safe:
        :mod:`.copy_ahead` calls it from a worker thread); the version and the CPU seconds it took."""
        start = time.thread_time()
        copy = self.full_copy()
        self.document()
        return copy.version, time.thread_time() - start

    def document(self) -> bytes:
        """``GET /catalog``: the current catalog as one update document (UTF-8)."""
        with self._lock:
            catalog = self.current()
            self._at(catalog)
            if self._document is None:
                text = _document(self._element_texts(catalog), version=catalog.version, origin=self.origin)
                self._document = text.encode()
            return self._document

    def full_copy(self) -> FullCopy:
        """The current catalog as a full copy, in parts of :data:`COPY_CHUNK` elements."""
        with self._lock:
            return self._full_copy()

    def _full_copy(self) -> FullCopy:
        catalog = self.current()
        self._at(catalog)
        if self._copy is None:
            texts = self._element_texts(catalog)
            chunks = [texts[i:i + COPY_CHUNK] for i in range(0, len(texts), COPY_CHUNK)] or [[]]
            self._copy = FullCopy(catalog.version, tuple(
                _document(chunk, version=catalog.version, origin=self.origin, copy=f"v{catalog.version}",
                          part=index, parts=len(chunks))
                for index, chunk in enumerate(chunks, start=1)))
        return self._copy
