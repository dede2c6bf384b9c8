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
    built = await copies.read()         # on the event loop: built in a worker thread, or the build under way
    built.document                      # GET /catalog at that version (bytes)
    built.copy                          # its full copy: copy.version, copy.documents (parts 1..n)
    copies.full_copy()                  # off the loop (benchmarks, tests): built in the calling thread
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from boreas.catalog.elements import KIND_TO_DICT, element_key
from boreas.catalog.model import Box, Catalog
from boreas.catalog.replicate import catalog_items
from boreas.catalog.updates import encode_item, update_document
from boreas.catalog.xmlcodec import element_text
from lxml import etree

from .yielding import Yielder

log = logging.getLogger(__name__)

#: Items per document of a full copy: big enough to load fast, small enough to stream.
COPY_CHUNK = 2000
#: A Catalog dict's name -> the kind its elements are kept under.
DICT_KIND = {attr: kind for kind, (attr, _) in KIND_TO_DICT.items()}


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


@dataclass(frozen=True)
class Serialized:
    """One catalog version serialized: ``GET /catalog``'s body and the full copy, both made from the same
    catalog object in one pass (so the version a reader is told is the documents' version)."""

    catalog: Catalog
    document: bytes
    copy: FullCopy
    cpu: float  # CPU seconds the build took (head/copy_ahead.py spaces its builds by it)

    @property
    def version(self) -> int:
        return self.copy.version


class CatalogCopies:
    """Owns the serialized catalog: per-element texts, the current version's documents, the build under way.

    On the event loop, read with :meth:`read`: it never blocks the loop.  A
    build runs in a worker thread, one at a time; readers arriving meanwhile
    await that build (an asyncio future) instead of starting another.
    :meth:`serialize` (and :meth:`document`, :meth:`full_copy`) build in the
    calling thread: for callers off the loop (benchmarks, tests, the worker).
    """

    def __init__(self, current: Callable[[], Catalog], origin: str, yielder: Yielder | None = None):
        self.current = current
        self.origin = origin
        # A build's checkpoint, called per element: it gives the GIL back to the event loop every few
        # milliseconds (head/yielding.py), so a build of 100,000 elements does not slow every request.
        self.yielder = yielder or Yielder()
        self._texts: dict[tuple[str, str], tuple[Any, str]] = {}  # (kind, key) -> (element, its XML)
        self._built: Serialized | None = None  # the latest version built
        self._building: asyncio.Future[Serialized] | None = None  # the worker's build under way (loop only)
        self.encoded = 0  # element encodings so far (a cheap read encodes nothing new)
        # Held while building, by a worker thread or a caller off the loop; never taken on the event loop.
        self._lock = threading.Lock()

    def _element_texts(self, catalog: Catalog) -> list[str]:
        """Every element's text in full-copy order; elements not seen before are encoded now."""
        texts, kept = [], {}
        tick = self.yielder
        for item in catalog_items(catalog):
            tick()
            key = element_key(item)
            cached = self._texts.get(key)
            if cached is None or cached[0] is not item:
                cached = (item, _text(item))
                self.encoded += 1
            kept[key] = cached
            texts.append(cached[1])
        self._texts = kept  # elements gone from the catalog are forgotten
        return texts

    def warm(self, touched: Mapping[str, Iterable[str]]) -> int:
        """Encode the current catalog's elements at ``touched`` (Catalog dict -> keys a commit wrote) that are
        not kept yet, and forget those gone; the number encoded.  Costs what the commit wrote: the next
        build then only walks the kept texts and joins them (blocks: for a worker thread)."""
        encoded = 0
        with self._lock:
            catalog = self.current()
            self.yielder.start()
            for name, keys in touched.items():
                kind = DICT_KIND.get(name)
                if kind is None:  # (not an element of a copy: nothing kept for it)
                    continue
                elements = getattr(catalog, name)
                for key in keys:
                    self.yielder()
                    item = elements.get(key)
                    if item is None:
                        self._texts.pop((kind, key), None)
                        continue
                    cached = self._texts.get((kind, key))
                    if cached is None or cached[0] is not item:
                        self._texts[(kind, key)] = (item, _text(item))
                        self.encoded += 1
                        encoded += 1
        return encoded

    def _is_current(self, built: Serialized | None, catalog: Catalog) -> bool:
        return built is not None and built.catalog is catalog and built.version == catalog.version

    def serialize(self) -> Serialized:
        """The current version serialized, built now in the calling thread unless it already is (blocks:
        not for the event loop, which uses :meth:`read`)."""
        with self._lock:
            catalog = self.current()
            if self._is_current(self._built, catalog):
                assert self._built is not None
                return self._built
            start = time.thread_time()
            self.yielder.start()
            texts = self._element_texts(catalog)
            document = _document(texts, version=catalog.version, origin=self.origin).encode()
            self.yielder()
            chunks = [texts[i:i + COPY_CHUNK] for i in range(0, len(texts), COPY_CHUNK)] or [[]]
            documents = []
            for index, chunk in enumerate(chunks, start=1):
                self.yielder()
                documents.append(_document(chunk, version=catalog.version, origin=self.origin,
                                           copy=f"v{catalog.version}", part=index, parts=len(chunks)))
            copy = FullCopy(catalog.version, tuple(documents))
            self._built = Serialized(catalog, document, copy, time.thread_time() - start)
            return self._built

    def ready(self) -> Serialized | None:
        """The current version serialized if it is built already (no waiting, no building)."""
        built = self._built
        return built if self._is_current(built, self.current()) else None

    async def read(self, wanted: bool = True) -> Serialized:
        """On the event loop: the current version serialized, or a newer one; built in a worker thread if
        need be, and a build under way is awaited, not repeated.  The loop keeps serving meanwhile.  A reader
        that ``wanted`` it (all but the copy built ahead) makes the build, and a warm holding the lock, wait
        for no request's end meanwhile (:meth:`~.yielding.Yielder.awaited`)."""
        if wanted:
            with self.yielder.awaited():
                return await self.read(wanted=False)
        version = self.current().version
        while True:
            built = self._built
            if self._is_current(built, self.current()) or (built is not None and built.version >= version):
                assert built is not None
                return built
            task = self._building
            if task is None:
                task = asyncio.ensure_future(asyncio.to_thread(self.serialize))
                self._building = task
                task.add_done_callback(self._build_done)
            await asyncio.shield(task)  # (a reader cancelled does not cancel the others' build)

    def _build_done(self, task: asyncio.Future[Serialized]) -> None:
        self._building = None
        if not task.cancelled() and task.exception() is not None:  # its readers got it too
            log.error("serializing the catalog failed", exc_info=task.exception())

    def document(self) -> bytes:
        """``GET /catalog``: the current catalog as one update document (UTF-8); blocks (see :meth:`read`)."""
        return self.serialize().document

    def full_copy(self) -> FullCopy:
        """The current catalog as a full copy, in parts of :data:`COPY_CHUNK` elements; blocks (see :meth:`read`)."""
        return self.serialize().copy
