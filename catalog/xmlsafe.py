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
  ``max_elements`` of them;
* an element has at most ``max_attributes_per_element`` attributes and the
  document at most ``max_attributes`` in all (a schema validator reports
  every unknown attribute with a copy of all of them, so thousands of
  attributes on one element once cost seconds);
* at most ``max_problems`` diagnostics are reported for one document; the
  rest are summed up in one last line (see :func:`capped`).

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
import time
from collections.abc import Callable
from dataclasses import dataclass

from lxml import etree

from .diagnostics import Diagnostic, ValidationFailed
from .element_paths import ElementPaths, element_path


@dataclass(frozen=True, slots=True)
class XmlLimits:
    """Bounds on what one document may cost to parse."""

    max_bytes: int = 16 * 1024 * 1024
    max_depth: int = 64
    max_elements: int = 1_000_000
    max_attributes_per_element: int = 64
    max_attributes: int = 1_000_000
    max_problems: int = 100


DEFAULT_LIMITS = XmlLimits()

TOO_SLOW = ("document took longer than the time budget to validate; refused "
            "(split it into smaller documents)")


class DeadlineExceeded(ValidationFailed):
    """Reading a document went past the caller's time budget."""

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


def as_bytes(data: bytes | str) -> bytes:
    """The document as bytes; a ``str`` is encoded as UTF-8 (its declaration dropped)."""
    if isinstance(data, str):
        data = data.encode("utf-8")
        # A str has no encoding of its own; drop a declaration that claims one.
        data = re.sub(rb"^\s*<\?xml[^>]*\?>", b"", data, count=1)
    return data


def _line_of(data: bytes, offset: int) -> int:
    return data.count(b"\n", 0, offset) + 1


def parse_xml(
    data: bytes | str, source: str = "<input>", limits: XmlLimits = DEFAULT_LIMITS
) -> etree._ElementTree:
    """Parse ``data`` under the rules above; ``source`` names it in errors."""
    data = as_bytes(data)
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
    if not _within(data, tree, limits):
        _check_shape(tree, source, limits)
    return tree


#: An ampersand that is not one of XML's five entities or a character reference.
_ENTITY_REFERENCE = re.compile(rb"&(?!(?:amp|lt|gt|quot|apos);|#)")


def _within(data: bytes, tree: etree._ElementTree, limits: XmlLimits) -> bool:
    """Whether the document is surely within ``limits``' shape, told in C: every element, comment and
    processing instruction costs a ``<`` of the text and every attribute a ``=`` (an entity reference
    other than XML's own sends the document to the walk, so nothing expands), the rest is XPath.  A
    false answer only means :func:`_check_shape` (a Python step per node: 0.08 s of CPU for 20,000
    boxes, issue 37) looks, and says what is over."""
    if data.count(b"<") > limits.max_elements or data.count(b"=") > limits.max_attributes:
        return False
    if _ENTITY_REFERENCE.search(data):  # (or an ampersand in a comment or CDATA: then the walk looks)
        return False
    deep = "/*" * limits.max_depth + "/node()[not(self::text())]"
    return not tree.xpath(f"boolean({deep} | //@*[{limits.max_attributes_per_element + 1}])")


def _check_shape(tree: etree._ElementTree, source: str, limits: XmlLimits) -> None:
    depth = 0
    count = 0
    attributes = 0
    for event, element in etree.iterwalk(tree, events=("start", "end")):
        if event == "end":
            depth -= 1
            continue
        depth += 1
        count += 1
        n = len(element.attrib) if isinstance(element.tag, str) else 0
        attributes += n
        if n > limits.max_attributes_per_element:
            raise ValidationFailed(
                [
                    Diagnostic(
                        source,
                        element.sourceline,
                        element_path(element),
                        f"<{element.tag}> has {n:,} attributes, over the limit of "
                        f"{limits.max_attributes_per_element} per element",
                    )
                ]
            )
        if attributes > limits.max_attributes:
            raise ValidationFailed(
                [
                    Diagnostic(
                        source,
                        element.sourceline,
                        element_path(element),
                        f"document has more than the limit of {limits.max_attributes:,} "
                        f"attributes (at <{element.tag}>)",
                    )
                ]
            )
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


class _Locator:
    """Parser target that tells which element each schema error is about.

    libxml2 validates while it parses (its "SAX plug") and reports an
    element's errors just after this target heard the element start or end,
    so an error logged between two events is about the element of the first.
    Only the first ``limit + 1`` are located (reading the parser's error log
    copies it), so the whole costs time linear in the document.
    """

    def __init__(self, limit: int, deadline: float | None, check: Callable[[int | None], None]):
        self.parser: etree.XMLParser | None = None
        self.limit = limit
        self.deadline = deadline
        self.check = check
        self.events = 0
        self.index = -1  # elements started so far, minus one: the current one's number
        self.stack: list[int] = []
        self.last = 0  # the element of the last event
        self.seen = 0  # errors in the log at the last event
        self.located: list[tuple[int, etree._LogEntry]] = []

    def _note(self, element: int) -> None:
        self.events += 1
        if self.deadline is not None and self.events % 4096 == 0:
            self.check(None)
        if len(self.located) <= self.limit:
            assert self.parser is not None
            log = self.parser.error_log
            if len(log) > self.seen:
                self.located += [(self.last, entry) for entry in list(log)[self.seen:]]
                self.seen = len(log)
        self.last = element

    def start(self, tag: str, attrib: object) -> None:
        self.index += 1
        self.stack.append(self.index)
        self._note(self.index)

    def end(self, tag: str) -> None:
        self._note(self.stack.pop())

    def close(self) -> None:
        self._note(self.last)


def streaming_schema_problems(
    data: bytes | str, tree: etree._ElementTree, schema: etree.XMLSchema, source: str,
    limits: XmlLimits = DEFAULT_LIMITS, deadline: float | None = None,
) -> list[Diagnostic]:
    """Check ``data`` (already parsed into ``tree`` by :func:`parse_xml`) against ``schema``.

    Validating a parsed tree with libxml2 costs, for every error, time in the
    number of siblings of the element and its ancestors (lxml records each
    error's XPath), so a wide document full of errors takes time in the square
    of its size.  Validating while parsing records no paths; errors are placed
    by :class:`_Locator` instead.  At most ``limits.max_problems`` problems,
    then a count of the rest.  Past ``deadline`` (``time.monotonic()``),
    raises :class:`DeadlineExceeded`.
    """
    def check(line: int | None) -> None:
        if deadline is not None and time.monotonic() > deadline:
            raise DeadlineExceeded([Diagnostic(source, line, "", TOO_SLOW)])

    if _valid(data, schema):  # (a valid document, the usual one, is never heard element by element)
        check(None)
        return []
    locator = _Locator(limits.max_problems, deadline, check)
    parser = etree.XMLParser(
        resolve_entities=False, no_network=True, load_dtd=False, dtd_validation=False,
        huge_tree=False, remove_blank_text=False, schema=schema, target=locator,
    )
    locator.parser = parser
    try:
        etree.fromstring(as_bytes(data), parser)
    except etree.XMLSyntaxError as exc:  # parse_xml accepted it, so this is unexpected
        raise ValidationFailed([Diagnostic(source, exc.lineno, "", f"malformed XML: {exc.msg}")]) from None
    schema_errors = [e for e in parser.error_log
                     if e.domain == etree.ErrorDomains.SCHEMASV and e.level >= etree.ErrorLevels.ERROR]
    if not schema_errors:
        return []
    located = [(i, e) for i, e in locator.located
               if e.domain == etree.ErrorDomains.SCHEMASV and e.level >= etree.ErrorLevels.ERROR]
    located = located[: limits.max_problems]
    wanted = {i for i, _ in located}
    elements: dict[int, etree._Element] = {}
    if wanted:
        last = max(wanted)
        for number, element in enumerate(tree.getroot().iter(etree.Element)):
            if number in wanted:
                elements[number] = element
            if number >= last:
                break
    paths = ElementPaths()
    problems = []
    for number, entry in located:
        element = elements.get(number)
        reason = " ".join(entry.message.split()).rstrip(".")
        if element is None:
            problems.append(Diagnostic(source, None, "", reason))
        else:
            problems.append(Diagnostic(source, element.sourceline, paths(element), reason))
    return capped(problems, source, limits.max_problems, len(schema_errors) - len(problems))


def _valid(data: bytes | str, schema: etree.XMLSchema) -> bool:
    """Whether ``data`` is valid, told by libxml2 alone: one pass in C, about a third of the time of
    :class:`_Locator`'s (a Python call per element start and end: 0.53 s against 0.16 s of CPU for
    20,000 boxes, issue 37).  Only a document with problems is parsed again to place them."""
    parser = etree.XMLParser(resolve_entities=False, no_network=True, load_dtd=False, dtd_validation=False,
                             huge_tree=False, remove_blank_text=False, schema=schema, collect_ids=False)
    try:
        etree.fromstring(as_bytes(data), parser)
    except etree.XMLSyntaxError:
        return False
    return not any(e.level >= etree.ErrorLevels.ERROR for e in parser.error_log)


def capped(problems: list[Diagnostic], source: str, limit: int,
           more: int | None = 0) -> list[Diagnostic]:
    """At most ``limit`` problems, then one line saying how many more there were.

    ``more`` counts problems the caller found but did not keep; None means
    the caller stopped looking, so there are more but how many is unknown.

    >>> ps = [Diagnostic("a.xml", i, "", "bad") for i in range(5)]
    >>> [str(p) for p in capped(ps, "a.xml", 2)]
    ['a.xml:0: bad', 'a.xml:1: bad', 'a.xml: ... and 3 more problems']
    >>> str(capped(ps[:2], "a.xml", 2, None)[-1])
    'a.xml: ... and more problems (only the first 2 are listed)'
    """
    if more is None:
        line = f"... and more problems (only the first {limit} are listed)"
        return [*problems[:limit], Diagnostic(source, None, "", line)]
    extra = max(0, len(problems) - limit) + more
    if not extra:
        return problems
    word = "problem" if extra == 1 else "problems"
    return [*problems[:limit], Diagnostic(source, None, "", f"... and {extra:,} more {word}")]
