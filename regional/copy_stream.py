"""Reading a streamed full copy of the global catalog as its bytes arrive.

A full copy of 100,000 boxes is about 26 MB of the Head's update XML.  The
component used to wait for each 2,000-element part, build its whole lxml
tree, walk it for the parser's limits, then decode it element by element
through lxml proxies (one per child of every box).  :class:`CopyStream`
is fed the copy's bytes in whatever chunks the network delivers (the Head
sends the kept serialization of the version as one chunked request,
:mod:`boreas.head.copy_sender`) and decodes each element as the parser
completes it, so decoding overlaps the transfer and no tree is built:

* the parser calls a *target* (libxml2's SAX events handed to
  :class:`_CopyTarget`) with each start tag's attributes as a dict, so a
  box, nearly all of a copy, is built straight from those dicts: its
  ``<in>``, ``<out>``, ``<parameter>`` and ``<access>`` children, its node
  spelled as :mod:`boreas.catalog.document_reader` spells it (normalised,
  once per spelling), its queue attributes in ``QUEUE_ATTRS`` order, its
  names checked and a parameter set twice refused, as there;
* every other element (schemas, streams, nodes, queries, ...: a few per
  node) is built as an lxml element and decoded by that reader, in runs of
  consecutive such elements, so it means exactly what it means in any
  update document;
* the parser's limits are counted on the events themselves (depth,
  elements, attributes per element and in all, bytes) instead of a walk of
  a finished tree, and nothing is read from files or the network: no DTD is
  loaded, no entity resolved, and a document that declares a DTD is
  refused (untrusted XML: :mod:`boreas.catalog.xmlsafe`'s rules).

The items are applied once the document ends, in document order, with
:func:`~boreas.catalog.replicate.apply_update` (a dict entry per element:
about 0.1 s at 100,000 boxes), so the catalog is exactly what the parts'
items made before; ``tests/test_copy_stream.py`` compares it with the
Head's catalog and with :func:`~boreas.catalog.documents.read_document`'s
items for random catalogs.

>>> from boreas.catalog.model import Box, InPort, Node
>>> from boreas.catalog.updates import update_document
>>> text = update_document([Node("n:1"), Box("b", "filter", (InPort("A"),), ("B",), node="n:1")], version=4)
>>> stream = CopyStream()
>>> for i in range(0, len(text), 7):      # any chunking
...     stream.feed(text[i:i + 7].encode())
>>> catalog = stream.close()
>>> catalog.version, sorted(catalog.boxes), catalog.boxes["b"].node
(4, ['b'], 'n:1')
"""

from __future__ import annotations

import re
from typing import Any

from lxml import etree

from boreas.catalog.diagnostics import Diagnostic, Origin, ValidationFailed
from boreas.catalog.document_reader import DocumentReader
from boreas.catalog.endpoints import normalize_endpoint, parse_position
from boreas.catalog.model import Box, Catalog, InPort
from boreas.catalog.replicate import apply_update
from boreas.catalog.sql_files import SQL_FILE
from boreas.catalog.xmlcodec import APP_ATTR, QUEUE_ATTRS
from boreas.catalog.xmlsafe import XmlLimits

#: Where the Head's streamed copy comes from, in diagnostics.
SOURCE = "full copy from the Head"

#: A streamed copy is one document of the whole catalog: bounded as a catalog is, not as one update.
COPY_LIMITS = XmlLimits(max_bytes=1 << 31, max_elements=50_000_000, max_attributes=200_000_000)

#: Names in attributes: non-empty, no spaces (as :mod:`boreas.catalog.document_reader` checks).
_NAME_ATTRS = frozenset(("name", "stream", "schema", "type", "box", "table"))
_NAME = re.compile(r"^\S+$")
_QUEUE = frozenset(QUEUE_ATTRS)
#: A DTD of any kind (the Head writes none); searched in each chunk with the end of the one before.
_DTD = re.compile(rb"<!(?:DOCTYPE|ENTITY|ELEMENT|ATTLIST|NOTATION)", re.IGNORECASE)
_CARRY = 16


class _Refused(Exception):
    """Raised inside the parser's callbacks; :class:`CopyStream` turns it into ``ValidationFailed``."""

    def __init__(self, diagnostic: Diagnostic):
        super().__init__(diagnostic.reason)
        self.diagnostic = diagnostic


def _queue_attrs(attrib: dict[str, str]) -> tuple[tuple[str, str], ...]:
    if _QUEUE.isdisjoint(attrib):
        return ()
    return tuple((a, attrib[a]) for a in QUEUE_ATTRS if a in attrib)


class _CopyTarget:
    """The parser's target: decodes each element of the root as it ends; owns the items so far."""

    def __init__(self, source: str, limits: XmlLimits):
        self.source = source
        self.limits = limits
        self.origin = Origin(source, None, "")
        self.items: list[Any] = []
        self.root: dict[str, str] | None = None  # the <update> element's attributes
        self.depth = 0
        self.elements = 0
        self.attributes = 0
        self.counts: dict[str, int] = {}  # top-level elements per tag (their paths, in diagnostics)
        self.endpoints: dict[str, str] = {}  # node spellings -> normalised
        self.other: etree.TreeBuilder | None = None  # a run of elements that are not boxes, being built
        # The box being read:
        self.box: dict[str, str] | None = None
        self.inputs: list[InPort] = []
        self.outputs: list[str] = []
        self.params: list[tuple[str, str]] = []
        self.access: list[str] = []
        self.param: dict[str, str] | None = None  # the box's <parameter> being read
        self.text: list[str] | None = None  # its text, if it has any

    def refuse(self, tag: str, reason: str) -> None:
        path = f"/update/{tag}[{self.counts.get(tag, 0)}]" if self.depth >= 2 else "/update"
        raise _Refused(Diagnostic(self.source, None, path, reason))

    # -- the parser's events ---------------------------------------------------------

    def start(self, tag: str, attrib: dict[str, str]) -> None:
        depth = self.depth = self.depth + 1
        self.elements += 1
        n = len(attrib)
        self.attributes += n
        limits = self.limits
        if (depth > limits.max_depth or self.elements > limits.max_elements
                or n > limits.max_attributes_per_element or self.attributes > limits.max_attributes):
            self.refuse(tag, f"the copy is over the parser's limits at <{tag}> (depth {limits.max_depth}, "
                             f"{limits.max_elements:,} elements, {limits.max_attributes_per_element} attributes "
                             f"an element, {limits.max_attributes:,} in all)")
        if depth == 3 and self.box is not None:  # most of a copy: a box's ports and parameters
            if tag == "out":
                self.outputs.append(attrib.get("stream"))  # type: ignore[arg-type]
            elif tag == "in":
                self.inputs.append(InPort(attrib.get("stream"),  # type: ignore[arg-type]
                                          attrib.get("connection_point_view"), _queue_attrs(attrib)))
            else:
                self._box_child(tag, attrib)
        elif depth == 2:
            self.counts[tag] = self.counts.get(tag, 0) + 1
            if tag == "box":
                if self.other is not None:
                    self._flush_other()
                self.box = attrib
                self.inputs, self.outputs, self.params, self.access = [], [], [], []
            else:
                if self.other is None:
                    self.other = etree.TreeBuilder()
                    self.other.start("update", {})
                self.other.start(tag, attrib)
        elif depth == 1:
            if tag != "update":
                self.refuse(tag, f"expected update XML, not <{tag}>")
            self.root = dict(attrib)
        elif self.box is None:
            assert self.other is not None
            self.other.start(tag, attrib)

    def _box_child(self, tag: str, attrib: dict[str, str]) -> None:
        """A box's child other than its ports."""
        if tag == "parameter":
            name = attrib.get("name")
            if name == SQL_FILE:  # (a file only the client reads: never here)
                self.refuse("box", f"<parameter name=\"{SQL_FILE}\"> names a file, which only the client reads")
            self.params.append((name, attrib.get("value")))  # type: ignore[arg-type]
            self.param = attrib  # its text (docs/xml.md) is read up to its end
        elif tag == "access":
            self.access.append(attrib.get("table"))  # type: ignore[arg-type]

    def data(self, text: str) -> None:
        if self.param is not None:
            if self.text is None:
                self.text = [text]
            else:
                self.text.append(text)
        elif self.other is not None and self.depth >= 2:
            self.other.data(text)

    def end(self, tag: str) -> None:
        depth = self.depth
        self.depth -= 1
        if self.box is not None:
            if depth == 3 and self.param is not None:
                if self.text is not None or "value" not in self.param:
                    self._parameter_text()
                self.param = None
            elif depth == 2:
                self.items.append(self._make_box())
                self.box = None
            return
        if depth >= 2 and self.other is not None:
            self.other.end(tag)
        elif depth == 1:
            self._flush_other()

    def close(self) -> None:
        return None

    def doctype(self, *args: Any) -> None:
        self.refuse("update", "the copy declares a DTD; refused")

    # -- decoding --------------------------------------------------------------------

    def _parameter_text(self) -> None:
        """A parameter's value= or its text, stripped: exactly one (as ``DocumentReader.parameter_texts``)."""
        text = "".join(self.text).strip() if self.text else ""
        name, value = self.params[-1]
        self.text = None
        if value is not None:
            if text:
                self.refuse("box", f"<parameter name=\"{name}\"> has both value= and text; give one of them")
            return
        if not text:
            self.refuse("box", f"<parameter name=\"{name}\"> has no value: give value= or the value as the "
                               f"element's text")
        self.params[-1] = (name, text)

    def _make_box(self) -> Box:
        attrib = self.box
        assert attrib is not None
        for name, value in attrib.items():
            if name in _NAME_ATTRS and not _NAME.match(value):
                self.refuse("box", f"<box> {name}={value!r} is not a name (names are non-empty and contain "
                                   f"no spaces)")
        params = self.params
        if len(params) > 1 and len({name for name, _ in params}) != len(params):
            names = [name for name, _ in params]
            twice = next(name for name in names if names.count(name) > 1)
            self.refuse("box", f"box {attrib.get('name')!r} sets parameter {twice!r} twice")
        return Box(attrib.get("name"), attrib.get("type"),  # type: ignore[arg-type]
                   tuple(self.inputs), tuple(self.outputs),
                   tuple(params), tuple(self.access), self._node(attrib.get("node")),
                   _queue_attrs(attrib), self.origin, attrib.get(APP_ATTR) or "")

    def _node(self, text: str | None) -> str | None:
        """A box's node, spelled as ``DocumentReader.node`` spells it in update XML."""
        if text is None:
            return None
        spelled = self.endpoints.get(text)
        if spelled is None:
            if parse_position(text) is not None:
                self.refuse("box", f"node position {text.strip()!r}: update XML names nodes by endpoint")
            try:
                spelled = self.endpoints[text] = normalize_endpoint(text)
            except ValueError as exc:
                self.refuse("box", str(exc))
        return spelled

    def _flush_other(self) -> None:
        """Decode the run of elements other than boxes read so far, as any update document's."""
        if self.other is None:
            return
        builder, self.other = self.other, None
        builder.end("update")
        root = builder.close()
        reader = DocumentReader(self.source, self.limits.max_problems)
        reader.parameter_texts(root)
        try:
            items = reader.update(root).items
        except (TypeError, ValueError, AttributeError, KeyError) as exc:
            # The decoders assume what the XSD gate checks (a <field> has a type=, ...), and the gate is
            # skipped for the Head's text: a copy damaged that way is refused, not a crash of the handler.
            raise ValidationFailed([Diagnostic(self.source, None, "/update",
                                               f"an element does not decode ({type(exc).__name__}: {exc})")]) from None
        if reader.problems:
            raise ValidationFailed(reader.problems)
        self.items += items


class CopyStream:
    """Owns one streamed copy being read: :meth:`feed` its bytes in any chunks, then :meth:`close`.

    Raises :class:`~boreas.catalog.diagnostics.ValidationFailed` (from either) for a copy that is
    malformed, over ``limits``, declares a DTD, or does not decode; the stream is then done with.
    """

    def __init__(self, source: str = SOURCE, limits: XmlLimits = COPY_LIMITS):
        self.source = source
        self.limits = limits
        self.size = 0
        self._tail = b""
        self._target = _CopyTarget(source, limits)
        self._parser = etree.XMLParser(target=self._target, resolve_entities=False, no_network=True,
                                       load_dtd=False, dtd_validation=False, huge_tree=False)

    def feed(self, chunk: bytes) -> None:
        """The next bytes of the copy; elements completed by them are decoded now."""
        self.size += len(chunk)
        if self.size > self.limits.max_bytes:
            self._fail(f"the copy is over {self.limits.max_bytes:,} bytes")
        if _DTD.search(self._tail + chunk[:_CARRY]) or _DTD.search(chunk):
            self._fail("the copy declares a DTD (<!DOCTYPE ...> or <!ENTITY ...>); refused")
        self._tail = chunk[-_CARRY:]
        self._call(self._parser.feed, chunk)

    def close(self) -> Catalog:
        """The end of the copy: the catalog it holds, at its version."""
        self._call(self._parser.close)
        target = self._target
        root = target.root or {}
        try:
            version = int(root["version"])
        except (KeyError, ValueError):
            self._fail("a copy's <update> needs version=")
        return apply_update(Catalog(), target.items, version)

    @property
    def items(self) -> int:
        """Elements decoded so far."""
        return len(self._target.items)

    def _call(self, fn: Any, *args: Any) -> None:
        try:
            fn(*args)
        except _Refused as exc:
            raise ValidationFailed([exc.diagnostic]) from None
        except etree.XMLSyntaxError as exc:
            message = " ".join((exc.msg or str(exc)).split(", line ")[0].split())
            raise ValidationFailed([Diagnostic(self.source, exc.lineno or None, "",
                                               f"malformed XML: {message}")]) from None

    def _fail(self, reason: str) -> None:
        raise ValidationFailed([Diagnostic(self.source, None, "", reason)])
