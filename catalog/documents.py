"""Whole documents: application, deployment and update XML, read into the model.

Reading a document is three gates, each of which reports every problem it
finds with file, line and element path: hardened parsing (``xmlsafe``), the
language's XSD (``boreas.schemas``), then decoding into model objects
(``xmlcodec``), which also normalises endpoints.  The language is told by
the root element, so a caller can hand over files in any order.

Reading costs time roughly linear in the document's size (element paths are
numbered once per parent, attributes are capped by ``xmlsafe``, at most
``limits.max_problems`` diagnostics are spelled out), and a caller with a
time budget passes ``deadline`` (a ``time.monotonic()`` value): a document
still being read then is refused rather than read on.

This module runs the gates; the third, decoding, is
:mod:`.document_reader`.  The values reading produces (``Application``,
``Deployment``, ``Update`` and the update items ``Delete``, ``Modify``,
``Move``, ...) are defined in :mod:`.document_model` and importable from here
too, which is where callers import them from.

>>> doc = read_document(b'<deploy><node endpoint=":15000" query="box1"/></deploy>', "d.xml")
>>> doc.nodes[0].endpoint, doc.nodes[0].names
('localhost:15000', ('box1',))
"""

from __future__ import annotations

from pathlib import Path

from lxml import etree

from .diagnostics import Diagnostic, ValidationFailed
from .document_model import (  # the values read; re-exported: callers import them from here
    DELETE_NAMES,
    Application,
    Connect,
    Delete,
    Deployment,
    Disconnect,
    Document,
    Modify,
    Move,
    NodeAssignment,
    Unsubscribe,
    Update,
)
from .document_reader import DocumentReader, check_deadline
from .sql_files import inline_sql_files
from .xmlsafe import DEFAULT_LIMITS, XmlLimits, capped, parse_xml, streaming_schema_problems

__all__ = [
    "DELETE_NAMES", "SMALL_DOCUMENT", "Application", "Connect", "Delete", "Deployment", "Disconnect",
    "Document", "Modify", "Move", "NodeAssignment", "Unsubscribe", "Update", "read_document", "read_file",
]


#: Documents with at most this many elements plus attributes are explained by
#: ``boreas.schemas.xsd_errors`` (the clearest messages; it costs time in the
#: square of the document's size, which is small here); larger ones by
#: libxml2 while it parses them again (linear).
SMALL_DOCUMENT = 2_000


def _is_small(root: etree._Element) -> bool:
    size = 0
    for element in root.iter(etree.Element):
        size += 1 + len(element.attrib)
        if size > SMALL_DOCUMENT:
            return False
    return True


def _schema_problems(data: bytes | str, tree: etree._ElementTree, source: str,
                     limits: XmlLimits, deadline: float | None) -> list[Diagnostic]:
    """The XSD's verdict, at most ``limits.max_problems`` of them spelled out.

    ``boreas.schemas`` loads xmlschema (about half a second): imported here, so that a reader that skips
    this gate (``check_schema=False``) never pays for it."""
    from boreas.schemas import LANGUAGES, xsd_errors

    root = tree.getroot()
    if root.tag not in LANGUAGES or _is_small(root):
        problems = [Diagnostic(source, p.line, p.path, p.reason) for p in xsd_errors(root)]
        return capped(problems, source, limits.max_problems)
    from boreas.schemas import fast_schema  # libxml2's compiled XSD, cached (and xmlschema not needed)

    return streaming_schema_problems(data, tree, fast_schema(LANGUAGES[root.tag]), source,
                                     limits, deadline)


def read_document(
    data: bytes | str, source: str = "<input>", limits: XmlLimits = DEFAULT_LIMITS,
    deadline: float | None = None, check_schema: bool = True,
) -> Document:
    """Parse, schema-check and decode one document; raises ``ValidationFailed``.

    ``deadline`` (a ``time.monotonic()`` value) bounds the time spent: past
    it, :class:`~boreas.catalog.xmlsafe.DeadlineExceeded` (a ``ValidationFailed``)
    is raised.  ``check_schema=False`` skips the XSD gate, for a document the
    Head wrote (its catalog, read back by a client): the Head validated every
    part of it when it came in, and the gate would load xmlschema for nothing.
    Decoding still reports what it cannot read.

    >>> read_document(b'<update><move box="b1" node=":15001"/></update>', check_schema=False).items[0].node
    'localhost:15001'
    """
    tree = parse_xml(data, source, limits)
    if deadline is not None:
        check_deadline(deadline, source, None)
    root = tree.getroot()
    problems = _schema_problems(data, tree, source, limits, deadline) if check_schema else []
    if problems:
        raise ValidationFailed(problems)
    reader = DocumentReader(source, limits.max_problems, deadline)
    reader.positions = root.tag in ("borealis", "deploy")
    reader.parameter_texts(root)
    if root.tag == "borealis":
        doc: Document = reader.application(root)
    elif root.tag == "deploy":
        doc = reader.deployment(root)
    else:
        doc = reader.update(root)
    if reader.problems:
        raise ValidationFailed(capped(reader.problems, source, limits.max_problems,
                                      reader.more_problems))
    return doc


def read_file(path: str | Path, limits: XmlLimits = DEFAULT_LIMITS) -> Document:
    """Read one XML file (at most ``limits.max_bytes`` are read from disk), its ``sql-file``
    parameters inlined from files beside it (:mod:`.sql_files`): the caller named the file, so
    it is trusted to name others; :func:`read_document` of bytes received never reads a file."""
    path = Path(path)
    try:
        with path.open("rb") as fh:
            data = fh.read(limits.max_bytes + 1)
    except OSError as exc:
        raise ValidationFailed([Diagnostic(str(path), None, "", f"cannot read file: {exc.strerror}")]) from None
    return read_document(inline_sql_files(data, path, limits), str(path), limits)
