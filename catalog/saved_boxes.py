"""The catalog's boxes kept in the store as one msgpack blob beside the saved index, so a start decodes them in bulk.

A Head's start reads the whole catalog from the store: at 100,000 boxes
that was 2.2-3 s CPU, nearly all of it parsing each box's XML text with
lxml and decoding it element by element (:func:`.elements.catalog_from_elements`,
about 20 us a box).  Boxes are the elements that scale, so the leading Head,
when it saves its index (:func:`.index_checkpoint.save_index`), saves the
same catalog version's boxes as one blob under :data:`KEY`: a header
(format, catalog version, the number of boxes, a checksum of the payload)
and every box's fields as msgpack maps (compressed), which ``msgspec`` decodes straight
into :class:`~.model.Box` values (no XML, no per-field Python).  A start
(:func:`read_catalog_at_start`) reads the store's snapshot as before and
takes the boxes from the blob when it was saved for that very version
and names exactly the snapshot's boxes; every other element, and every box
of any other version, is decoded from its text as before.  A blob that is
stale, corrupt or missing is logged and ignored.

What a saved box carries is its value and its application, as the store's
text does; its origin is the stored catalog's (:data:`~.diagnostics.CATALOG`),
as a box decoded from the store has.  ``tests/test_saved_boxes.py`` holds
the result equal to reading every text.

The trust is the saved index's (:mod:`.index_codec`), and it weighs more
here: these are the catalog's boxes themselves, not facts derived from
them.  Within one store a version names the catalog's content: a blob is
kept in the catalog's own subtree (SQLite's file, ZooKeeper's
``<chroot>/catalog``), so a catalog laid out there again, counting its
versions from 0, never finds the blobs of the one before; the names and
the count guard against a blob of other boxes at the same version.
"""

from __future__ import annotations

import hashlib
import logging
import struct
import time
import zlib
from collections.abc import Callable
from typing import Any

import msgspec

from .elements import catalog_from_elements
from .model import Box, Catalog
from .store import CatalogStore, StoreError

log = logging.getLogger(__name__)

#: The store blob holding the boxes of the catalog version the index was last saved for.
KEY = "catalog-boxes"
#: Bumped whenever what a saved box holds changes: an older blob is then ignored.
FORMAT = 1
_MAGIC = b"BXBOX"
_HEAD = struct.Struct(">5sI")  # magic, header length
#: Boxes msgpack-encoded in one call: the encoder holds the GIL throughout, so a saver thread ticks between.
CHUNK = 2000

_DECODER = msgspec.msgpack.Decoder(list[Box])


class StaleBoxes(Exception):
    """The saved boxes are not the given snapshot's (another version or other boxes), or the blob is corrupt."""


#: The most bytes a saved blob of boxes may inflate to (about 200 a box: 2 GB is ten million boxes).
MAX_INFLATED = 2 << 30


class _Header(msgspec.Struct, array_like=True):
    format: int
    version: int
    count: int
    checksum: str


def _row(box: Box) -> dict[str, Any]:
    """``box`` as the map msgspec decodes into a :class:`Box`: every field but the origin (the stored
    catalog's default), fields at their default left out."""
    row: dict[str, Any] = {"name": box.name, "type": box.type,
                           "inputs": [_port(p.stream, p.view, p.attrs) for p in box.inputs],
                           "outputs": box.outputs}
    for name, value in (("params", box.params), ("access", box.access), ("node", box.node),
                        ("attrs", box.attrs), ("app", box.app)):
        if value:
            row[name] = value
    return row


def _port(stream: str, view: str | None, attrs: tuple) -> dict[str, Any]:
    port: dict[str, Any] = {"stream": stream}
    if view is not None:
        port["view"] = view
    if attrs:
        port["attrs"] = attrs
    return port


def _checksum(payload: bytes) -> str:
    return hashlib.blake2b(payload, digest_size=16).hexdigest()


def encode_boxes(catalog: Catalog, tick: Callable[[], None] | None = None) -> bytes:
    """``catalog``'s boxes as the blob :func:`decode_boxes` reads; ``tick`` is called between chunks of
    :data:`CHUNK` boxes (a saver thread gives the interpreter back to the Head's event loop there)."""
    boxes = list(catalog.boxes.values())
    parts = [_array_header(len(boxes))]
    for start in range(0, len(boxes), CHUNK):
        if tick is not None:
            tick()
        chunk = [_row(box) for box in boxes[start:start + CHUNK]]
        parts.append(msgspec.msgpack.encode(chunk)[len(_array_header(len(chunk))):])
    payload = zlib.compress(b"".join(parts), 1)  # (field names repeat per box: about a sixth the size)
    header = msgspec.msgpack.encode(_Header(FORMAT, catalog.version, len(boxes), _checksum(payload)))
    return _HEAD.pack(_MAGIC, len(header)) + header + payload


def _array_header(n: int) -> bytes:
    """msgpack's array header for ``n`` entries (an array's encoding is its header, then its entries').

    >>> _array_header(3) + b"".join(msgspec.msgpack.encode(i) for i in (1, 2, 3)) == msgspec.msgpack.encode([1, 2, 3])
    True
    """
    if n < 16:
        return bytes([0x90 | n])
    if n < 1 << 16:
        return b"\xdc" + n.to_bytes(2, "big")
    return b"\xdd" + n.to_bytes(4, "big")


def decode_boxes(data: bytes, version: int, names: set[str]) -> dict[str, Box]:
    """The boxes ``data`` saved, by name, when saved for catalog ``version`` with exactly the boxes ``names``;
    else :class:`StaleBoxes` saying why."""
    try:
        magic, length = _HEAD.unpack_from(data)
        if magic != _MAGIC:
            raise StaleBoxes("not saved boxes (no header)")
        header = msgspec.msgpack.decode(data[_HEAD.size:_HEAD.size + length], type=_Header)
    except (struct.error, msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise StaleBoxes(f"its header does not decode ({exc})") from exc
    if header.format != FORMAT:
        raise StaleBoxes(f"saved in format {header.format}, not {FORMAT}")
    if header.version != version:
        raise StaleBoxes(f"saved for catalog version {header.version}, not {version}")
    if header.count != len(names):
        raise StaleBoxes(f"{header.count} boxes saved, the catalog has {len(names)}")
    payload = data[_HEAD.size + length:]
    if header.checksum != _checksum(payload):
        raise StaleBoxes("its checksum does not match: the blob is corrupt")
    try:
        inflate = zlib.decompressobj()
        raw = inflate.decompress(payload, MAX_INFLATED)
        if inflate.unconsumed_tail:  # (a blob inflating past any catalog's size: refused, not held in memory)
            raise StaleBoxes(f"it inflates past {MAX_INFLATED} bytes")
        boxes = {box.name: box for box in _DECODER.decode(raw)}
    except (msgspec.DecodeError, msgspec.ValidationError, zlib.error) as exc:
        raise StaleBoxes(f"it does not decode ({exc})") from exc
    if boxes.keys() != names:
        raise StaleBoxes("saved for other boxes at this catalog version")
    return boxes


def save_boxes(store: CatalogStore, catalog: Catalog, tick: Callable[[], None] | None = None) -> int:
    """Save ``catalog``'s boxes for the next start; the bytes written."""
    data = encode_boxes(catalog, tick)
    store.put_blob(KEY, data)
    return len(data)


def read_catalog_at_start(store: CatalogStore) -> tuple[Catalog, int]:
    """The whole catalog, read from ``store`` (one snapshot), its boxes taken from the saved blob when it is
    that snapshot's; with the number of boxes so taken (0: every element decoded from its text)."""
    start = time.process_time()
    snapshot = store.snapshot()
    names = {key for kind, key in snapshot.elements if kind == "box"}
    saved: dict[str, Box] = {}
    if names:
        try:
            data = store.get_blob(KEY)
            if data is None:
                raise StaleBoxes("none saved")
            saved = decode_boxes(data, snapshot.version, names)
        except (StaleBoxes, StoreError) as exc:
            log.info("saved boxes not used (%s): decoding catalog version %d's %d boxes from their XML",
                     exc, snapshot.version, len(names))
    catalog = catalog_from_elements(snapshot.elements, snapshot.version, saved)
    if saved:
        log.info("catalog version %d read with its %d boxes from the saved blob in %.2f s CPU",
                 snapshot.version, len(saved), time.process_time() - start)
    return catalog, len(saved)

