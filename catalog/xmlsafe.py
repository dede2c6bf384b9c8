"""Hardened XML parsing for untrusted topology documents.

Topology XML arrives from operators, optimizers and other nodes, so parsing
must never read a file or the network, never expand entities and never let a
small document become a large tree.  The rules:

* the raw document is at most ``max_bytes`` (16 MiB by default);
* no DTD is loaded and no entity is resolved; a DOCTYPE that only *names* an
  external DTD (``<!DOCTYPE borealis SYSTEM "borealis.dtd">``, as every real
  Borealis file has) is accepted and ignored, but a document that declares
  anything itself (an internal subset, so entities or expansion bombs) is
  refused before libxml2 sees it;
* elements nest at most ``max_depth`` deep and there are at most
  ``max_elements`` of them.

Every refusal is a :class:`~boreas.catalog.diagnostics.ValidationFailed`
naming the file and line.

>>> root = parse_xml(b'<?xml version="1.0"?><!DOCTYPE borealis SYSTEM "x.dtd"><borealis/>', "a.xml").getroot()
>>> root.tag
'borealis'
>>> parse_xml(b'<!DOCTYPE r [<!ENTITY e "x">]><r>&e;</r>', "b.xml")
Traceback (most recent call last):
...
boreas.catalog.diagnostics.ValidationFailed: 1 problem:
  b.xml:1: document declares a DTD internal subset (<!ENTITY ...> or similar); entities and inline DTDs are refused
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from lxml import etree

from .diagnostics import Diagnostic, ValidationFailed


@dataclass(frozen=True, slots=True)
class XmlLimits:
    """Bounds on what one document may cost to parse."""

    max_bytes: int = 16 * 1024 * 1024
    max_depth: int = 64
    max_elements: int = 1_000_000


DEFAULT_LIMITS = XmlLimits()

# A DOCTYPE with an internal subset: `<!DOCTYPE name ... [`.  Quoted system
# and public identifiers are skipped so a `[` inside them does not count.
_DOCTYPE_SUBSET = re.compile(
    rb"<!DOCTYPE\s+[^\s\[>]+(?:\s+(?:SYSTEM|PUBLIC)(?:\s+(?:\"[^\"]*\"|'[^']*'))+)?\s*\[",
    re.IGNORECASE,
)
_DECLARATION = re.compile(rb"<!(?:ENTITY|ELEMENT|ATTLIST|NOTATION)\b", re.IGNORECASE)


def _parser() -> etree.XMLParser:
    # A new parser per call: lxml parsers are not safe to share across threads.
    # (Do not add collect_ids=False: with it libxml2 tries to fetch the DTD.)
    return etree.XMLParser(
        resolve_entities=False,
        no_network=True,
        load_dtd=False,
        dtd_validation=False,
        huge_tree=False,
        remove_blank_text=False,
    )


def _line_of(data: bytes, offset: int) -> int:
    return data.count(b"\n", 0, offset) + 1


def parse_xml(
    data: bytes | str, source: str = "<input>", limits: XmlLimits = DEFAULT_LIMITS
) -> etree._ElementTree:
    """Parse ``data`` under the rules above; ``source`` names it in errors."""
    if isinstance(data, str):
        data = data.encode("utf-8")
        # A str has no encoding of its own; drop a declaration that claims one.
        data = re.sub(rb"^\s*<\?xml[^>]*\?>", b"", data, count=1)
    if len(data) > limits.max_bytes:
        raise ValidationFailed(
            [
                Diagnostic(
                    source,
                    None,
                    "",
                    f"document is {len(data):,} bytes, over the limit of {limits.max_bytes:,}",
                )
            ]
        )
    for pattern in (_DOCTYPE_SUBSET, _DECLARATION):
        found = pattern.search(data)
        if found:
            raise ValidationFailed(
                [
                    Diagnostic(
                        source,
                        _line_of(data, found.start()),
                        "",
                        "document declares a DTD internal subset (<!ENTITY ...> or similar); "
                        "entities and inline DTDs are refused",
                    )
                ]
            )
    try:
        tree = etree.ElementTree(etree.fromstring(data, _parser()))
    except etree.XMLSyntaxError as exc:
        line = exc.lineno if exc.lineno else None
        message = (exc.msg.split(", line ")[0] if exc.msg else str(exc)).strip()
        message = " ".join(message.split())
        raise ValidationFailed([Diagnostic(source, line, "", f"malformed XML: {message}")]) from None
    subset = tree.docinfo.internalDTD  # belt and braces: the scan above missed it
    if subset is not None and (any(True for _ in subset.iterentities())
                               or any(True for _ in subset.iterelements())):
        raise ValidationFailed(
            [Diagnostic(source, 1, "", "document declares a DTD internal subset; refused")]
        )
    _check_shape(tree, source, limits)
    return tree


def _check_shape(tree: etree._ElementTree, source: str, limits: XmlLimits) -> None:
    depth = 0
    count = 0
    for event, element in etree.iterwalk(tree, events=("start", "end")):
        if event == "end":
            depth -= 1
            continue
        depth += 1
        count += 1
        if isinstance(element, etree._Entity):
            raise ValidationFailed(
                [Diagnostic(source, element.sourceline, "", "entity references are refused")]
            )
        if depth > limits.max_depth:
            raise ValidationFailed(
                [
                    Diagnostic(
                        source,
                        element.sourceline,
                        "",
                        f"elements nest deeper than the limit of {limits.max_depth}",
                    )
                ]
            )
        if count > limits.max_elements:
            raise ValidationFailed(
                [
                    Diagnostic(
                        source,
                        element.sourceline,
                        "",
                        f"document has more than the limit of {limits.max_elements:,} elements",
                    )
                ]
            )


def element_path(element: etree._Element) -> str:
    """An XPath-like location for error messages: ``/borealis/box[2]``."""
    return element.getroottree().getpath(element)
