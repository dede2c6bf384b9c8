"""A checked :class:`~.index.CatalogIndex` as bytes, so a Head that starts decodes it instead of checking again.

Checking a catalog of 100,000 boxes whole (:meth:`CatalogIndex.build`) took
12.3-12.5 s CPU of a Head's start; decoding what that check learned takes a
small part of it.  What is saved is every fact the index derived, none of
the catalog itself (the Head reads that from the store anyway):

* the **references** (name -> the elements naming it);
* every stream's **state** (its inferred schema, or broken);
* per box its **typing** (in and out schemas, problems), without the box:
  decoding takes the box from the catalog it is given (bound to its table
  as typing does), so a typing always describes the catalog's own box;
* the **stream schemas** slices read, and the **problems** found.

Schemas are written once each (the index shares them between a producer's
out stream and its readers) and referred to by number, origins likewise;
decoding shares them again.  The blob starts with a header saying what it
was made from: the codec's format, the catalog version, a digest of the
catalog's element names and the box types' names, and a checksum of the
rest.  :func:`decode_index` refuses (:class:`StaleIndex`) a blob whose header
does not match the catalog and registry it is given, or whose body is
corrupt; the caller then checks the catalog whole (:mod:`.index_checkpoint`).

>>> from boreas.catalog import read_document
>>> from boreas.catalog.merge import merge
>>> app = read_document('''<borealis><input stream="R" schema="S"/><schema name="S"><field name="a" type="int"/>
...   </schema><box name="f" type="filter"><in stream="R"/><out stream="F"/>
...   <parameter name="expression.0" value="a &gt; 1"/></box></borealis>''', "app.xml")
>>> catalog, _ = merge(Catalog(), [app], [])
>>> index = CatalogIndex.build(catalog)
>>> again = decode_index(encode_index(index), catalog, index.registry)
>>> again.typings == index.typings and again.stream_schemas == index.stream_schemas
True
>>> newer = catalog.copy()
>>> newer.version += 1
>>> decode_index(encode_index(index), newer, index.registry)
Traceback (most recent call last):
...
boreas.catalog.index_codec.StaleIndex: saved for catalog version 0, not 1
"""

from __future__ import annotations

import hashlib
import struct
import zlib
from collections.abc import Callable
from typing import Any

import msgspec

from .boxtypes import BoxTypeRegistry
from .diagnostics import Diagnostic, Origin
from .index import CatalogIndex
from .model import Catalog, Field, FieldType, Schema
from .schemas_of import BoxTyping
from .table_params import bind
from .tracked import CATALOG_DICTS
from .validate import Checks

#: Bumped whenever what is saved, or what the index derives, changes: an older blob is then stale.
FORMAT = 3
_MAGIC = b"BXIDX"
_HEAD = struct.Struct(">5sI")  # magic, header length
_BROKEN = -1  # a stream's state: BROKEN (cannot be told)


class StaleIndex(Exception):
    """The saved index is not the one for this catalog (another version, format or registry), or it is corrupt."""


class _Header(msgspec.Struct, array_like=True):
    format: int
    version: int
    digest: str
    checksum: str


def catalog_digest(catalog: Catalog, registry: BoxTypeRegistry) -> str:
    """What an index depends on besides the version: every element's name, per kind, and the box types.

    The version names the catalog's content within one store; the names guard against a blob from another
    catalog at the same version (a store made anew), the box types against a Head run with others.
    """
    digest = hashlib.blake2b(digest_size=16)
    for kind in CATALOG_DICTS:
        digest.update(f"\x00{kind}\x00".encode())
        digest.update("\x00".join(sorted(getattr(catalog, kind))).encode())
    digest.update(("\x01" + "\x00".join(sorted(registry.names()))).encode())
    return digest.hexdigest()


# -- encoding -------------------------------------------------------------------------------------------


class _Table:
    """Objects numbered in order of first sight (by identity: the index shares them), encoded once each."""

    def __init__(self, encode: Any):
        self.encode = encode
        self.numbers: dict[int, int] = {}
        self.rows: list[Any] = []
        self._keep: list[Any] = []  # (ids are only unique while the objects live)

    def __call__(self, obj: Any) -> int:
        number = self.numbers.get(id(obj))
        if number is None:
            row = self.encode(obj)  # (may number what it holds first)
            number = self.numbers[id(obj)] = len(self.rows)
            self.rows.append(row)
            self._keep.append(obj)
        return number


def encode_index(index: CatalogIndex, checkpoint: Callable[[], None] | None = None) -> bytes:
    """The bytes :func:`decode_index` reads back for ``index.catalog``; see the module docstring.

    ``checkpoint`` is called once per entry written (a reference, a stream's state, a box's typing, a
    schema), so a worker thread saving the index can give the interpreter back to the Head's event loop
    between entries (head/yielding.py).  Not cut: the envelope's last encode, its compression and the catalog's
    digest (a sort of every key), which still grow with the catalog (about 55 ms at 20,000 boxes)."""
    tick = checkpoint or _nothing
    origins = _Table(lambda o: (o.file, o.line, o.path))

    def field(f: Field) -> tuple:
        return f.name, None if f.type is None else f.type.value, f.size, f.array, origins(f.origin)

    schemas = _Table(lambda s: (s.name, origins(s.origin), [field(f) for f in s.fields]))

    def state(schema: Schema | None) -> int:
        return _BROKEN if schema is None else schemas(schema)

    refs = []
    for (noun, name), elements in index.refs.items():
        tick()
        grouped: dict[str, list[str]] = {}
        for kind, key in elements:
            grouped.setdefault(kind, []).append(key)
        refs.append((noun, name, list(grouped.items())))
    states = []
    for stream, s in index.states.items():
        tick()
        states.append((stream, state(s)))
    typings = []
    for name, t in index.typings.items():
        tick()
        typings.append((name, [state(s) for s in t.inputs], None if t.outs is None else [schemas(s) for s in t.outs],
                        list(t.problems)))
    stream_schemas = []
    for stream, s in index.stream_schemas.items():
        tick()
        stream_schemas.append((stream, schemas(s)))
    body = (refs, states, typings, stream_schemas, [(d.file, d.line, d.path, d.reason) for d in index.problems])
    # Each section encoded apart, so decoding holds one section's msgpack lists at a time, not all.
    sections = [_encode_list(section, tick) for section in body]
    payload = zlib.compress(msgspec.msgpack.encode((origins.rows, schemas.rows, sections)), 1)
    header = msgspec.msgpack.encode(_Header(FORMAT, index.catalog.version,
                                            catalog_digest(index.catalog, index.registry), _checksum(payload)))
    return _HEAD.pack(_MAGIC, len(header)) + header + payload


#: Entries msgpack-encoded in one call: the encoder holds the GIL throughout (a 100,000-box section whole: 0.3 s).
ENCODE_CHUNK = 1000


def _array_header(n: int) -> bytes:
    """msgpack's array header for ``n`` entries."""
    if n < 16:
        return bytes([0x90 | n])
    if n < 1 << 16:
        return b"\xdc" + n.to_bytes(2, "big")
    return b"\xdd" + n.to_bytes(4, "big")


def _encode_list(items: list, tick: Callable[[], None]) -> bytes:
    """``msgspec.msgpack.encode(items)``, byte for byte, encoded :data:`ENCODE_CHUNK` entries at a time with
    ``tick()`` between: an array's encoding is its header and its entries' encodings one after another.

    >>> items = [[i, str(i)] for i in range(2500)]
    >>> _encode_list(items, _nothing) == msgspec.msgpack.encode(items)
    True
    """
    parts = [_array_header(len(items))]
    for start in range(0, len(items), ENCODE_CHUNK):
        tick()
        chunk = items[start:start + ENCODE_CHUNK]
        parts.append(msgspec.msgpack.encode(chunk)[len(_array_header(len(chunk))):])
    return b"".join(parts)


def _nothing() -> None:
    """No checkpoint: encoding where nothing else waits."""


def _checksum(payload: bytes) -> str:
    return hashlib.blake2b(payload, digest_size=16).hexdigest()


# -- decoding -------------------------------------------------------------------------------------------


def decode_index(data: bytes, catalog: Catalog, registry: BoxTypeRegistry,
                 checks: Checks | None = None) -> CatalogIndex:
    """The index ``data`` saved, for ``catalog`` (the same version, read from the store).

    Raises :class:`StaleIndex` saying why when ``data`` was saved for another catalog, format or registry,
    or does not decode: the caller checks the catalog whole instead.  ``checks`` must be the ones the
    saved index was checked with (a Head plugs in none).
    """
    header, payload = _split(data)
    if header.format != FORMAT:
        raise StaleIndex(f"saved in format {header.format}, not {FORMAT}")
    if header.version != catalog.version:
        raise StaleIndex(f"saved for catalog version {header.version}, not {catalog.version}")
    if header.digest != catalog_digest(catalog, registry):
        raise StaleIndex(f"saved for other elements or box types at catalog version {catalog.version}")
    if header.checksum != _checksum(payload):
        raise StaleIndex("its checksum does not match: the blob is corrupt")
    try:
        return _decode_body(msgspec.msgpack.decode(zlib.decompress(payload)), catalog, registry, checks)
    except (ValueError, TypeError, KeyError, IndexError, zlib.error, msgspec.DecodeError) as exc:
        raise StaleIndex(f"it does not decode ({type(exc).__name__}: {exc})") from exc


def _split(data: bytes) -> tuple[_Header, bytes]:
    try:
        magic, length = _HEAD.unpack_from(data)
        if magic != _MAGIC:
            raise StaleIndex("not a saved index (no header)")
        header = msgspec.msgpack.decode(data[_HEAD.size:_HEAD.size + length], type=_Header)
    except (struct.error, msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise StaleIndex(f"its header does not decode ({exc})") from exc
    return header, data[_HEAD.size + length:]


def _decode_body(decoded: Any, catalog: Catalog, registry: BoxTypeRegistry, checks: Checks | None) -> CatalogIndex:
    origin_rows, schema_rows, sections = decoded
    refs, states, typings, stream_schemas, problems = (_Section(data) for data in sections)
    origins = [Origin(*row) for row in origin_rows]
    schemas = [Schema(name, tuple(Field(f, None if t is None else FieldType(t), size, array, origins[o])
                                  for f, t, size, array, o in fields), origins[origin])
               for name, origin, fields in schema_rows]

    def state(number: int) -> Schema | None:
        return None if number == _BROKEN else schemas[number]

    boxes = catalog.boxes
    index = CatalogIndex(
        catalog, registry,
        {(noun, name): frozenset((kind, key) for kind, keys in grouped for key in keys)
         for noun, name, grouped in refs.rows()},
        {stream: state(number) for stream, number in states.rows()},
        {name: BoxTyping(bind(boxes[name], catalog), tuple(state(n) for n in inputs),
                         None if outs is None else tuple(schemas[n] for n in outs), tuple(reasons))
         for name, inputs, outs, reasons in typings.rows()},
        {stream: schemas[number] for stream, number in stream_schemas.rows()},
        [Diagnostic(*row) for row in problems.rows()],
        checks or Checks(),
        parent=Catalog(),  # as built: everything is new to the empty catalog's index
        changed={kind: set(getattr(catalog, kind)) for kind in CATALOG_DICTS},
    )
    return index


class _Section:
    """One section's msgpack, decoded when asked and let go at once (the index built from it is what stays)."""

    def __init__(self, data: bytes):
        self.data = data

    def rows(self) -> list[Any]:
        data, self.data = self.data, b""
        return msgspec.msgpack.decode(data)
